//! What the commands print, by default and when asked for more or less:
//! no logs unless asked (`-v`, a filter, a log file), `-q` for errors
//! only, colour only on a terminal or with `--color always`, a closed pipe
//! that ends the process quietly, and `check`'s kernel directory and
//! `--fit` checks.

use std::path::Path;
use std::process::{Command, Stdio};

const PROJECT: &str = r#"[project]
name = "tiny"
target = "ipu21"
tiles = 4
kernels = "KERNELS"

[[tensor]]
name = "x"
shape = [8, 64]
dtype = "f16"
role = "input"

[[tensor]]
name = "spare"
shape = [4]
dtype = "f16"
role = "weight"

[[op]]
name = "y"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ipub(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ipub"));
    command
        .args(args)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", dir.join(".cache"))
        .env("IPUB_DEVICE_LOCK", dir.join("device.lock"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run ipub");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn project(dir: &Path) {
    let text = PROJECT.replace("KERNELS", concat!(env!("CARGO_MANIFEST_DIR"), "/device"));
    std::fs::write(dir.join("tiny.toml"), text).expect("write project");
}

#[test]
fn logs_only_when_asked_quiet_means_errors_and_colour_only_when_wanted() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    project(dir);

    // By default: status lines and results on stdout; on stderr only the
    // warning and its summary, no logs, no colour in a pipe.
    let run = ipub(dir, &["run", "tiny.toml"], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("numericalTest=PASS"), "{}", run.stdout);
    assert!(!run.stderr.contains("INFO"), "{}", run.stderr);
    assert!(!run.stderr.contains('\u{1b}') && !run.stdout.contains('\u{1b}'));
    assert!(
        run.stderr.contains("warning: unused tensor `spare`"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("warning: `tiny` generated 1 warning"),
        "{}",
        run.stderr
    );

    // -v: the seed-shaped logs, names and fields as before; --log-file:
    // the same in a file.
    let log = dir.join("ipub.log");
    let verbose = ipub(
        dir,
        &[
            "-v",
            "--log-file",
            log.to_str().unwrap(),
            "run",
            "tiny.toml",
            "--out",
            "again",
        ],
        &[],
    );
    assert_eq!(verbose.code, 0, "{}", verbose.stderr);
    for event in [
        "package build phase finished",
        "invoking streaming host exchange call",
    ] {
        assert!(
            verbose.stderr.contains(event),
            "{event}: {}",
            verbose.stderr
        );
    }
    assert!(verbose.stderr.contains("elapsed_ms="), "{}", verbose.stderr);
    let logged = std::fs::read_to_string(&log).expect("the log file");
    assert!(
        logged.contains(" INFO ") && logged.contains("phase=\"lower\""),
        "{logged}"
    );
    // IPUB_LOG still selects logs on its own.
    let filtered = ipub(
        dir,
        &["build", "tiny.toml", "--out", "third"],
        &[("IPUB_LOG", "info")],
    );
    assert!(
        filtered.stderr.contains("package build phase finished"),
        "{}",
        filtered.stderr
    );

    // -q: nothing but errors.
    let quiet = ipub(dir, &["-q", "run", "tiny.toml"], &[]);
    assert_eq!(quiet.code, 0);
    assert_eq!((quiet.stdout.as_str(), quiet.stderr.as_str()), ("", ""));
    let broken = PROJECT.replace("inputs = [\"x\"]", "inputs = [\"xx\"]");
    std::fs::write(dir.join("broken.toml"), broken).expect("write");
    let quiet = ipub(dir, &["-q", "check", "broken.toml"], &[]);
    assert_eq!(quiet.code, 1);
    assert!(
        quiet.stderr.contains("unknown tensor `xx`"),
        "{}",
        quiet.stderr
    );

    // Colour: never in a pipe by default, always when asked, and NO_COLOR
    // does not override an explicit request.
    let plain = ipub(dir, &["check", "broken.toml"], &[]);
    assert!(!plain.stderr.contains('\u{1b}'), "{}", plain.stderr);
    let coloured = ipub(
        dir,
        &["--color", "always", "check", "broken.toml"],
        &[("NO_COLOR", "1")],
    );
    assert!(coloured.stderr.contains("\u{1b}["), "{}", coloured.stderr);
    let never = ipub(
        dir,
        &["--color", "never", "check", "broken.toml"],
        &[("CLICOLOR_FORCE", "1")],
    );
    assert!(!never.stderr.contains('\u{1b}'), "{}", never.stderr);
}

#[test]
fn check_reports_a_missing_kernel_directory_and_with_fit_a_project_that_does_not_place() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    std::fs::write(
        dir.join("nokernels.toml"),
        PROJECT.replace("KERNELS", "no-such-dir"),
    )
    .expect("write");
    let checked = ipub(dir, &["check", "nokernels.toml"], &[]);
    assert_eq!(checked.code, 1);
    assert!(
        checked
            .stderr
            .contains("kernel directory `no-such-dir` is not a directory: it does not exist")
            && checked.stderr.contains("nokernels.toml:5:11"),
        "{}",
        checked.stderr
    );

    project(dir);
    let fits = ipub(dir, &["check", "--fit", "tiny.toml"], &[]);
    assert_eq!(fits.code, 0, "{}", fits.stderr);
    assert!(
        fits.stdout.contains("4 tiles, fits); 1 warning"),
        "{}",
        fits.stdout
    );
    let big = std::fs::read_to_string(dir.join("tiny.toml"))
        .expect("project")
        .replace("tiles = 4", "tiles = 1")
        .replace("shape = [8, 64]", "shape = [512, 512]");
    std::fs::write(dir.join("big.toml"), big).expect("write");
    let fits = ipub(dir, &["check", "--fit", "big.toml"], &[]);
    assert_eq!(fits.code, 1, "{}", fits.stderr);
    assert!(fits.stderr.contains("big.toml:4:9"), "{}", fits.stderr);
    assert!(fits.stderr.contains("try more tiles"), "{}", fits.stderr);
    assert!(
        fits.stderr.contains("`big.toml` does not build"),
        "{}",
        fits.stderr
    );
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::os::unix::process::ExitStatusExt as _;
    // The reader is gone before ipub starts.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .arg("schema")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run ipub");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(output.status.signal(), Some(13), "{:?}", output.status);
}
