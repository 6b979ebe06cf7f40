//! Comparison of device outputs with the host reference.
//!
//! Two metrics decide a check: the cosine similarity of the two vectors
//! (accumulated in f64) must reach the project's minimum, and no value may
//! differ from its reference by more than the maximum absolute error. A value
//! *mismatches* when `|device - reference|` exceeds that maximum or either
//! side is NaN (the same infinity on both sides agrees; the cosine is
//! undefined when a NaN or an infinity has no equal partner); a failure lists the first mismatches in the shape users know
//! from the hardware stack:
//!
//! ```text
//! numerical comparison failed for 7565/8192 logical shard values (maximum absolute error 1.4360352): [(0, -0.056854248, -0.0032958984, 0.05355835), …]
//! ```
//!
//! Numbers print as Rust prints f32 (the shortest text that reads back to the
//! same value), differences are computed in f32.

use std::fmt::Write as _;

/// How many mismatches a failure message lists.
pub(crate) const LISTED_MISMATCHES: usize = 16;

/// One value that differs by more than the allowed error (or is NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub device: f32,
    pub reference: f32,
    /// `|device - reference|` in f32 (0 when they are equal, infinities
    /// included); NaN when either side is NaN.
    pub difference: f32,
}

/// The outcome of comparing one output.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Values compared (the shorter length if the lengths differ).
    pub count: usize,
    /// Lengths of the device and reference vectors.
    pub device_len: usize,
    pub reference_len: usize,
    /// Cosine similarity over the pairs where both values are finite: 1 when
    /// both vectors are zero there (they agree), 0 when only one is; NaN
    /// (undefined) when a pair holds a NaN or an infinity the other side
    /// does not have.
    pub cosine_similarity: f64,
    /// Largest `|device - reference|` over pairs without NaN (0 if none;
    /// equal infinities differ by 0).
    pub max_abs_error: f32,
    /// Pairs with a NaN on either side.
    pub nan_count: usize,
    /// Pairs with the same infinity on both sides (they agree).
    pub equal_infinities: usize,
    /// All mismatching pairs, and the first [`LISTED_MISMATCHES`] of them.
    pub mismatch_count: usize,
    pub first_mismatches: Vec<Mismatch>,
    /// The thresholds the comparison was made against.
    pub min_cosine_similarity: f64,
    pub max_abs_error_allowed: f64,
}

/// Compares `device` with `reference` against the check's thresholds.
pub fn compare(device: &[f32], reference: &[f32], min_cos: f64, max_abs: f64) -> Comparison {
    let count = device.len().min(reference.len());
    let (mut dot, mut device_norm, mut reference_norm) = (0.0f64, 0.0f64, 0.0f64);
    let mut max_abs_error = 0.0f32;
    let mut nan_count = 0;
    let mut non_finite_disagreements = 0;
    let mut equal_infinities = 0;
    let mut mismatch_count = 0;
    let mut first_mismatches = Vec::new();
    for (index, (&d, &r)) in device.iter().zip(reference).enumerate() {
        let nan = d.is_nan() || r.is_nan();
        // Equal values agree, the same infinity on both sides included
        // (whose difference would be NaN).
        let difference = if d == r { 0.0 } else { (d - r).abs() };
        if nan {
            nan_count += 1;
        } else {
            max_abs_error = max_abs_error.max(difference);
        }
        if d.is_finite() && r.is_finite() {
            let (d, r) = (f64::from(d), f64::from(r));
            dot += d * r;
            device_norm += d * d;
            reference_norm += r * r;
        } else if d != r {
            non_finite_disagreements += 1;
        } else {
            equal_infinities += 1;
        }
        if nan || f64::from(difference) > max_abs {
            mismatch_count += 1;
            if first_mismatches.len() < LISTED_MISMATCHES {
                first_mismatches.push(Mismatch {
                    index,
                    device: d,
                    reference: r,
                    difference,
                });
            }
        }
    }
    Comparison {
        count,
        device_len: device.len(),
        reference_len: reference.len(),
        // Finite values cannot be compared by angle with an infinity or a
        // NaN: the similarity is undefined then, never 1.
        cosine_similarity: if non_finite_disagreements > 0 {
            f64::NAN
        } else {
            cosine(dot, device_norm, reference_norm)
        },
        max_abs_error,
        nan_count,
        equal_infinities,
        mismatch_count,
        first_mismatches,
        min_cosine_similarity: min_cos,
        max_abs_error_allowed: max_abs,
    }
}

