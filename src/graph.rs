//! The validated project graph: the IR every later phase starts from.
//!
//! A [`Graph`] is what `project::validate` produces from a project's TOML and
//! what the host reference and the planner consume. Its invariants, which the
//! validator establishes and nobody downstream re-checks:
//!
//! - tensors are in definition order and every operation's inputs are defined
//!   before it (the op list is a topological order);
//! - every shape is consistent with its producing operation and every dtype is
//!   allowed for the operation;
//! - FP8 tensors (`f143`, `f152`) carry a scale in the allowed range, others a
//!   scale of zero;
//! - a repeat's body refers only to graph tensors defined before the repeat,
//!   to its own per-iteration weights and to its carried activation.
//!
//! The graph knows nothing about salsa, files or tiles.

use crate::target::TargetId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest tensor rank the compiler handles: validation refuses more,
/// and index arithmetic downstream uses fixed arrays of this size.
pub(crate) const MAX_RANK: usize = 8;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    /// FP8 with 1 sign, 4 exponent, 3 mantissa bits, bias 8, tensor-wide scale.
    F143,
    /// FP8 with 1 sign, 5 exponent, 2 mantissa bits, bias 16, tensor-wide scale.
    F152,
}

impl DType {
    pub(crate) const fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
            DType::F143 | DType::F152 => 1,
        }
    }

    pub(crate) const fn is_fp8(self) -> bool {
        matches!(self, DType::F143 | DType::F152)
    }

    pub(crate) const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::F143 => "f143",
            DType::F152 => "f152",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "f32" => DType::F32,
            "f16" => DType::F16,
            "f143" => DType::F143,
            "f152" => DType::F152,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Index of a tensor in [`Graph::tensors`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TensorId(pub u32);

/// Index of an operation in [`Graph::ops`] (or in a repeat body's ops).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId(pub u32);

/// How a tensor gets its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Streamed from the host at each run.
    Input,
    /// Loaded with the package.
    Weight,
    /// Produced by an operation.
    Activation,
}

/// Where an input's or weight's values come from: the seeded generator
/// (values generated in f32, then rounded to the tensor's dtype with its
/// scale for FP8), or a tensor file (values converted to the dtype the
/// same way, see `book/src/numerics.md`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase")]
pub enum Init {
    /// Normal with mean 0 and the given standard deviation.
    Normal {
        std: f32,
    },
    /// Uniform on `[-scale, scale)`.
    Uniform {
        scale: f32,
    },
    Zeros,
    Ones,
    /// Values from a tensor file: `path` as resolved against the project
    /// file that declares the tensor, and for a `.safetensors` file the
    /// `key` of the entry, where `{i}` stands for the iteration of a
    /// repeat's weight. The graph holds no file contents: the validator
    /// has checked the file's index (key, shape, element type), and the
    /// values travel with the package.
    File {
        path: String,
        key: Option<String>,
    },
}

impl Init {
    /// The tensor file this init reads, if any.
    pub(crate) fn file(&self) -> Option<(&str, Option<&str>)> {
        match self {
            Init::File { path, key } => Some((path, key.as_deref())),
            _ => None,
        }
    }
}

/// One tensor of the graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Power-of-two scale of FP8 tensors: real value = stored value × 2^scale.
    /// Zero for other dtypes.
    pub scale: i8,
    pub role: Role,
    /// Present for inputs and weights.
    pub init: Option<Init>,
    /// For a weight declared inside a repeat body: the repeat it belongs to.
    /// Such a weight has one independent instance per iteration.
    pub repeat: Option<u32>,
    /// The name as written in the project, when the graph qualifies it: a
    /// repeat's body name that other repeats use too is `REPEAT.NAME` in
    /// the graph. A weight's generated values are drawn under the name as
    /// written, so that they do not depend on what other repeats call
    /// their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_name: Option<String>,
}

impl Tensor {
    /// The name as written in the project, which its generated values are
    /// drawn under.
    pub(crate) fn written_name(&self) -> &str {
        self.written_name.as_deref().unwrap_or(&self.name)
    }

    /// The product of the dimensions; validated graphs keep it far below
    /// `usize::MAX`, and it saturates rather than wraps for any other.
    pub(crate) fn element_count(&self) -> usize {
        self.shape.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.element_count().saturating_mul(self.dtype.size_bytes())
    }
}

