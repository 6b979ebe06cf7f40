//! Tensors in and out of `ipub run`: where a run's inputs and weights come
//! from (the seeded generator, the package's values from tensor files, or
//! `--inputs FILE.safetensors` at run time), the host reference evaluated
//! on exactly those values, and `--dump DIR`, which writes what the device
//! computed and what the reference computed as `.npy` files, one
//! `.safetensors` file per side, and an index.

use crate::compare::Comparison;
use crate::data::{self, Array, FileFormat};
use crate::device::model::HostBuffers;
use crate::graph::{Role, TensorId};
use crate::package::{Package, Step};
use crate::reference::Evaluation;
use anyhow::{anyhow, bail, Context};
use camino::Utf8Path;
use serde::Serialize;
use std::collections::BTreeMap;

/// Input values given at run time, as device bytes by tensor.
#[derive(Clone, Debug, Default)]
pub(super) struct Overrides(BTreeMap<TensorId, Vec<u8>>);

impl Overrides {
    /// How many inputs are overridden.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Reads `--inputs FILE.safetensors`: each key names an input of the
/// package's graph, with its shape; values are converted to the input's
/// dtype as inits from files are.
pub(super) fn read_overrides(package: &Package, path: &Utf8Path) -> anyhow::Result<Overrides> {
    if FileFormat::of(path.as_str()) != Some(FileFormat::Safetensors) {
        bail!("`--inputs` takes a `.safetensors` file whose keys are the project's input names, not {path}");
    }
    let bytes = crate::fsutil::read_bytes(path, crate::vfs::MAX_DATA_FILE_BYTES)
        .map_err(|e| anyhow!("cannot read {path}: {e}"))?;
    let index = data::index(path.as_str(), &bytes).map_err(|e| anyhow!("{path}: {e}"))?;
    let graph = &package.graph;
    let inputs: Vec<&str> = graph
        .tensors
        .iter()
        .filter(|t| t.role == Role::Input)
        .map(|t| t.name.as_str())
        .collect();
    let mut overrides = Overrides::default();
    for (key, entry) in &index.entries {
        let Some(id) = graph
            .tensors
            .iter()
            .position(|t| t.role == Role::Input && &t.name == key)
        else {
            bail!(
                "{path}: `{key}` is not an input of `{}` (its inputs: {})",
                graph.name,
                inputs.join(", ")
            );
        };
        let tensor = &graph.tensors[id];
        if entry.shape != tensor.shape {
            bail!(
                "{path}: `{key}` has shape {:?}, but the input is declared {:?}",
                entry.shape,
                tensor.shape
            );
        }
        let converted =
            data::device_bytes(entry, &bytes, tensor.dtype, tensor.scale).ok_or_else(|| {
                anyhow!(
                    "{path}: `{key}` holds {} values; ipub converts f64, f32, f16 and bf16",
                    entry.dtype.name()
                )
            })?;
        if converted.nans > 0 || converted.overflows > 0 {
            super::output::warning(format!(
                "{path}: `{key}` has {} NaN values and {} too large for {}",
                converted.nans, converted.overflows, tensor.dtype
            ));
        }
        overrides.0.insert(TensorId(id as u32), converted.bytes);
    }
    Ok(overrides)
}

/// The device bytes of an input or weight (one iteration of a repeat's
/// weight) for a run: overridden at run time, from a tensor file (the
/// package carries those), or seeded.
pub(super) fn leaf_bytes(
    package: &Package,
    overrides: &Overrides,
    tensor: TensorId,
    iteration: Option<u32>,
) -> Vec<u8> {
    if let Some(bytes) = overrides.0.get(&tensor) {
        return bytes.clone();
    }
    if let Some(bytes) = package.file_bytes(tensor, iteration) {
        return bytes.to_vec();
    }
    crate::reference::init::tensor_bytes(&package.graph, tensor, iteration)
}

/// Host buffers holding every streamed input of `package`'s run call.
pub(super) fn host_inputs(package: &Package, overrides: &Overrides) -> HostBuffers {
    let mut host = HostBuffers::default();
    for step in &package.run.steps {
        if let Step::HostWrite { binding } = step {
            let b = &package.bindings[*binding as usize];
            host.inputs.insert(
                *binding,
                leaf_bytes(package, overrides, b.tensor, b.iteration),
            );
        }
    }
    host
}

/// The host reference of `package`'s graph on the run's inputs and
/// weights, summing each matrix product's K in the slices its plan split
/// it into, and evaluating in f16 the GELUs the device evaluates in f16.
pub(super) fn reference(package: &Package, overrides: &Overrides) -> anyhow::Result<Evaluation> {
    let graph = &package.graph;
    let plan = crate::reference::DevicePlan {
        k_slices: k_slices(package),
        f16_gelus: f16_gelus(package),
    };
    let precision = graph.check.reference_precision;
    let result = if overrides.is_empty() && package.file_values.is_empty() {
        let generated = |tensor: TensorId, iteration: Option<u32>| {
            crate::reference::init::tensor_values(graph, tensor, iteration)
        };
        crate::reference::evaluate_with_inputs(graph, precision, &generated, &plan)
    } else {
        let leaves = |tensor: TensorId, iteration: Option<u32>| {
            let t = graph.tensor(tensor);
            let bytes = leaf_bytes(package, overrides, tensor, iteration);
            crate::numerics::decode(&bytes, t.dtype, t.scale)
        };
        crate::reference::evaluate_with_inputs(graph, precision, &leaves, &plan)
    };
    result.map_err(|e| anyhow!("host reference: {e}"))
}

/// The graph operations a compiled operation of the profile layout
/// stands for: its name joins theirs with `+`, the one whose kind it kept
/// first (`fc1+fc1_bias+gelu`, a product and its fused epilogue).
fn absorbed(compiled: &crate::package::OpEstimate) -> std::str::Split<'_, char> {
    compiled.name.split('+')
}

