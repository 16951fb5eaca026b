//! HTTPS for outgoing calls (DynamoDB and webhook deliveries): rustls over ring, trusting
//! Mozilla's root certificates compiled into the binary. The system's certificate files are never
//! read: loading about 150 of them was most of a Lambda function's cold start, and a bundled list
//! answers the same on every machine. Certificates are verified as before; plain `http` (DynamoDB
//! Local, private webhook endpoints in tests) goes through the same clients without TLS.

use std::sync::Arc;

use aws_sdk_dynamodb::config::SharedHttpClient;
use aws_smithy_http_client::Builder;
use aws_smithy_http_client::tls::{Provider, TlsContext, TrustStore, rustls_provider::CryptoMode};
use base64::Engine;

/// The AWS SDK's HTTP client, trusting only the bundled roots.
pub fn sdk_http_client() -> SharedHttpClient {
    let roots = TrustStore::empty().with_native_roots(false).with_pem_certificate(bundled_roots_pem());
    // Only fails if a later SDK release starts validating here; the roots themselves are checked
    // when the client first connects (and by `bundled_roots_are_usable` below).
    let context = TlsContext::builder().with_trust_store(roots).build().expect("a TLS context of bundled roots");
    Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).tls_context(context).build_https()
}

/// The SDK's trust store takes PEM only, while webpki-root-certs ships DER: one PEM bundle.
fn bundled_roots_pem() -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pem = Vec::with_capacity(webpki_root_certs::TLS_SERVER_ROOT_CERTS.len() * 2_100);
    for cert in webpki_root_certs::TLS_SERVER_ROOT_CERTS {
        pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
        let body = b64.encode(cert.as_ref());
        for line in body.as_bytes().chunks(64) {
            pem.extend_from_slice(line);
            pem.push(b'\n');
        }
        pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    }
    pem
}

/// A rustls configuration for other HTTP clients (reqwest): the same bundled roots, taken as
/// trust anchors that need no parsing.
pub fn rustls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    use super::*;

    #[test]
    fn bundled_roots_are_usable() {
        let pem = bundled_roots_pem();
        let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(&pem).collect::<Result<_, _>>().unwrap();
        assert_eq!(certs.len(), webpki_root_certs::TLS_SERVER_ROOT_CERTS.len());
        assert!(certs.len() > 100, "Mozilla's list has about 150 roots");
        let mut store = rustls::RootCertStore::empty();
        let (ok, bad) = store.add_parsable_certificates(certs);
        assert_eq!((ok, bad), (webpki_root_certs::TLS_SERVER_ROOT_CERTS.len(), 0));
        assert!(rustls_config().is_ok());
    }
}
