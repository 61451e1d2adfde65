//! What a JS store method's answer means, or the `TypeError` naming the
//! method when it answered with the wrong type (so `acquire` resolving
//! `"OK"` fails instead of being read as truthy).

use crate::store::{Reply, StoreMethod};

/// A store method's checked answer. For an `acquire` made for `owner`, the
/// owner or null.
pub enum Checked {
    Bool(bool),
    Owner(Option<String>),
    Ms(Option<f64>),
}

/// Check `reply` against what `method` must return.
pub fn check_reply(
    method: StoreMethod,
    reply: Reply,
    owner: Option<String>,
) -> std::result::Result<Checked, String> {
    if method == StoreMethod::RemainingTime {
        return milliseconds(reply)
            .map(Checked::Ms)
            .map_err(|got| wrong(method, "a number or null", got));
    }
    let taken = boolean(reply).map_err(|got| wrong(method, "a boolean", got))?;
    Ok(match owner {
        Some(owner) if method == StoreMethod::Acquire => Checked::Owner(taken.then_some(owner)),
        _ => Checked::Bool(taken),
    })
}

/// The message of the `TypeError` for a reply of the wrong type.
pub fn wrong(method: StoreMethod, expected: &str, got: Reply) -> String {
    format!(
        "LockStore.{}() must return {expected} (or a promise of one), but it gave {}",
        method.name(),
        shown(got)
    )
}

fn shown(reply: Reply) -> String {
    match reply {
        Reply::Bool(b) => format!("{b}"),
        Reply::Number(n) => format!("the number {n}"),
        Reply::Nullish => "null or undefined".to_owned(),
        Reply::Other(what) => what.to_owned(),
    }
}

pub fn boolean(reply: Reply) -> std::result::Result<bool, Reply> {
    match reply {
        Reply::Bool(b) => Ok(b),
        other => Err(other),
    }
}

pub fn milliseconds(reply: Reply) -> std::result::Result<Option<f64>, Reply> {
    match reply {
        Reply::Nullish => Ok(None),
        Reply::Number(ms) if ms.is_finite() => Ok(Some(ms)),
        other => Err(other),
    }
}
