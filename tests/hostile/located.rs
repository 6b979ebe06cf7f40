//! Project errors that used to surface late, unlocated or as the wrong
//! error, through `ipub check` and `ipub run`: unusable names, an op
//! reading its own output, a kernel directory lacking a kernel's source.
//! Each is an error at file:line:column with a non-zero exit, never a
//! panic; names the tool can write stay usable, dumps included. (The
//! `ipub check` output of the first two is also in the broken-project
//! corpus, `tests/data/projects/broken/`.)

use super::{Scratch, MANIFEST};
use std::path::{Path, PathBuf};

fn text(path: PathBuf) -> String {
    path.to_str().expect("utf-8").to_string()
}

/// `text` as a TOML string (Rust's `{:?}` escapes control characters in
/// a form TOML does not read).
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// A project of two ops with `names` for its input, weight and two ops,
/// its kernels read from `kernels`.
fn project(kernels: &str, names: [&str; 4]) -> String {
    let [x, bias, sum, out] = names.map(quoted);
    let kernels = quoted(kernels);
    format!(
        r#"[project]
name = "names"
target = "ipu21"
tiles = 4
seed = 3
kernels = {kernels}

[[tensor]]
name = {x}
shape = [8, 16]
dtype = "f16"
role = "input"

[[tensor]]
name = {bias}
shape = [16]
dtype = "f16"
role = "weight"

[[op]]
name = {sum}
op = "add"
inputs = [{x}, {bias}]
dtype = "f16"

[[op]]
name = {out}
op = "gelu"
inputs = [{sum}]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = [{sum}, {out}]
"#
    )
}

fn device_kernels() -> String {
    Path::new(MANIFEST)
        .join("device")
        .to_str()
        .expect("utf-8")
        .to_string()
}

#[test]
fn unusable_names_are_located_errors_before_anything_is_written() {
    let scratch = Scratch::new();
    let kernels = device_kernels();
    // One unusable name at a time, in each of the four places: the error is
    // at that name's value (line 9, 15, 21 or 27, column 8).
    let places = [(0, 9), (1, 15), (2, 21), (3, 27)];
    for bad in [
        "",
        ".",
        "..",
        "../evil",
        "a/b",
        "a\\b",
        "a\0b",
        "a\u{1b}[2J",
    ] {
        for (place, line) in places {
            let mut names = ["x", "fc1.bias", "q+k", "h_out"];
            names[place] = bad;
            let file = scratch.write("p.toml", &project(&kernels, names));
            let out = text(scratch.path("out"));
            let dump = text(scratch.path("out/dump"));
            let (code, _, stderr) = scratch.run(&["check", &file]);
            assert_eq!(code, 1, "{bad:?}: {stderr}");
            assert!(
                stderr.contains(&format!("p.toml:{line}:8")) && stderr.contains("invalid "),
                "{bad:?} at {place}: {stderr}"
            );
            let (code, _, stderr) =
                scratch.run(&["run", &file, "--out", &out, "--dump", &dump, "-q"]);
            assert_eq!(code, 1, "{bad:?}: {stderr}");
            assert!(
                stderr.contains(&format!("p.toml:{line}:8")),
                "{bad:?} at {place}: {stderr}"
            );
            assert!(!scratch.path("out").exists(), "{bad:?}: out was written");
        }
    }
}

#[test]
fn names_that_can_name_a_file_build_run_and_dump() {
    let scratch = Scratch::new();
    let names = ["x", "fc1.bias", "q+k", "h_out"];
    let file = scratch.write("p.toml", &project(&device_kernels(), names));
    let (code, _, stderr) = scratch.run(&["check", &file]);
    assert_eq!(code, 0, "{stderr}");
    let out = text(scratch.path("out"));
    let dump = text(scratch.path("out/dump"));
    let (code, _, stderr) = scratch.run(&["run", &file, "--out", &out, "--dump", &dump, "-q"]);
    assert_eq!(code, 0, "{stderr}");
    for side in ["device", "reference"] {
        for name in ["q+k", "h_out"] {
            let npy = scratch.path(&format!("out/dump/{side}/{name}.npy"));
            assert!(npy.is_file(), "{} is missing", npy.display());
        }
    }
}

#[test]
fn an_op_reading_its_own_output_is_a_cycle_at_the_input() {
    let scratch = Scratch::new();
    let file = "tests/data/projects/broken/self-reference.toml";
    let out = text(scratch.path("out"));
    for args in [vec!["check", file], vec!["run", file, "--out", &out, "-q"]] {
        let (code, _, stderr) = scratch.run(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: dependency cycle between operations")
                && stderr.contains("self-reference.toml:17:16")
                && stderr.contains("cycle: a -> a"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("unknown tensor"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_kernel_missing_from_the_kernel_directory_is_an_error_at_kernels() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path("empty-kernels")).expect("mkdir");
    let names = ["x", "fc1.bias", "q+k", "h_out"];
    let file = scratch.write("p.toml", &project("empty-kernels", names));
    // Plain `check` reads no kernel; `--fit` assembles them, as `run` does.
    let (code, _, stderr) = scratch.run(&["check", &file]);
    assert_eq!(code, 0, "{stderr}");
    let out = text(scratch.path("out"));
    for args in [
        vec!["check", "--fit", &file],
        vec!["run", &file, "--out", &out, "-q"],
    ] {
        let (code, _, stderr) = scratch.run(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: cannot read kernel source `")
                && stderr.contains("p.toml:6:11")
                && stderr.contains("kernels = \"empty-kernels\""),
            "{args:?}: {stderr}"
        );
    }
}
