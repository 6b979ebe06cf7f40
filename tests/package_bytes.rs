//! The packages of the shipped 64-tile projects, pinned by content hash.
//!
//! A restructuring of the compiler (moving code between layers, changing
//! how a phase is keyed or how the target reaches it) must not change what
//! it writes. This test builds each project into a fresh directory with a
//! fresh kernel cache and compares the blake3 of the package with the
//! pinned value, so any change of package bytes shows up here and has to
//! be blessed on purpose (`UPDATE_EXPECT=1 cargo test --test package_bytes`)
//! by a change that means to alter programs.

use expect_test::expect;
use std::path::Path;
use std::process::Command;

/// Builds `project` into a scratch directory and returns the package's
/// blake3 and size.
fn package_hash(project: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().expect("scratch directory");
    let out = scratch.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .arg("build")
        .arg(root.join(project))
        .arg("--out")
        .arg(&out)
        .env("IPUB_CACHE_DIR", scratch.path().join("cache"))
        .env_remove("IPUB_REMOTE_CACHE")
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .current_dir(root)
        .output()
        .expect("run ipub build");
    assert!(
        output.status.success(),
        "ipub build {project} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let package = std::fs::read_dir(&out)
        .expect("output directory")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "ipuexe"))
        .expect("a package was written");
    let bytes = std::fs::read(&package).expect("read package");
    format!("{} {}", blake3::hash(&bytes).to_hex(), bytes.len())
}

#[test]
fn shipped_packages_are_byte_identical() {
    let projects = [
        "projects/matmul-f8.toml",
        "projects/mixed-f8.toml",
        "projects/mlp-f16.toml",
        "projects/attention-f16.toml",
        "projects/vit-fp8.toml",
        "projects/llama-block-f16.toml",
    ];
    let mut lines = String::new();
    for project in projects {
        lines.push_str(&format!("{project}: {}\n", package_hash(project)));
    }
    expect![[r#"
        projects/matmul-f8.toml: 40c36497b4f9613e89eab4a006b8f7a81161d616488425461987d87b77d6081a 103595
        projects/mixed-f8.toml: 91b407d25d7ef6cec0c160fd738d72d5ecd4a724854440401b6083de4877e585 64516
        projects/mlp-f16.toml: 94d6ab972b8cc5ad6a13de5d2dcc352b44f7da5395d11dffead40ee5b31c9d1c 2883499
        projects/attention-f16.toml: 1a438383370010a1b6215005355e49f0e6d979bf9e587970297c59e5f5444072 1301307
        projects/vit-fp8.toml: 3d2057df31c4c0ddb3ac5b67b5ac981d1bf37933ddbac287594364fc79ade11c 7765985
        projects/llama-block-f16.toml: ccd7c6de977a8fd98a8c68415b1ba48d3992f93d3a07f8b4ee4e92b7d1d1a541 9587465
    "#]].assert_eq(&lines);
}