/// What an operation computes. Shapes follow NumPy conventions.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum OpKind {
    /// `[.., M, K] x [.., K, N] -> [.., M, N]` (or `[.., N, K]` when
    /// `transpose_rhs`); leading batch dimensions must match or the right
    /// operand is 2-D and shared by every batch. Projects leave `epilogue`
    /// empty; in the fused graph it lists the elementwise operations merged
    /// after the product (`crate::fuse`), applied in order to its f16
    /// result, each rounded to f16, and each binary step takes the next
    /// input after the two factors, broadcast to the output's shape.
    Matmul {
        transpose_rhs: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        epilogue: Vec<EpilogueStep>,
    },
    /// Element type conversion; FP8 outputs use the output tensor's scale.
    Cast,
    /// Elementwise add with NumPy broadcasting.
    Add,
    /// Elementwise `a * b` with NumPy broadcasting.
    Mul,
    /// Elementwise `a - b` with NumPy broadcasting.
    Sub,
    /// Elementwise `a / b` with NumPy broadcasting (IEEE division: a zero
    /// divisor gives an infinity or NaN).
    Div,
    /// SiLU (swish): `x * sigmoid(x)`.
    Silu,
    /// GELU with the tanh approximation:
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    #[serde(rename = "gelu_tanh")]
    GeluTanh,
    /// RMS normalisation over the last axis: inputs are `x` and `gamma`;
    /// `x / sqrt(mean(x^2) + epsilon) * gamma`.
    Rmsnorm { epsilon: f32 },
    /// Exact GELU: `x * 0.5 * (1 + erf(x / sqrt(2)))`. Projects give it
    /// one input; in the fused graph a second is added to the first before
    /// the GELU (an `add` fusion merged into it, `crate::fuse`).
    Gelu,
    /// Softmax over the last axis of `x * scale`; with `causal`, element
    /// `[.., i, j]` with `j > i` is masked out. A second input is an
    /// additive mask (f16 or f32, broadcast to `x`, never with `causal`)
    /// added to `x * scale` before the row maximum; a row with every
    /// element at -inf reads as zeros.
    Softmax { scale: f32, causal: bool },
    /// Layer normalisation over the last axis: inputs are `x`, `gamma`, `beta`.
    Layernorm { epsilon: f32 },
    /// Axis permutation (a view).
    Transpose { perm: Vec<usize> },
    /// Shape change with the same element count (a view).
    Reshape,
    /// An explicit layout change: the values are unchanged, the device copies
    /// them into block-major layout with the given block.
    Rearrange { block: [usize; 2] },
    /// Indices `start..start + len` of `axis` (a view; `len` is the output's
    /// extent there).
    Slice { axis: usize, start: usize },
    /// The inputs joined end to end along `axis` (materialised: the output
    /// has buffers of its own, filled by exchange).
    Concat { axis: usize },
    /// A reduction over the last axis, which stays with extent 1:
    /// `[.., N] -> [.., 1]`.
    Reduce { reduction: Reduction },
}

/// One elementwise operation of a matrix product's epilogue
/// ([`OpKind::Matmul`]): a binary step combines the running result with
/// the next extra input (both operations are commutative, so the side the
/// project wrote it on does not matter), a unary step applies a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpilogueStep {
    Add,
    Mul,
    Gelu,
    Silu,
    GeluTanh,
}

impl EpilogueStep {
    /// The step an operation of `kind` becomes, if it has one.
    pub(crate) fn of(kind: &OpKind) -> Option<EpilogueStep> {
        Some(match kind {
            OpKind::Add => EpilogueStep::Add,
            OpKind::Mul => EpilogueStep::Mul,
            OpKind::Gelu => EpilogueStep::Gelu,
            OpKind::Silu => EpilogueStep::Silu,
            OpKind::GeluTanh => EpilogueStep::GeluTanh,
            _ => return None,
        })
    }

    /// Whether the step takes an extra input.
    pub(crate) fn is_binary(self) -> bool {
        matches!(self, EpilogueStep::Add | EpilogueStep::Mul)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            EpilogueStep::Add => "add",
            EpilogueStep::Mul => "mul",
            EpilogueStep::Gelu => "gelu",
            EpilogueStep::Silu => "silu",
            EpilogueStep::GeluTanh => "gelu_tanh",
        }
    }
}

/// What a [`OpKind::Reduce`] computes over each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    Sum,
    Mean,
    Max,
}

impl Reduction {
    /// The op's name in a project.
    pub(crate) fn op_name(self) -> &'static str {
        match self {
            Reduction::Sum => "reduce_sum",
            Reduction::Mean => "reduce_mean",
            Reduction::Max => "reduce_max",
        }
    }
}

// Floats in the graph compare by their bits: the graph is a query result,
// and salsa stops recomputing where a result compares equal, so `0.0` and
// `-0.0` (which `==` calls equal, but which the package writes differently)
// must differ, and a NaN must equal itself.

fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits()
}

