//! What every native store is told alike: TLS certificates, and how a URL
//! and a TTL reach a server.

use std::time::Duration;

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

/// What a store on a database table is made with: the server's URL, the
/// table (optionally qualified by its schema or database), the pool, the
/// time bounds, TLS; every field but the URL already checked by the JS layer.
#[derive(Debug, Clone)]
pub struct TableOptions {
    pub url: String,
    pub table: String,
    pub pool_size: usize,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// How often expired rows are swept away (at most; only while acquiring).
    pub sweep_interval: Duration,
    pub tls: Option<TlsOptions>,
}

impl TableOptions {
    /// The server at `url`, the table `table`, two connections, time bounds
    /// of 5 s: what the stores' own tests use.
    #[cfg(test)]
    pub fn testing(url: &str, table: &str) -> TableOptions {
        TableOptions {
            url: url.to_owned(),
            table: table.to_owned(),
            pool_size: 2,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(5),
            sweep_interval: Duration::from_secs(60),
            tls: None,
        }
    }
}

/// A URL as it may appear in an error message: without its password (in
/// the user part, or a `password=` or `pass=` parameter, as some unix
/// socket URLs carry it), and with `***` only where there was one.
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
                Some((name, _))
                    if name.eq_ignore_ascii_case("password")
                        || name.eq_ignore_ascii_case("pass") =>
                {
                    format!("{name}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// Why `url`'s text is not a URL as written, if it is not: whitespace at
/// either end, or a control character anywhere. The URL readers behind the
/// stores would otherwise take it quietly (the `url` crate drops spaces and
/// control characters at the ends, and tabs and newlines anywhere), so a
/// value read with a stray newline or space would connect as if clean, or
/// keep the character in a password and fail as a refused login.
pub fn unclean_text(url: &str) -> Option<String> {
    if url.starts_with(char::is_whitespace) {
        return Some("begins with whitespace: a URL has none around it".to_owned());
    }
    if url.ends_with(char::is_whitespace) {
        return Some(
            "ends with whitespace (a newline read with it?): a URL has none around it".to_owned(),
        );
    }
    url.chars().find(|c| c.is_control()).map(|c| {
        format!(
            "has a control character (U+{:04X}) in it: %-encode it if it is meant",
            u32::from(c)
        )
    })
}

/// `text`, one part of a URL (named by `part`: "the password"), %-decoded,
/// or why not. Strict where the decoders behind the stores are not: they
/// keep a `%` that is not followed by two hex digits as it is, so a
/// password with `%ZZ` in it would be sent as written and fail as a
/// refused login, far from the mistake. A decoded NUL is refused too: the
/// servers read names, passwords and values up to a NUL (`te%00st` would
/// be the database `te`). The part's text is never in the message, as it
/// may be a password.
pub fn decoded_part(part: &str, text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let byte = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .filter(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        let Some(byte) = byte else {
            return Err(format!(
                "{part} has an invalid %-escape (a % not followed by two hex digits; a % itself is written %25)"
            ));
        };
        out.push(byte);
        i += 3;
    }
    if out.contains(&0) {
        return Err(format!(
            "{part} has a NUL character (%00) in it: no server takes one there (most would read only up to it)"
        ));
    }
    Ok(out)
}

/// Why a URL that asks for a unix-domain socket (`given`, as the URL gave
/// it: `host=/run/db`) cannot be used, where it cannot: off unix
/// (on Windows, of the targets built), where the stores reach servers over
/// TCP only. Said when the store is made, not as a failed connection on
/// the first operation.
pub fn unix_socket_refused(given: &str) -> Option<String> {
    cfg!(not(unix)).then(|| {
        format!("asks for a unix-domain socket ({given}), which is not supported on Windows")
    })
}

/// Stores keep whole milliseconds; a fractional TTL rounds up, as it does in
/// the process's own store.
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
            redacted("db://app:s3cret@10.0.0.1:6379/2"),
            "db://app:***@10.0.0.1:6379/2"
        );
        assert_eq!(redacted("db://:s3cret@host"), "db://:***@host");
        assert_eq!(redacted("db://host:6379"), "db://host:6379");
        // No password, no stars.
        assert_eq!(
            redacted("db://app@db:5432/x?sslmode=verify-full"),
            "db://app@db:5432/x?sslmode=verify-full"
        );
        assert_eq!(
            redacted("db://app@db/x?sslmode=require&password=s3cret"),
            "db://app@db/x?sslmode=require&password=***"
        );
        assert_eq!(
            redacted("db+unix:///tmp/db.sock?db=1&pass=s3cret"),
            "db+unix:///tmp/db.sock?db=1&pass=***"
        );
    }

    #[test]
    fn unix_sockets_are_refused_only_off_unix() {
        let refused = unix_socket_refused("socket=/tmp/m.sock");
        if cfg!(unix) {
            assert_eq!(refused, None);
        } else {
            let why = refused.unwrap_or_default();
            assert!(why.contains("(socket=/tmp/m.sock), which is not supported on Windows"));
        }
    }

    #[test]
    fn url_text_is_taken_only_as_written() {
        assert_eq!(unclean_text("db://h:1/2"), None);
        assert_eq!(unclean_text("db://u:p%20q@[::1]/d"), None);
        for (url, why) in [
            (" db://h", "begins with whitespace"),
            ("db://h\n", "ends with whitespace"),
            ("db://h/d\u{a0}", "ends with whitespace"),
            ("db://h/d\tb", "U+0009"),
            ("db://u:p\u{7f}@h/d", "U+007F"),
        ] {
            let e = unclean_text(url).unwrap_or_default();
            assert!(e.contains(why), "{url:?}: {e}");
        }
    }

    #[test]
    fn url_parts_decode_strictly_and_never_show_their_text() {
        assert_eq!(
            decoded_part("the password", "p%40ss%20w").unwrap(),
            b"p@ss w"
        );
        assert_eq!(decoded_part("the path", "%2Fa%2fb").unwrap(), b"/a/b");
        assert_eq!(decoded_part("the password", "").unwrap(), b"");
        for text in ["s3cr%ZZet", "s3cret%", "s3cret%4", "s3cr%+1et", "%\u{e9}0"] {
            let e = decoded_part("the password", text).unwrap_err();
            assert!(
                e.starts_with("the password has an invalid %-escape") && !e.contains("s3cr"),
                "{text}: {e}"
            );
        }
        let e = decoded_part("the database name", "te%00st").unwrap_err();
        assert!(
            e.contains("the database name has a NUL") && !e.contains("te%00"),
            "{e}"
        );
    }

    #[test]
    fn fractional_ttls_round_up() {
        assert_eq!(whole_ms(0.2), 1);
        assert_eq!(whole_ms(1500.0), 1500);
        assert_eq!(whole_ms(9_007_199_254_740_991.0), 9_007_199_254_740_991);
    }
}
