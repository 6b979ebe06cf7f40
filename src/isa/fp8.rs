//! The two FP8 ("quarter") formats of the IPU21 model, and `erf`, as the
//! simulator's instructions compute them. The host side (reference, data,
//! readback) has its own implementation in `numerics`, kept apart on
//! purpose so a rounding bug cannot hide in both; `numerics`' tests hold
//! the two to the same bits.
//!
//! Both formats have no infinities and use the negative-zero pattern 0x80 as
//! their only NaN. Conversions to FP8 round to nearest even and saturate to
//! the largest finite value; a value that rounds to zero becomes +0 (0x00)
//! whatever its sign, because 0x80 is NaN.
//!
//! Scaling follows `target-ipu21.md`: a tensor's value is its stored FP8
//! value × 2^scale, so casting to FP8 stores value × 2^-scale and casting
//! back multiplies by 2^scale.

use half::f16;
use std::sync::OnceLock;

/// FP8 formats: sign, exponent bits, mantissa bits and exponent bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// 1 sign, 4 exponent, 3 mantissa bits, bias 8: 2^-10 ..= 240.
    F143,
    /// 1 sign, 5 exponent, 2 mantissa bits, bias 16: 2^-17 ..= 57344.
    F152,
}

/// The byte that is NaN in both formats.
pub(super) const NAN: u8 = 0x80;

impl Fp8Format {
    pub(super) const fn mantissa_bits(self) -> i32 {
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

    /// The format selected by a `$fp8cfg` format bit.
    pub(crate) const fn from_bit(bit: u32) -> Fp8Format {
        if bit & 1 == 0 {
            Fp8Format::F143
        } else {
            Fp8Format::F152
        }
    }

    pub(crate) fn max_finite(self) -> f64 {
        self.to_f64(0x7F)
    }

    /// The stored value of a code (without any tensor scale); NaN for 0x80.
    pub fn to_f64(self, code: u8) -> f64 {
        if code == NAN {
            return f64::NAN;
        }
        let mbits = self.mantissa_bits();
        let magnitude = i32::from(code & 0x7F);
        let exponent = magnitude >> mbits;
        let mantissa = magnitude & ((1 << mbits) - 1);
        let value = if exponent == 0 {
            f64::from(mantissa) * pow2(1 - self.bias() - mbits)
        } else {
            f64::from(mantissa + (1 << mbits)) * pow2(exponent - self.bias() - mbits)
        };
        if code & 0x80 != 0 {
            -value
        } else {
            value
        }
    }

    /// The nearest code to `x` (ties to even), saturating; NaN gives 0x80.
    pub fn from_f64(self, x: f64) -> u8 {
        if x.is_nan() {
            return NAN;
        }
        let sign = if x < 0.0 { 0x80 } else { 0 };
        let a = x.abs();
        if a >= self.max_finite() {
            return sign | 0x7F;
        }
        let mbits = self.mantissa_bits();
        let min_normal_exponent = 1 - self.bias();
        // floor(log2(a)) from the bits, so powers of two are exact.
        let exponent = if a == 0.0 {
            min_normal_exponent
        } else {
            (((a.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(min_normal_exponent)
        };
        let quanta = (a / pow2(exponent - mbits)).round_ties_even() as i32;
        // Subnormals land on codes 0..2^m directly; for normals the
        // implicit bit of `quanta` carries the exponent field up by one,
        // which also handles rounding up into the next binade.
        let magnitude = ((exponent - min_normal_exponent) << mbits) + quanta;
        match magnitude {
            0 => 0,
            m if m > 0x7F => sign | 0x7F,
            m => sign | m as u8,
        }
    }

    /// Casts an f16 tensor value to a stored code with the tensor's scale.
    pub fn from_f16(self, value: f16, scale: i32) -> u8 {
        self.from_f64(f64::from(value.to_f32()) * pow2(-scale))
    }

    /// Casts a stored code back to an f16 value with the tensor's scale,
    /// rounding to nearest even (values beyond f16 become infinities).
    pub fn to_f16(self, code: u8, scale: i32) -> f16 {
        crate::numerics::f16_from_f64(self.to_f64(code) * pow2(scale))
    }
}

/// One table per format and scale (a signed byte of `$fp8cfg`), built by
/// `build` on first use and shared by every tile afterwards.
type PerScale<T> = [[OnceLock<T>; 256]; 2];

fn per_scale<T>(
    tables: &'static PerScale<T>,
    format: Fp8Format,
    scale: i8,
    build: impl FnOnce() -> T,
) -> &'static T {
    tables[format as usize][usize::from(scale as u8)].get_or_init(build)
}

/// The f16 → code conversion of every f16 for one format and scale, as
/// `from_f16` computes it (64 KiB). The executor's `f16v4tof8` converts
/// millions of values per run with a handful of scales, and a lookup is
/// several times cheaper than the arithmetic.
pub(crate) fn encode_table(format: Fp8Format, scale: i8) -> &'static [u8; 1 << 16] {
    static TABLES: PerScale<Box<[u8; 1 << 16]>> = [const { [const { OnceLock::new() }; 256] }; 2];
    per_scale(&TABLES, format, scale, || {
        let mut table = Box::new([0; 1 << 16]);
        for (bits, code) in (0..=u16::MAX).zip(table.iter_mut()) {
            *code = format.from_f16(f16::from_bits(bits), i32::from(scale));
        }
        table
    })
    .as_ref()
}

/// The code → f16 conversion of every code for one format and scale, as
/// `to_f16` computes it.
pub(crate) fn decode_table(format: Fp8Format, scale: i8) -> &'static [u16; 256] {
    static TABLES: PerScale<[u16; 256]> = [const { [const { OnceLock::new() }; 256] }; 2];
    per_scale(&TABLES, format, scale, || {
        std::array::from_fn(|code| format.to_f16(code as u8, i32::from(scale)).to_bits())
    })
}

/// The value of every code for one format and scale, as f32 (NaN for
/// 0x80): what the AMP multiplies, for its FP8 inputs and weights.
pub(crate) fn value_table(format: Fp8Format, scale: i8) -> &'static [f32; 256] {
    static TABLES: PerScale<[f32; 256]> = [const { [const { OnceLock::new() }; 256] }; 2];
    per_scale(&TABLES, format, scale, || {
        std::array::from_fn(|code| (format.to_f64(code as u8) * pow2(i32::from(scale))) as f32)
    })
}

