//! Incremental builds that once disagreed with clean builds, each as the
//! user met it.

use crate::incremental::{clean_build, shipped, Incremental};
use crate::support::{self, Built};
use crate::watch::{save, Watch};
use std::path::Path;
use std::time::Duration;

/// How long a watcher gets to notice an edit (it reacts in well under a
/// second; a missed edit is never reported, so the wait must end).
const NOTICE: Duration = Duration::from_secs(20);

fn package(built: &Built) -> Vec<u8> {
    match built {
        Built::Package(bytes) => bytes.clone(),
        Built::Failed(errors) => panic!("the project does not build:\n{errors}"),
    }
}

/// `matmul-f8` and the kernel sources written under `dir`.
fn matmul_tree(dir: &Path) -> crate::edits::Tree {
    let project = shipped("matmul-f8");
    support::write_tree(dir, &project.tree);
    project.tree
}

/// A kernel edit that changes the code, so the package must change.
fn edit_kernel(text: &str) -> String {
    text.replacen(
        "        setzi   $m10, 0\n",
        "        setzi   $m10, 0\n        setzi   $m10, 0\n",
        1,
    )
}

/// The build stamp must not depend on the working directory: a build from
/// directory A, a kernel edit under A, then the same project (by absolute
/// path) built from directory B, which holds an unedited copy at the same
/// relative paths. The second build must see the edit.
#[test]
fn a_fresh_build_from_another_directory_sees_an_edit_made_since_the_last_build() {
    let top = tempfile::tempdir().expect("temporary directory");
    let (a, b) = (top.path().join("A"), top.path().join("B"));
    let mut tree = matmul_tree(&a);
    matmul_tree(&b);
    let cache = top.path().join("cache");
    let out = top.path().join("out");
    let out_arg = out.to_str().expect("utf-8");
    let project = a.join("projects/matmul-f8.toml");
    let project_arg = project.to_str().expect("utf-8");
    let kernel = "device/cast_f8.S";
    let mut failures = Vec::new();
    // The project named relative to A, then absolute from B; and absolute
    // both times.
    for first in ["projects/matmul-f8.toml", project_arg] {
        let (code, stdout, stderr) = support::ipub(&a, &cache, &["build", first, "--out", out_arg]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let edited = edit_kernel(&tree[kernel]);
        assert_ne!(edited, tree[kernel]);
        std::fs::write(a.join(kernel), &edited).expect("edit the kernel");
        tree.insert(kernel.to_string(), edited);
        let (code, stdout, stderr) =
            support::ipub(&b, &cache, &["build", project_arg, "--out", out_arg]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let written = std::fs::read(out.join("matmul-f8.ipuexe")).expect("package");
        let clean = package(&clean_build(&tree, "projects/matmul-f8.toml"));
        if stdout.contains("is up to date") || written != clean {
            failures.push(format!(
                "built first as `{first}` from A, then from B after editing A's {kernel}: {}\n{stdout}",
                if written == clean {
                    "said up to date"
                } else {
                    "the package differs from a clean build"
                }
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `ipub watch ./dir/projects/p.toml` must see edits of the project file
/// itself.
#[test]
fn watch_sees_edits_of_a_project_named_with_a_leading_dot() {
    let top = tempfile::tempdir().expect("temporary directory");
    let mut tree = matmul_tree(&top.path().join("dir"));
    let out = top.path().join("out");
    let mut watch = Watch::start(
        top.path(),
        &[
            "./dir/projects/matmul-f8.toml",
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    watch
        .wait_for("watching", Duration::from_secs(120))
        .unwrap();
    let root = "projects/matmul-f8.toml";
    let edited = tree[root].replace("shape = [128, 64]", "shape = [256, 64]");
    assert_ne!(edited, tree[root]);
    save(&top.path().join("dir").join(root), &edited, true);
    tree.insert(root.to_string(), edited);
    watch.wait_for("rebuilt after change", NOTICE).unwrap();
    let written = std::fs::read(out.join("matmul-f8.ipuexe")).expect("package");
    assert!(
        written == package(&clean_build(&tree, root)),
        "the rebuilt package differs from a clean build"
    );
}

/// An include whose directory does not exist yet: the first build fails,
/// and creating the directory and the file must rebuild the project.
#[test]
fn watch_picks_up_an_include_created_in_a_new_directory() {
    let top = tempfile::tempdir().expect("temporary directory");
    let mut tree = matmul_tree(top.path());
    let root = "projects/matmul-f8.toml";
    // The weight's declaration moves into `more/w.toml`, not written yet.
    let text = tree[root].clone();
    let start = text.find("[[tensor]]\nname = \"w\"").expect("the weight");
    let end = start + text[start..].find("\n\n").expect("end of the block") + 1;
    let weight = text[start..end].to_string();
    let without = format!(
        "include = [\"more/w.toml\"]\n{}{}",
        &text[..start],
        &text[end..]
    );
    save(&top.path().join(root), &without, false);
    tree.insert(root.to_string(), without);
    let out = top.path().join("out");
    let mut watch = Watch::start(top.path(), &[root, "--out", out.to_str().expect("utf-8")]);
    watch
        .wait_for("watching", Duration::from_secs(120))
        .unwrap();
    assert!(!out.join("matmul-f8.ipuexe").exists());
    save(&top.path().join("projects/more/w.toml"), &weight, true);
    tree.insert("projects/more/w.toml".to_string(), weight);
    watch.wait_for("rebuilt after change", NOTICE).unwrap();
    let written =
        std::fs::read(out.join("matmul-f8.ipuexe")).expect("a package once the include exists");
    assert!(
        written == package(&clean_build(&tree, root)),
        "the package differs from a clean build"
    );
}

/// A softmax project small enough to build in a blink.
const SOFTMAX: &str = r#"
[project]
name = "softmax-zero"
target = "ipu21"
tiles = 2
seed = 1
kernels = "../device"

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[op]]
name = "y"
op = "softmax"
inputs = ["x"]
dtype = "f16"
scale = 0.0

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.05
outputs = ["y"]
"#;

/// `0.0` and `-0.0` are different settings (the package records them as
/// written): an edit from one to the other must give the clean build's
/// bytes, in `max_abs_error`, `min_cosine_similarity` and a softmax
/// `scale`, both ways.
#[test]
fn an_edit_between_zero_and_negative_zero_rebuilds_as_a_clean_build_does() {
    let mut tree = shipped("matmul-f8").tree;
    let root = "projects/softmax-zero.toml";
    tree.insert(root.to_string(), SOFTMAX.to_string());
    let edits = [
        (
            "max_abs_error = 0.05",
            "max_abs_error = 0.0",
            "max_abs_error = -0.0",
        ),
        (
            "min_cosine_similarity = 0.99",
            "min_cosine_similarity = 0.0",
            "min_cosine_similarity = -0.0",
        ),
        ("scale = 0.0", "scale = 0.0", "scale = -0.0"),
    ];
    let mut failures = Vec::new();
    for (original, zero, negative) in edits {
        for (from, to) in [(zero, negative), (negative, zero)] {
            let mut before = tree.clone();
            before.insert(root.to_string(), SOFTMAX.replace(original, from));
            let mut after = before.clone();
            after.insert(root.to_string(), SOFTMAX.replace(original, to));
            let mut incremental = Incremental::new(&before, root);
            package(&incremental.build());
            let edit = crate::edits::Edit {
                description: format!("{from} -> {to}"),
                paths: vec![root.to_string()],
            };
            incremental.apply(&after, &edit);
            let rebuilt = package(&incremental.build());
            let clean = package(&clean_build(&after, root));
            if rebuilt != clean {
                failures.push(format!(
                    "`{from}` -> `{to}`: the rebuilt package differs from a clean build"
                ));
            }
        }
    }
    // Through the watcher too, which writes a package only when its bytes
    // changed.
    let top = tempfile::tempdir().expect("temporary directory");
    let mut disk = tree.clone();
    disk.insert(
        root.to_string(),
        SOFTMAX.replace("max_abs_error = 0.05", "max_abs_error = 0.0"),
    );
    support::write_tree(top.path(), &disk);
    let out = top.path().join("out");
    let mut watch = Watch::start(top.path(), &[root, "--out", out.to_str().expect("utf-8")]);
    watch
        .wait_for("watching", Duration::from_secs(120))
        .unwrap();
    let negative = SOFTMAX.replace("max_abs_error = 0.05", "max_abs_error = -0.0");
    save(&top.path().join(root), &negative, true);
    disk.insert(root.to_string(), negative);
    watch.wait_for("rebuilt after change", NOTICE).unwrap();
    let written = std::fs::read(out.join("softmax-zero.ipuexe")).expect("package");
    if written != package(&clean_build(&disk, root)) {
        failures.push("under ipub watch, `max_abs_error = 0.0` -> `-0.0`: the package left differs from a clean build".to_string());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
