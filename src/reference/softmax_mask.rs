//! Softmax with an additive mask, the reference for softmax's second
//! input (`book/src/numerics.md`).

use super::ops::elementwise;
use rayon::prelude::*;

/// Softmax over the last axis of `y = x * scale + mask`, the mask
/// broadcast to `shape`: exponentials in f32 after subtracting the row
/// maximum, sums in f64. A row whose every `y` is -inf (every element
/// removed) has no defined softmax and reads as zeros.
pub(super) fn softmax_masked(
    shape: &[usize],
    x: &[f32],
    (mask, mask_shape): (&[f32], &[usize]),
    scale: f32,
) -> Result<Vec<f32>, String> {
    let last = shape.last().copied().unwrap_or(1).max(1);
    let mut out = elementwise(shape, (x, shape), (mask, mask_shape), |v, m| v * scale + m)?;
    out.par_chunks_mut(last).for_each(|y| {
        let max = y.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if max == f32::NEG_INFINITY {
            y.fill(0.0);
            return;
        }
        let mut sum = 0.0f64;
        for v in y.iter_mut() {
            *v = (*v - max).exp();
            sum += f64::from(*v);
        }
        for v in y.iter_mut() {
            *v = (f64::from(*v) / sum) as f32;
        }
    });
    Ok(out)
}
