//! A member's client URL as the store reads it, and the credentials it
//! logs in with.

use rustls::pki_types::ServerName;

/// One member's client URL, read.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// The name its certificate is checked against, for `https`.
    pub tls_name: Option<ServerName<'static>>,
}

impl Endpoint {
    /// `http://host:port` or `https://host:port` (the port defaults to 2379),
    /// or why not.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        // Messages show the URL without what may be a password in it.
        let shown = without_credentials(text);
        let url = url::Url::parse(text).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(format!(
                    "{shown:?}: the scheme must be http or https, not {other}"
                ))
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "{shown:?}: give username and password as options, not in the URL"
            ));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "{shown:?}: an endpoint is a scheme, a host and a port, nothing more"
            ));
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => return Err(format!("{shown:?} names no host")),
        };
        let port = url.port().unwrap_or(2379);
        let tls_name = if tls {
            Some(ServerName::try_from(host.clone()).map_err(|e| format!("{shown:?}: {e}"))?)
        } else {
            None
        };
        Ok(Endpoint {
            host,
            port,
            tls_name,
        })
    }

    /// How messages name it.
    pub fn name(&self) -> String {
        let scheme = if self.tls_name.is_some() {
            "https"
        } else {
            "http"
        };
        if self.host.contains(':') {
            format!("etcd at {scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("etcd at {scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// `text` with anything between `//` and the `@` after it (a user and
/// password) left out.
fn without_credentials(text: &str) -> String {
    let Some(start) = text.find("//").map(|at| at + 2) else {
        return text.to_owned();
    };
    let end = text[start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |at| start + at);
    match text[start..end].rfind('@') {
        Some(at) => format!("{}***@{}", &text[..start], &text[start + at + 1..]),
        None => text.to_owned(),
    }
}

/// A user name and its password, which no message ever shows.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}
