//! MySqlLockStore's options, and the URL read into where and how to
//! connect: `mysql://user:password@host:port/database?ssl-mode=...&socket=...`.

use super::super::options::{
    decoded_part, redacted, unclean_text, unix_socket_refused, TableOptions,
};

/// Whether and how TLS is spoken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    Off,
    /// If the server offers it (else plain text).
    Preferred,
    Required,
}

/// Where the URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Tcp { host: String, port: u16 },
    Socket(String),
}

/// The URL, read.
#[derive(Clone, Debug)]
pub struct Address {
    pub place: Place,
    pub user: String,
    pub password: Option<Vec<u8>>,
    pub database: String,
    pub tls: TlsMode,
    /// The server as error messages name it (no password).
    pub display: String,
}

const KNOWN: &str = "ssl-mode, socket";

/// Read `options.url`, or say what is wrong with it (never showing its password).
pub fn address(options: &TableOptions) -> Result<Address, String> {
    let shown = redacted(&options.url);
    let bad = |why: &str| format!("url {shown:?} {why}");
    if let Some(why) = unclean_text(&options.url) {
        return Err(bad(&why));
    }
    let url = url::Url::parse(&options.url).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if url.scheme() != "mysql" && url.scheme() != "mariadb" {
        return Err(bad("is not a mysql:// URL"));
    }
    let decode = |part: &str, text: &str| -> Result<Vec<u8>, String> {
        decoded_part(part, text).map_err(|why| format!("url {shown:?}: {why}"))
    };
    let user = match url.username() {
        "" => "root".to_owned(),
        name => String::from_utf8(decode("the user name", name)?)
            .map_err(|_| bad("has a user name that is not UTF-8"))?,
    };
    let password = url
        .password()
        .map(|text| decode("the password", text))
        .transpose()?;
    let database = url.path().trim_start_matches('/');
    if database.contains('/') {
        return Err(bad(
            "has a path of more than one part: give the database alone",
        ));
    }
    let database = String::from_utf8(decode("the database name", database)?)
        .map_err(|_| bad("names a database that is not UTF-8"))?;
    // The host is not decoded (a name goes to DNS as written), but a bad
    // escape there is the same slip as anywhere else: said here, not as a
    // failed lookup on the first operation.
    if let Some(url::Host::Domain(host)) = url.host() {
        decode("the host", host)?;
    }
    // The parameters as written: `query_pairs` below keeps a bad escape as
    // it is and passes a NUL on (a socket path cut at it).
    for pair in url.query().unwrap_or("").split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = String::from_utf8_lossy(&decode("a parameter's name", name)?).into_owned();
        decode(&format!("the parameter {name:?}"), value)?;
    }
    let mut tls = if options.tls.is_some() {
        TlsMode::Required
    } else {
        TlsMode::Off
    };
    let mut socket = None;
    for (name, value) in url.query_pairs() {
        match name.as_ref() {
            // MySQL's meanings, except that a certificate is always checked
            // (the chain, and the host name) whenever TLS is spoken: REQUIRED
            // and VERIFY_CA are VERIFY_IDENTITY here, and PREFERRED does not
            // settle for an unchecked certificate (only for no TLS at all).
            "ssl-mode" | "sslMode" | "ssl_mode" => {
                tls = match value.to_ascii_uppercase().as_str() {
                    "DISABLED" => TlsMode::Off,
                    "PREFERRED" => TlsMode::Preferred,
                    "REQUIRED" | "VERIFY_CA" | "VERIFY_IDENTITY" => TlsMode::Required,
                    _ => {
                        return Err(bad(&format!(
                            "has ssl-mode={value}; use DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
                        )))
                    }
                }
            }
            "socket" => socket = Some(value.into_owned()),
            other => return Err(bad(&format!("has the parameter {other:?}, which this store does not know (known: {KNOWN})"))),
        }
    }
    if tls == TlsMode::Off && options.tls.is_some() {
        return Err(format!(
            "options.tls is given but url {shown:?} turns TLS off (ssl-mode=DISABLED)"
        ));
    }
    let place = match socket {
        Some(path) => {
            if let Some(why) = unix_socket_refused(&format!("socket={path}")) {
                return Err(bad(&why));
            }
            if tls == TlsMode::Required {
                return Err(bad(
                    "asks for TLS over a unix socket, which MySQL does not speak",
                ));
            }
            tls = TlsMode::Off;
            Place::Socket(path)
        }
        None => {
            let host = match url.host() {
                Some(url::Host::Ipv6(ip)) => ip.to_string(),
                Some(host) => host.to_string(),
                None => "localhost".to_owned(),
            };
            Place::Tcp {
                host,
                port: url.port().unwrap_or(3306),
            }
        }
    };
    if database.is_empty() && !options.table.contains('.') {
        return Err(bad(&format!(
            "names no database (mysql://host/database), and table {:?} does not name one either (database.table)",
            options.table
        )));
    }
    let display = match &place {
        Place::Tcp { host, port } if host.contains(':') => {
            format!("mysql://{user}@[{host}]:{port}/{database}")
        }
        Place::Tcp { host, port } => format!("mysql://{user}@{host}:{port}/{database}"),
        Place::Socket(path) => format!("mysql://{user}@{path}/{database}"),
    };
    Ok(Address {
        place,
        user,
        password,
        database,
        tls,
        display,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str) -> TableOptions {
        TableOptions::testing(url, "keel_locks")
    }

    #[test]
    fn a_url_names_the_server_user_password_and_database() {
        let a = address(&options("mysql://app:p%40ss@db.internal:3307/orders")).unwrap();
        assert_eq!(
            a.place,
            Place::Tcp {
                host: "db.internal".to_owned(),
                port: 3307
            }
        );
        assert_eq!(
            (a.user.as_str(), a.password.as_deref()),
            ("app", Some(&b"p@ss"[..]))
        );
        assert_eq!(a.database, "orders");
        assert_eq!(a.display, "mysql://app@db.internal:3307/orders");
        let a = address(&options("mysql://127.0.0.1/test")).unwrap();
        assert_eq!(
            (a.user.as_str(), a.password, a.tls),
            ("root", None, TlsMode::Off)
        );
        let a = address(&options(
            "mysql://u@localhost/test?socket=%2Frun%2Fmysqld%2Fmysqld.sock",
        ))
        .unwrap();
        assert_eq!(a.place, Place::Socket("/run/mysqld/mysqld.sock".to_owned()));
        assert_eq!(
            address(&options("mysql://[::1]/d")).unwrap().display,
            "mysql://root@[::1]:3306/d"
        );
    }

    #[test]
    fn ssl_mode_keeps_the_certificate_checked() {
        for (mode, tls) in [
            ("DISABLED", TlsMode::Off),
            ("preferred", TlsMode::Preferred),
            ("REQUIRED", TlsMode::Required),
            ("VERIFY_CA", TlsMode::Required),
            ("VERIFY_IDENTITY", TlsMode::Required),
        ] {
            assert_eq!(
                address(&options(&format!("mysql://h/d?ssl-mode={mode}")))
                    .unwrap()
                    .tls,
                tls
            );
        }
    }

    #[test]
    fn bad_urls_say_why_without_the_password() {
        for (url, why) in [
            ("redis://app:hunter2@h/d", "is not a mysql:// URL"),
            (
                "mysql://app:hunter2@h/d?ssl-mode=sometimes",
                "ssl-mode=sometimes",
            ),
            ("mysql://app:hunter2@h/d?charset=latin1", "\"charset\""),
            ("mysql://app:hunter2@h", "names no database"),
            ("mysql://app:hunter2@h/a/b", "more than one part"),
            (
                "mysql://app:hunter2%ZZ@h/d",
                "the password has an invalid %-escape",
            ),
            (
                "mysql://app:hunter2@h/te%00st",
                "the database name has a NUL",
            ),
            (
                "mysql://app:hunter2@h/d?socket=%2Ftmp%00",
                "\"socket\" has a NUL",
            ),
            (" mysql://app:hunter2@h/d", "begins with whitespace"),
        ] {
            let e = address(&options(url)).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
