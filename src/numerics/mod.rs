//! Number formats of the IPU21 as ipub models them: f16 (IEEE binary16,
//! through the `half` crate) and the two FP8 "quarter" formats F143 and F152
//! with their tensor-wide power-of-two scale.
//!
//! Everything here is pure arithmetic on bit patterns: the host reference,
//! the seeded generator, tensor files and the runtime's readback all go
//! through these functions so that the host side has one definition of
//! each rounding. The exact rules are in `book/src/numerics.md`.
//!
//! The simulator does not use them: its instructions convert with their
//! own implementation (`isa::fp8`, and `isa::fp8::erf` for `f32erf`),
//! written apart on purpose, since the reference checks what the simulator
//! computed and a bug shared by both would pass. A test holds the two to
//! the same bits on every f16 value and every code.

mod erf;
mod fp8;

#[cfg(test)]
mod tests;

pub(crate) use erf::erf;
pub use fp8::Fp8Format;

use crate::graph::DType;
use half::f16;

/// Rounds an f32 to the nearest f16 (ties to even, overflow to infinity, as
/// IEEE conversion does) and returns it widened back to f32, which is exact.
pub(crate) fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Rounds an f64 to the nearest f16, once (ties to even, overflow to
/// infinity). `half`'s own conversion goes through f32 where the CPU
/// converts in hardware, which rounds twice: 1 + 2^-11 + 2^-40 would become
/// 1 + 2^-11 in f32, a tie, and then 1. Rounding to f32 "to odd" first
/// keeps one rounding: an inexact value becomes the f32 toward zero with
/// its last bit set, which f32's 13 bits beyond f16's keep as a sticky bit
/// below any f16 tie.
pub(crate) fn f16_from_f64(x: f64) -> f16 {
    let near = x as f32;
    if !near.is_finite() || f64::from(near) == x {
        return f16::from_f32(near);
    }
    let mut bits = near.to_bits();
    if f64::from(near).abs() > x.abs() {
        bits -= 1;
    }
    f16::from_f32(f32::from_bits(bits | 1))
}

/// Rounds a real value to what a tensor of `dtype` with `scale` can hold and
/// returns the held real value: identity for f32, f16 rounding for f16, and
/// for FP8 the device's cast path f32 → f16 → FP8 (both steps round to
/// nearest even; FP8 saturates, NaN stays NaN).
pub(crate) fn round_to_dtype(x: f32, dtype: DType, scale: i8) -> f32 {
    match dtype {
        DType::F32 => x,
        DType::F16 => round_f16(x),
        DType::F143 => Fp8Format::F143.quantize(x, scale),
        DType::F152 => Fp8Format::F152.quantize(x, scale),
    }
}

/// What a tensor of `dtype` with `scale` holds of a value the host
/// converts into it ([`encode`]): as [`round_to_dtype`], except that an
/// FP8 tensor with a positive scale keeps values past f16's range to the
/// nearest code (`Fp8Format::encode_host`).
pub(crate) fn host_round(x: f32, dtype: DType, scale: i8) -> f32 {
    match Fp8Format::from_dtype(dtype) {
        Some(format) => format.to_f32(format.encode_host(f64::from(x), scale), scale),
        None => round_to_dtype(x, dtype, scale),
    }
}

/// Stores a value in a tensor of `dtype` with `scale`, as writing it to the
/// device does: a value the tensor holds exactly (decoded device bytes, or
/// values already rounded) is kept, anything else rounded as
/// [`round_to_dtype`] rounds. Rounding a held FP8 value again would not
/// always keep it, since the cast goes through f16.
pub(crate) fn store_in_dtype(x: f32, dtype: DType, scale: i8) -> f32 {
    match Fp8Format::from_dtype(dtype) {
        Some(format) if format.holds(x, scale) => x,
        _ => host_round(x, dtype, scale),
    }
}

/// Encodes real values as the device stores a tensor of `dtype` with
/// `scale`: little-endian f32 (4 bytes) or f16 (2 bytes) per element, or one
/// FP8 code per element. Values are rounded as [`host_round`] rounds.
pub(crate) fn encode(values: &[f32], dtype: DType, scale: i8) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * dtype.size_bytes());
    match dtype {
        DType::F32 => values
            .iter()
            .for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
        DType::F16 => values
            .iter()
            .for_each(|&v| bytes.extend_from_slice(&f16::from_f32(v).to_le_bytes())),
        DType::F143 => bytes.extend(
            values
                .iter()
                .map(|&v| Fp8Format::F143.encode_host(f64::from(v), scale)),
        ),
        DType::F152 => bytes.extend(
            values
                .iter()
                .map(|&v| Fp8Format::F152.encode_host(f64::from(v), scale)),
        ),
    }
    bytes
}

/// Decodes device bytes of a tensor of `dtype` with `scale` into real values
/// (exact for every format). A trailing partial element is ignored, since a
/// device buffer is always a whole number of elements.
pub(crate) fn decode(bytes: &[u8], dtype: DType, scale: i8) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::F143 => bytes
            .iter()
            .map(|&c| Fp8Format::F143.to_f32(c, scale))
            .collect(),
        DType::F152 => bytes
            .iter()
            .map(|&c| Fp8Format::F152.to_f32(c, scale))
            .collect(),
    }
}
