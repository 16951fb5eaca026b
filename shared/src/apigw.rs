//! API Gateway's Management API for the WebSocket API's connections (docs/streams.md, "AWS"):
//! `PostToConnection` sends a frame to a client, `DeleteConnection` hangs up. The endpoint is the
//! API's stage URL (`https://<api>.execute-api.<region>.amazonaws.com/<stage>`), or any URL
//! (tests point it at a local server standing in for it).
//!
//! [`Poster`] is what the stream fan-out (`domain::streams::connections`) and the WebSocket
//! function send through; [`SignedApi`] is the real one: two calls signed with SigV4 over the
//! DynamoDB client's HTTP stack. (`aws-sdk-apigatewaymanagement` did the same for 130 KB more
//! of each function binary; the tests check the signatures are the SDK's.)

use async_trait::async_trait;
use aws_sdk_dynamodb::config::Credentials;

/// What became of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The connection is gone (410): the client left, or API Gateway closed it.
    Gone,
}

/// Where frames for WebSocket connections go.
#[async_trait]
pub trait Poster: Send + Sync {
    /// Send one text frame to a connection.
    async fn post(&self, connection_id: &str, frame: &str) -> Result<Delivery, String>;
    /// Close a connection (a revoked token's). A connection already gone is no error.
    async fn hang_up(&self, connection_id: &str) -> Result<(), String>;
}

/// The Management API's two calls signed with SigV4 (service `execute-api`) and sent over the
/// SDK's HTTP client ([`crate::sdk_http`]): what the functions use, at a fraction of the SDK
/// client's size. Its signatures are the SDK's, byte for byte (tests/api/ws_connections.rs).
#[derive(Clone)]
pub struct SignedApi {
    endpoint: String,
    region: String,
    identity: aws_smithy_runtime_api::client::identity::Identity,
    pool: crate::sdk_http::Pool,
}

/// How long one call may take.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl SignedApi {
    /// For a Lambda function: region and the role's credentials as Lambda sets them in the
    /// environment; None without credentials.
    pub fn in_lambda(endpoint: &str, env: &crate::config::Env) -> Option<Self> {
        let region = ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|n| env.get(n)).unwrap_or("us-east-1");
        let (key, secret) = (env.get("AWS_ACCESS_KEY_ID")?, env.get("AWS_SECRET_ACCESS_KEY")?);
        let creds =
            Credentials::new(key, secret, env.get("AWS_SESSION_TOKEN").map(str::to_owned), None, "lambda-environment");
        Some(Self::new(endpoint, region, creds))
    }

    /// With these credentials (tests: a local endpoint that checks none).
    pub fn with_credentials(endpoint: &str, region: &str, access_key: &str, secret_key: &str) -> Self {
        Self::new(endpoint, region, Credentials::new(access_key, secret_key, None, None, "waymark-static"))
    }

    fn new(endpoint: &str, region: &str, creds: Credentials) -> Self {
        // Fails only if ring lacked TLS 1.2 and 1.3.
        let tls = crate::tls::rustls_config().expect("a TLS configuration of the bundled roots");
        Self {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            region: region.to_owned(),
            identity: creds.into(),
            pool: crate::sdk_http::pool(tls, Some(std::time::Duration::from_secs(3))),
        }
    }

    /// The signed request of `method` on connection `connection_id`, signed at `at`.
    pub fn request(
        &self,
        method: &str,
        connection_id: &str,
        body: &[u8],
        at: std::time::SystemTime,
    ) -> Result<hyper::Request<aws_smithy_types::body::SdkBody>, String> {
        let length = body.len().to_string();
        let mut headers = vec![("content-length", length.as_str())];
        if method == "POST" {
            headers.push(("content-type", "application/octet-stream"));
        }
        self.request_with(method, connection_id, &headers, body, at)
    }

    /// The same with these headers (signed, all of them).
    pub fn request_with(
        &self,
        method: &str,
        connection_id: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        at: std::time::SystemTime,
    ) -> Result<hyper::Request<aws_smithy_types::body::SdkBody>, String> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        // The id as one path segment (API Gateway's ids end in `=`), as the SDK writes it.
        let url = format!("{}/@connections/{}", self.endpoint, encode(connection_id));
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name("execute-api")
            .time(at)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let signable = SignableRequest::new(method, &url, headers.iter().copied(), SignableBody::Bytes(body))
            .map_err(|e| e.to_string())?;
        let (instructions, _) = sign(signable, &params).map_err(|e| e.to_string())?.into_parts();
        let mut req = hyper::Request::builder().method(method).uri(&url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut req = req.body(aws_smithy_types::body::SdkBody::from(body.to_vec())).map_err(|e| e.to_string())?;
        instructions.apply_to_request_http1x(&mut req);
        Ok(req)
    }

    /// Send one call; its status.
    async fn call(&self, method: &str, connection_id: &str, body: &[u8]) -> Result<u16, String> {
        let req = self.request(method, connection_id, body, std::time::SystemTime::now())?;
        let sent = tokio::time::timeout(CALL_TIMEOUT, self.pool.request(req))
            .await
            .map_err(|_| format!("{method} @connections/{connection_id}: no answer in {CALL_TIMEOUT:?}"))?
            .map_err(|e| format!("{method} @connections/{connection_id}: {e}"))?;
        Ok(sent.status().as_u16())
    }
}

/// Percent-encode all but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[async_trait]
impl Poster for SignedApi {
    async fn post(&self, connection_id: &str, frame: &str) -> Result<Delivery, String> {
        match self.call("POST", connection_id, frame.as_bytes()).await? {
            200..=299 => Ok(Delivery::Sent),
            410 => Ok(Delivery::Gone),
            s => Err(format!("PostToConnection {connection_id}: status {s}")),
        }
    }

    async fn hang_up(&self, connection_id: &str) -> Result<(), String> {
        match self.call("DELETE", connection_id, b"").await? {
            200..=299 | 410 => Ok(()),
            s => Err(format!("DeleteConnection {connection_id}: status {s}")),
        }
    }
}
