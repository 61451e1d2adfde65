//! What a PostgreSQL store is told: the server (a `postgres://` URL read by
//! tokio-postgres), the table, the pool, the time bounds, TLS; and the
//! server as an error message may name it.

use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;

use crate::store::options::{
    decoded_part, redacted, unclean_text, unix_socket_refused, TableOptions,
};

/// The connection settings read from the URL, and whether they ask for TLS.
pub(super) struct Target {
    pub config: Config,
    /// `config` without the settings the store adds to `options` (below),
    /// for a server that refuses the `options` startup parameter.
    pub plain: Config,
    /// Whether the server refused `options`: connect with `plain` from then on.
    pub refuses_options: AtomicBool,
    /// Whether TLS is spoken: wanted (`tls_optional`: `sslmode=prefer`, a
    /// server that has no TLS is spoken to in plain text) or required.
    pub tls: bool,
    pub tls_optional: bool,
    /// The server as error messages name it: `postgres://user@host:port/db`.
    pub display: String,
}

/// Read `options.url`; a URL that cannot be used is the caller's mistake,
/// reported with its password hidden.
pub(super) fn target(options: &TableOptions) -> Result<Target, String> {
    target_of(options, "url", &options.url)
}

/// Read `listen_url` (`options.listenUrl`), if given, as `url` is read.
pub(super) fn listen_target(
    options: &TableOptions, listen_url: Option<&str>,
) -> Result<Option<Target>, String> {
    listen_url
        .map(|url| target_of(options, "listenUrl", url))
        .transpose()
}

/// A connection opened by tokio-postgres (a unix socket, several hosts) has
/// no command-timeout rule for going silent (that is the event loop's, in
/// `store::event_loop`): the kernel finds a host that is gone instead, idle by
/// keepalive probes and with statements unanswered by the TCP user timeout,
/// both within about 30 s, as on the event loop's connections. A stalled
/// but live server still acknowledges what it is sent, so its connection
/// stays, with its statements in order. What the URL sets is kept.
fn find_silent_hosts(config: &mut Config) {
    const LIBPQ_IDLE: Duration = Duration::from_secs(2 * 60 * 60);
    if config.get_keepalives() && config.get_keepalives_idle() == LIBPQ_IDLE {
        config.keepalives_idle(Duration::from_secs(15));
        if config.get_keepalives_interval().is_none() {
            config.keepalives_interval(Duration::from_secs(5));
        }
        if config.get_keepalives_retries().is_none() {
            config.keepalives_retries(3);
        }
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
}

/// Read `url` (the option `name`) with the store's bounds.
fn target_of(options: &TableOptions, name: &str, url: &str) -> Result<Target, String> {
    let shown = redacted(url);
    if let Some(why) = unclean_text(url) {
        return Err(format!("{name} {shown:?} {why}"));
    }
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        return Err(format!(
            "{name} {shown:?} is not a postgres:// URL (postgres://user:password@host:port/database)"
        ));
    }
    strict_parts(url).map_err(|why| format!("{name} {shown:?}: {why}"))?;
    let (url, sslmode) = without_sslmode(url);
    let mut config = Config::from_str(&url)
        .map_err(|e| format!("{name} {shown:?} is not a PostgreSQL URL this store can use: {e}"))?;
    if config.get_hosts().is_empty() {
        config.host("localhost");
    }
    // Off unix, tokio-postgres would look a socket folder up as a host name.
    let folder = config.get_hosts().iter().find_map(|host| match host {
        Host::Tcp(host) if host.starts_with('/') => Some(host),
        _ => None,
    });
    if let Some(why) = folder.and_then(|folder| unix_socket_refused(&format!("host={folder}"))) {
        return Err(format!("{name} {shown:?} {why}"));
    }
    if config.get_user().is_none() {
        config.user("postgres");
    }
    // libpq's meanings, except that a certificate is always checked (the
    // chain, and the host name) whenever TLS is spoken: require and
    // verify-ca are verify-full here, and prefer does not settle for an
    // unchecked certificate (only for no TLS at all).
    let mode = match sslmode.as_deref() {
        None => {
            if options.tls.is_some() {
                SslMode::Require
            } else {
                SslMode::Disable
            }
        }
        Some("disable" | "allow") => SslMode::Disable,
        Some("prefer") => SslMode::Prefer,
        Some("require" | "verify-ca" | "verify-full") => SslMode::Require,
        Some(other) => {
            return Err(format!(
                "{name} {shown:?} has sslmode={other}; use disable, allow, prefer, require, verify-ca or verify-full"
            ))
        }
    };
    if mode == SslMode::Disable && options.tls.is_some() {
        return Err(format!(
            "options.tls is given but {name} {shown:?} turns TLS off (sslmode=disable or allow)"
        ));
    }
    let tls = mode != SslMode::Disable;
    let tls_optional = mode == SslMode::Prefer;
    config.ssl_mode(mode);
    config.connect_timeout(options.connect_timeout);
    config.application_name("keel-lock");
    find_silent_hosts(&mut config);
    // The server cancels a statement that outlives the command timeout, so a
    // statement stuck behind another session's lock does not hold its
    // connection after the caller has been told it timed out. READ COMMITTED
    // whatever the database's default: the hold function (sql.rs) counts on
    // each of its statements seeing what was committed before it.
    let bound = format!(
        "-c statement_timeout={} -c default_transaction_isolation=read\\ committed",
        options.command_timeout.as_millis().max(1)
    );
    let plain = config.clone();
    let given = config.get_options().unwrap_or_default().to_owned();
    config.options(if given.is_empty() {
        bound
    } else {
        format!("{given} {bound}")
    });
    let display = display(&config);
    Ok(Target {
        config,
        plain,
        refuses_options: AtomicBool::new(false),
        tls,
        tls_optional,
        display,
    })
}