/// A cosine similarity as the check prints it: nine decimals, or
/// `undefined` when non-finite values made it so.
pub(crate) fn format_cosine(cosine: f64) -> String {
    if cosine.is_nan() {
        "undefined".to_string()
    } else {
        format!("{cosine:.9}")
    }
}

fn cosine(dot: f64, a: f64, b: f64) -> f64 {
    match (a == 0.0, b == 0.0) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        // Rounding can push |cos| a hair past 1; clamp so thresholds of 1.0
        // behave.
        // Squared norms of f32 data stay far inside f64, so the product
        // cannot overflow, and one square root rounds once.
        (false, false) => (dot / (a * b).sqrt()).clamp(-1.0, 1.0),
    }
}

impl Comparison {
    /// `", N values NaN"` when pairs hold a NaN, which the maximum
    /// absolute error leaves out; empty otherwise.
    pub(crate) fn nan_note(&self) -> String {
        match self.nan_count {
            0 => String::new(),
            1 => ", 1 value NaN".to_string(),
            n => format!(", {n} values NaN"),
        }
    }

    #[cfg(test)]
    pub(crate) fn passed(&self) -> bool {
        self.count > 0
            && self.device_len == self.reference_len
            && self.mismatch_count == 0
            && self.cosine_similarity >= self.min_cosine_similarity
    }

    /// Why the comparison failed, or `None` if it passed; mismatches are
    /// listed by flat index (see [`Comparison::failure_report`]).
    pub fn failure_message(&self) -> Option<String> {
        self.failure_report(None)
    }

    /// Why the comparison failed, in the hardware stack's words, or `None`
    /// if it passed. Value mismatches take precedence over a low cosine
    /// similarity because they say where to look: they are listed as a
    /// table with named columns, each index as coordinates of `shape` when
    /// it is given (a flat index otherwise).
    pub(crate) fn failure_report(&self, shape: Option<&[usize]>) -> Option<String> {
        if self.device_len != self.reference_len {
            return Some(format!(
                "numerical comparison failed: the device produced {} values and the reference {}",
                self.device_len, self.reference_len
            ));
        }
        if self.count == 0 {
            return Some("numerical comparison failed: there are no values to compare".into());
        }
        if self.mismatch_count > 0 {
            let listed = self.first_mismatches.len();
            let mut message = format!(
                "numerical comparison failed for {}/{} logical shard values (maximum absolute error {}{}); the first {listed}:",
                self.mismatch_count,
                self.count,
                self.max_abs_error,
                self.nan_note()
            );
            let mut rows = vec![[
                "index".to_string(),
                "device".to_string(),
                "reference".to_string(),
                "difference".to_string(),
                "threshold".to_string(),
            ]];
            for m in &self.first_mismatches {
                rows.push([
                    coordinates(m.index, shape),
                    m.device.to_string(),
                    m.reference.to_string(),
                    m.difference.to_string(),
                    self.max_abs_error_allowed.to_string(),
                ]);
            }
            let widths: Vec<usize> = (0..5)
                .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
                .collect();
            for row in &rows {
                message.push_str("\n   ");
                for (cell, width) in row.iter().zip(&widths) {
                    let _ = write!(message, " {cell:>width$}");
                }
            }
            return Some(message);
        }
        // An undefined (NaN) similarity is below every minimum.
        if self.cosine_similarity.is_nan() || self.cosine_similarity < self.min_cosine_similarity {
            return Some(format!(
                "numerical comparison failed: cosine similarity {} is below the minimum {} over {} values (maximum absolute error {})",
                format_cosine(self.cosine_similarity),
                self.min_cosine_similarity,
                self.count,
                self.max_abs_error
            ));
        }
        None
    }
}

