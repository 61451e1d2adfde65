//! How each reply is read: the operation's answer, or what came instead
//! ([`Misread`]); a server's error reply is read first, by the transport.

use redis::Value;

use crate::store::line::{Handed, Release};
use crate::store::Acquired;
use crate::text::SmallStr;

/// What a reply that is not the operation's answer was instead.
pub type Misread = &'static str;

/// Any reply but an error (which the transport reads first) is an answer.
pub fn answered(_: Value) -> Result<(), Misread> {
    Ok(())
}

fn int(value: Value) -> Result<i64, Misread> {
    match value {
        Value::Int(n) => Ok(n),
        _ => Err("something other than a count"),
    }
}

/// The readers of the replies.
///
/// A fencing token, or nil: not taken; or a lock handed to this process.
pub fn token(value: Value) -> Result<Acquired, Misread> {
    match value {
        Value::Nil => Ok(Acquired::Refused),
        Value::Int(token) => Ok(Acquired::Fenced(u64::try_from(token).unwrap_or(0))),
        Value::Array(pair) => match pair.as_slice() {
            [Value::BulkString(owner), Value::Int(token)] => Ok(Acquired::Handed {
                owner: owner_text(owner)?,
                token: u64::try_from(*token).unwrap_or(0),
            }),
            _ => Err("something other than an owner and a token"),
        },
        _ => Err("something other than a fencing token or nil"),
    }
}

/// 1 or 0, or a lock handed to this process: `[owner, token, asked]`.
pub fn release(value: Value) -> Result<Release, Misread> {
    match value {
        Value::Array(handed) => match handed.as_slice() {
            [Value::BulkString(owner), Value::Int(token), Value::Int(asked)] => {
                Ok(Release::HandedHere(
                    true,
                    Handed {
                        token: u64::try_from(*token).unwrap_or(0),
                        asked: u64::try_from(*asked).unwrap_or(0),
                        owner: owner_text(owner)?,
                    },
                ))
            }
            _ => Err("something other than an owner, a token and when it was asked"),
        },
        value if one(value.clone())? => Ok(Release::Released),
        _ => Ok(Release::NotHeld),
    }
}

fn owner_text(owner: &[u8]) -> Result<SmallStr, Misread> {
    std::str::from_utf8(owner)
        .map(SmallStr::from)
        .map_err(|_| "an owner token that is not text")
}

/// 1: done (deleted, extended, a key that exists).
pub fn one(value: Value) -> Result<bool, Misread> {
    Ok(int(value)? == 1)
}

/// `PTTL`: -2 no such key; -1 a key without expiry, which no lock writes.
pub fn pttl(value: Value) -> Result<Option<f64>, Misread> {
    let ms = int(value)?;
    Ok((ms >= 0).then_some(ms as f64))
}

/// The value of a plain lock: whether it is `owner`'s token.
pub fn owned_by(owner: &str) -> impl FnOnce(Value) -> Result<bool, Misread> + Send + 'static {
    let owner = owner.to_owned();
    move |value| match value {
        Value::Nil => Ok(false),
        Value::BulkString(bytes) => Ok(bytes == owner.as_bytes()),
        _ => Err("something other than a string or nil"),
    }
}

/// A hold's milliseconds left (0 or less: none).
pub fn left(value: Value) -> Result<Option<f64>, Misread> {
    let ms = int(value)?;
    Ok((ms > 0).then_some(ms as f64))
}

/// A hold's milliseconds left, as whether it is live.
pub fn live(value: Value) -> Result<bool, Misread> {
    Ok(int(value)? > 0)
}

/// How many hold a key.
pub fn count(value: Value) -> Result<f64, Misread> {
    Ok(int(value)?.max(0) as f64)
}

/// An answer that only says the script ran.
pub fn nothing(value: Value) -> Result<(), Misread> {
    int(value).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reader_takes_its_answers_and_names_what_it_got_instead() {
        assert!(matches!(token(Value::Nil), Ok(Acquired::Refused)));
        assert!(matches!(token(Value::Int(7)), Ok(Acquired::Fenced(7))));
        assert!(token(Value::Okay).is_err());
        assert_eq!(one(Value::Int(1)), Ok(true));
        assert_eq!(one(Value::Int(0)), Ok(false));
        assert_eq!(pttl(Value::Int(-2)), Ok(None));
        assert_eq!(pttl(Value::Int(0)), Ok(Some(0.0)));
        assert_eq!(left(Value::Int(0)), Ok(None));
        assert_eq!(left(Value::Int(12)), Ok(Some(12.0)));
        assert_eq!(live(Value::Int(12)), Ok(true));
        assert_eq!(count(Value::Int(-1)), Ok(0.0));
        assert_eq!(nothing(Value::Int(0)), Ok(()));
        assert_eq!(owned_by("me")(Value::BulkString(b"me".to_vec())), Ok(true));
        assert_eq!(
            owned_by("me")(Value::BulkString(b"you".to_vec())),
            Ok(false)
        );
        assert_eq!(owned_by("me")(Value::Nil), Ok(false));
        assert!(owned_by("me")(Value::Int(1)).is_err());
        assert!(one(Value::Nil).is_err());
    }
}
