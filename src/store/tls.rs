//! TLS for the connections this crate makes itself (on the event loop or
//! on Tokio): a rustls client configuration made when the
//! store is made, so a bad PEM
//! is the caller's error at once. The server is checked against the system's
//! trusted roots, or only `tls.ca` when one is given; there is no switch to
//! skip verification.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::options::TlsOptions;

/// The client configuration for `tls`, or why it cannot be made.
pub fn client_config(tls: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    match &tls.ca {
        Some(ca) => {
            for cert in CertificateDer::pem_slice_iter(ca) {
                let cert =
                    cert.map_err(|e| format!("options.tls.ca is not PEM certificates: {e}"))?;
                roots.add(cert).map_err(|e| {
                    format!("options.tls.ca holds a certificate rustls refuses: {e}")
                })?;
            }
            if roots.is_empty() {
                return Err("options.tls.ca holds no certificate".to_owned());
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for cert in native.certs {
                // A system root rustls cannot use is skipped, as browsers do.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("options.tls: {e}"))?
        .with_root_certificates(roots);
    let config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("options.tls.cert is not PEM certificates: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("options.tls.key is not a PEM private key: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("options.tls.cert and options.tls.key: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("options.tls.cert and options.tls.key go together".to_owned()),
    };
    Ok(Arc::new(config))
}
