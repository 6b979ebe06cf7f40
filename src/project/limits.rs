//! What a project may ask for, in one place (and listed in
//! `book/src/limits.md`): how deep its includes go, what its names may be,
//! and how much memory its tensors need, checked against the tiles it may
//! use before anything is allocated per element or per iteration.

use crate::graph::{DType, Graph, Role};
use crate::target::Target;

/// Deepest chain of includes (a file including a file including ...).
pub(super) const MAX_INCLUDE_DEPTH: usize = 32;

/// Most files one project may read, the root and its includes.
pub(super) const MAX_FILES: usize = 1024;

/// Longest project name: packages and profiles are named after it.
pub(super) const MAX_NAME_LENGTH: usize = 64;

/// Longest tensor, operation or repeat name, in bytes: `ipub run --dump`
/// writes a tensor as `NAME.npy`, and the compiler derives names from
/// users' (`NAME.cast_a`, `NAME.batches`), which must all stay under the
/// 255 bytes most file systems allow in a file name.
pub(super) const MAX_TENSOR_NAME_BYTES: usize = 200;

/// Most names (tensors, operations, repeats and what their bodies
/// declare) one project may declare: validation, planning and lowering
/// work per name, so this bounds them all.
pub(super) const MAX_NAMES: usize = 1 << 16;

/// Most repeats one project may declare (each is validated with its own
/// view of the names outside it).
pub(super) const MAX_REPEATS: usize = 1024;

/// Diagnostics after which an unknown name gets no "similar name"
/// suggestion.
pub(super) const MAX_SUGGESTIONS: usize = 20;

/// Bytes that `tiles` tiles of `target` can hold: the memory the loader may
/// write on each. Nothing a project declares can be larger.
pub(super) fn capacity(target: &Target, tiles: u32) -> u64 {
    u64::from(tiles) * u64::from(target.memory.loadable.len())
}

/// The bytes of a tensor of `shape` and `dtype`, or `None` when they do not
/// fit in 64 bits.
pub(super) fn tensor_bytes(shape: &[usize], dtype: DType) -> Option<u64> {
    shape
        .iter()
        .try_fold(dtype.size_bytes() as u64, |bytes, &d| {
            bytes.checked_mul(d as u64)
        })
}

/// Why one tensor cannot fit the tiles a project may use, if it cannot.
pub(super) fn tensor_problem(
    shape: &[usize],
    dtype: DType,
    capacity: u64,
    tiles: u32,
) -> Option<String> {
    match tensor_bytes(shape, dtype) {
        Some(bytes) if bytes <= capacity => None,
        Some(bytes) => Some(format!(
            "a tensor of shape {shape:?} in {dtype} needs {bytes} bytes, more than the {capacity} bytes of memory of the {tiles} tiles the project may use"
        )),
        None => Some(format!(
            "a tensor of shape {shape:?} in {dtype} has more bytes than 64 bits can count"
        )),
    }
}

/// The bytes a graph keeps in tile memory for the whole run (inputs and
/// weights, a repeat's weights once per iteration), with the largest
/// contributors first, for the message when they do not fit.
pub(super) fn resident_bytes(graph: &Graph) -> (u64, Vec<(String, u64)>) {
    let mut parts: Vec<(String, u64)> = graph
        .tensors
        .iter()
        .filter(|t| t.role != Role::Activation)
        .map(|t| {
            let copies = t
                .repeat
                .and_then(|r| graph.repeats.get(r as usize))
                .map_or(1, |r| u64::from(r.count));
            let bytes = tensor_bytes(&t.shape, t.dtype)
                .unwrap_or(u64::MAX)
                .saturating_mul(copies);
            let name = match copies {
                1 => format!("`{}`", t.name),
                n => format!("`{}` x{n} iterations", t.name),
            };
            (name, bytes)
        })
        .collect();
    let total = parts
        .iter()
        .fold(0u64, |sum, (_, b)| sum.saturating_add(*b));
    parts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (total, parts)
}

/// Why `name` cannot name the files ipub writes after it (`NAME.ipuexe`,
/// `NAME.profile.json`), if it cannot: it must be one path segment of
/// letters, digits, `_`, `-` and `.`, not starting with `.` or `-`.
pub(crate) fn file_name_problem(name: &str) -> Option<String> {
    let bad = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')));
    if name.is_empty() {
        Some("it is empty".into())
    } else if name.len() > MAX_NAME_LENGTH {
        Some(format!(
            "it is {} bytes long, more than {MAX_NAME_LENGTH}",
            name.len()
        ))
    } else if let Some(c) = bad {
        Some(format!(
            "it contains {c:?}; use letters, digits, `_`, `-` and `.`"
        ))
    } else if name.starts_with(['.', '-']) {
        Some("it starts with `.` or `-`".into())
    } else {
        None
    }
}

