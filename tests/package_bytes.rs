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
        projects/matmul-f8.toml: f200da59eb798d47058121c4e237802b5cadf6eb72fa2b514dbb115547b3b1fe 103598
        projects/mixed-f8.toml: 4311c2af05e805ebfbaf2c9728cd0894c4955d51e2f652fb1285c54ff9ff0e1a 68891
        projects/mlp-f16.toml: cca718efa86f8f1ab8e210102625e7ffc1083fd3e7753bad6ec1e89bad95893d 2532552
        projects/attention-f16.toml: 51d71c4be87646db4c107ae81127f7964fbc748b18d6b061960cddef9aef5e28 870088
        projects/vit-fp8.toml: b9061414dbadf2d7885fb9f47bb7ffb027419af1f069830d1ad8347bb5efab25 7061910
        projects/llama-block-f16.toml: 4cad803101503f262e23cb3ef8744319579aa8ce80343ee663dcf9f7dab4fb8c 8133309
    "#]].assert_eq(&lines);
}
