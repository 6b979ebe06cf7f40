//! Project validation through the `ipub check` command line: every project
//! in `projects/` validates, and every file of the broken-project corpus
//! (`tests/data/projects/broken/*.toml`) exits with code 1 and prints the
//! diagnostic in its companion `.stderr` snapshot (bless with
//! `UPDATE_EXPECT=1 cargo test --test projects`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn ipub(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .output()
        .expect("run ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn toml_files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("read corpus directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_project_validates() {
    let projects = toml_files("projects");
    assert!(projects.len() >= 4, "expected the four projects");
    for project in projects {
        let relative = project
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("inside the crate")
            .to_str()
            .expect("utf-8 path")
            .trim_start_matches('/')
            .to_string();
        let (code, stdout, stderr) = ipub(&["check", &relative]);
        assert_eq!(code, 0, "{relative}: {stderr}");
        assert!(
            stdout.starts_with(&format!("checked {relative}")),
            "{stdout}"
        );
    }
}

#[test]
fn every_broken_project_gives_its_diagnostic_and_exit_code_1() {
    let corpus = toml_files("tests/data/projects/broken");
    assert!(corpus.len() >= 20, "the corpus went missing");
    for file in corpus {
        let relative = format!(
            "tests/data/projects/broken/{}",
            file.file_name().and_then(|n| n.to_str()).expect("name")
        );
        let (code, stdout, stderr) = ipub(&["check", &relative]);
        assert_eq!(code, 1, "{relative} should fail: {stdout}{stderr}");
        assert!(
            !stderr.contains("panicked"),
            "{relative} panicked: {stderr}"
        );
        assert!(stdout.is_empty(), "{relative}: {stdout}");
        expect_test::expect_file![file.with_extension("stderr")].assert_eq(&stderr);
    }
}

#[test]
fn checking_a_missing_file_is_an_error_not_a_panic() {
    let (code, _, stderr) = ipub(&["check", "projects/does-not-exist.toml"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot read project file"), "{stderr}");
}