impl PartialEq for Init {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Init::Normal { std: a }, Init::Normal { std: b }) => same_f32(*a, *b),
            (Init::Uniform { scale: a }, Init::Uniform { scale: b }) => same_f32(*a, *b),
            (Init::Zeros, Init::Zeros) | (Init::Ones, Init::Ones) => true,
            (Init::File { path: a, key: k }, Init::File { path: b, key: l }) => a == b && k == l,
            _ => false,
        }
    }
}

impl PartialEq for OpKind {
    fn eq(&self, other: &Self) -> bool {
        use OpKind::*;
        match (self, other) {
            (
                Matmul {
                    transpose_rhs: a,
                    epilogue: e,
                },
                Matmul {
                    transpose_rhs: b,
                    epilogue: f,
                },
            ) => a == b && e == f,
            (
                Softmax {
                    scale: a,
                    causal: c,
                },
                Softmax {
                    scale: b,
                    causal: d,
                },
            ) => same_f32(*a, *b) && c == d,
            (Layernorm { epsilon: a }, Layernorm { epsilon: b })
            | (Rmsnorm { epsilon: a }, Rmsnorm { epsilon: b }) => same_f32(*a, *b),
            (Transpose { perm: a }, Transpose { perm: b }) => a == b,
            (Rearrange { block: a }, Rearrange { block: b }) => a == b,
            (Slice { axis: a, start: s }, Slice { axis: b, start: t }) => a == b && s == t,
            (Concat { axis: a }, Concat { axis: b }) => a == b,
            (Reduce { reduction: a }, Reduce { reduction: b }) => a == b,
            (Cast, Cast)
            | (Add, Add)
            | (Mul, Mul)
            | (Sub, Sub)
            | (Div, Div)
            | (Silu, Silu)
            | (GeluTanh, GeluTanh)
            | (Gelu, Gelu)
            | (Reshape, Reshape) => true,
            _ => false,
        }
    }
}

impl PartialEq for Check {
    fn eq(&self, other: &Self) -> bool {
        self.reference_precision == other.reference_precision
            && self.min_cosine_similarity.to_bits() == other.min_cosine_similarity.to_bits()
            && self.max_abs_error.to_bits() == other.max_abs_error.to_bits()
            && self.outputs == other.outputs
    }
}

impl OpKind {
    /// A transpose, reshape or slice: a view of its input, with no device
    /// work of its own.
    pub(crate) fn is_view(&self) -> bool {
        matches!(
            self,
            OpKind::Transpose { .. } | OpKind::Reshape | OpKind::Slice { .. }
        )
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            OpKind::Matmul { .. } => "matmul",
            OpKind::Cast => "cast",
            OpKind::Add => "add",
            OpKind::Mul => "mul",
            OpKind::Sub => "sub",
            OpKind::Div => "div",
            OpKind::Silu => "silu",
            OpKind::GeluTanh => "gelu_tanh",
            OpKind::Rmsnorm { .. } => "rmsnorm",
            OpKind::Gelu => "gelu",
            OpKind::Softmax { .. } => "softmax",
            OpKind::Layernorm { .. } => "layernorm",
            OpKind::Transpose { .. } => "transpose",
            OpKind::Reshape => "reshape",
            OpKind::Rearrange { .. } => "rearrange",
            OpKind::Slice { .. } => "slice",
            OpKind::Concat { .. } => "concat",
            OpKind::Reduce { reduction } => reduction.op_name(),
        }
    }
}

/// One operation: reads `inputs`, writes the single tensor `output`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    pub name: String,
    pub kind: OpKind,
    pub inputs: Vec<TensorId>,
    pub output: TensorId,
}

/// A structured repeat: `body` runs `count` times. The activation `carry_in`
/// (a body-local name for the value entering each iteration) is bound to
/// `init` for the first iteration and to the previous iteration's
/// `carry_out` after that; `output` receives the last iteration's
/// `carry_out`. Weights whose [`Tensor::repeat`] names this repeat have one
/// instance per iteration. The body is compiled once and looped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    pub name: String,
    pub count: u32,
    pub init: TensorId,
    pub carry_in: TensorId,
    pub carry_out: TensorId,
    pub output: TensorId,
    /// Indices into [`Graph::ops`] of the body, in execution order. Body ops
    /// are contiguous and appear in the op list right where the repeat runs.
    pub body: Vec<OpId>,
}

/// Numerics check settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReferencePrecision {
    /// Emulate the device's rounding: f16 storage, FP8 casts with scale,
    /// f16 partials where the device uses them.
    Device,
    /// Plain f32 everywhere.
    F32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Check {
    pub reference_precision: ReferencePrecision,
    pub min_cosine_similarity: f64,
    pub max_abs_error: f64,
    /// The outputs compared against the host reference.
    pub outputs: Vec<TensorId>,
}