/// The K slices of the package's split matrix products, by the name of
/// the product in its graph.
fn k_slices(package: &Package) -> crate::reference::KSlices {
    package
        .profile
        .ops
        .iter()
        .filter(|compiled| compiled.kind == "matmul")
        .filter_map(|compiled| {
            let product = absorbed(compiled).next()?;
            Some((product.to_string(), compiled.k_slice? as usize))
        })
        .collect()
}

/// The GELUs of the package's graph, by name, that the device evaluates
/// in f16: those of a compiled operation whose kernels do
/// (`gelu_in_f16` in the profile layout).
fn f16_gelus(package: &Package) -> std::collections::BTreeSet<String> {
    let gelus: std::collections::BTreeSet<&str> = package
        .graph
        .ops
        .iter()
        .filter(|op| op.kind == crate::graph::OpKind::Gelu)
        .map(|op| op.name.as_str())
        .collect();
    package
        .profile
        .ops
        .iter()
        .filter(|compiled| compiled.gelu_in_f16)
        .flat_map(absorbed)
        .filter(|name| gelus.contains(name))
        .map(str::to_string)
        .collect()
}

/// One tensor of a dump, as the index lists it.
#[derive(Serialize)]
struct IndexEntry<'a> {
    name: &'a str,
    shape: &'a [usize],
    dtype: String,
    /// Whether `[check]` judges it.
    checked: bool,
    /// The repeat whose body computes it (`null` outside repeats): the
    /// values are those of the repeat's last iteration.
    last_iteration_of: Option<&'a str>,
    /// `null` when undefined (NaNs or infinities on one side only).
    cosine_similarity: Option<f64>,
    max_abs_error: f32,
    device: String,
    reference: String,
}

#[derive(Serialize)]
struct Index<'a> {
    project: &'a str,
    seed: u64,
    reference_precision: String,
    tensors: Vec<IndexEntry<'a>>,
}

/// The name of the repeat whose body computes `tensor`, if any.
fn body_repeat(graph: &crate::graph::Graph, tensor: TensorId) -> Option<&str> {
    graph
        .repeats
        .iter()
        .find(|r| r.body.iter().any(|op| graph.op(*op).output == tensor))
        .map(|r| r.name.as_str())
}

