//! `.safetensors` files through the `safetensors` crate: an 8-byte header
//! length, a JSON header naming each tensor's dtype, shape and byte range,
//! then the data.
//!
//! The crate checks what matters for hostile files before anything is
//! allocated: the header length against its own limit and the bytes
//! present, every tensor's byte range against its dtype and shape (with
//! overflow checks), ranges back to back, and the data ending exactly at
//! the end of the file.

use super::{Array, DataError, ElementType, Entry, FileFormat, TensorIndex};
use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};

/// The index of a safetensors file's bytes.
pub(super) fn index(bytes: &[u8]) -> Result<TensorIndex, DataError> {
    let (header, metadata) = SafeTensors::read_metadata(bytes)
        .map_err(|error| DataError::Safetensors(error.to_string()))?;
    // The data follows the 8-byte length and the header.
    let start = 8 + header;
    let entries = metadata
        .tensors()
        .into_iter()
        .map(|(name, info)| {
            let (from, to) = info.data_offsets;
            let entry = Entry {
                dtype: element_type(info.dtype),
                shape: info.shape.clone(),
                bytes: start + from..start + to,
            };
            (name, entry)
        })
        .collect();
    Ok(TensorIndex {
        format: FileFormat::Safetensors,
        entries,
    })
}

fn element_type(dtype: Dtype) -> ElementType {
    match dtype {
        Dtype::F64 => ElementType::F64,
        Dtype::F32 => ElementType::F32,
        Dtype::F16 => ElementType::F16,
        Dtype::BF16 => ElementType::BF16,
        other => ElementType::Unsupported(format!("{other:?}")),
    }
}

/// A safetensors file of f32 arrays, in the order given; `None` if two
/// arrays share a name or one's values do not fill its shape.
pub fn write_f32(arrays: &[Array<'_>]) -> Result<Vec<u8>, DataError> {
    let bytes: Vec<Vec<u8>> = arrays
        .iter()
        .map(|a| a.values.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views = arrays
        .iter()
        .zip(&bytes)
        .map(|(a, data)| {
            TensorView::new(Dtype::F32, a.shape.to_vec(), data)
                .map(|view| (a.name.to_string(), view))
                .map_err(|error| DataError::Safetensors(format!("`{}`: {error}", a.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ::safetensors::serialize(views, None).map_err(|error| DataError::Safetensors(error.to_string()))
}