/// Each part of `url` that tokio-postgres %-decodes, decoded strictly
/// (`decoded_part`): its decoder keeps a bad escape as written (a password
/// with `%ZZ` is sent so, and refused as a wrong password) and passes a
/// NUL on, where the server reads a name only up to it (`te%00st` is the
/// database `te`). The parts are cut where tokio-postgres cuts them: the
/// credentials up to the first `@`, the user up to its first `:`, the
/// hosts up to `/` or `?` (several, split at `,`), the database up to `?`,
/// then `name=value` pairs split at `&`.
fn strict_parts(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .unwrap_or(url);
    let rest = match rest.split_once('@') {
        Some((credentials, rest)) => {
            let (user, password) = match credentials.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (credentials, None),
            };
            decoded_part("the user name", user)?;
            if let Some(password) = password {
                decoded_part("the password", password)?;
            }
            rest
        }
        None => rest,
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (hosts, rest) = rest.split_at(end);
    for host in hosts.split(',').filter(|h| !h.is_empty()) {
        // `[::1]:5432`, `host:5432`, or a socket folder (`%2Frun%2Fpostgresql`).
        let (host, port) = match host.strip_prefix('[') {
            Some(bracketed) => match bracketed.split_once(']') {
                Some((host, port)) => (host, port.strip_prefix(':')),
                None => (bracketed, None),
            },
            None => match host.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host, None),
            },
        };
        decoded_part("the host", host)?;
        if let Some(port) = port {
            decoded_part("the port", port)?;
        }
    }
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    decoded_part("the database name", path.strip_prefix('/').unwrap_or(path))?;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = String::from_utf8_lossy(&decoded_part("a parameter's name", key)?).into_owned();
        decoded_part(&format!("the parameter {key:?}"), value)?;
    }
    Ok(())
}