/// Writes every tensor the run read back (the checked outputs, and with
/// a package built for `--dump-all` every materialised intermediate) into
/// `dir`: `device/NAME.npy` and `reference/NAME.npy` (f32), the same in
/// `device.safetensors` and `reference.safetensors`, and `index.json`.
/// Returns how many tensors were written.
pub(super) fn write_dump(
    dir: &Utf8Path,
    package: &Package,
    host: &HostBuffers,
    reference: &Evaluation,
) -> anyhow::Result<usize> {
    let graph = &package.graph;
    let mut tensors: Vec<(TensorId, Vec<f32>)> = Vec::new();
    for step in &package.run.steps {
        let Step::HostRead { binding } = step else {
            continue;
        };
        let b = &package.bindings[*binding as usize];
        if b.iteration.is_some() || tensors.iter().any(|(t, _)| *t == b.tensor) {
            continue;
        }
        let t = graph.tensor(b.tensor);
        let bytes = host.outputs.get(binding).cloned().unwrap_or_default();
        tensors.push((b.tensor, crate::numerics::decode(&bytes, t.dtype, t.scale)));
    }
    // Validation refuses such names (a package's graph is validated too);
    // checked again before anything is created, since a name becomes a
    // path here.
    for (id, _) in &tensors {
        let name = &graph.tensor(*id).name;
        if let Some(problem) = crate::project::limits::name_problem(name) {
            bail!("tensor {name:?} cannot name a dump file: {problem}");
        }
    }
    for side in ["device", "reference"] {
        std::fs::create_dir_all(dir.join(side))
            .with_context(|| format!("cannot create {}", dir.join(side)))?;
    }
    let mut entries = Vec::new();
    let mut device_arrays = Vec::new();
    let mut reference_arrays = Vec::new();
    for (id, device) in &tensors {
        let t = graph.tensor(*id);
        let expected = reference.get(*id).unwrap_or(&[]);
        let comparison: Comparison = crate::compare::compare(
            device,
            expected,
            graph.check.min_cosine_similarity,
            graph.check.max_abs_error,
        );
        for (side, values) in [("device", device.as_slice()), ("reference", expected)] {
            let array = Array {
                name: &t.name,
                shape: &t.shape,
                values,
            };
            let path = dir.join(side).join(format!("{}.npy", t.name));
            crate::fsutil::write_atomic(&path, &data::npy::write_f32(&array))
                .with_context(|| format!("cannot write {path}"))?;
        }
        device_arrays.push(Array {
            name: &t.name,
            shape: &t.shape,
            values: device,
        });
        reference_arrays.push(Array {
            name: &t.name,
            shape: &t.shape,
            values: expected,
        });
        entries.push(IndexEntry {
            name: &t.name,
            shape: &t.shape,
            dtype: t.dtype.to_string(),
            checked: graph.check.outputs.contains(id),
            last_iteration_of: body_repeat(graph, *id),
            cosine_similarity: Some(comparison.cosine_similarity).filter(|c| c.is_finite()),
            max_abs_error: comparison.max_abs_error,
            device: format!("device/{}.npy", t.name),
            reference: format!("reference/{}.npy", t.name),
        });
    }
    for (side, arrays) in [("device", &device_arrays), ("reference", &reference_arrays)] {
        let bytes = data::safetensors::write_f32(arrays).map_err(|e| anyhow!("{side}: {e}"))?;
        let path = dir.join(format!("{side}.safetensors"));
        crate::fsutil::write_atomic(&path, &bytes)
            .with_context(|| format!("cannot write {path}"))?;
    }
    let index = Index {
        project: &graph.name,
        seed: graph.seed,
        reference_precision: format!("{:?}", graph.check.reference_precision).to_lowercase(),
        tensors: entries,
    };
    let json = serde_json::to_string_pretty(&index)?;
    let path = dir.join("index.json");
    crate::fsutil::write_atomic(&path, json.as_bytes())
        .with_context(|| format!("cannot write {path}"))?;
    Ok(tensors.len())
}
