//! The FP8 ("quarter") formats F143 and F152.
//!
//! ipub's model of them, which `book/src/numerics.md` states for users:
//! a code is `s eeee mmm` (F143, bias 8) or `s eeeee mm` (F152, bias 16);
//! exponent zero means subnormal (`m × 2^(1 - bias - mantissa_bits)`), every
//! other exponent, including all ones, is finite, so there are no
//! infinities; the negative-zero pattern `0x80` is the only NaN. A tensor
//! carries an integer scale and the real value of a code is its stored value
//! × 2^scale. Encoding rounds to nearest with ties to even and saturates to
//! ± the largest finite value.

use half::f16;
use std::sync::{LazyLock, OnceLock};

/// One of the two FP8 formats of the IPU21.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// 1 sign, 4 exponent, 3 mantissa bits, bias 8: finite range ±240,
    /// smallest subnormal 2^-10.
    F143,
    /// 1 sign, 5 exponent, 2 mantissa bits, bias 16: finite range ±57344,
    /// smallest subnormal 2^-17.
    F152,
}

/// The code ipub uses for NaN in both formats (the negative-zero pattern).
pub(super) const NAN_CODE: u8 = 0x80;

/// The largest positive code (all exponent and mantissa bits set).
const MAX_POSITIVE_CODE: u8 = 0x7F;

static F143_TABLE: LazyLock<[f32; 256]> = LazyLock::new(|| build_table(Fp8Format::F143));
static F152_TABLE: LazyLock<[f32; 256]> = LazyLock::new(|| build_table(Fp8Format::F152));

/// Builds the decode table from the field definitions, so the table and the
/// format description cannot drift apart.
fn build_table(format: Fp8Format) -> [f32; 256] {
    let mut table = [0.0f32; 256];
    let mantissa_bits = format.mantissa_bits();
    let mantissa_mask = (1u32 << mantissa_bits) - 1;
    for (code, slot) in table.iter_mut().enumerate() {
        let code = code as u32;
        if code == u32::from(NAN_CODE) {
            *slot = f32::NAN;
            continue;
        }
        let negative = code & 0x80 != 0;
        let exponent = ((code & 0x7F) >> mantissa_bits) as i32;
        let mantissa = code & mantissa_mask;
        let bias = format.bias();
        // Every f8 value is an integer times a power of two that f64 holds
        // exactly, and the narrowing to f32 is exact as well.
        let magnitude = if exponent == 0 {
            f64::from(mantissa) * 2f64.powi(1 - bias - mantissa_bits as i32)
        } else {
            f64::from(mantissa | (1 << mantissa_bits))
                * 2f64.powi(exponent - bias - mantissa_bits as i32)
        };
        *slot = if negative { -magnitude } else { magnitude } as f32;
    }
    table
}

/// f16 → code tables, one per format and scale, built on first use from
/// [`Fp8Format::encode_f16_arithmetic`]: a cast is then one f16 conversion and
/// one load, which matters for the generator and the reference (millions of
/// casts per run).
type EncodeTable = [u8; 1 << 16];
static ENCODE_TABLES: [[OnceLock<Box<EncodeTable>>; 256]; 2] = [
    [const { OnceLock::new() }; 256],
    [const { OnceLock::new() }; 256],
];

