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
//! Lambda freeze) reported as I/O errors, which the store's retry policy retries
//! (`store::dynamo::retry`); and each request's connection lent to the SDK, which closes it after
//! a transient error (connection poisoning).

use std::error::Error;
use std::sync::Mutex;
use std::time::Duration;

use aws_smithy_runtime_api::client::connection::{CaptureSmithyConnection, ConnectionMetadata};
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{HttpConnector as TcpConnector, capture_connection};
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub(crate) type Pool = Client<HttpsConnector<TcpConnector>, SdkBody>;
/// Connect and read timeouts: what a connector is built for.
type Timeouts = (Option<Duration>, Option<Duration>);

/// The SDK's HTTP client: HTTPS with the bundled roots, plain HTTP for local endpoints
/// (DynamoDB Local).
pub fn sdk_http_client() -> SharedHttpClient {
    // Fails only if ring lacked TLS 1.2 and 1.3.
    sdk_http_client_with(crate::tls::rustls_config().expect("a TLS configuration of the bundled roots"))
}

/// The same over another TLS configuration (a private CA; the tests' own certificate).
pub fn sdk_http_client_with(tls: rustls::ClientConfig) -> SharedHttpClient {
    SharedHttpClient::new(Http1Client { tls, connectors: Mutex::default() })
}

/// The SDK asks for a connector before every attempt: one is built per pair of timeouts and
/// kept (a client asks for the same pair every time; the configuration chain's metadata lookups
/// ask for shorter ones).
#[derive(Debug)]
struct Http1Client {
    tls: rustls::ClientConfig,
    connectors: Mutex<Vec<(Timeouts, SharedHttpConnector)>>,
}

impl HttpClient for Http1Client {
    fn http_connector(&self, settings: &HttpConnectorSettings, _: &RuntimeComponents) -> SharedHttpConnector {
        let timeouts = (settings.connect_timeout(), settings.read_timeout());
        let mut connectors = self.connectors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = connectors.iter().find(|(t, _)| *t == timeouts) {
            return c.clone();
        }
        let pool = pool(self.tls.clone(), timeouts.0);
        let connector = SharedHttpConnector::new(Http1Connector { pool, read_timeout: timeouts.1 });
        connectors.push((timeouts, connector.clone()));
        connector
    }
}

/// Hyper's HTTP/1.1 client over rustls (and plain HTTP for local endpoints), its idle
/// connections closed after 90 s: the SDK's connector, and the Management API's
/// (`crate::apigw`), which sends through it the same way.
pub(crate) fn pool(tls: rustls::ClientConfig, connect_timeout: Option<Duration>) -> Pool {
    let mut tcp = TcpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(connect_timeout);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https)
}

#[derive(Debug)]
struct Http1Connector {
    pool: Pool,
    read_timeout: Option<Duration>,
}

impl HttpConnector for Http1Connector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let mut request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        lend_connection(&mut request);
        let (pool, read_timeout) = (self.pool.clone(), self.read_timeout);
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

/// Tells the SDK which connection carries `request`, so that after a transient error (a 500, a
/// throttle, a timeout) its connection-poisoning step can close it rather than send the retry down
/// the same, possibly broken, connection (without it the SDK logs an ERROR at every such error).
fn lend_connection<B>(request: &mut hyper::Request<B>) {
    let Some(smithy) = request.extensions().get::<CaptureSmithyConnection>().cloned() else { return };
    let hyper = capture_connection(request);
    smithy.set_connection_retriever(move || {
        let proxied = hyper.connection_metadata().as_ref()?.is_proxied();
        let conn = hyper.clone();
        let poison = move || {
            if let Some(c) = conn.connection_metadata().as_ref() {
                c.poison();
            }
        };
        Some(ConnectionMetadata::builder().proxied(proxied).poison_fn(poison).build())
    });
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
