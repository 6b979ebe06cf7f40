//! The error function in f64, which Rust's standard library lacks and the
//! exact GELU needs.
//!
//! Two expansions without cancellation cover the line: below |x| = 3 the
//! series `erf(x) = 2/√π · e^(-x²) · Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1))`, whose
//! terms are all positive; from 3 to 6 the continued fraction of
//! `erfc(x) = e^(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`,
//! evaluated backwards from a fixed depth; beyond 6, `erfc` is below 2^-55
//! and `erf` rounds to ±1. The absolute error is about 1e-15.

const FRAC_2_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// Depth of the continued fraction: enough for 1e-16 at x = 3, where it
/// converges slowest.
const CONTINUED_FRACTION_TERMS: u32 = 120;

/// `erf(x)`; odd, NaN for NaN, ±1 for ±infinity.
pub(crate) fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let a = x.abs();
    let magnitude = if a < 3.0 {
        erf_series(a)
    } else if a < 6.0 {
        1.0 - erfc_continued_fraction(a)
    } else {
        1.0
    };
    magnitude.copysign(x)
}

fn erf_series(a: f64) -> f64 {
    let two_a2 = 2.0 * a * a;
    let mut term = a;
    let mut sum = a;
    let mut n = 0u32;
    while term > sum * 1e-17 {
        n += 1;
        term *= two_a2 / f64::from(2 * n + 1);
        sum += term;
    }
    FRAC_2_SQRT_PI * (-a * a).exp() * sum
}

fn erfc_continued_fraction(a: f64) -> f64 {
    let mut tail = a;
    for n in (1..=CONTINUED_FRACTION_TERMS).rev() {
        tail = a + f64::from(n) / 2.0 / tail;
    }
    (-a * a).exp() / (std::f64::consts::PI.sqrt() * tail)
}
