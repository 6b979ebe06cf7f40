//! The host reference's kernels on row-major f32 buffers.
//!
//! Each works on real values (FP8 scales already applied) and returns its
//! output unrounded; the evaluator applies the precision's storage rounding.
//! Shape mistakes come back as `Err(reason)` for the evaluator to name the
//! operation; none of these functions panics on a malformed graph.

use crate::numerics::{erf, round_f16};
use rayon::prelude::*;

/// Output rows computed by one sgemm call (one rayon task): big enough for
/// the kernel's packing to pay off, small enough to spread a 197-row
/// attention matmul over both cores.
const ROWS_PER_TASK: usize = 64;

/// Row-major strides of `shape`.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// The geometry of a (batched) matmul as `OpKind::Matmul` documents it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MatmulShape {
    pub batch: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// The right operand is 2-D and shared by every batch.
    pub rhs_shared: bool,
    /// The right operand is stored `[.., N, K]`.
    pub transpose_rhs: bool,
}

impl MatmulShape {
    pub(super) fn new(
        lhs: &[usize],
        rhs: &[usize],
        transpose_rhs: bool,
    ) -> Result<MatmulShape, String> {
        if lhs.len() < 2 || rhs.len() < 2 {
            return Err(format!(
                "matmul operands must have rank 2 or more, got {lhs:?} and {rhs:?}"
            ));
        }
        let (lhs_batch, lhs_mat) = lhs.split_at(lhs.len() - 2);
        let (rhs_batch, rhs_mat) = rhs.split_at(rhs.len() - 2);
        let (m, k) = (lhs_mat[0], lhs_mat[1]);
        let (rhs_k, n) = if transpose_rhs {
            (rhs_mat[1], rhs_mat[0])
        } else {
            (rhs_mat[0], rhs_mat[1])
        };
        if rhs_k != k {
            return Err(format!(
                "inner dimensions differ: {lhs:?} x {rhs:?} (transpose_rhs={transpose_rhs})"
            ));
        }
        let rhs_shared = rhs_batch.is_empty();
        if !rhs_shared && rhs_batch != lhs_batch {
            return Err(format!("batch dimensions differ: {lhs:?} x {rhs:?}"));
        }
        Ok(MatmulShape {
            batch: lhs_batch.iter().product(),
            m,
            k,
            n,
            rhs_shared,
            transpose_rhs,
        })
    }

    fn lhs_len(&self) -> usize {
        self.batch * self.m * self.k
    }

    fn rhs_len(&self) -> usize {
        let one = self.k * self.n;
        if self.rhs_shared {
            one
        } else {
            self.batch * one
        }
    }

    pub(super) fn output_len(&self) -> usize {
        self.batch * self.m * self.n
    }
}

