//! What a Redis store is told: its options, checked URLs, TLS certificates.

use std::time::Duration;

use redis::{Client, ClientTlsConfig, TlsCertificates};

use crate::store::options::{redacted, TlsOptions};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
