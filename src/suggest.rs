//! "Did you mean": the closest known name to a misspelt one.
//!
//! Every place that rejects a name from a fixed or known set (project keys,
//! op kinds, dtypes, tensor names, `--emit` values, assembler symbols) asks
//! [`closest`] for a suggestion, so the rule for "close enough" is the same
//! everywhere: an edit distance of at most a third of the longer name (and
//! at least one edit).

/// The known name closest to `name` by edit distance, if close enough.
/// Ties go to the candidate that sorts first, so the answer does not depend
/// on the order the candidates come in.
pub(crate) fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|k| *k != name)
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, k)| *d <= (name.chars().count().max(k.chars().count()) / 3).max(1))
        .min()
        .map(|(_, k)| k)
}

/// The help line of a suggestion: ``did you mean `x`?``.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(name, known).map(|k| format!("did you mean `{k}`?"))
}

/// Edit distance in characters, counting an insertion, a deletion, a
/// substitution or a swap of two neighbours as one edit (the optimal string
/// alignment distance), since swapped letters are the commonest typo.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * width + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let mut best = (d[(i - 1) * width + j] + 1)
                    .min(d[i * width + j - 1] + 1)
                    .min(d[(i - 1) * width + j - 1] + usize::from(a[i - 1] != b[j - 1]));
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    best = best.min(d[(i - 2) * width + j - 2] + 1);
                }
                best
            };
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, known: &[&str], expected: Option<&str>) {
        assert_eq!(closest(name, known.iter().copied()), expected, "{name}");
    }

    #[test]
    fn suggests_close_names_only() {
        check("shap", &["name", "shape", "dtype"], Some("shape"));
        check("f61", &["f32", "f16", "f143", "f152"], Some("f16"));
        check("matmull", &["matmul", "cast", "add"], Some("matmul"));
        check("relu", &["matmul", "cast", "add", "gelu"], Some("gelu"));
        check("zzzzzz", &["matmul", "cast"], None);
        check("x", &["x"], None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("é", "e"), 1);
        assert_eq!(edit_distance("f61", "f16"), 1);
    }

    #[test]
    fn ties_do_not_depend_on_order() {
        check("ab", &["ac", "bb"], Some("ac"));
        check("ab", &["bb", "ac"], Some("ac"));
    }
}