/// A validated project.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub name: String,
    pub target: TargetId,
    pub tiles: u32,
    pub seed: u64,
    pub tensors: Vec<Tensor>,
    /// In execution order; repeat bodies included (see [`Repeat::body`]).
    pub ops: Vec<Op>,
    pub repeats: Vec<Repeat>,
    /// Tensors the program produces for the host (at least the checked ones).
    pub outputs: Vec<TensorId>,
    pub check: Check,
}

impl Graph {
    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id.0 as usize]
    }

    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.0 as usize]
    }

    /// The tensor `tensor` is a view of (through transposes, reshapes and
    /// slices, however many), or `tensor` itself when no view produces it.
    pub(crate) fn view_base(&self, tensor: TensorId) -> TensorId {
        let mut base = tensor;
        while let Some(op) = self
            .ops
            .iter()
            .find(|op| op.output == base && op.kind.is_view())
        {
            base = op.inputs[0];
        }
        base
    }

    /// Whether an operation on the device reads `tensor`: directly, through
    /// views of it, or as the value a repeat starts from or carries into
    /// its next iteration. A result only the host reads leaves no layout
    /// for a later operation to pay for.
    pub(crate) fn read_on_device(&self, tensor: TensorId) -> bool {
        self.repeats
            .iter()
            .any(|r| r.carry_out == tensor || r.init == tensor)
            || self
                .ops
                .iter()
                .filter(|op| op.inputs.contains(&tensor))
                .any(|op| !op.kind.is_view() || self.read_on_device(op.output))
    }

    /// The repeat whose body contains `op`, if any.
    pub(crate) fn repeat_of(&self, op: OpId) -> Option<&Repeat> {
        self.repeats.iter().find(|r| r.body.contains(&op))
    }

    /// Multiply-accumulates of one execution of the whole graph, with repeat
    /// bodies counted once per iteration.
    pub fn matmul_macs(&self) -> u64 {
        let mut total = 0u64;
        for (i, op) in self.ops.iter().enumerate() {
            if let OpKind::Matmul { .. } = op.kind {
                let out = self.tensor(op.output);
                let lhs = self.tensor(op.inputs[0]);
                let k = *lhs.shape.last().unwrap_or(&1) as u64;
                let times = self
                    .repeat_of(OpId(i as u32))
                    .map_or(1, |r| u64::from(r.count));
                total += out.element_count() as u64 * k * times;
            }
        }
        total
    }
}

impl Graph {
    /// The stable text dump of a graph (`ipub build --emit graph`, tests).
    pub(crate) fn dump(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "project {} target={} tiles={} seed={}",
            self.name, self.target, self.tiles, self.seed
        );
        for tensor in self.tensors.iter().filter(|t| t.role != Role::Activation) {
            let _ = write!(
                out,
                "{:?} {}: {}{:?}",
                tensor.role, tensor.name, tensor.dtype, tensor.shape
            );
            if tensor.dtype.is_fp8() {
                let _ = write!(out, " scale={}", tensor.scale);
            }
            if let Some(init) = &tensor.init {
                let _ = write!(out, " init={init:?}");
            }
            if let Some(repeat) = tensor.repeat {
                let _ = write!(out, " per-iteration of repeat {repeat}");
            }
            out.push('\n');
        }
        for (i, op) in self.ops.iter().enumerate() {
            let indent = if self.repeat_of(OpId(i as u32)).is_some() {
                "    "
            } else {
                ""
            };
            if let Some(repeat) = self
                .repeats
                .iter()
                .find(|r| r.body.first() == Some(&OpId(i as u32)))
            {
                let _ = writeln!(
                    out,
                    "repeat {} x{}: {} = {} -> {} = {}",
                    repeat.name,
                    repeat.count,
                    self.tensor(repeat.carry_in).name,
                    self.tensor(repeat.init).name,
                    self.tensor(repeat.output).name,
                    self.tensor(repeat.carry_out).name,
                );
            }
            let output = self.tensor(op.output);
            let inputs: Vec<&str> = op
                .inputs
                .iter()
                .map(|&id| self.tensor(id).name.as_str())
                .collect();
            let _ = write!(
                out,
                "{indent}{} = {:?}({}) : {}{:?}",
                output.name,
                op.kind,
                inputs.join(", "),
                output.dtype,
                output.shape
            );
            if output.dtype.is_fp8() {
                let _ = write!(out, " scale={}", output.scale);
            }
            out.push('\n');
        }
        let names = |ids: &[TensorId]| {
            ids.iter()
                .map(|&id| self.tensor(id).name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "outputs {}", names(&self.outputs));
        let _ = writeln!(
            out,
            "check {:?} min_cosine_similarity={} max_abs_error={} outputs {}",
            self.check.reference_precision,
            self.check.min_cosine_similarity,
            self.check.max_abs_error,
            names(&self.check.outputs)
        );
        out
    }
}
