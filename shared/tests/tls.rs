//! Outgoing HTTPS still verifies certificates now that the roots are bundled: a server on
//! loopback whose self-signed certificate (valid for 127.0.0.1, trusted by nobody) is refused by
//! the DynamoDB client and by the webhook client, for its unknown issuer. And the DynamoDB
//! client's own HTTP/1.1 transport (`shared::sdk_http`) carries a call over TLS to a server it
//! trusts, twice on one kept-alive connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::config::{Credentials, Region};
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Made once with `openssl req -x509 -newkey ec ... -subj /CN=waymark-test-untrusted
/// -addext subjectAltName=IP:127.0.0.1,DNS:localhost` (valid until 2126); for this test only.
const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgMPJtVo1PvORiOW+G
dtqiNnfb6MOgfmqu6tzhlTQHBlqhRANCAARsqEFCdHTgQ968a95oh6JKhJ+a2WoW
6KZfLHT3B9AnUw9+jgB1OLp46YfhTWkduAVArjhamjp6lMDs3FSe46uI
-----END PRIVATE KEY-----";
const CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBxzCCAW6gAwIBAgIUP79KdfkDPvNt5GChkqwLGywpni4wCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWd2F5bWFyay10ZXN0LXVudHJ1c3RlZDAgFw0yNjExMjMxMzI5
NDlaGA8yMTI2MTAzMDEzMjk0OVowITEfMB0GA1UEAwwWd2F5bWFyay10ZXN0LXVu
dHJ1c3RlZDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGyoQUJ0dOBD3rxr3miH
okqEn5rZahbopl8sdPcH0CdTD36OAHU4unjph+FNaR24BUCuOFqaOnqUwOzcVJ7j
q4ijgYEwfzAdBgNVHQ4EFgQUCC0Fei6IHaNna7kJLYwjckbpUr0wHwYDVR0jBBgw
FoAUCC0Fei6IHaNna7kJLYwjckbpUr0wGgYDVR0RBBMwEYcEfwAAAYIJbG9jYWxo
b3N0MAwGA1UdEwEB/wQCMAAwEwYDVR0lBAwwCgYIKwYBBQUHAwEwCgYIKoZIzj0E
AwIDRwAwRAIgd/ezBGYAzyibimnpvMRllFkDQlbOba7YM/wl4ui9qeUCID7XSfPb
Bvu4o3QhYlicquB+15I8diTCqzxSqKm2t3BP
-----END CERTIFICATE-----";

/// A loopback listener and a TLS acceptor presenting the test certificate.
async fn tls_listener() -> (tokio::net::TcpListener, tokio_rustls::TlsAcceptor, SocketAddr) {
    let certs = vec![CertificateDer::from_pem_slice(CERT.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, tokio_rustls::TlsAcceptor::from(Arc::new(config)), addr)
}

/// A TLS server on a loopback port that handshakes with the untrusted certificate and then closes.
async fn untrusted_server() -> SocketAddr {
    let (listener, acceptor, addr) = tls_listener().await;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(stream).await;
            });
        }
    });
    addr
}

/// A TLS server that answers every request on a connection with a DynamoDB `ListTables` answer,
/// counting connections and requests.
async fn trusted_dynamodb(connections: Arc<AtomicUsize>, requests: Arc<AtomicUsize>) -> SocketAddr {
    let (listener, acceptor, addr) = tls_listener().await;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, requests) = (acceptor.clone(), requests.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let answer = service_fn(move |req: hyper::Request<Incoming>| {
                    requests.fetch_add(1, Ordering::SeqCst);
                    async move {
                        assert_eq!(req.headers()["x-amz-target"], "DynamoDB_20120810.ListTables");
                        let body = req.into_body().collect().await.expect("request body").to_bytes();
                        assert!(body.starts_with(b"{"), "a JSON request: {body:?}");
                        let mut answer =
                            hyper::Response::new(Full::new(Bytes::from_static(br#"{"TableNames":["waymark-main"]}"#)));
                        answer.headers_mut().insert("content-type", "application/x-amz-json-1.0".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(answer)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), answer).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn dynamodb_client_calls_a_trusted_server_over_http1_and_keeps_the_connection() {
    let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let addr = trusted_dynamodb(connections.clone(), requests.clone()).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(CERT.as_bytes()).expect("cert")).expect("root");
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("x", "x", None, None, "test"))
        .endpoint_url(format!("https://localhost:{}", addr.port()))
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .http_client(shared::sdk_http::sdk_http_client_with(tls))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    for _ in 0..2 {
        let out = client.list_tables().send().await.expect("ListTables over TLS");
        assert_eq!(out.table_names(), ["waymark-main"]);
    }
    assert_eq!((connections.load(Ordering::SeqCst), requests.load(Ordering::SeqCst)), (1, 2));
}

#[tokio::test]
async fn dynamodb_client_refuses_an_untrusted_certificate() {
    let addr = untrusted_server().await;
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("x", "x", None, None, "test"))
        .endpoint_url(format!("https://{addr}"))
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .http_client(shared::sdk_http::sdk_http_client())
        .build();
    let err = aws_sdk_dynamodb::Client::from_conf(config).list_tables().send().await.expect_err("must be refused");
    let chain = format!("{err:?}");
    assert!(chain.contains("UnknownIssuer"), "refused for another reason: {chain}");
}

#[tokio::test]
async fn webhook_client_refuses_an_untrusted_certificate() {
    let addr = untrusted_server().await;
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(shared::tls::rustls_config().expect("config"))
        .build()
        .expect("client");
    let err = client.get(format!("https://{addr}/hook")).send().await.expect_err("must be refused");
    let chain = format!("{err:?}");
    assert!(chain.contains("UnknownIssuer"), "refused for another reason: {chain}");
}