/// Why `name` cannot name a tensor, an operation or a repeat, if it
/// cannot. A read-back tensor is dumped as `NAME.npy`, so a name must be
/// one path segment: not empty, not `.` or `..`, without `/` or `\\`, not
/// longer than [`MAX_TENSOR_NAME_BYTES`]. Control characters (NUL among
/// them) are refused too: names reach the terminal in diagnostics, results
/// and `--explain`, and would reach it raw. Everything else is allowed
/// (`fc1.bias`, `h_out`, `q+k`, non-ASCII letters): the tool joins and
/// prints names but never parses them back.
pub(crate) fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".into())
    } else if name == "." || name == ".." {
        Some(format!("`{name}` names a directory"))
    } else if let Some(c) = name
        .chars()
        .find(|&c| matches!(c, '/' | '\\') || c.is_control())
    {
        Some(format!("it contains {c:?}"))
    } else if name.len() > MAX_TENSOR_NAME_BYTES {
        Some(format!(
            "it is {} bytes long, more than {MAX_TENSOR_NAME_BYTES}",
            name.len()
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_safe_path_segment() {
        for good in ["vit-fp8", "a", "mlp_f16.v2", &"x".repeat(MAX_NAME_LENGTH)] {
            assert_eq!(file_name_problem(good), None, "{good}");
        }
        let problem = |name: &str| file_name_problem(name).unwrap_or_default();
        assert_eq!(problem(""), "it is empty");
        assert_eq!(problem("."), "it starts with `.` or `-`");
        assert_eq!(problem(".."), "it starts with `.` or `-`");
        assert_eq!(
            problem("../escaped/evil"),
            "it contains '/'; use letters, digits, `_`, `-` and `.`"
        );
        assert_eq!(
            problem("/abs"),
            "it contains '/'; use letters, digits, `_`, `-` and `.`"
        );
        assert_eq!(
            problem("a\0b"),
            "it contains '\\0'; use letters, digits, `_`, `-` and `.`"
        );
        assert_eq!(
            problem(&"y".repeat(300)),
            "it is 300 bytes long, more than 64"
        );
    }

    #[test]
    fn tensor_names_are_one_path_segment_and_otherwise_free() {
        for good in [
            "fc1.bias",
            "h_out",
            "q+k",
            "-x",
            ".hidden",
            "...",
            "layers.{i}",
            "é",
            &"n".repeat(MAX_TENSOR_NAME_BYTES),
        ] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        let problem = |name: &str| name_problem(name).unwrap_or_default();
        assert_eq!(problem(""), "it is empty");
        assert_eq!(problem("."), "`.` names a directory");
        assert_eq!(problem(".."), "`..` names a directory");
        assert_eq!(problem("../evil"), "it contains '/'");
        assert_eq!(problem("a\\b"), "it contains '\\\\'");
        assert_eq!(problem("a\0b"), "it contains '\\0'");
        assert_eq!(problem("a\u{1b}[31m"), "it contains '\\u{1b}'");
        assert_eq!(
            problem(&"n".repeat(MAX_TENSOR_NAME_BYTES + 1)),
            "it is 201 bytes long, more than 200"
        );
    }

    #[test]
    fn tensor_sizes_are_checked_without_overflow() {
        let target = &crate::target::IPU21;
        let cap = capacity(target, 64);
        assert_eq!(cap, 64 * 0x9BBB0);
        assert_eq!(tensor_problem(&[384, 384], DType::F16, cap, 64), None);
        expect_test::expect!["a tensor of shape [2097152, 64] in f16 needs 268435456 bytes, more than the 40823808 bytes of memory of the 64 tiles the project may use"]
            .assert_eq(&tensor_problem(&[2097152, 64], DType::F16, cap, 64).unwrap_or_default());
        let huge = 1usize << 62;
        expect_test::expect!["a tensor of shape [4611686018427387904, 8] in f32 has more bytes than 64 bits can count"]
            .assert_eq(&tensor_problem(&[huge, 8], DType::F32, cap, 64).unwrap_or_default());
    }
}
