//! What a store is told: its options, checked URLs, TLS certificates, and
//! how a URL may appear in an error message.

use std::time::Duration;

use redis::{Client, ClientTlsConfig, TlsCertificates};

/// How a store connects; every field already checked by the JS layer.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    pub url: String,
    /// A Redis Cluster's node URLs; empty for a single server (`url`).
    pub cluster: Vec<String>,
    pub prefix: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub tls: Option<TlsOptions>,
}

/// PEM bytes for a TLS connection; each part optional, `cert` and `key` together.
#[derive(Clone, Default)]
pub struct TlsOptions {
    pub ca: Option<Vec<u8>>,
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsOptions {
    // A private key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca.as_ref().map(|_| "<pem>"))
            .field("cert", &self.cert.as_ref().map(|_| "<pem>"))
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl TlsOptions {
    /// The certificates for the redis crate; `cert` and `key` go together.
    pub(super) fn certificates(&self) -> Result<TlsCertificates, String> {
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
            (None, None) => None,
            _ => return Err("options.tls.cert and options.tls.key go together".into()),
        };
        Ok(TlsCertificates {
            client_tls,
            root_cert: self.ca.clone(),
        })
    }
}

/// `url` as the redis crate should read it. That crate ignores URL parts it
/// does not know, which would put a lock somewhere else than its user meant
/// (`?db=4` on a TCP URL: database 0), and it reads `#insecure` as "skip the
/// certificate check". Here `?db=N` is honoured (moved into the path, where
/// the crate reads it), and anything else unknown is refused.
pub(super) fn checked_url(raw: &str) -> Result<String, String> {
    // Not parsable, or a unix socket (whose `?db=` the crate reads itself):
    // left to the redis crate.
    let Ok(mut url) = url::Url::parse(raw) else {
        return Ok(raw.to_owned());
    };
    if !matches!(url.scheme(), "redis" | "rediss" | "valkey" | "valkeys") {
        return Ok(raw.to_owned());
    }
    let shown = redacted(raw);
    if url.fragment().is_some() {
        return Err(format!(
            "url {shown:?} has a #fragment; none is allowed (a server's certificate is always checked)"
        ));
    }
    let mut db = None;
    for (name, value) in url.query_pairs() {
        if name != "db" {
            return Err(format!(
                "url {shown:?} has the parameter {name:?}, which this store does not know (the only one is ?db=N)"
            ));
        }
        db = Some(value.into_owned());
    }
    let Some(db) = db else {
        return Ok(raw.to_owned());
    };
    if db.parse::<u16>().is_err() {
        return Err(format!(
            "url {shown:?}: ?db= must be a database number, got {db:?}"
        ));
    }
    let path = url.path().trim_matches('/').to_owned();
    if !path.is_empty() && path != db {
        return Err(format!(
            "url {shown:?} names two databases, /{path} and ?db={db}: give one"
        ));
    }
    url.set_path(&db);
    url.set_query(None);
    Ok(url.to_string())
}

/// A client for one URL, with the TLS certificates if given (a URL that is
/// not `rediss://` then is a mistake).
pub(super) fn open_client(
    url: &str,
    certificates: Option<&TlsCertificates>,
) -> Result<Client, String> {
    match certificates {
        None => Client::open(url).map_err(|e| {
            format!(
                "url {:?} is not a Redis URL this store can use: {e}",
                redacted(url)
            )
        }),
        Some(certificates) => {
            if !url.starts_with("rediss://") {
                return Err(format!(
                    "options.tls needs a rediss:// url, got {:?}",
                    redacted(url)
                ));
            }
            Client::build_with_tls(url, certificates.clone())
                .map_err(|e| format!("options.tls: {e}"))
        }
    }
}

/// A URL as it may appear in an error message: without its password.
pub(super) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// Redis expiries are whole milliseconds; a fractional TTL rounds up, as in memory.
pub(super) fn whole_ms(ttl_ms: f64) -> u64 {
    // `ttl_ms` is positive and at most 2^53 - 1, so the cast is exact.
    ttl_ms.ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_error_messages() {
        assert_eq!(
            redacted("redis://app:s3cret@10.0.0.1:6379/2"),
            "redis://app:***@10.0.0.1:6379/2"
        );
        assert_eq!(redacted("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redacted("redis://host:6379"), "redis://host:6379");
    }

    #[test]
    fn url_parameters_are_honoured_or_refused() {
        assert_eq!(checked_url("redis://h:1/?db=4").unwrap(), "redis://h:1/4");
        assert_eq!(checked_url("redis://h/4?db=4").unwrap(), "redis://h/4");
        assert_eq!(checked_url("redis://h/2").unwrap(), "redis://h/2");
        let twice = checked_url("redis://u:secret@h/0?db=4").unwrap_err();
        assert!(
            twice.contains("two databases") && !twice.contains("secret"),
            "{twice}"
        );
        assert!(checked_url("redis://h?db=x")
            .unwrap_err()
            .contains("database number"));
        assert!(checked_url("redis://h?protocol=resp3")
            .unwrap_err()
            .contains("\"protocol\""));
        assert!(checked_url("rediss://h#insecure")
            .unwrap_err()
            .contains("#fragment"));
        assert_eq!(
            checked_url("redis+unix:///tmp/r.sock?db=3").unwrap(),
            "redis+unix:///tmp/r.sock?db=3"
        );
    }

    #[test]
    fn fractional_ttls_round_up() {
        assert_eq!(whole_ms(0.2), 1);
        assert_eq!(whole_ms(1500.0), 1500);
        assert_eq!(whole_ms(9_007_199_254_740_991.0), 9_007_199_254_740_991);
    }
}
