//! File values to device bytes.
//!
//! Every supported file type widens to f64 exactly, so one rounding takes a
//! value to an f32 or f16 tensor (to nearest, ties to even) and an FP8
//! tensor gets the device's two: to f16, then the cast with the tensor's
//! scale (saturating, NaN to the NaN code); a value past f16's range that
//! the tensor's positive scale can hold is rounded to the nearest code
//! directly (`Fp8Format::encode_host`). The counts of NaNs and of
//! finite values that overflowed (to infinity in f16, to the largest code
//! in FP8) come back with the bytes, for a warning: such values are data a
//! checkpoint may really hold, not a reason to refuse it.

use super::{ElementType, Entry};
use crate::graph::DType;
use crate::numerics::Fp8Format;
use half::{bf16, f16};
use rayon::prelude::*;

/// Converted values and what the conversion met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Converted {
    /// The device bytes: row-major, little-endian f32 or f16, or FP8 codes.
    pub bytes: Vec<u8>,
    /// Elements that were NaN in the file.
    pub nans: usize,
    /// Finite elements too large for the tensor's dtype (with its scale).
    pub overflows: usize,
}

/// Elements converted by one rayon task.
const CHUNK: usize = 1 << 14;

/// The device bytes of `entry` (read from `file`, the whole file's bytes)
/// as a tensor of `dtype` with `scale`; `None` when the entry's element
/// type is unsupported or its bytes are not in `file`.
pub(crate) fn device_bytes(
    entry: &Entry,
    file: &[u8],
    dtype: DType,
    scale: i8,
) -> Option<Converted> {
    let width = entry.dtype.size_bytes();
    if width == 0 {
        return None;
    }
    let data = file.get(entry.bytes.clone())?;
    if data.len() != entry.element_count().checked_mul(width)? {
        return None;
    }
    let out_width = dtype.size_bytes();
    let mut bytes = vec![0u8; data.len() / width * out_width];
    let (nans, overflows) = bytes
        .par_chunks_mut(CHUNK * out_width)
        .zip(data.par_chunks(CHUNK * width))
        .map(|(out, input)| convert_chunk(&entry.dtype, input, dtype, scale, out))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    Some(Converted {
        bytes,
        nans,
        overflows,
    })
}

fn convert_chunk(
    from: &ElementType,
    input: &[u8],
    dtype: DType,
    scale: i8,
    out: &mut [u8],
) -> (usize, usize) {
    let (mut nans, mut overflows) = (0, 0);
    let width = from.size_bytes();
    let fp8 = Fp8Format::from_dtype(dtype);
    for (i, raw) in input.chunks_exact(width).enumerate() {
        let value = widen(from, raw);
        if value.is_nan() {
            nans += 1;
        }
        match (dtype, fp8) {
            (DType::F32, _) => {
                let v = value as f32;
                overflows += usize::from(value.is_finite() && v.is_infinite());
                out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
            }
            (_, Some(format)) => {
                let limit = f64::from(format.max_finite()) * f64::from(scale).exp2();
                overflows += usize::from(value.is_finite() && value.abs() > limit);
                out[i] = format.encode_host(value, scale);
            }
            _ => {
                let v = crate::numerics::f16_from_f64(value);
                overflows += usize::from(value.is_finite() && v.is_infinite());
                out[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    (nans, overflows)
}

/// One element widened to f64, exactly.
fn widen(from: &ElementType, raw: &[u8]) -> f64 {
    match from {
        ElementType::F64 => f64::from_le_bytes(raw.try_into().unwrap_or([0; 8])),
        ElementType::F32 => f64::from(f32::from_le_bytes(raw.try_into().unwrap_or([0; 4]))),
        ElementType::F16 => f16::from_le_bytes([raw[0], raw[1]]).to_f64(),
        ElementType::BF16 => bf16::from_le_bytes([raw[0], raw[1]]).to_f64(),
        ElementType::Unsupported(_) => f64::NAN,
    }
}
