//! Outgoing HTTPS still verifies certificates now that the roots are bundled: a server on
//! loopback whose self-signed certificate (valid for 127.0.0.1, trusted by nobody) is refused by
//! the DynamoDB client and by the webhook client, for its unknown issuer.

use std::net::SocketAddr;
use std::sync::Arc;

use aws_sdk_dynamodb::config::{Credentials, Region};
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

/// A TLS server on a loopback port that handshakes with the untrusted certificate and then closes.
async fn untrusted_server() -> SocketAddr {
    let certs = vec![CertificateDer::from_pem_slice(CERT.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
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

#[tokio::test]
async fn dynamodb_client_refuses_an_untrusted_certificate() {
    let addr = untrusted_server().await;
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("x", "x", None, None, "test"))
        .endpoint_url(format!("https://{addr}"))
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .http_client(shared::tls::sdk_http_client())
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
