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
        projects/matmul-f8.toml: 4ef8cdffe1c924b568cd099fdef2cb4fd221403ba010300c3aa2834905e9b43e 103905
        projects/mixed-f8.toml: 9a49daebbca1547439c8a752b77ed6a9c6c8ce91b07d8a3ef52486a7474b94d6 64829
        projects/mlp-f16.toml: fe492d82b2e0613f22d3fa89237310324d8a225ba221316ad4fcfa21bd4fa9a0 2883779
        projects/attention-f16.toml: 24df791f2858f1ff12b2eb85f0df9fb3ffc6e55e812edf1d9a9a8644f987714f 1312526
        projects/vit-fp8.toml: ae3d72b8e8322a9e82446c1bb895f41b918b20a730910e36a643af10942c53ea 7713004
        projects/llama-block-f16.toml: 06aad891e30662e18b400ae75777a7cbe8dc0a4dc321d15afc3b5c08d3266900 9254988
    "#]].assert_eq(&lines);
}