/// 2^e for any exponent an i8 scale and the formats can produce.
pub(crate) fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// The error function, accurate to a few units in the last place of f64,
/// so `f32erf` (this rounded to f32) is correctly rounded except in rare
/// near-tie cases. The host reference has its own (`numerics::erf`).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let magnitude = if a < 3.0 {
        // erf(a) = 2/sqrt(pi) e^-a² Σ 2^n a^(2n+1) / (1·3·…·(2n+1)): all
        // terms positive, so no cancellation.
        let a2 = a * a;
        let mut term = a;
        let mut sum = a;
        let mut n = 0.0;
        while term > sum * 1e-17 {
            n += 1.0;
            term *= 2.0 * a2 / (2.0 * n + 1.0);
            sum += term;
        }
        std::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * sum
    } else if a < 6.0 {
        // erfc(a) = e^-a² / sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + …)))),
        // evaluated bottom-up; 80 levels converge far below f64 precision
        // for a >= 3.
        let mut t = a;
        for k in (1..=80).rev() {
            t = a + (f64::from(k) / 2.0) / t;
        }
        1.0 - (-a * a).exp() / (std::f64::consts::PI.sqrt() * t)
    } else {
        1.0
    };
    magnitude.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables are the conversions they cache, for both formats and
    /// scales of both signs (a table filed under the wrong format or
    /// scale would differ somewhere).
    #[test]
    fn the_conversion_tables_are_the_conversions() {
        for format in [Fp8Format::F143, Fp8Format::F152] {
            for scale in [-128i8, -7, 0, 3, 127] {
                let encode = encode_table(format, scale);
                for bits in 0..=u16::MAX {
                    let want = format.from_f16(f16::from_bits(bits), i32::from(scale));
                    assert_eq!(
                        encode[usize::from(bits)],
                        want,
                        "{format:?} {scale} {bits:#x}"
                    );
                }
                let values = value_table(format, scale);
                for code in 0..=u8::MAX {
                    let want = (format.to_f64(code) * pow2(i32::from(scale))) as f32;
                    assert_eq!(
                        values[usize::from(code)].to_bits(),
                        want.to_bits(),
                        "{format:?} {scale} {code:#x}"
                    );
                }
                let decode = decode_table(format, scale);
                for code in 0..=u8::MAX {
                    let want = format.to_f16(code, i32::from(scale)).to_bits();
                    assert_eq!(
                        decode[usize::from(code)],
                        want,
                        "{format:?} {scale} {code:#x}"
                    );
                }
            }
        }
    }
}
