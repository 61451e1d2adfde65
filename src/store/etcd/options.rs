//! What an `EtcdLockStore` is made with, its URLs already read.

use std::time::Duration;

use super::endpoint::{Credentials, Endpoint};
use crate::store::TlsOptions;

#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// The members' client URLs, tried in this order first.
    pub endpoints: Vec<Endpoint>,
    /// Put before every key the store writes.
    pub prefix: Vec<u8>,
    pub credentials: Option<Credentials>,
    pub tls: Option<TlsOptions>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

impl EtcdOptions {
    /// The options for `urls` (client URLs, at least one), every other
    /// option at its default.
    pub fn for_urls(urls: &[&str]) -> Result<EtcdOptions, String> {
        let endpoints = urls
            .iter()
            .map(|url| Endpoint::parse(url))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err("at least one endpoint is needed".to_owned());
        }
        Ok(EtcdOptions {
            endpoints,
            prefix: b"keel:".to_vec(),
            credentials: None,
            tls: None,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
        })
    }
}