/// Flat index `index` as coordinates of `shape` (`[1, 0, 3]`), or the
/// flat index itself without a shape.
fn coordinates(mut index: usize, shape: Option<&[usize]>) -> String {
    let Some(shape) = shape.filter(|s| !s.is_empty() && s.iter().all(|&d| d > 0)) else {
        return index.to_string();
    };
    let mut coordinates = vec![0; shape.len()];
    for (c, &d) in coordinates.iter_mut().zip(shape).rev() {
        *c = index % d;
        index /= d;
    }
    let shown: Vec<String> = coordinates.iter().map(usize::to_string).collect();
    format!("[{}]", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn failure_message_has_the_seed_shape() {
        // The first pairs of seed 004, then values within the allowed error.
        let pairs = [
            (-0.056854248f32, -0.0032958984f32),
            (0.74902344, 0.3996582),
            (0.030899048, -0.31469727),
            (0.5, 0.5),
            (1.0, 1.01),
        ];
        let (device, reference): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
        let comparison = compare(&device, &reference, 0.99, 0.05);
        assert!(!comparison.passed());
        expect![[r#"
            numerical comparison failed for 3/5 logical shard values (maximum absolute error 0.34936523); the first 3:
                index       device     reference difference threshold
                    0 -0.056854248 -0.0032958984 0.05355835      0.05
                    1   0.74902344     0.3996582 0.34936523      0.05
                    2  0.030899048   -0.31469727  0.3455963      0.05"#]]
            .assert_eq(&comparison.failure_message().unwrap_or_default());
    }

    #[test]
    fn mismatches_are_located_by_coordinates() {
        let device = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.5];
        let reference = [0.0f32, 1.0, 2.25, 3.0, 4.0, 5.0];
        let comparison = compare(&device, &reference, 0.0, 0.125);
        expect![[r#"
            numerical comparison failed for 2/6 logical shard values (maximum absolute error 0.5); the first 2:
                 index device reference difference threshold
                [0, 2]      2      2.25       0.25     0.125
                [1, 2]    5.5         5        0.5     0.125"#]].assert_eq(&comparison.failure_report(Some(&[2, 3])).unwrap_or_default());
    }

    #[test]
    fn lists_only_the_first_sixteen_mismatches() {
        let device: Vec<f32> = (0..40).map(|i| i as f32).collect();
        let reference = vec![0.0f32; 40];
        let comparison = compare(&device, &reference, 0.0, 0.5);
        assert_eq!(comparison.mismatch_count, 39);
        assert_eq!(comparison.first_mismatches.len(), LISTED_MISMATCHES);
        assert_eq!(comparison.first_mismatches[0].index, 1);
        assert_eq!(comparison.first_mismatches[15].index, 16);
        assert_eq!(comparison.max_abs_error, 39.0);
    }

    #[test]
    fn cosine_similarity_and_zero_vectors() {
        let c = |d: &[f32], r: &[f32]| compare(d, r, 0.0, f64::INFINITY).cosine_similarity;
        assert_eq!(c(&[1.0, 0.0], &[2.0, 0.0]), 1.0);
        assert_eq!(c(&[1.0, 0.0], &[0.0, 3.0]), 0.0);
        assert_eq!(c(&[1.0, 2.0], &[-1.0, -2.0]), -1.0);
        assert_eq!(c(&[0.0, 0.0], &[0.0, 0.0]), 1.0);
        assert_eq!(c(&[0.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(c(&[], &[]), 1.0);
        let close = c(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.1]);
        expect!["0.9998778"].assert_eq(&format!("{close:.7}"));
    }

    #[test]
    fn nan_is_a_mismatch_and_leaves_the_cosine_undefined() {
        let comparison = compare(&[1.0, f32::NAN, 3.0], &[1.0, 2.0, f32::NAN], 0.9, 1.0);
        assert_eq!(comparison.nan_count, 2);
        assert_eq!(comparison.mismatch_count, 2);
        assert_eq!(comparison.max_abs_error, 0.0);
        assert!(comparison.cosine_similarity.is_nan());
        assert!(!comparison.passed());
        let both_nan = compare(&[f32::NAN], &[f32::NAN], -1.0, f64::INFINITY);
        assert_eq!(both_nan.mismatch_count, 1);
        assert!(!both_nan.passed());
        expect![[r#"
            numerical comparison failed for 2/3 logical shard values (maximum absolute error 0, 2 values NaN); the first 2:
                index device reference difference threshold
                    1    NaN         2        NaN         1
                    2      3       NaN        NaN         1"#]]
            .assert_eq(&comparison.failure_message().unwrap_or_default());
    }

    #[test]
    fn equal_infinities_agree_and_other_infinities_mismatch() {
        let inf = f32::INFINITY;
        let agree = compare(&[inf, -inf, 1.0], &[inf, -inf, 1.0], 0.99, 0.1);
        assert!(agree.passed(), "{agree:?}");
        assert_eq!(agree.equal_infinities, 2);
        assert_eq!(agree.max_abs_error, 0.0);
        assert_eq!(agree.cosine_similarity, 1.0);

        // The device overflowed where the reference did not: an infinite
        // error, and no similarity to speak of (never 1).
        let overflow = compare(&[inf, 2.0], &[60000.0, 2.0], 0.99, 0.5);
        assert!(!overflow.passed());
        assert_eq!(overflow.max_abs_error, inf);
        assert!(overflow.cosine_similarity.is_nan());
        assert_eq!(format_cosine(overflow.cosine_similarity), "undefined");
        expect![[r#"
            numerical comparison failed for 1/2 logical shard values (maximum absolute error inf); the first 1:
                index device reference difference threshold
                    0    inf     60000        inf       0.5"#]]
            .assert_eq(&overflow.failure_message().unwrap_or_default());

        let opposite = compare(&[inf], &[-inf], -1.0, f64::INFINITY);
        assert!(!opposite.passed());
        assert_eq!(opposite.max_abs_error, inf);
    }

    #[test]
    fn low_cosine_without_large_errors_fails_too() {
        let comparison = compare(&[0.01, -0.01], &[-0.01, 0.01], 0.99, 0.1);
        assert_eq!(comparison.mismatch_count, 0);
        assert!(!comparison.passed());
        expect!["numerical comparison failed: cosine similarity -1.000000000 is below the minimum 0.99 over 2 values (maximum absolute error 0.02)"]
            .assert_eq(&comparison.failure_message().unwrap_or_default());
    }

    #[test]
    fn passing_comparison_has_no_message() {
        let comparison = compare(&[1.0, 2.0], &[1.0, 2.001], 0.999, 0.01);
        assert!(comparison.passed());
        assert_eq!(comparison.failure_message(), None);
    }

    #[test]
    fn a_comparison_of_nothing_fails() {
        let comparison = compare(&[], &[], 0.0, 1.0);
        assert!(!comparison.passed());
        expect!["numerical comparison failed: there are no values to compare"]
            .assert_eq(&comparison.failure_message().unwrap_or_default());
    }

    #[test]
    fn length_mismatch_fails() {
        let comparison = compare(&[1.0], &[1.0, 2.0], 0.0, 1.0);
        assert!(!comparison.passed());
        expect!["numerical comparison failed: the device produced 1 values and the reference 2"]
            .assert_eq(&comparison.failure_message().unwrap_or_default());
    }
}