/// `url` without its `sslmode` parameter, and that parameter's value: read
/// here, as the URL reader knows only three of libpq's six values.
fn without_sslmode(url: &str) -> (String, Option<String>) {
    let Some((place, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut sslmode = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("sslmode=") {
            Some(value) => {
                sslmode = Some(value.to_owned());
                false
            }
            None => true,
        })
        .collect();
    if kept.is_empty() {
        (place.to_owned(), sslmode)
    } else {
        (format!("{place}?{}", kept.join("&")), sslmode)
    }
}

/// Whether a server's refusal is PgBouncer's of the `options` startup
/// parameter (it takes only the few parameters it tracks, unless told to
/// ignore others): then the store connects without it, and goes without
/// the settings it carries (statement_timeout, READ COMMITTED), which
/// nothing here needs for correctness.
pub(super) fn refuses_options(error: &str) -> bool {
    error.contains("unsupported startup parameter: options")
}

fn display(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str) -> TableOptions {
        TableOptions {
            pool_size: 1,
            connect_timeout: Duration::from_secs(1),
            command_timeout: Duration::from_millis(2500),
            ..TableOptions::testing(url, "locks")
        }
    }

    #[test]
    fn a_gone_host_is_found_by_the_kernel_unless_the_url_says_otherwise() {
        let t = target(&options("postgres://app@a:5432,b:5432/db")).unwrap();
        assert_eq!(t.config.get_keepalives_idle(), Duration::from_secs(15));
        assert_eq!(
            t.config.get_keepalives_interval(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(t.config.get_keepalives_retries(), Some(3));
        assert_eq!(
            t.config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(30))
        );
        assert_eq!(
            t.plain.get_tcp_user_timeout(),
            Some(&Duration::from_secs(30))
        );
        let t = target(&options(
            "postgres://app@a/db?keepalives_idle=60&tcp_user_timeout=5",
        ))
        .unwrap();
        assert_eq!(t.config.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(
            t.config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(5))
        );
        let t = target(&options("postgres://app@a/db?keepalives=0")).unwrap();
        assert!(!t.config.get_keepalives());
    }

    #[test]
    fn urls_are_read_and_named_without_their_password() {
        let t = target(&options("postgres://app:s3cret@db.internal:6543/orders")).unwrap();
        assert_eq!(t.display, "postgres://app@db.internal:6543/orders");
        assert!(!t.tls);
        assert_eq!(
            t.config.get_options(),
            Some("-c statement_timeout=2500 -c default_transaction_isolation=read\\ committed")
        );
        let t = target(&options("postgres://app@h/db?sslmode=require")).unwrap();
        assert!(t.tls);
        let bad = target(&options("mysql://app:s3cret@h/db")).err().unwrap();
        assert!(
            bad.contains("postgres://") && !bad.contains("s3cret"),
            "{bad}"
        );
        let bad = target(&options("postgres://app:s3cret@h/db?nonsense=1"))
            .err()
            .unwrap();
        assert!(!bad.contains("s3cret"), "{bad}");
        let listening = options("postgres://app@bouncer:6432/db");
        assert!(listen_target(&listening, None).unwrap().is_none());
        let bad = listen_target(&listening, Some("mysql://app:s3cret@h/db"))
            .err()
            .unwrap();
        assert!(
            bad.starts_with("listenUrl ") && !bad.contains("s3cret"),
            "{bad}"
        );
        let direct = listen_target(&listening, Some("postgres://app@db:5432/db"))
            .unwrap()
            .unwrap();
        assert_eq!(direct.display, "postgres://app@db:5432/db");
    }

    #[test]
    fn each_decoded_part_is_decoded_strictly() {
        for (url, why) in [
            (
                "postgres://app:s3cret%ZZ@h/db",
                "the password has an invalid %-escape",
            ),
            (
                "postgres://app:s3cret@h/te%00st",
                "the database name has a NUL",
            ),
            (
                "postgres://app:s3cret@[::1]:5%ZZ/db",
                "the port has an invalid",
            ),
            ("postgres://app@h,%2Frun%ZZ/db", "the host has an invalid"),
            (
                "postgres://app@h/db?password=s3cret%00",
                "\"password\" has a NUL",
            ),
            ("postgres://app:s3cret@h/db\n", "ends with whitespace"),
        ] {
            let e = target(&options(url)).err().unwrap_or_default();
            assert!(e.contains(why) && !e.contains("s3cret"), "{url}: {e}");
        }
        let t = target(&options(
            "postgres://app:p%40ss%20w@%2Frun%2Fpg:5433/my%20db",
        ))
        .unwrap();
        assert_eq!(t.config.get_password(), Some(&b"p@ss w"[..]));
        assert_eq!(t.config.get_dbname(), Some("my db"));
    }

    #[test]
    fn every_sslmode_of_libpq_is_read() {
        for (mode, tls, optional) in [
            ("disable", false, false),
            ("allow", false, false),
            ("prefer", true, true),
            ("require", true, false),
            ("verify-ca", true, false),
            ("verify-full", true, false),
        ] {
            let url = format!("postgres://app@h/db?application_name=x&sslmode={mode}");
            let t = target(&options(&url)).unwrap();
            assert_eq!((t.tls, t.tls_optional), (tls, optional), "{mode}");
        }
        let bad = target(&options("postgres://app:s3cret@h/db?sslmode=always"))
            .err()
            .unwrap();
        assert!(
            bad.contains("sslmode=always")
                && bad.contains("verify-full")
                && !bad.contains("s3cret"),
            "{bad}"
        );
        let mut with_tls = options("postgres://app@h/db?sslmode=disable");
        with_tls.tls = Some(crate::store::TlsOptions::default());
        let bad = target(&with_tls).err().unwrap();
        assert!(bad.contains("options.tls"), "{bad}");
        with_tls.url = "postgres://app@h/db".to_owned();
        assert!(target(&with_tls).unwrap().tls);
    }
}
