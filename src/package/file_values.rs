//! The `tensors` part: the values of inputs and weights that a project
//! reads from tensor files, as device bytes (after the dtype conversion),
//! so that a package runs and is checked without the files it was built
//! from. Weights are in the tiles' segments too, laid out for the device;
//! the reference and the runtime's input streams read these copies.
//!
//! The part is a safetensors file of `U8` vectors named `T` (tensor id)
//! or `T.I` (iteration `I` of a repeat's weight). It is present only when
//! the graph has inits from files, and then it holds exactly one entry per
//! instance of each such tensor, of exactly its byte size.

use super::{FileValues, Package, PackageError};
use crate::graph::{Init, TensorId};
use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The part's name in the package's table.
pub(super) const PART: &str = "tensors";

fn key(values: &FileValues) -> String {
    match values.iteration {
        Some(i) => format!("{}.{i}", values.tensor.0),
        None => values.tensor.0.to_string(),
    }
}

/// The part's bytes.
pub(super) fn encode(values: &[FileValues]) -> Result<Vec<u8>, PackageError> {
    let views = values
        .iter()
        .map(|v| {
            TensorView::new(Dtype::U8, vec![v.bytes.len()], &v.bytes)
                .map(|view| (key(v), view))
                .map_err(|e| PackageError::invalid(PART, format!("cannot be encoded: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ::safetensors::serialize(views, None)
        .map_err(|e| PackageError::invalid(PART, format!("cannot be encoded: {e}")))
}

/// The part's entries, in key order; their agreement with the graph is
/// checked by [`check`].
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<FileValues>, PackageError> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| {
        PackageError::invalid(
            PART,
            format!("the part is not a valid safetensors file: {e}"),
        )
    })?;
    let mut values = Vec::new();
    for (name, view) in file.iter() {
        let parsed = match name.split_once('.') {
            Some((t, i)) => t.parse().ok().zip(i.parse().ok().map(Some)),
            None => name.parse().ok().map(|t| (t, None)),
        };
        let Some((tensor, iteration)) = parsed else {
            return Err(PackageError::invalid(
                PART,
                format!("entry `{name}` does not name a tensor"),
            ));
        };
        if view.dtype() != Dtype::U8 || view.shape().len() != 1 {
            return Err(PackageError::invalid(
                PART,
                format!("entry `{name}` is not a byte vector"),
            ));
        }
        values.push(FileValues {
            tensor: TensorId(tensor),
            iteration,
            bytes: Arc::new(view.data().to_vec()),
        });
    }
    Ok(values)
}

/// Every instance of every tensor initialised from a file has one entry of
/// its byte size, and nothing else has one.
pub(crate) fn check(package: &Package) -> Result<(), PackageError> {
    let graph = &package.graph;
    let mut expected = BTreeSet::new();
    for (id, t) in graph.tensors.iter().enumerate() {
        if !matches!(t.init, Some(Init::File { .. })) {
            continue;
        }
        match t.repeat {
            Some(r) => {
                let count = graph.repeats.get(r as usize).map_or(0, |r| r.count);
                expected.extend((0..count).map(|i| (id as u32, Some(i))));
            }
            None => {
                expected.insert((id as u32, None));
            }
        }
    }
    let mut seen = BTreeSet::new();
    for v in &package.file_values {
        let instance = (v.tensor.0, v.iteration);
        if !expected.contains(&instance) || !seen.insert(instance) {
            return Err(PackageError::invalid(
                PART,
                format!(
                    "entry `{}` is not a tensor read from a file, or appears twice",
                    key(v)
                ),
            ));
        }
        let size = graph.tensors[v.tensor.0 as usize].size_bytes();
        if v.bytes.len() != size {
            return Err(PackageError::invalid(
                PART,
                format!(
                    "entry `{}` has {} bytes, but its tensor has {size}",
                    key(v),
                    v.bytes.len()
                ),
            ));
        }
    }
    if let Some(&(tensor, iteration)) = expected.difference(&seen).next() {
        return Err(PackageError::invalid(
            PART,
            format!(
                "the values of `{}`{} are missing",
                graph.tensors[tensor as usize].name,
                iteration.map_or(String::new(), |i| format!(" (iteration {i})"))
            ),
        ));
    }
    Ok(())
}

impl Package {
    /// The device bytes of `tensor` (iteration `iteration`) when they come
    /// from a file.
    pub(crate) fn file_bytes(&self, tensor: TensorId, iteration: Option<u32>) -> Option<&[u8]> {
        self.file_values
            .iter()
            .find(|v| v.tensor == tensor && v.iteration == iteration)
            .map(|v| v.bytes.as_slice())
    }
}
