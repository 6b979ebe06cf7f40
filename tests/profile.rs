//! `ipub profile` and `ipub profile diff` on real runs: the summary, the
//! HTML report, the Chrome trace, a comparison after a build change, and
//! a clear error for a file that is not a profile.

use std::path::Path;
use std::process::Command;

fn ipub(args: &[&str], cache: &Path) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("IPUB_CACHE_DIR", cache)
        .env("IPUB_DEVICE_LOCK", cache.join("device.lock"))
        .env("IPUB_LOG", "warn")
        .output()
        .expect("run ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn ok(args: &[&str], cache: &Path) -> String {
    let (code, stdout, stderr) = ipub(args, cache);
    assert_eq!(code, 0, "ipub {args:?}\n{stdout}\n{stderr}");
    stdout
}

/// Runs `project` into `dir/out`; returns the profile's path.
fn run(project: &Path, out: &Path, cache: &Path) -> String {
    ok(
        &[
            "run",
            project.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        cache,
    );
    out.join("matmul-f8.profile.json")
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn profiles_summarise_export_and_compare() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let cache = dir.path();
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/projects/matmul-f8.toml"
    ))
    .expect("project");
    let kernels = concat!("kernels = \"", env!("CARGO_MANIFEST_DIR"), "/device\"");
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).expect("mkdir");
        let file = path.join("matmul-f8.toml");
        std::fs::write(
            &file,
            text.replace("seed = 4", &format!("seed = 4\n{kernels}")),
        )
        .expect("write");
        file
    };
    let on_64 = write("p64", source.clone());
    let on_32 = write("p32", source.replace("tiles = 64", "tiles = 32"));
    let before = run(&on_64, &dir.path().join("a"), cache);
    let after = run(&on_32, &dir.path().join("b"), cache);

    let html = dir.path().join("report.html");
    let trace = dir.path().join("trace.json");
    let summary = ok(
        &[
            "profile",
            &before,
            "--html",
            html.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        cache,
    );
    for expected in [
        "cycles measured",
        "64 of 1472 tiles used",
        "where the cycles went",
        "by operation",
        "by kernel",
        "peak memory",
    ] {
        assert!(summary.contains(expected), "{expected}:\n{summary}");
    }
    let page = std::fs::read_to_string(&html).expect("report");
    assert!(page.contains("id=\"timeline\"") && page.contains("id=\"memory\""));
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace).expect("trace")).expect("trace JSON");
    let events = trace["traceEvents"].as_array().expect("events");
    assert!(events
        .iter()
        .any(|e| e["name"].as_str().is_some_and(|n| n.starts_with("y: "))));
    assert!(events.iter().any(|e| e["name"] == "live memory"));

    // A second run keeps the first one's profile for comparison.
    let again = ok(
        &[
            "run",
            on_64.to_str().unwrap(),
            "--out",
            dir.path().join("a").to_str().unwrap(),
        ],
        cache,
    );
    let previous = dir.path().join("a/matmul-f8.previous.profile.json");
    assert!(again.contains("the last run's profile is kept"), "{again}");
    let same = ok(
        &["profile", "diff", previous.to_str().unwrap(), &before],
        cache,
    );
    assert!(same.contains("the same package ran both times"), "{same}");

    let diff_html = dir.path().join("diff.html");
    let changed = ok(
        &[
            "profile",
            "diff",
            &before,
            &after,
            "--html",
            diff_html.to_str().unwrap(),
        ],
        cache,
    );
    for expected in [
        "by operation (largest change first)",
        "`y`: 64 -> 32 tiles",
        "tiles whose busy time changed most",
        "32 tiles no longer used",
    ] {
        assert!(changed.contains(expected), "{expected}:\n{changed}");
    }
    assert!(std::fs::read_to_string(diff_html)
        .expect("comparison page")
        .contains("What the build changed"));
}

#[test]
fn a_file_that_is_not_a_profile_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let bad = dir.path().join("bad.profile.json");
    std::fs::write(&bad, "{\"format_version\": 2, \"steps\": 7}").expect("write");
    for args in [
        vec!["profile", bad.to_str().unwrap()],
        vec![
            "profile",
            "diff",
            bad.to_str().unwrap(),
            bad.to_str().unwrap(),
        ],
        vec!["profile", "missing.profile.json"],
    ] {
        let (code, stdout, stderr) = ipub(&args, dir.path());
        assert_eq!(code, 1, "{args:?}\n{stdout}\n{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (_, _, stderr) = ipub(&["profile", bad.to_str().unwrap()], dir.path());
    assert!(stderr.contains("is not a valid ipub profile"), "{stderr}");
}
