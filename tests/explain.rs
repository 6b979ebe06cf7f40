//! Fresh-process builds: a no-op build is up to date from the stamp, and
//! `--explain` names what changed and what each phase recomputed.

use std::path::Path;
use std::process::Command;

fn build(dir: &Path, extra: &[&str]) -> String {
    ipub(dir, &[&["build", "matmul-f8.toml"], extra].concat())
}

/// Runs `ipub ARGS` in `dir` with its own cache; returns stdout.
fn ipub(dir: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", dir.join(".cache"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .output()
        .expect("runs ipub");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn no_op_builds_are_up_to_date_and_explain_names_the_edit() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/matmul-f8.toml"),
    )
    .expect("read project")
    .replace(
        "seed = 4",
        concat!(
            "seed = 4\nkernels = \"",
            env!("CARGO_MANIFEST_DIR"),
            "/device\""
        ),
    );
    let project = dir.path().join("matmul-f8.toml");
    std::fs::write(&project, &original).expect("copy project");

    let first = build(dir.path(), &["--explain"]);
    assert!(
        first.contains("wrote target/ipub/matmul-f8/matmul-f8.ipuexe"),
        "{first}"
    );
    assert!(first.contains("no earlier build"), "{first}");

    let again = build(dir.path(), &["--explain"]);
    assert!(again.contains("is up to date"), "{again}");
    assert!(again.contains("nothing recomputed"), "{again}");

    // A damaged package is rebuilt even though no input changed.
    let package = dir.path().join("target/ipub/matmul-f8/matmul-f8.ipuexe");
    std::fs::write(&package, b"damaged").expect("damage");
    let repaired = build(dir.path(), &[]);
    assert!(repaired.contains("wrote"), "{repaired}");

    std::fs::write(
        &project,
        original.replace("shape = [128, 64]", "shape = [256, 64]"),
    )
    .expect("edit");
    // `ipub explain` is `ipub build --explain`.
    let edited = ipub(dir.path(), &["explain", "matmul-f8.toml"]);
    assert!(edited.contains("1 input(s) changed"), "{edited}");
    let key_line = edited
        .lines()
        .find(|l| l.contains("matmul-f8.toml:"))
        .unwrap_or_default();
    assert!(key_line.ends_with(".shape"), "{edited}");
    // The plans of the unchanged signatures come from the store.
    assert!(edited.contains("reused"), "{edited}");
    let plan = edited
        .lines()
        .find(|l| l.trim_start().starts_with("plan:"))
        .unwrap_or_default();
    assert!(!plan.contains(" 0 recomputed"), "{edited}");
}

#[test]
fn two_builds_at_once_both_succeed_and_leave_a_valid_package() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/matmul-f8.toml"),
    )
    .expect("read project")
    .replace(
        "seed = 4",
        concat!(
            "seed = 4\nkernels = \"",
            env!("CARGO_MANIFEST_DIR"),
            "/device\""
        ),
    );
    std::fs::write(dir.path().join("matmul-f8.toml"), &original).expect("copy project");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(["build", "matmul-f8.toml"])
            .current_dir(dir.path())
            .env("IPUB_CACHE_DIR", dir.path().join(".cache"))
            .env_remove("RUST_LOG")
            .env_remove("IPUB_LOG")
            .output()
            .expect("runs ipub build")
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(spawn);
        let b = scope.spawn(spawn);
        (a.join().expect("first"), b.join().expect("second"))
    });
    assert!(a.status.success() && b.status.success(), "{a:?}\n{b:?}");
    let package = dir.path().join("target/ipub/matmul-f8/matmul-f8.ipuexe");
    ipub::package::file::read(camino::Utf8Path::from_path(&package).expect("utf-8"))
        .expect("the package two builds wrote at once is whole");
    // And the store both wrote is readable: the next build is up to date.
    let again = build(dir.path(), &[]);
    assert!(again.contains("is up to date"), "{again}");
}

/// Copies `projects/matmul-f8.toml` and `device/` into `root`.
fn copy_project(root: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(root.join("projects")).expect("mkdir");
    std::fs::create_dir_all(root.join("device/include")).expect("mkdir");
    std::fs::copy(
        crate_dir.join("projects/matmul-f8.toml"),
        root.join("projects/matmul-f8.toml"),
    )
    .expect("copy project");
    for dir in ["device", "device/include"] {
        for entry in std::fs::read_dir(crate_dir.join(dir)).expect("kernels") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                std::fs::copy(&path, root.join(dir).join(path.file_name().unwrap()))
                    .expect("copy kernel");
            }
        }
    }
}

/// The stamp records absolute paths: a build from directory A by relative
/// path, a kernel edit under A, and the same project built by absolute path
/// from directory B (which holds an unedited copy at the same relative
/// paths) must rebuild, not find B's copy unchanged.
#[test]
fn the_stamp_rechecks_the_files_it_read_whatever_the_working_directory() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    copy_project(&a);
    copy_project(&b);
    let out = dir.path().join("out");
    let out = out.to_str().expect("utf-8");
    let cache = dir.path().join("cache");
    let run = |cwd: &Path, project: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(["build", project, "--out", out])
            .current_dir(cwd)
            .env("IPUB_CACHE_DIR", &cache)
            .env_remove("RUST_LOG")
            .env_remove("IPUB_LOG")
            .output()
            .expect("runs ipub");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let first = run(&a, "projects/matmul-f8.toml");
    assert!(first.contains("wrote"), "{first}");
    let kernel = a.join("device/gemm_f16_amp.S");
    let text = std::fs::read_to_string(&kernel).expect("kernel");
    std::fs::write(&kernel, format!("{text}\n// edited\n")).expect("edit");
    let absolute = a.join("projects/matmul-f8.toml");
    let second = run(&b, absolute.to_str().expect("utf-8"));
    assert!(!second.contains("is up to date"), "{second}");
}
