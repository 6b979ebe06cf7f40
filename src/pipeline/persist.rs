//! Persisted queries: an expensive query first looks its result up in the
//! database's [`Store`](crate::store::Store) under a blake3 key of
//! everything it reads (and the compiler's build identity), so a fresh
//! process reuses what an earlier one computed. Only a computed result is
//! recorded for `--explain`; a store hit counts as reused.
//!
//! The store already refuses an entry written for another key; each query
//! also checks that a stored result fits what it asked for (a plan has the
//! operation's rows and kernel, an image is of its tile), so a result
//! damaged with a valid checksum is recomputed rather than used. What no
//! such check catches fails a later phase's verification, and the driver
//! then builds again without reading the store.

use crate::db::Db;
use crate::store::Lookup;
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

/// Returns the stored result of `kind` under `key` if `check` accepts it,
/// or computes, records and stores it.
pub(crate) fn persisted<T: Serialize + DeserializeOwned + Clone + Send + 'static>(
    db: &dyn Db,
    kind: &'static str,
    key: Option<blake3::Hash>,
    record: (&'static str, String),
    check: impl FnOnce(&T) -> Result<(), String>,
    compute: impl FnOnce() -> T,
) -> T {
    match persisted_ok(db, kind, key, record, check, || {
        Ok::<T, std::convert::Infallible>(compute())
    }) {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

/// [`persisted`] for a fallible computation: only successes are stored.
/// A stored value is used only if `check` accepts it; otherwise it is
/// reported and recomputed (and the recomputed value replaces it).
pub(crate) fn persisted_ok<T: Serialize + DeserializeOwned + Clone + Send + 'static, E>(
    db: &dyn Db,
    kind: &'static str,
    key: Option<blake3::Hash>,
    record: (&'static str, String),
    check: impl FnOnce(&T) -> Result<(), String>,
    compute: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let store = db.store().zip(key);
    if let Some((store, key)) = &store {
        if let Lookup::Hit(value) = store.get(kind, key) {
            match check(&value) {
                Ok(()) => return Ok(value),
                Err(reason) => tracing::warn!(
                    kind,
                    item = %record.1,
                    %reason,
                    "a stored result does not fit what it was stored for; recomputing"
                ),
            }
        }
    }
    let value = compute()?;
    db.record_execution(record.0, record.1);
    if let Some((store, key)) = store {
        store.put_in_background(kind, key, value.clone());
    }
    Ok(value)
}

/// Serialization to JSON bytes behind a trait object, so a key can mix
/// inputs of different types.
pub(crate) mod erased {
    pub trait Json {
        fn json(&self) -> Option<Vec<u8>>;
    }

    impl<T: serde::Serialize + ?Sized> Json for T {
        fn json(&self) -> Option<Vec<u8>> {
            serde_json::to_vec(self).ok()
        }
    }
}
