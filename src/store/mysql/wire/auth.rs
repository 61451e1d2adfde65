//! The answers to the server's login challenge, per authentication plugin.
//! Both hash the password with the server's one-time nonce, so the password
//! itself never crosses the wire (unless the connection is TLS and the server
//! asks for it: `caching_sha2_password`'s full authentication).

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// `mysql_native_password` (MySQL 5.x, MariaDB):
/// SHA1(password) XOR SHA1(nonce + SHA1(SHA1(password))).
pub fn native_password(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha1::digest(password);
    let twice = Sha1::digest(once);
    let mut salted = Sha1::new();
    salted.update(nonce);
    salted.update(twice);
    xor(&once, &salted.finalize())
}

/// `caching_sha2_password` (MySQL 8's default), its fast path:
/// SHA256(password) XOR SHA256(SHA256(SHA256(password)) + nonce).
pub fn caching_sha2(password: &[u8], nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha256::digest(password);
    let twice = Sha256::digest(once);
    let mut salted = Sha256::new();
    salted.update(twice);
    salted.update(nonce);
    xor(&once, &salted.finalize())
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// The nonce as a plugin's data carries it: without the NUL that ends it.
pub fn nonce(data: &[u8]) -> &[u8] {
    data.strip_suffix(&[0]).unwrap_or(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The server keeps SHA1(SHA1(password)) (`mysql.user`'s
    /// `*`-prefixed hash); it checks an answer by undoing the XOR with the
    /// nonce and hashing once more. The same check, here.
    #[test]
    fn a_native_password_answer_is_what_the_server_checks() {
        let nonce = b"abcdefghijklmnopqrst";
        let answer = native_password(b"secret", nonce);
        let stored = Sha1::digest(Sha1::digest(b"secret"));
        let mut salted = Sha1::new();
        salted.update(nonce);
        salted.update(stored);
        let once = xor(&answer, &salted.finalize());
        assert_eq!(Sha1::digest(once).as_slice(), stored.as_slice());
        // PASSWORD('secret') in MySQL and MariaDB.
        assert_eq!(
            hex(&stored).to_uppercase(),
            "14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
        );
        assert!(native_password(b"", nonce).is_empty());
    }

    #[test]
    fn a_caching_sha2_answer_undoes_to_the_password_hash() {
        let nonce = b"abcdefghijklmnopqrst";
        let answer = caching_sha2(b"secret", nonce);
        let once = Sha256::digest(b"secret");
        let mut salted = Sha256::new();
        salted.update(Sha256::digest(once));
        salted.update(nonce);
        assert_eq!(xor(&answer, &salted.finalize()), once.to_vec());
        assert_eq!(nonce_of(), b"12345678901234567890");
    }

    fn nonce_of() -> &'static [u8] {
        nonce(b"12345678901234567890\0")
    }
}
