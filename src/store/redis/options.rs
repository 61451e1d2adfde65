//! What a Redis store is told: its options, checked URLs, TLS certificates.

use std::time::Duration;

use redis::{Client, ClientTlsConfig, TlsCertificates};

use crate::store::options::{
    decoded_part, redacted, unclean_text, unix_socket_refused, TlsOptions,
};

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
    let shown = redacted(raw);
    if let Some(why) = unclean_text(raw) {
        return Err(format!("url {shown:?} {why}"));
    }
    // Not parsable: left to the redis crate, which says why.
    let Ok(mut url) = url::Url::parse(raw) else {
        return Ok(raw.to_owned());
    };
    strict_parts(&url).map_err(|why| format!("url {shown:?}: {why}"))?;
    // A unix socket, whose `?db=` the crate reads itself: left to it, where
    // there are unix sockets.
    if !tcp_scheme(&url) {
        if unix_scheme(&url) {
            if let Some(why) = unix_socket_refused(url.path()) {
                return Err(format!("url {shown:?} {why}"));
            }
        }
        return Ok(raw.to_owned());
    }
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

/// The parts of `url` the redis crate %-decodes (the user and password,
/// a unix socket's path and parameters), decoded strictly: its decoder
/// keeps a bad escape as written (a password with `%ZZ` is sent so, and
/// refused as a wrong password) and passes a NUL on. The host is not
/// decoded (a name goes to DNS as written), nor is a database number, but
/// a bad escape there is the same slip, said here rather than as a failed
/// lookup or an unreadable number.
fn strict_parts(url: &url::Url) -> Result<(), String> {
    decoded_part("the user name", url.username())?;
    if let Some(password) = url.password() {
        decoded_part("the password", password)?;
    }
    if let Some(url::Host::Domain(host)) = url.host() {
        decoded_part("the host", host)?;
    }
    let path = if tcp_scheme(url) {
        "the database"
    } else {
        "the socket path"
    };
    decoded_part(path, url.path())?;
    for pair in url.query().unwrap_or("").split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = String::from_utf8_lossy(&decoded_part("a parameter's name", name)?).into_owned();
        decoded_part(&format!("the parameter {name:?}"), value)?;
    }
    Ok(())
}

/// Whether `url` names a server over TCP (else a unix socket, or nothing
/// the redis crate reads).
fn tcp_scheme(url: &url::Url) -> bool {
    matches!(url.scheme(), "redis" | "rediss" | "valkey" | "valkeys")
}

/// Whether `url` names a server through a unix socket.
fn unix_scheme(url: &url::Url) -> bool {
    matches!(url.scheme(), "unix" | "redis+unix" | "valkey+unix")
}

/// A client for one URL, with the TLS certificates if given (a URL that is
/// not `rediss://` then is a mistake).
pub(super) fn open_client(
    url: &str, certificates: Option<&TlsCertificates>,
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
        for (url, why) in [
            (
                "redis://:s3cret%ZZ@h",
                "the password has an invalid %-escape",
            ),
            ("redis://u%00:s3cret@h", "the user name has a NUL"),
            ("redis+unix:///tmp/r%00.sock", "the socket path has a NUL"),
            (
                "redis+unix:///tmp/r.sock?pass=s3cret%ZZ",
                "\"pass\" has an invalid",
            ),
            (" redis://:s3cret@h", "begins with whitespace"),
        ] {
            let e = checked_url(url).unwrap_err();
            assert!(e.contains(why) && !e.contains("s3cret"), "{url}: {e}");
        }
        assert_eq!(
            checked_url("redis://:p%40ss%20w@[::1]:6380/1").unwrap(),
            "redis://:p%40ss%20w@[::1]:6380/1"
        );
    }
}
