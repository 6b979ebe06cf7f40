//! Shape and dtype rules of the reductions over the last axis
//! (`reduce_sum`, `reduce_mean`, `reduce_max`).
//!
//! The reduced axis stays with extent 1 (`[.., N] -> [.., 1]`): the result
//! keeps the input's rank, so it broadcasts against the input in `sub`,
//! `mul` or `div` (`x - reduce_mean(x)`) and a rows plan keeps its rows.

use super::{output_dtype, plain, require_dtype, Inferred, Input};
use crate::diagnostic::Diagnostic;
use crate::graph::{DType, OpKind, Reduction};
use crate::project::syntax::OpAst;
use crate::project::Site;

/// `reduce_sum`, `reduce_mean` or `reduce_max` (by `op`'s name) of one
/// f16 or f32 input.
pub(super) fn infer(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    let reduction = match op.op.get_ref().as_str() {
        "reduce_sum" => Reduction::Sum,
        "reduce_mean" => Reduction::Mean,
        _ => Reduction::Max,
    };
    let name = reduction.op_name();
    require_dtype(site, x, &[DType::F16, DType::F32], name)?;
    let Some((&length, leading)) = x.shape.split_last() else {
        return Err(site
            .error(
                format!(
                    "`{name}` reduces the last axis, but `{}` is a scalar",
                    x.name.get_ref()
                ),
                x.name.span(),
            )
            .help("reshape the input to `[1]` or more dimensions"));
    };
    if length == 0 {
        return Err(site.error(
            format!(
                "`{name}` of `{}` reduces an empty last axis",
                x.name.get_ref()
            ),
            x.name.span(),
        ));
    }
    let out = output_dtype(site, op, declared, x.dtype, &[x.dtype])?;
    let mut shape = leading.to_vec();
    shape.push(1);
    Ok(plain(OpKind::Reduce { reduction }, shape, out))
}
