//! Tensor files: `.safetensors` and `.npy` read into an index of typed
//! entries, values converted to a tensor's device dtype, and arrays
//! written back (for `ipub run --dump`).
//!
//! Nothing here does IO: readers take a file's bytes, which the database
//! holds as a [`DataFile`](crate::db::DataFile) input, and writers return
//! bytes for the driver to write. Only [`query`] knows salsa. Every reader treats its
//! input as hostile: declared sizes are checked against the bytes present
//! before anything is allocated for them, and every problem is a
//! [`DataError`], never a panic.
//!
//! Conversion follows `book/src/numerics.md`: values are read exactly
//! (f64, f32, f16 and bf16 all widen to f64 without loss), rounded to
//! nearest even into an f32 or f16 tensor, and into an FP8 tensor through
//! f16 with the tensor's scale, as the device's casts do.

mod convert;
pub mod npy;
pub(crate) mod query;
pub mod safetensors;

#[cfg(test)]
mod tests;

pub(crate) use convert::device_bytes;

use crate::vfs::ReadError;
use std::collections::BTreeMap;
use std::ops::Range;

/// Tensor file formats ipub reads, chosen by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// Many named tensors (a checkpoint); an init names one with `key`.
    Safetensors,
    /// One NumPy array; an init names no key.
    Npy,
}

impl FileFormat {
    /// The format of a file named `path`, from its extension.
    pub(crate) fn of(path: &str) -> Option<FileFormat> {
        let extension = path.rsplit_once('.').map(|(_, e)| e)?;
        match extension {
            "safetensors" => Some(FileFormat::Safetensors),
            "npy" => Some(FileFormat::Npy),
            _ => None,
        }
    }
}

/// An element type a tensor file may declare.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    F64,
    F32,
    F16,
    BF16,
    /// Anything else (integers, OCP FP8, complex), kept with the file's
    /// own name for it so that using it is a clear error.
    Unsupported(String),
}

impl ElementType {
    /// Bytes of one element (0 for an unsupported type).
    pub(crate) fn size_bytes(&self) -> usize {
        match self {
            ElementType::F64 => 8,
            ElementType::F32 => 4,
            ElementType::F16 | ElementType::BF16 => 2,
            ElementType::Unsupported(_) => 0,
        }
    }

    pub(crate) fn name(&self) -> &str {
        match self {
            ElementType::F64 => "f64",
            ElementType::F32 => "f32",
            ElementType::F16 => "f16",
            ElementType::BF16 => "bf16",
            ElementType::Unsupported(name) => name,
        }
    }
}

/// One tensor of a file: its element type, shape, and where its
/// little-endian, row-major bytes lie in the file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    pub dtype: ElementType,
    pub shape: Vec<usize>,
    pub bytes: Range<usize>,
}

impl Entry {
    pub(crate) fn element_count(&self) -> usize {
        self.shape.iter().product()
    }
}

/// What a tensor file holds. An `.npy` file's one array has the key
/// [`NPY_KEY`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorIndex {
    pub format: FileFormat,
    pub entries: BTreeMap<String, Entry>,
}

/// The key of the one array of an `.npy` file.
pub(crate) const NPY_KEY: &str = "";

/// Why a tensor file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DataError {
    #[error("{0}")]
    Unreadable(ReadError),
    #[error("the file name does not say its format: tensor files end in `.safetensors` or `.npy`")]
    UnknownFormat,
    #[error("it is not a valid safetensors file: {0}")]
    Safetensors(String),
    #[error("it is not a valid .npy file: {0}")]
    Npy(String),
    #[error("it has no tensor `{0}`")]
    MissingKey(String),
    #[error("`{key}` holds {dtype} values; ipub converts f64, f32, f16 and bf16")]
    Unsupported { key: String, dtype: String },
}

/// Reads the index of a tensor file named `path` from its bytes.
pub(crate) fn index(path: &str, bytes: &[u8]) -> Result<TensorIndex, DataError> {
    match FileFormat::of(path) {
        Some(FileFormat::Safetensors) => safetensors::index(bytes),
        Some(FileFormat::Npy) => npy::index(bytes),
        None => Err(DataError::UnknownFormat),
    }
}

impl TensorIndex {
    /// The entry of `key` (an `.npy` file's array for [`NPY_KEY`]).
    pub(crate) fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// The keys closest to `key`, for a message about a missing one: those
    /// sharing its longest prefix of dotted components, at most `count`.
    pub(crate) fn near_keys(&self, key: &str, count: usize) -> Vec<&str> {
        let shared = |k: &str| {
            k.split('.')
                .zip(key.split('.'))
                .take_while(|(a, b)| a == b)
                .count()
        };
        let best = self.entries.keys().map(|k| shared(k)).max().unwrap_or(0);
        self.entries
            .keys()
            .filter(|k| shared(k) == best)
            .take(count)
            .map(String::as_str)
            .collect()
    }
}

/// The key of iteration `iteration` of a repeat weight: `{i}` in `pattern`
/// replaced by the iteration number.
pub(crate) fn iteration_key(pattern: &str, iteration: Option<u32>) -> String {
    match iteration {
        Some(i) => pattern.replace(ITERATION, &i.to_string()),
        None => pattern.to_string(),
    }
}

/// What a key pattern writes for the repeat iteration.
pub(crate) const ITERATION: &str = "{i}";

/// Arrays in f32 as a dump writes them: a name, a shape and row-major
/// values.
pub struct Array<'a> {
    pub name: &'a str,
    pub shape: &'a [usize],
    pub values: &'a [f32],
}
