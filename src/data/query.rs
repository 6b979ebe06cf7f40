//! The salsa queries over tensor files; everything else in [`crate::data`]
//! knows no salsa.
//!
//! [`tensor_index`] parses a file's index (keys, element types, shapes,
//! byte ranges), which is all validation reads: an edit that changes only
//! a file's values gives an equal index, so the project is not validated
//! again. [`tensor_file_bytes`] converts one entry for one tensor; it
//! re-runs for every entry of a file that changed, and everything
//! downstream of it only when the converted bytes differ.

use super::{device_bytes, DataError, TensorIndex};
use crate::db::{DataFile, Db};
use crate::graph::DType;
use std::sync::Arc;

/// The index of a tensor file, or why it cannot be read.
#[salsa::tracked(returns(ref))]
pub(crate) fn tensor_index(db: &dyn Db, file: DataFile) -> Result<Arc<TensorIndex>, DataError> {
    let contents = file.contents(db).clone().map_err(DataError::Unreadable)?;
    super::index(file.path(db).as_str(), contents.bytes()).map(Arc::new)
}

/// One entry of a tensor file converted for the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConvertedEntry {
    pub bytes: Arc<Vec<u8>>,
    /// Elements that were NaN in the file.
    pub nans: usize,
    /// Finite elements too large for the tensor's dtype (with its scale).
    pub overflows: usize,
}

/// The device bytes of entry `key` of a tensor file, converted to `dtype`
/// with `scale` (`book/src/numerics.md`). NaNs and values too large for
/// the dtype are kept (a checkpoint may really hold them) and counted; a
/// build warns of them at the tensor ([`value_warning`]).
#[salsa::tracked(returns(ref))]
pub(super) fn tensor_file_bytes(
    db: &dyn Db,
    file: DataFile,
    key: String,
    dtype: DType,
    scale: i8,
) -> Result<ConvertedEntry, DataError> {
    let index = tensor_index(db, file).clone()?;
    let contents = file.contents(db).clone().map_err(DataError::Unreadable)?;
    let entry = index
        .get(&key)
        .ok_or_else(|| DataError::MissingKey(key.clone()))?;
    let converted = device_bytes(entry, contents.bytes(), dtype, scale).ok_or_else(|| {
        DataError::Unsupported {
            key: key.clone(),
            dtype: entry.dtype.name().to_string(),
        }
    })?;
    Ok(ConvertedEntry {
        bytes: Arc::new(converted.bytes),
        nans: converted.nans,
        overflows: converted.overflows,
    })
}

/// The device bytes of one instance of `tensor`, an input or weight
/// initialised from a file (`iteration` picks the key of a repeat's
/// weight); `None` when its values do not come from a file.
pub(crate) fn file_tensor_bytes(
    db: &dyn Db,
    tensor: &crate::graph::Tensor,
    iteration: Option<u32>,
) -> Option<Result<Arc<Vec<u8>>, DataError>> {
    let entry = file_tensor_entry(db, tensor, iteration)?;
    Some(
        entry
            .as_ref()
            .map(|e| e.bytes.clone())
            .map_err(Clone::clone),
    )
}

/// [`file_tensor_bytes`] with the counts of values the conversion kept
/// although the dtype cannot hold them.
fn file_tensor_entry<'db>(
    db: &'db dyn Db,
    tensor: &crate::graph::Tensor,
    iteration: Option<u32>,
) -> Option<&'db Result<ConvertedEntry, DataError>> {
    let (path, key) = tensor.init.as_ref()?.file()?;
    let key = super::iteration_key(key.unwrap_or(super::NPY_KEY), iteration);
    let file = db.data_file(camino::Utf8Path::new(path));
    Some(tensor_file_bytes(db, file, key, tensor.dtype, tensor.scale))
}

/// What a tensor initialised from a file holds that its dtype cannot:
/// NaNs, and finite values too large for it (saturated in FP8, infinite in
/// f16), summed over every iteration's entry of a repeat's weight. `None`
/// when it holds neither, or its values do not come from a file (or could
/// not be read, which the build reports as an error).
pub(crate) fn value_warning(
    db: &dyn Db,
    graph: &crate::graph::Graph,
    tensor: &crate::graph::Tensor,
) -> Option<String> {
    let iterations: Vec<Option<u32>> = match tensor.repeat {
        Some(r) => (0..graph.repeats.get(r as usize)?.count)
            .map(Some)
            .collect(),
        None => vec![None],
    };
    let (mut nans, mut overflows) = (0, 0);
    for iteration in iterations {
        if let Ok(entry) = file_tensor_entry(db, tensor, iteration)? {
            nans += entry.nans;
            overflows += entry.overflows;
        }
    }
    let (path, _) = tensor.init.as_ref()?.file()?;
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut parts = Vec::new();
    if nans > 0 {
        parts.push(format!("{nans} NaN{}", plural(nans)));
    }
    if overflows > 0 {
        parts.push(format!(
            "{overflows} value{} too large for {}",
            plural(overflows),
            tensor.dtype
        ));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "`{}` reads {} from `{path}`",
            tensor.written_name(),
            parts.join(" and ")
        )
    })
}