/// `2^exponent` as an f32, exact for every exponent an `i8` scale produces
/// (the smallest, 2^-128, is an f32 subnormal). Built from bits because
/// this sits on the decode path.
fn pow2(exponent: i32) -> f32 {
    let exponent = exponent.clamp(-149, 127);
    if exponent >= -126 {
        f32::from_bits(((exponent + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (exponent + 149))
    }
}

/// `2^exponent` as an f64 for `-1022 <= exponent <= 1023`.
fn pow2_f64(exponent: i32) -> f64 {
    f64::from_bits(((exponent.clamp(-1022, 1023) + 1023) as u64) << 52)
}

impl Fp8Format {
    pub(crate) fn from_dtype(dtype: crate::graph::DType) -> Option<Fp8Format> {
        match dtype {
            crate::graph::DType::F143 => Some(Fp8Format::F143),
            crate::graph::DType::F152 => Some(Fp8Format::F152),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(super) const fn exponent_bits(self) -> u32 {
        match self {
            Fp8Format::F143 => 4,
            Fp8Format::F152 => 5,
        }
    }

    pub(super) const fn mantissa_bits(self) -> u32 {
        match self {
            Fp8Format::F143 => 3,
            Fp8Format::F152 => 2,
        }
    }

    pub(super) const fn bias(self) -> i32 {
        match self {
            Fp8Format::F143 => 8,
            Fp8Format::F152 => 16,
        }
    }

    /// The largest finite stored value (240 or 57344).
    pub(crate) fn max_finite(self) -> f32 {
        self.decode_table()[usize::from(MAX_POSITIVE_CODE)]
    }

    #[cfg(test)]
    /// The smallest positive stored value (2^-10 or 2^-17).
    pub(super) fn min_subnormal(self) -> f32 {
        self.decode_table()[1]
    }

    /// Stored values (scale 0) of all 256 codes; `0x80` decodes to NaN.
    pub(super) fn decode_table(self) -> &'static [f32; 256] {
        match self {
            Fp8Format::F143 => &F143_TABLE,
            Fp8Format::F152 => &F152_TABLE,
        }
    }

    /// The real value of `code` in a tensor with `scale`. Exact unless the
    /// scale takes the value outside f32's range (only possible for scales
    /// near the ends of the `i8` range).
    pub(super) fn to_f32(self, code: u8, scale: i8) -> f32 {
        self.decode_table()[usize::from(code)] * pow2(i32::from(scale))
    }

    #[cfg(test)]
    /// The real value of `code` as f16: exact whenever f16 can represent it,
    /// otherwise rounded as IEEE conversion rounds (to infinity on overflow).
    pub fn to_f16(self, code: u8, scale: i8) -> f16 {
        f16::from_f32(self.to_f32(code, scale))
    }

    /// The device's f16 → FP8 cast: the code nearest to `x × 2^-scale`, ties
    /// to the even code, saturating to ± the largest finite value (infinities
    /// included); NaN becomes [`NAN_CODE`]; a negative value that rounds to
    /// zero gives `+0` because `-0`'s pattern is NaN.
    pub(crate) fn encode_f16(self, x: f16, scale: i8) -> u8 {
        self.encode_table(scale)[usize::from(x.to_bits())]
    }

    /// The table of [`Fp8Format::encode_f16`] for `scale`, indexed by f16 bits.
    pub(super) fn encode_table(self, scale: i8) -> &'static EncodeTable {
        let format_index = match self {
            Fp8Format::F143 => 0,
            Fp8Format::F152 => 1,
        };
        ENCODE_TABLES[format_index][usize::from(scale as u8)].get_or_init(|| {
            let mut table = Box::new([0u8; 1 << 16]);
            for (bits, code) in table.iter_mut().enumerate() {
                *code = self.encode_f16_arithmetic(f16::from_bits(bits as u16), scale);
            }
            table
        })
    }

    /// The definition behind the encode tables.
    fn encode_f16_arithmetic(self, x: f16, scale: i8) -> u8 {
        let value = x.to_f64();
        if value.is_nan() {
            return NAN_CODE;
        }
        let sign = if value.is_sign_negative() { 0x80 } else { 0 };
        // Scaling an f16 by a power of two is exact in f64.
        let magnitude = value.abs() * pow2_f64(-i32::from(scale));
        let code = self.encode_magnitude(magnitude);
        if code == 0 {
            0
        } else {
            sign | code
        }
    }

    /// The device's f32 → FP8 cast, which goes through f16 as the hardware
    /// does (no direct conversion exists): f32 → f16 rounds to nearest even,
    /// then [`Fp8Format::encode_f16`].
    pub(super) fn encode_f32(self, x: f32, scale: i8) -> u8 {
        self.encode_f16(f16::from_f32(x), scale)
    }

    /// The host's conversion of a real value into a tensor with `scale`
    /// (generated values, tensor files, run-time inputs): through f16 as the
    /// device's cast goes ([`Fp8Format::encode_f32`]), except that a finite
    /// value past f16's range, which a tensor with a positive scale can
    /// hold, is rounded to the nearest code directly rather than made
    /// infinite and saturated.
    pub(crate) fn encode_host(self, x: f64, scale: i8) -> u8 {
        let half = super::f16_from_f64(x);
        if half.is_finite() || !x.is_finite() {
            return self.encode_f16(half, scale);
        }
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        sign | self.encode_magnitude(x.abs() * pow2_f64(-i32::from(scale)))
    }

    /// Rounds a real value through the device cast and back: the value an
    /// FP8 tensor with `scale` holds after casting `x` into it.
    pub(super) fn quantize(self, x: f32, scale: i8) -> f32 {
        self.to_f32(self.encode_f32(x, scale), scale)
    }

    /// Whether a tensor with `scale` holds `x` exactly: some code's real
    /// value is `x` (NaN included; -0 and the infinities are not held, a
    /// cast makes them +0 and the largest codes). Rounding such a value
    /// again through f16 could change it: a held value from 65520 up
    /// (scale > 0) is infinite in f16, and the cast saturates it.
    pub(crate) fn holds(self, x: f32, scale: i8) -> bool {
        if x.is_nan() {
            return true;
        }
        if !x.is_finite() || (x == 0.0 && x.is_sign_negative()) {
            return false;
        }
        let magnitude = f64::from(x.abs()) * pow2_f64(-i32::from(scale));
        self.to_f32(self.encode_magnitude(magnitude), scale) == x.abs()
    }

    /// Rounds a non-negative (or infinite) stored magnitude to the nearest
    /// positive code, ties to even, saturating at the largest code.
    fn encode_magnitude(self, magnitude: f64) -> u8 {
        let mantissa_bits = self.mantissa_bits() as i32;
        let min_normal_exponent = 1 - self.bias();
        if magnitude >= f64::from(self.max_finite()) {
            return MAX_POSITIVE_CODE;
        }
        // The binade of the value (its unbiased exponent), clamped to the
        // subnormal binade, fixes the spacing of representable values.
        let exponent = if magnitude == 0.0 {
            min_normal_exponent
        } else {
            f64_exponent(magnitude).max(min_normal_exponent)
        };
        let quantum = pow2_f64(exponent - mantissa_bits);
        // Exact: the quotient by a power of two only moves the exponent.
        let steps = round_half_even(magnitude / quantum);
        // For a normal value `steps` includes the implicit leading bit
        // (2^mantissa_bits), which adds the missing one to `field_minus_one`;
        // for a subnormal both parts are zero-based already. When rounding
        // reaches 2^(mantissa_bits + 1) steps the addition carries into the
        // exponent field, which is exactly the next binade's first code.
        let field_minus_one = (exponent - min_normal_exponent) as u64;
        let code = (field_minus_one << mantissa_bits) + steps as u64;
        code.min(u64::from(MAX_POSITIVE_CODE)) as u8
    }
}

/// The unbiased binary exponent of a positive normal f64 (floor of log2).
fn f64_exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023
}

/// Rounds to the nearest integer with ties to even.
fn round_half_even(x: f64) -> f64 {
    let floor = x.floor();
    let fraction = x - floor;
    if fraction > 0.5 || (fraction == 0.5 && floor % 2.0 != 0.0) {
        floor + 1.0
    } else {
        floor
    }
}
