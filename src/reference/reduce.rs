//! The reference of the reductions over the last axis: each row's sum,
//! mean or maximum computed in f64 from the stored values and rounded
//! once, to the output's dtype when the reference emulates the device and
//! to f32 otherwise (`book/src/numerics.md`).

use crate::graph::Reduction;
use rayon::prelude::*;

/// How a row's f64 result becomes a stored value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rounding {
    /// To f32, the reference's storage.
    F32,
    /// To f16 directly (not through f32, which could round twice).
    F16,
}

/// One value per row of `x`, whose rows are `row_length` long: the sum and
/// the mean in f64 (a mean divides the exact sum by `row_length`), the
/// maximum exactly. A NaN element is ignored by the maximum (IEEE maxNum,
/// as the device's maximum instructions do), so a row holds NaN only when
/// every element is NaN; sums propagate NaN and infinities as f64 does.
pub(super) fn reduce(
    x: &[f32],
    row_length: usize,
    reduction: Reduction,
    rounding: Rounding,
) -> Result<Vec<f32>, String> {
    if row_length == 0 || !x.len().is_multiple_of(row_length) {
        return Err(format!(
            "{} values do not make rows of {row_length}",
            x.len()
        ));
    }
    Ok(x.par_chunks(row_length)
        .map(|row| {
            let values = row.iter().map(|&v| f64::from(v));
            let value = match reduction {
                Reduction::Sum => values.sum::<f64>(),
                Reduction::Mean => values.sum::<f64>() / row_length as f64,
                Reduction::Max => values.fold(f64::NAN, f64::max),
            };
            match rounding {
                Rounding::F32 => value as f32,
                Rounding::F16 => crate::numerics::f16_from_f64(value).to_f32(),
            }
        })
        .collect())
}
