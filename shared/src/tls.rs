//! HTTPS for outgoing calls (DynamoDB and webhook deliveries): rustls over ring, trusting
//! Mozilla's root certificates compiled into the binary (webpki-roots). The system's certificate
//! files are never read: loading about 150 of them was most of a Lambda function's cold start,
//! and a bundled list answers the same on every machine. Certificates are verified as before;
//! plain `http` (DynamoDB Local, private webhook endpoints in tests) goes through the same clients
//! without TLS.

use std::sync::Arc;

/// The rustls configuration of every outgoing client (DynamoDB: [`crate::sdk_http`]; webhook
/// deliveries: reqwest): Mozilla's roots as trust anchors compiled in, which need no parsing.
pub fn rustls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_roots_are_usable() {
        assert!(webpki_roots::TLS_SERVER_ROOTS.len() > 100, "Mozilla's list has about 150 roots");
        assert!(rustls_config().is_ok());
    }
}
