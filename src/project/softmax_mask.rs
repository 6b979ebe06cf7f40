//! The rules of softmax's optional second input, an additive mask.
//!
//! `inputs = ["scores", "mask"]` adds the mask to `scores * scale` before
//! the row maximum: 0 keeps an element, -inf removes it, and finite values
//! bias it. The mask broadcasts to the scores over leading axes (NumPy
//! rules, so `[S, S]` serves every batch and head and `[B, 1, 1, S]` is a
//! padding mask). It must be f16 or f32, since FP8 formats have no -inf,
//! and it replaces `causal` rather than combining with it: one mask tensor
//! states the whole pattern.

use super::syntax::OpAst;
use super::Site;
use crate::diagnostic::Diagnostic;
use crate::graph::DType;
use toml::Spanned;

/// A mask input as these rules see it (the shape rules' view of an input,
/// without depending on them).
pub(crate) struct Mask<'a> {
    pub name: &'a Spanned<String>,
    pub shape: &'a [usize],
    pub dtype: DType,
}

/// Checks `mask` against the softmax input's shape `x` and the op's
/// `causal` key.
pub(crate) fn check(site: &Site, op: &OpAst, x: &[usize], mask: Mask) -> Result<(), Diagnostic> {
    let name = mask.name.get_ref();
    if !matches!(mask.dtype, DType::F16 | DType::F32) {
        return Err(site
            .error(
                format!(
                    "softmax mask `{name}` is {}, but a mask must be f16 or f32",
                    mask.dtype
                ),
                mask.name.span(),
            )
            .label("allowed: f16, f32")
            .help("FP8 formats cannot hold -inf, which removes an element; declare the mask f16"));
    }
    if let Some(causal) = op.causal.as_ref().filter(|c| *c.get_ref()) {
        return Err(site
            .error(
                "`causal` cannot be combined with a softmax mask",
                causal.span(),
            )
            .label("the mask input states which elements are kept")
            .help("put -inf above the diagonal of the mask instead, or drop the mask"));
    }
    if let Some(reason) = broadcast_mismatch(mask.shape, x) {
        return Err(site
            .error(
                format!(
                    "softmax mask `{name}` of shape {:?} does not broadcast to the input's {:?}",
                    mask.shape, x
                ),
                mask.name.span(),
            )
            .label(reason)
            .help("each mask dimension, aligned from the last, must equal the input's or be 1"));
    }
    Ok(())
}

/// The error for a softmax given more than its input and a mask.
pub(super) fn too_many_inputs(site: &Site, op: &OpAst, found: usize) -> Diagnostic {
    site.error(
        format!("`softmax` takes 1 or 2 inputs, found {found}"),
        op.inputs.span(),
    )
    .label("expected the input and, optionally, a mask")
    .help("combine several masks into one by adding them")
}

/// Why `shape` does not broadcast to `to` (one-way: `to` is not widened),
/// or `None` when it does.
fn broadcast_mismatch(shape: &[usize], to: &[usize]) -> Option<String> {
    if shape.len() > to.len() {
        return Some(format!(
            "{} dimensions, the input has {}",
            shape.len(),
            to.len()
        ));
    }
    let offset = to.len() - shape.len();
    shape.iter().enumerate().find_map(|(d, &extent)| {
        let target = to[d + offset];
        (extent != target && extent != 1).then(|| {
            format!(
                "mask dimension {d} is {extent} where the input's dimension {} is {target}",
                d + offset
            )
        })
    })
}