/// `c[rows × n] = a[rows × k] · b[k × n]` through matrixmultiply's sgemm,
/// `a` row-major with row stride `rsa`, `b` with strides `(rsb, csb)`.
#[allow(clippy::too_many_arguments)]
fn sgemm(
    rows: usize,
    k: usize,
    n: usize,
    a: &[f32],
    rsa: usize,
    b: &[f32],
    (rsb, csb): (usize, usize),
    c: &mut [f32],
) {
    if rows == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..rows * n].fill(0.0);
        return;
    }
    // The pointer arithmetic below stays inside the slices; the callers
    // derive every extent from a validated `MatmulShape`, so a failure here
    // is a bug in this module, not bad input.
    assert!((rows - 1) * rsa + k <= a.len(), "sgemm: lhs out of bounds");
    assert!(
        (k - 1) * rsb + (n - 1) * csb < b.len(),
        "sgemm: rhs out of bounds"
    );
    assert!(rows * n <= c.len(), "sgemm: output out of bounds");
    // SAFETY: the assertions above bound every element sgemm reads or
    // writes; `c` is exclusively borrowed and its strides do not alias.
    unsafe {
        matrixmultiply::sgemm(
            rows,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa as isize,
            1,
            b.as_ptr(),
            rsb as isize,
            csb as isize,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// How the products of one output row block are summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Accumulation {
    /// One f32 sum over the whole inner dimension.
    F32,
    /// Products summed in f32 within each block of `k_block` inner indices;
    /// after each block the running sum is rounded to f16 (the model of the
    /// AMP's f16 partials, see `book/src/numerics.md`). With a `k_slice`,
    /// each slice of that many inner indices (the last may be shorter) is
    /// such a chain of its own, and the slices' sums are added in f32, in
    /// slice order, and rounded to f16 once: a K split over tiles.
    F16Partials {
        k_block: usize,
        k_slice: Option<usize>,
    },
}

/// A batched matmul; parallel over batches and blocks of output rows.
pub(super) fn matmul(
    shape: MatmulShape,
    lhs: &[f32],
    rhs: &[f32],
    accumulation: Accumulation,
) -> Result<Vec<f32>, String> {
    if lhs.len() != shape.lhs_len() || rhs.len() != shape.rhs_len() {
        return Err(format!(
            "operand sizes {} and {} do not match {shape:?}",
            lhs.len(),
            rhs.len()
        ));
    }
    let MatmulShape { m, k, n, .. } = shape;
    let mut out = vec![0.0f32; shape.output_len()];
    if out.is_empty() {
        return Ok(out);
    }
    let rhs_strides = if shape.transpose_rhs { (1, k) } else { (n, 1) };
    out.par_chunks_mut(m * n)
        .enumerate()
        .for_each(|(batch, out_batch)| {
            let a_batch = &lhs[batch * m * k..(batch + 1) * m * k];
            let b_batch = if shape.rhs_shared {
                rhs
            } else {
                &rhs[batch * k * n..(batch + 1) * k * n]
            };
            out_batch
                .par_chunks_mut(ROWS_PER_TASK * n)
                .enumerate()
                .for_each(|(block, c)| {
                    let row0 = block * ROWS_PER_TASK;
                    let rows = c.len() / n;
                    let a = &a_batch[row0 * k..(row0 + rows) * k];
                    match accumulation {
                        Accumulation::F32 => sgemm(rows, k, n, a, k, b_batch, rhs_strides, c),
                        Accumulation::F16Partials { k_block, k_slice } => {
                            let k_block = k_block.max(1);
                            let k_slice = k_slice.unwrap_or(k).max(1);
                            let mut partial = vec![0.0f32; c.len()];
                            let mut chain = vec![0.0f32; c.len()];
                            let mut slice0 = 0;
                            while slice0 < k {
                                let slice_end = (slice0 + k_slice).min(k);
                                chain.fill(0.0);
                                let mut k0 = slice0;
                                while k0 < slice_end {
                                    let kk = k_block.min(slice_end - k0);
                                    let b_offset = if shape.transpose_rhs { k0 } else { k0 * n };
                                    sgemm(
                                        rows,
                                        kk,
                                        n,
                                        &a[k0..],
                                        k,
                                        &b_batch[b_offset..],
                                        rhs_strides,
                                        &mut partial,
                                    );
                                    for (acc, p) in chain.iter_mut().zip(&partial) {
                                        *acc = round_f16(*acc + p);
                                    }
                                    k0 += kk;
                                }
                                for (sum, slice) in c.iter_mut().zip(&chain) {
                                    *sum += slice;
                                }
                                slice0 = slice_end;
                            }
                            if k_slice < k {
                                c.iter_mut().for_each(|v| *v = round_f16(*v));
                            }
                        }
                    }
                });
        });
    Ok(out)
}

/// `out[i] = src[Σ_d i_d · src_strides[d]]` over `out_shape`: the index map
/// behind broadcasting and transposition. Parallel over rows of the last
/// axis.
pub(super) fn gather(out_shape: &[usize], src_strides: &[usize], src: &[f32]) -> Vec<f32> {
    let count: usize = out_shape.iter().product();
    let mut out = vec![0.0f32; count];
    if count == 0 {
        return out;
    }
    let rank = out_shape.len();
    let last = if rank == 0 { 1 } else { out_shape[rank - 1] };
    let last_stride = if rank == 0 { 0 } else { src_strides[rank - 1] };
    out.par_chunks_mut(last).enumerate().for_each(|(row, dst)| {
        let mut rest = row;
        let mut base = 0;
        for d in (0..rank.saturating_sub(1)).rev() {
            base += (rest % out_shape[d]) * src_strides[d];
            rest /= out_shape[d];
        }
        for (j, v) in dst.iter_mut().enumerate() {
            *v = src[base + j * last_stride];
        }
    });
    out
}

/// Strides that read `shape` as if broadcast to `out_shape` (NumPy rules:
/// align at the right, size-1 and missing axes repeat).
pub(super) fn broadcast_strides(
    shape: &[usize],
    out_shape: &[usize],
) -> Result<Vec<usize>, String> {
    if shape.len() > out_shape.len() {
        return Err(format!("cannot broadcast {shape:?} to {out_shape:?}"));
    }
    let own = strides(shape);
    let offset = out_shape.len() - shape.len();
    let mut result = vec![0; out_shape.len()];
    for (d, &extent) in shape.iter().enumerate() {
        if extent == out_shape[d + offset] {
            result[d + offset] = if extent == 1 { 0 } else { own[d] };
        } else if extent != 1 {
            return Err(format!("cannot broadcast {shape:?} to {out_shape:?}"));
        }
    }
    Ok(result)
}

/// Elementwise `a + b` with NumPy broadcasting to `out_shape`.
pub(super) fn add(
    out_shape: &[usize],
    a: (&[f32], &[usize]),
    b: (&[f32], &[usize]),
) -> Result<Vec<f32>, String> {
    elementwise(out_shape, a, b, |x, y| x + y)
}

/// Elementwise `f(a, b)` with NumPy broadcasting to `out_shape`; `f`
/// computes in f32, which rounds once, as IEEE `+ - * /` do.
pub(super) fn elementwise(
    out_shape: &[usize],
    (a, a_shape): (&[f32], &[usize]),
    (b, b_shape): (&[f32], &[usize]),
    f: impl Fn(f32, f32) -> f32,
) -> Result<Vec<f32>, String> {
    let a = gather(out_shape, &broadcast_strides(a_shape, out_shape)?, a);
    let b = gather(out_shape, &broadcast_strides(b_shape, out_shape)?, b);
    Ok(a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect())
}

/// SiLU, `x / (1 + exp(-x))`, evaluated in f64.
pub(super) fn silu(values: &[f32]) -> Vec<f32> {
    values
        .par_iter()
        .map(|&x| {
            let x = f64::from(x);
            (x / (1.0 + (-x).exp())) as f32
        })
        .collect()
}

/// GELU with the tanh approximation (as PyTorch's `approximate="tanh"`),
/// evaluated in f64. For `u < 0`, `1 + tanh(u)` would cancel (in f64 it
/// keeps no correct digit once the result is below about 1e-16 |x|), so
/// it is computed there as `2 e^2u / (1 + e^2u)`, the same value.
pub(super) fn gelu_tanh(values: &[f32]) -> Vec<f32> {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    values
        .par_iter()
        .map(|&x| {
            let x = f64::from(x);
            let u = k * (x + 0.044715 * x * x * x);
            let one_plus_tanh = if u < 0.0 {
                let e = (2.0 * u).exp();
                2.0 * e / (1.0 + e)
            } else {
                1.0 + u.tanh()
            };
            (0.5 * x * one_plus_tanh) as f32
        })
        .collect()
}

/// RMS normalisation over the last axis (the mean square in f64):
/// `x / sqrt(mean(x^2) + epsilon) * gamma`; `gamma` has the last axis's
/// length.
pub(super) fn rmsnorm(
    shape: &[usize],
    x: &[f32],
    gamma: &[f32],
    epsilon: f32,
) -> Result<Vec<f32>, String> {
    let last = shape.last().copied().unwrap_or(1);
    if gamma.len() != last {
        return Err(format!(
            "gamma has {} values for a last axis of {last}",
            gamma.len()
        ));
    }
    let mut out = x.to_vec();
    if last == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(last).for_each(|row| {
        let mean_square = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / row.len() as f64;
        let inv = 1.0 / (mean_square + f64::from(epsilon)).sqrt();
        for (v, &g) in row.iter_mut().zip(gamma) {
            *v = (f64::from(*v) * inv * f64::from(g)) as f32;
        }
    });
    Ok(out)
}

/// The axis permutation `out.shape[i] = in.shape[perm[i]]`.
pub(super) fn transpose(
    shape: &[usize],
    perm: &[usize],
    values: &[f32],
) -> Result<Vec<f32>, String> {
    let mut seen = vec![false; shape.len()];
    if perm.len() != shape.len()
        || perm
            .iter()
            .any(|&p| p >= shape.len() || std::mem::replace(&mut seen[p], true))
    {
        return Err(format!(
            "{perm:?} is not a permutation of the axes of {shape:?}"
        ));
    }
    let own = strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let src_strides: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
    Ok(gather(&out_shape, &src_strides, values))
}

/// Indices `start..start + len` of `axis`: the input seen as
/// `[outer, extent, inner]`, each outer block keeps `len` rows of `inner`.
pub(super) fn slice(
    shape: &[usize],
    axis: usize,
    start: usize,
    len: usize,
    values: &[f32],
) -> Result<Vec<f32>, String> {
    let extent = *shape
        .get(axis)
        .ok_or_else(|| format!("axis {axis} is out of range for {shape:?}"))?;
    if len == 0 || start + len > extent {
        return Err(format!(
            "{start}..{} is outside axis {axis} of {shape:?}",
            start + len
        ));
    }
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(values.len() / extent * len);
    for block in values.chunks(extent * inner) {
        out.extend_from_slice(&block[start * inner..(start + len) * inner]);
    }
    Ok(out)
}

/// The parts joined along `axis`: each seen as `[outer, extent, inner]`,
/// every outer block of the output is the parts' blocks one after another.
pub(super) fn concat(axis: usize, parts: &[(&[f32], &[usize])]) -> Result<Vec<f32>, String> {
    let Some(&(_, first)) = parts.first() else {
        return Err("concat of no inputs".into());
    };
    if axis >= first.len() {
        return Err(format!("axis {axis} is out of range for {first:?}"));
    }
    let outer: usize = first[..axis].iter().product();
    let inner: usize = first[axis + 1..].iter().product();
    let mut total = 0;
    for &(values, shape) in parts {
        let fits = shape.len() == first.len()
            && (0..shape.len()).all(|d| d == axis || shape[d] == first[d])
            && values.len() == shape.iter().product::<usize>();
        if !fits {
            return Err(format!(
                "{shape:?} does not fit {first:?} along axis {axis}"
            ));
        }
        total += values.len();
    }
    let mut out = Vec::with_capacity(total);
    for block in 0..outer {
        for &(values, shape) in parts {
            let run = shape[axis] * inner;
            out.extend_from_slice(&values[block * run..(block + 1) * run]);
        }
    }
    Ok(out)
}

/// Exact GELU, `x · Φ(x)`, evaluated in f64.
pub(super) fn gelu(values: &[f32]) -> Vec<f32> {
    values
        .par_iter()
        .map(|&x| {
            let x = f64::from(x);
            (0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
        })
        .collect()
}

/// GELU as the device evaluates it where its result is stored as FP8
/// (`device/gelu_f16.S`): every step in f16, each rounded to nearest even,
/// `h = x · ½`, `t = x · f16(1/√2)`, `u = f16(erf(t)) + 1`, `h · u`. The
/// values are f16 already (the input is an f16 activation). An f16 product
/// or sum is exact in f64, so rounding it once from f64 is the f16 result.
pub(super) fn gelu_in_f16(values: &[f32]) -> Vec<f32> {
    let round = |v: f64| f64::from(half::f16::from_f64(v));
    let rsqrt2 = round(std::f64::consts::FRAC_1_SQRT_2);
    values
        .par_iter()
        .map(|&x| {
            let x = f64::from(x);
            let h = round(x * 0.5);
            let u = round(round(erf(round(x * rsqrt2))) + 1.0);
            round(h * u) as f32
        })
        .collect()
}

/// Softmax of `x · scale` over the last axis; with `causal`, entries whose
/// column exceeds their row (the last two axes) are excluded and read 0.
/// Exponentials in f32 after subtracting the row maximum; sums in f64.
pub(super) fn softmax(shape: &[usize], values: &[f32], scale: f32, causal: bool) -> Vec<f32> {
    let rank = shape.len();
    let last = shape.last().copied().unwrap_or(1).max(1);
    let rows_per_matrix = if rank >= 2 { shape[rank - 2].max(1) } else { 1 };
    let mut out = values.to_vec();
    out.par_chunks_mut(last).enumerate().for_each(|(row, y)| {
        let i = row % rows_per_matrix;
        let visible = if causal {
            (i + 1).min(y.len())
        } else {
            y.len()
        };
        let max = y[..visible]
            .iter()
            .map(|&v| v * scale)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for v in &mut y[..visible] {
            *v = (*v * scale - max).exp();
            sum += f64::from(*v);
        }
        for v in &mut y[..visible] {
            *v = (f64::from(*v) / sum) as f32;
        }
        y[visible..].fill(0.0);
    });
    out
}

/// Layer normalisation over the last axis with biased variance (mean and
/// variance in f64); `gamma` and `beta` have the last axis's length or 1.
pub(super) fn layernorm(
    shape: &[usize],
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    epsilon: f32,
) -> Result<Vec<f32>, String> {
    let last = shape.last().copied().unwrap_or(1);
    for (name, p) in [("gamma", gamma), ("beta", beta)] {
        if p.len() != last && p.len() != 1 {
            return Err(format!(
                "{name} has {} values for a last axis of {last}",
                p.len()
            ));
        }
    }
    let mut out = x.to_vec();
    if last == 0 {
        return Ok(out);
    }
    let param = |p: &[f32], j: usize| f64::from(if p.len() == 1 { p[0] } else { p[j] });
    out.par_chunks_mut(last).for_each(|row| {
        let n = row.len() as f64;
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let variance = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let inv = 1.0 / (variance + f64::from(epsilon)).sqrt();
        for (j, v) in row.iter_mut().enumerate() {
            *v = ((f64::from(*v) - mean) * inv * param(gamma, j) + param(beta, j)) as f32;
        }
    });
    Ok(out)
}
