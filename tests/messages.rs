//! `--message-format json` against its documented shape: the examples in
//! `book/src/messages.md` are the specification. `check`, `build`, `run`
//! and `watch` run on a small project; every line of their stdout must be
//! one JSON object whose keys (recursively) are exactly those of the
//! documented example of its `reason`, and every documented reason must
//! occur.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const ROOT: &str = r#"[project]
name = "small"
target = "ipu21"
tiles = 4
seed = 1
kernels = "KERNELS"

[[tensor]]
name = "x"
shape = [32, 64]
dtype = "f16"
role = "input"

[[tensor]]
name = "w"
shape = [64, 32]
dtype = "f16"
role = "weight"

[[tensor]]
name = "spare"
shape = [4]
dtype = "f16"
role = "weight"

[[op]]
name = "h"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["h"]
"#;

/// The documented example of each reason.
fn documented() -> BTreeMap<String, Value> {
    let book =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/messages.md"))
            .expect("the messages chapter");
    let mut examples = BTreeMap::new();
    for block in book.split("```json\n").skip(1) {
        let json = block.split("```").next().expect("a closed block");
        let value: Value = serde_json::from_str(json.trim())
            .unwrap_or_else(|e| panic!("the book's example is JSON: {e}\n{json}"));
        let reason = value["reason"].as_str().expect("a reason").to_string();
        examples.insert(reason, value);
    }
    assert!(examples.len() >= 5, "{:?}", examples.keys());
    examples
}

/// Holds `actual` to the keys of `expected`: objects must have the same
/// keys, recursively; an array's elements are held to the example's first
/// element; `null` on either side matches anything (a value not known).
fn check_shape(expected: &Value, actual: &Value, at: &str) {
    match (expected, actual) {
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(e), Value::Object(a)) => {
            let ek: Vec<&String> = e.keys().collect();
            let ak: Vec<&String> = a.keys().collect();
            assert_eq!(ak, ek, "keys of {at}");
            for (key, value) in e {
                check_shape(value, &a[key], &format!("{at}.{key}"));
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if let Some(first) = e.first() {
                for (i, item) in a.iter().enumerate() {
                    check_shape(first, item, &format!("{at}[{i}]"));
                }
            }
        }
        (e, a) => assert_eq!(
            std::mem::discriminant(e),
            std::mem::discriminant(a),
            "type of {at}: documented {e}, got {a}"
        ),
    }
}

/// Checks every stdout line; returns the reasons seen.
fn check_lines(stdout: &str, examples: &BTreeMap<String, Value>) -> Vec<String> {
    let mut reasons = Vec::new();
    for line in stdout.lines() {
        let value: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let reason = value["reason"].as_str().expect("a reason").to_string();
        let example = examples
            .get(&reason)
            .unwrap_or_else(|| panic!("`{reason}` is not documented"));
        check_shape(example, &value, &reason);
        reasons.push(reason);
    }
    reasons
}

fn ipub(dir: &Path, args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", dir.join(".cache"))
        .env("IPUB_DEVICE_LOCK", dir.join("device.lock"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .output()
        .expect("run ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn every_json_message_has_its_documented_shape() {
    let examples = documented();
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    let device = concat!(env!("CARGO_MANIFEST_DIR"), "/device");
    let root = ROOT.replace("KERNELS", device);
    std::fs::write(dir.join("small.toml"), &root).expect("write");
    let big = root
        .replace("tiles = 4", "tiles = 1")
        .replace("[32, 64]", "[256, 512]")
        .replace("[64, 32]", "[512, 256]");
    std::fs::write(dir.join("big.toml"), big).expect("write");
    let mut seen = Vec::new();
    let json = ["--message-format", "json"];

    let (code, stdout) = ipub(dir, &[&["check", "small.toml"][..], &json].concat());
    assert_eq!(code, 0, "{stdout}");
    let reasons = check_lines(&stdout, &examples);
    assert_eq!(reasons, ["compiler-message", "check-finished"]);
    seen.extend(reasons);

    let (code, stdout) = ipub(dir, &[&["check", "--fit", "big.toml"][..], &json].concat());
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains(r#""code":"placement""#), "{stdout}");
    assert!(stdout.contains(r#""fits":false"#), "{stdout}");
    seen.extend(check_lines(&stdout, &examples));

    let (code, stdout) = ipub(dir, &[&["run", "small.toml"][..], &json].concat());
    assert_eq!(code, 0, "{stdout}");
    let reasons = check_lines(&stdout, &examples);
    assert_eq!(
        reasons,
        ["compiler-message", "build-finished", "run-finished"]
    );
    assert!(stdout.contains(r#""numerical_test":"PASS""#), "{stdout}");
    seen.extend(reasons);

    let (code, stdout) = ipub(dir, &[&["build", "small.toml"][..], &json].concat());
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains(r#""fresh":true"#), "{stdout}");
    seen.extend(check_lines(&stdout, &examples));

    // Watch: the first build, then a rebuild after an edit.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args([
            "watch",
            "small.toml",
            "--debounce",
            "50",
            "--max-rebuilds=1",
        ])
        .args(json)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", dir.join(".cache"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ipub watch");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    // The human line "watching ..." goes to stderr; the first build's
    // message says the watcher is up.
    let mut watched = Vec::new();
    let wait_for = |reason: &str, watched: &mut Vec<String>| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no `{reason}` from ipub watch: {watched:?}"));
        watched.push(line.clone());
        if line.contains(&format!(r#""reason":"{reason}""#)) {
            break;
        }
    };
    wait_for("build-finished", &mut watched);
    // Give the watcher time to watch the directory before the edit.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(dir.join("small.toml"), root.replace("seed = 1", "seed = 2")).expect("edit");
    wait_for("rebuild-finished", &mut watched);
    let status = child.wait().expect("watch exits");
    assert!(status.success());
    seen.extend(check_lines(&watched.join("\n"), &examples));

    for reason in examples.keys() {
        assert!(seen.contains(reason), "`{reason}` never seen: {seen:?}");
    }
}

/// `build-finished` counts the error messages the build printed, as the
/// human summary ("2 previous errors") and `check-finished` do, not the
/// failed build as one.
#[test]
fn build_finished_counts_every_error_message() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    let device = concat!(env!("CARGO_MANIFEST_DIR"), "/device");
    let broken = ROOT
        .replace("KERNELS", device)
        .replace(r#"inputs = ["x", "w"]"#, r#"inputs = ["q", "r"]"#);
    std::fs::write(dir.join("broken.toml"), broken).expect("write");
    for command in ["build", "check"] {
        let (code, stdout) = ipub(dir, &[command, "broken.toml", "--message-format", "json"]);
        assert_eq!(code, 1, "{stdout}");
        let messages: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        let printed = messages
            .iter()
            .filter(|m| m["reason"] == "compiler-message" && m["message"]["level"] == "error")
            .count();
        assert_eq!(printed, 2, "{stdout}");
        let finished = messages.last().expect("a finished message");
        assert_eq!(finished["errors"], printed, "{stdout}");
    }
}
