//! Persisted queries: an expensive query first looks its result up through
//! the database's [`Persistence`] hooks under a blake3 key of everything it
//! reads (and the compiler's build identity), so a fresh process reuses
//! what an earlier one computed. The hooks do the IO; this module decodes
//! and checks what they load and hands them what to save. A hit is
//! reported as reused, so `--explain` counts the query's execution as
//! reused rather than recomputed (see [`super::items`]).
//!
//! The store already refuses an entry written for another key; each query
//! also checks that a stored result fits what it asked for (a plan has the
//! operation's rows and kernel), so a result
//! damaged with a valid checksum is recomputed rather than used. What no
//! such check catches fails a later phase's verification, and the driver
//! then builds again without reading the store.

use crate::db::{Db, Persistence};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The store key of `kind` computed from `parts` (JSON of the query's
/// inputs); `None` if an input cannot be serialized, which only disables
/// persistence for that call.
pub(crate) fn key_of(kind: &str, parts: &[&dyn erased::Json]) -> Option<blake3::Hash> {
    let mut encoded = vec![kind.as_bytes().to_vec()];
    for part in parts {
        encoded.push(part.json()?);
    }
    let slices: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
    Some(crate::store::key(&slices))
}

/// Returns the stored result of `kind` under `key` if it decodes and
/// `check` accepts it (reporting it as reused), or computes and stores it;
/// a stored value that does not fit is reported, recomputed and replaced.
/// `item` is the phase and the item the result is, as `--explain` names
/// it.
pub(crate) fn persisted<T: Serialize + DeserializeOwned + Clone + Send + 'static>(
    db: &dyn Db,
    kind: &'static str,
    key: Option<blake3::Hash>,
    item: (&'static str, String),
    check: impl FnOnce(&T) -> Result<(), String>,
    compute: impl FnOnce() -> T,
) -> T {
    let persistence = db.persistence();
    if let Some(key) = &key {
        if let Some(value) = load(persistence, kind, key, &item.1, check) {
            persistence.reused(item.0, item.1);
            return value;
        }
    }
    let value = compute();
    if let Some(key) = key {
        let stored = value.clone();
        persistence.save(kind, key, Box::new(move || serde_json::to_vec(&stored)));
    }
    value
}

/// The stored result of `kind` under `key`, if there is one that decodes
/// and that `check` accepts.
fn load<T: DeserializeOwned>(
    persistence: &dyn Persistence,
    kind: &'static str,
    key: &blake3::Hash,
    item: &str,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Option<T> {
    let payload = persistence.load(kind, key)?;
    let rejected = match serde_json::from_slice::<T>(&payload) {
        Ok(value) => match check(&value) {
            Ok(()) => return Some(value),
            Err(reason) => reason,
        },
        Err(error) => format!("unreadable payload: {error}"),
    };
    tracing::warn!(
        kind,
        item,
        reason = %rejected,
        "a stored result does not fit what it was stored for; recomputing"
    );
    None
}

/// Serialization to JSON bytes behind a trait object, so a key can mix
/// inputs of different types.
pub(crate) mod erased {
    pub(crate) trait Json {
        fn json(&self) -> Option<Vec<u8>>;
    }

    impl<T: serde::Serialize + ?Sized> Json for T {
        fn json(&self) -> Option<Vec<u8>> {
            serde_json::to_vec(self).ok()
        }
    }
}
