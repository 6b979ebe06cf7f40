//! The project file as written: serde structures with spans.
//!
//! Every struct denies unknown keys, so a misspelt key is a diagnostic and
//! not a silently ignored setting. Values are wrapped in [`Spanned`] wherever
//! validation may need to point at them.

use serde::Deserialize;
use toml::Spanned;

/// One TOML file: the root project or an included file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileAst {
    pub project: Option<Spanned<ProjectAst>>,
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    #[serde(default)]
    pub tensor: Vec<Spanned<TensorAst>>,
    #[serde(default)]
    pub op: Vec<Spanned<OpAst>>,
    #[serde(default)]
    pub repeat: Vec<Spanned<RepeatAst>>,
    pub check: Option<Spanned<CheckAst>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProjectAst {
    pub name: Spanned<String>,
    pub target: Spanned<String>,
    pub tiles: Spanned<i64>,
    #[serde(default)]
    pub seed: Option<Spanned<i64>>,
    /// The directory of kernel sources, relative to the project file.
    #[serde(default)]
    pub kernels: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TensorAst {
    pub name: Spanned<String>,
    pub shape: Spanned<Vec<Spanned<i64>>>,
    pub dtype: Spanned<String>,
    pub scale: Option<Spanned<i64>>,
    pub role: Spanned<String>,
    pub init: Option<Spanned<InitAst>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InitAst {
    /// The seeded distribution; absent when `file` gives the values.
    pub dist: Option<Spanned<String>>,
    pub std: Option<Spanned<f64>>,
    pub scale: Option<Spanned<f64>>,
    /// A tensor file (`.safetensors` or `.npy`), relative to this file.
    pub file: Option<Spanned<String>>,
    /// The entry of a `.safetensors` file; `{i}` stands for the iteration
    /// of a repeat's weight.
    pub key: Option<Spanned<String>>,
}

/// An operation; which of the optional keys are allowed depends on `op`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpAst {
    pub name: Spanned<String>,
    pub op: Spanned<String>,
    pub inputs: Spanned<Vec<Spanned<String>>>,
    pub dtype: Option<Spanned<String>>,
    /// The FP8 output's power-of-two scale, or softmax's multiplier.
    pub scale: Option<Spanned<f64>>,
    pub transpose_rhs: Option<Spanned<bool>>,
    pub causal: Option<Spanned<bool>>,
    pub epsilon: Option<Spanned<f64>>,
    pub perm: Option<Spanned<Vec<Spanned<i64>>>>,
    pub shape: Option<Spanned<Vec<Spanned<i64>>>>,
    pub block: Option<Spanned<Vec<Spanned<i64>>>>,
    /// slice: the axis (negative counts from the last).
    pub axis: Option<Spanned<i64>>,
    /// slice: the first index kept.
    pub start: Option<Spanned<i64>>,
    /// slice: one past the last index kept.
    pub end: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepeatAst {
    /// Also the name of the tensor that receives the last iteration's result.
    pub name: Spanned<String>,
    pub count: Spanned<i64>,
    /// The tensor entering the first iteration.
    pub input: Spanned<String>,
    /// The body-local name of the activation entering each iteration.
    pub carry: Spanned<String>,
    /// The body tensor that becomes the next iteration's `carry`.
    pub result: Spanned<String>,
    /// Per-iteration weights.
    #[serde(default)]
    pub tensor: Vec<Spanned<TensorAst>>,
    #[serde(default)]
    pub op: Vec<Spanned<OpAst>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckAst {
    pub reference_precision: Spanned<String>,
    pub min_cosine_similarity: Spanned<f64>,
    pub max_abs_error: Spanned<f64>,
    pub outputs: Spanned<Vec<Spanned<String>>>,
}
