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
        projects/matmul-f8.toml: bb5ed1cf2210d3616702780f2a0b390f511dcd017aec61b1cbc4dc51e61a2952 103595
        projects/mixed-f8.toml: 3474c0f55fb6372d9895a137f1925146a9bbb71369aefbf8ef3eef95dc9985f2 66902
        projects/mlp-f16.toml: 37b79ee331f887ae693169b6f43a25f078a77c8460fd2da9791b71be4b8299b1 2529689
        projects/attention-f16.toml: f5de0c188afec86f636142d52fa49aeabd2cdbd5c63d545f6d0df304c1efadc9 931675
        projects/vit-fp8.toml: 8ddcdac91b9bc62e3c4b812e661e0c266d7cc6d45428b2e2a2272ebd459794ab 8770416
        projects/llama-block-f16.toml: a0156ce41921e24d47a845a0ef3357045d97a641b1e04ee5be3d749780b52117 8371752
    "#]].assert_eq(&lines);
}
