//! What every native store is told alike: TLS certificates, and how a URL
//! and a TTL reach a server.

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

/// A URL as it may appear in an error message: without its password (in
/// the user part, or a `password=` parameter), and with `***` only where
/// there was one.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (place, query) = match rest.split_once('?') {
        Some((place, query)) => (place, Some(query)),
        None => (rest, None),
    };
    let mut shown = format!("{scheme}://");
    match place.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => shown.push_str(&format!("{user}:***@{host}")),
            None => shown.push_str(place),
        },
        None => shown.push_str(place),
    }
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// Stores keep whole milliseconds; a fractional TTL rounds up, as in memory.
pub fn whole_ms(ttl_ms: f64) -> u64 {
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
        // No password, no stars.
        assert_eq!(
            redacted("postgres://app@db:5432/x?sslmode=verify-full"),
            "postgres://app@db:5432/x?sslmode=verify-full"
        );
        assert_eq!(
            redacted("postgres://app@db/x?sslmode=require&password=s3cret"),
            "postgres://app@db/x?sslmode=require&password=***"
        );
    }

    #[test]
    fn fractional_ttls_round_up() {
        assert_eq!(whole_ms(0.2), 1);
        assert_eq!(whole_ms(1500.0), 1500);
        assert_eq!(whole_ms(9_007_199_254_740_991.0), 9_007_199_254_740_991);
    }
}
