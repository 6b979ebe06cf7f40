//! The full-chip projects (1472 tiles): for each, the cold plan phase and
//! cold build, a no-op build in a fresh process, the package size and the
//! `ipub run` wall time. `cargo bench --bench fullchip`.
//!
//! Every build spawns the `ipub` binary with its own empty cache and output
//! directory, so "cold" means no stored plans, tile images or kernels. A
//! run that takes longer than `IPUB_FULLCHIP_RUN_LIMIT_S` seconds (default
//! 300; 0 skips runs) is stopped and reported as such.

use camino::Utf8PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROJECTS: [&str; 3] = [
    "projects/siglip-mlp-f8.toml",
    "projects/vit-b16-fp8.toml",
    "projects/gemm-131072x64x64-f8.toml",
];

/// The milliseconds a phase line of `ipub build` reports (`plan ... (…, 123.4 ms)`).
fn phase_ms(stdout: &str, phase: &str) -> Option<f64> {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{phase} ")))?;
    let at = line.rfind(" ms)")?;
    line[..at].rsplit([',', '(']).next()?.trim().parse().ok()
}

struct Dirs {
    cache: Utf8PathBuf,
    out: Utf8PathBuf,
}

fn ipub(dirs: &Dirs, command: &str, project: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipub"));
    cmd.args([
        command,
        "--color",
        "never",
        "--out",
        dirs.out.as_str(),
        project,
    ])
    .env("IPUB_CACHE_DIR", &dirs.cache)
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

/// One build in a new process: wall milliseconds and its stdout.
fn build(dirs: &Dirs, project: &str) -> (f64, String) {
    let started = Instant::now();
    let output = ipub(dirs, "build", project).output().expect("runs ipub");
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{project}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (elapsed, stdout)
}

/// `ipub run` wall seconds, or why there is no figure.
fn run(dirs: &Dirs, project: &str, limit: Duration) -> String {
    if limit.is_zero() {
        return "skipped".to_string();
    }
    let started = Instant::now();
    let mut child = ipub(dirs, "run", project)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("runs ipub");
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            let seconds = started.elapsed().as_secs_f64();
            return match status.success() {
                true => format!("{seconds:.1} s"),
                false => format!("failed after {seconds:.1} s ({status})"),
            };
        }
        if started.elapsed() > limit {
            // The child is this process's own; stop it by its handle.
            let _ = child.kill();
            let _ = child.wait();
            return format!("over {} s, stopped", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let limit = std::env::var("IPUB_FULLCHIP_RUN_LIMIT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    for project in PROJECTS {
        let scratch = tempfile::tempdir().expect("temporary directory");
        let root = Utf8PathBuf::from_path_buf(scratch.path().to_path_buf()).expect("utf-8");
        let dirs = Dirs {
            cache: root.join("cache"),
            out: root.join("out"),
        };
        let (cold, stdout) = build(&dirs, project);
        let plan = phase_ms(&stdout, "plan").unwrap_or(f64::NAN);
        let (noop, _) = build(&dirs, project);
        let size: u64 = std::fs::read_dir(&dirs.out)
            .expect("output directory")
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "ipuexe"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        let wall = run(&dirs, project, limit);
        println!(
            "{project}: cold plan {plan:.0} ms, cold build {cold:.0} ms, fresh no-op {noop:.0} ms, package {:.1} MB, run {wall}",
            size as f64 / 1e6
        );
    }
}
