//! The AWS SDK's HTTP client: hyper's HTTP/1.1 client over rustls ([`crate::tls`]), plugged into
//! the SDK through its `HttpClient` trait.
//!
//! Why not the SDK's own client (`aws-smithy-http-client`): it always links HTTP/2 (h2 and
//! hyper's HTTP/2 half, about 390 KB of a 8.5 MB function binary, over the 8 MB limit) and reads
//! its roots from PEM. DynamoDB speaks HTTP/1.1; a function sends one request at a time.
//!
//! What the SDK expects of a connector and this one does: connect and read timeouts from the
//! SDK's settings; a pool of kept-alive connections (idle ones closed after 90 s, as the SDK's
//! client does); failures to connect and broken connections (a stale pooled connection after a
//! Lambda freeze) reported as I/O errors, which the SDK's retry strategy retries.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

type Pool = Client<HttpsConnector<TcpConnector>, SdkBody>;
/// Pools by connect timeout.
type Pools = Arc<Mutex<Vec<(Option<Duration>, Pool)>>>;

/// The SDK's HTTP client: HTTPS with the bundled roots, plain HTTP for local endpoints
/// (DynamoDB Local).
pub fn sdk_http_client() -> SharedHttpClient {
    sdk_http_client_with(crate::tls::rustls_config())
}

/// The same over another TLS configuration (a private CA; the tests' own certificate). One that
/// could not be built fails every request with its reason.
pub fn sdk_http_client_with(tls: Result<rustls::ClientConfig, rustls::Error>) -> SharedHttpClient {
    SharedHttpClient::new(Http1Client { tls: tls.map_err(|e| e.to_string()), pools: Arc::default() })
}

/// One pool per connect timeout the SDK asks for (a client asks the same every time; the
/// configuration chain's metadata lookups ask for shorter ones).
#[derive(Debug, Clone)]
struct Http1Client {
    tls: Result<rustls::ClientConfig, String>,
    pools: Pools,
}

impl Http1Client {
    fn pool(&self, connect_timeout: Option<Duration>) -> Result<Pool, String> {
        let mut pools = self.pools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, pool)) = pools.iter().find(|(t, _)| *t == connect_timeout) {
            return Ok(pool.clone());
        }
        let mut tcp = TcpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(connect_timeout);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(self.tls.clone()?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let pool = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(https);
        pools.push((connect_timeout, pool.clone()));
        Ok(pool)
    }
}

impl HttpClient for Http1Client {
    fn http_connector(&self, settings: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        let pool = self.pool(settings.connect_timeout());
        SharedHttpConnector::new(Http1Connector { pool, read_timeout: settings.read_timeout() })
    }
}

#[derive(Debug)]
struct Http1Connector {
    pool: Result<Pool, String>,
    read_timeout: Option<Duration>,
}

impl HttpConnector for Http1Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let pool = match &self.pool {
            Ok(pool) => pool.clone(),
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(format!("TLS: {e}").into()))),
        };
        let request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        let read_timeout = self.read_timeout;
        HttpConnectorFuture::new(async move {
            let sent = pool.request(request);
            let response = match read_timeout {
                None => sent.await,
                Some(limit) => {
                    tokio::time::timeout(limit, sent).await.map_err(|e| ConnectorError::timeout(e.into()))?
                }
            }
            .map_err(classify)?;
            HttpResponse::try_from(response.map(SdkBody::from_body_1_x))
                .map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// Connecting failed, or the connection broke or closed under the request: I/O, retried by the
/// SDK. Anything else (a malformed answer) is not.
fn classify(e: hyper_util::client::legacy::Error) -> ConnectorError {
    let broken = e.is_connect()
        || chain(&e).any(|s| {
            s.is::<std::io::Error>()
                || s.downcast_ref::<hyper::Error>()
                    .is_some_and(|h| h.is_closed() || h.is_canceled() || h.is_incomplete_message())
        });
    if broken { ConnectorError::io(e.into()) } else { ConnectorError::other(e.into(), None) }
}

fn chain<'a>(e: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}
