//! API Gateway's Management API for the WebSocket API's connections (docs/streams.md, "AWS"):
//! `PostToConnection` sends a frame to a client, `DeleteConnection` hangs up. Built on the same
//! HTTP client and SDK settings as DynamoDB ([`crate::sdk_http`]); the endpoint is the API's
//! stage URL (`https://<api>.execute-api.<region>.amazonaws.com/<stage>`), or any URL (tests
//! point it at a local server standing in for it).
//!
//! [`Poster`] is what the stream fan-out (`domain::streams::connections`) and the WebSocket
//! function send through; [`ManagementApi`] is the real one.

use async_trait::async_trait;
use aws_sdk_apigatewaymanagement::Client;
use aws_sdk_apigatewaymanagement::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_apigatewaymanagement::primitives::Blob;

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

/// The Management API of one WebSocket API stage.
#[derive(Debug, Clone)]
pub struct ManagementApi {
    client: Client,
}

impl ManagementApi {
    /// For a Lambda function: region and the role's credentials from what Lambda sets in the
    /// environment (as the DynamoDB store's `in_lambda`).
    pub fn in_lambda(endpoint: &str, env: &crate::config::Env) -> Self {
        let region = ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|n| env.get(n)).unwrap_or("us-east-1");
        let config = aws_sdk_apigatewaymanagement::Config::builder()
            .credentials_provider(aws_config::environment::EnvironmentVariableCredentialsProvider::new());
        Self::build(config, endpoint, region)
    }

    /// With these credentials (tests: a local endpoint that checks none).
    pub fn with_credentials(endpoint: &str, region: &str, access_key: &str, secret_key: &str) -> Self {
        let creds = Credentials::new(access_key, secret_key, None, None, "waymark-static");
        Self::build(aws_sdk_apigatewaymanagement::Config::builder().credentials_provider(creds), endpoint, region)
    }

    fn build(config: aws_sdk_apigatewaymanagement::config::Builder, endpoint: &str, region: &str) -> Self {
        let config = config
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(region.to_owned()))
            .http_client(crate::sdk_http::sdk_http_client())
            .endpoint_url(endpoint.trim_end_matches('/'))
            .build();
        Self { client: Client::from_conf(config) }
    }
}

/// Whether an answer says the connection is gone: 410 (`GoneException`), however its body
/// names it.
fn gone<E>(e: &aws_sdk_apigatewaymanagement::error::SdkError<E>) -> bool {
    e.raw_response().is_some_and(|r| r.status().as_u16() == 410)
}

#[async_trait]
impl Poster for ManagementApi {
    async fn post(&self, connection_id: &str, frame: &str) -> Result<Delivery, String> {
        let sent = self
            .client
            .post_to_connection()
            .connection_id(connection_id)
            .data(Blob::new(frame.as_bytes()))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(Delivery::Sent),
            Err(e) if gone(&e) => Ok(Delivery::Gone),
            Err(e) => Err(format!(
                "PostToConnection {connection_id}: {}",
                aws_sdk_apigatewaymanagement::error::DisplayErrorContext(e)
            )),
        }
    }

    async fn hang_up(&self, connection_id: &str) -> Result<(), String> {
        match self.client.delete_connection().connection_id(connection_id).send().await {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(format!(
                "DeleteConnection {connection_id}: {}",
                aws_sdk_apigatewaymanagement::error::DisplayErrorContext(e)
            )),
        }
    }
}
