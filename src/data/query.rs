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

/// The device bytes of entry `key` of a tensor file, converted to `dtype`
/// with `scale` (`book/src/numerics.md`). NaNs and values too large for
/// the dtype are kept (a checkpoint may really hold them) with a warning.
#[salsa::tracked(returns(ref))]
pub(super) fn tensor_file_bytes(
    db: &dyn Db,
    file: DataFile,
    key: String,
    dtype: DType,
    scale: i8,
) -> Result<Arc<Vec<u8>>, DataError> {
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
    let path = file.path(db);
    if converted.nans > 0 {
        tracing::warn!(%path, key = key.as_str(), nans = converted.nans, "tensor file values are NaN");
    }
    if converted.overflows > 0 {
        tracing::warn!(
            %path,
            key = key.as_str(),
            overflows = converted.overflows,
            %dtype,
            "tensor file values are too large for the tensor's dtype (saturated or infinite)"
        );
    }
    Ok(Arc::new(converted.bytes))
}

/// The device bytes of one instance of `tensor`, an input or weight
/// initialised from a file (`iteration` picks the key of a repeat's
/// weight); `None` when its values do not come from a file.
pub(crate) fn file_tensor_bytes(
    db: &dyn Db,
    tensor: &crate::graph::Tensor,
    iteration: Option<u32>,
) -> Option<Result<Arc<Vec<u8>>, DataError>> {
    let (path, key) = tensor.init.as_ref()?.file()?;
    let key = super::iteration_key(key.unwrap_or(super::NPY_KEY), iteration);
    let file = db.data_file(camino::Utf8Path::new(path));
    Some(tensor_file_bytes(db, file, key, tensor.dtype, tensor.scale).clone())
}
