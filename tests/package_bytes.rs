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
        projects/matmul-f8.toml: 74c3315602aed4ef2e450c721b58cae7cad1e1426ec63b3ec396579940b08eb5 103596
        projects/mixed-f8.toml: 3474c0f55fb6372d9895a137f1925146a9bbb71369aefbf8ef3eef95dc9985f2 66902
        projects/mlp-f16.toml: 00c675b7f7156597a32b0b47494106a920a4f577585287bf883d812d29b7aee3 2529691
        projects/attention-f16.toml: f5de0c188afec86f636142d52fa49aeabd2cdbd5c63d545f6d0df304c1efadc9 931675
        projects/vit-fp8.toml: 1f5d23cfac7886af1674b00548a424370c47ae6edec5597a75e15c9949bfb29c 8770425
        projects/llama-block-f16.toml: c3e502ba714b760ff540b4f5ea3fa9cb8c66cd7627f6c5b43a947401c70b17a3 8371756
    "#]].assert_eq(&lines);
}
