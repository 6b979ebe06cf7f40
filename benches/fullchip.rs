//! The full-chip projects (1472 tiles): for each, the cold plan phase and
//! cold build, a no-op build in a fresh process, one weight edit rebuilt in
//! watch, the package size, the peak resident memory of the cold build and
//! of the run, the `ipub run` wall time and the simulated tile-cycles per
//! second. `cargo bench --bench fullchip`.
//!
//! Each project works on a copy of `projects/` and `device/` in its own
//! temporary directory with its own empty cache, so "cold" means no stored
//! plans, tile images or kernels, and the edits never touch the checkout.
//! Fresh-process builds spawn the `ipub` binary; the watch rebuild runs in
//! this process the way `ipub watch` does (refresh the edited file, rebuild
//! through the same database, write the package if it changed). A run that
//! takes longer than `IPUB_FULLCHIP_RUN_LIMIT_S` seconds (default 300; 0
//! skips runs) is stopped and reported as such.

mod common;

use camino::{Utf8Path, Utf8PathBuf};
use common::copy_dir;
use ipub::cli::build::build;
use ipub::cli::watch::keep_package;
use ipub::db::{Database, Db};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A project and the weight edit rebuilt in watch: in `file` (relative to
/// the project directory's parent), the first `from` becomes `to`.
struct Workload {
    project: &'static str,
    file: &'static str,
    from: &'static str,
    to: &'static str,
}

const WORKLOADS: [Workload; 3] = [
    Workload {
        project: "projects/siglip-mlp-f8.toml",
        file: "projects/siglip-mlp-f8.toml",
        from: "std = 0.03 }",
        to: "std = 0.031 }",
    },
    Workload {
        project: "projects/vit-b16-fp8.toml",
        file: "projects/layers/vit-b16-encoder.toml",
        from: "std = 0.05 }",
        to: "std = 0.051 }",
    },
    Workload {
        project: "projects/gemm-131072x64x64-f8.toml",
        file: "projects/gemm-131072x64x64-f8.toml",
        from: "std = 0.125 }",
        to: "std = 0.126 }",
    },
];

/// The milliseconds a phase line of `ipub build` reports (`plan ... (…, 123.4 ms)`).
fn phase_ms(stdout: &str, phase: &str) -> Option<f64> {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{phase} ")))?;
    let at = line.rfind(" ms)")?;
    line[..at].rsplit([',', '(']).next()?.trim().parse().ok()
}

/// The simulation rate `ipub run` reports (`…: 12.3 M tile-cycles/s`).
fn tile_cycles_per_second(stdout: &str) -> Option<f64> {
    let line = stdout.lines().find(|l| l.contains("M tile-cycles/s"))?;
    let at = line.rfind(" M tile-cycles/s")?;
    let millions: f64 = line[..at].rsplit(' ').next()?.parse().ok()?;
    Some(millions * 1e6)
}

fn ipub(root: &Utf8Path, command: &str, project: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipub"));
    cmd.args([command, "--color", "never", project])
        .env("IPUB_CACHE_DIR", root.join("cache"))
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A finished child process: wall time, peak resident memory, output.
struct Finished {
    seconds: f64,
    peak_rss_mb: f64,
    stdout: String,
}

/// The peak resident set of a running process so far (`VmHWM` in
/// `/proc/PID/status`), in megabytes.
fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Runs `cmd` to the end, or stops it after `limit`. The peak memory is
/// the child's own high-water mark, read every few milliseconds while it
/// runs (`getrusage` would report the parent's size at the fork when the
/// child stays smaller, and this process holds a whole build's database).
fn spawn_measured(mut cmd: Command, limit: Duration) -> Result<Finished, String> {
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot start ipub: {e}"))?;
    // Read the pipes on their own threads so a chatty child never blocks.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let mut peak = 0.0f64;
    let status = loop {
        if let Some(mb) = peak_rss_mb(child.id()) {
            peak = peak.max(mb);
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > limit {
            // The child is this process's own; stop it by its handle.
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("over {} s, stopped", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "failed after {seconds:.1} s ({status}): {}{}",
            stdout.trim_end(),
            stderr.trim_end()
        ));
    }
    Ok(Finished {
        seconds,
        peak_rss_mb: peak,
        stdout,
    })
}

/// One watch rebuild after editing `workload`'s file: milliseconds and the
/// queries recomputed.
fn watch_edit(root: &Utf8Path, workload: &Workload) -> (f64, usize) {
    std::env::set_current_dir(root).expect("cd");
    std::env::set_var("IPUB_CACHE_DIR", root.join("cache"));
    let mut db = Database::on_disk();
    let file = db.file(Utf8Path::new(workload.project));
    let first = build(&db, file, false);
    assert!(first.ok, "{} builds in watch", workload.project);
    // As `ipub watch` does: the package written, the stamp saved.
    let project = Utf8Path::new(workload.project);
    keep_package(&db, project, None, &first, None).expect("writes");
    let written = first.package.clone().expect("package");
    if let Some(store) = db.store() {
        store.flush();
    }

    let edited = root.join(workload.file);
    let text = std::fs::read_to_string(&edited).expect("project file");
    assert!(
        text.contains(workload.from),
        "{}: no `{}`",
        workload.file,
        workload.from
    );
    std::fs::write(&edited, text.replacen(workload.from, workload.to, 1)).expect("edit");
    let started = Instant::now();
    db.refresh_file(Utf8Path::new(workload.file));
    let outcome = build(&db, file, false);
    assert!(outcome.ok, "{} builds after the edit", workload.project);
    keep_package(&db, project, None, &outcome, Some(&written)).expect("writes");
    (started.elapsed().as_secs_f64() * 1000.0, outcome.recomputed)
}

fn package_mb(root: &Utf8Path) -> f64 {
    let out = root.join("target/ipub");
    let mut bytes = 0u64;
    for dir in std::fs::read_dir(&out).into_iter().flatten().flatten() {
        for entry in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.path().extension().is_some_and(|x| x == "ipuexe") {
                bytes += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    bytes as f64 / 1e6
}

fn main() {
    let limit = std::env::var("IPUB_FULLCHIP_RUN_LIMIT_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    let checkout = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let build_limit = Duration::from_secs(600);
    for workload in &WORKLOADS {
        let project = workload.project;
        let scratch = tempfile::tempdir().expect("temporary directory");
        let root = Utf8PathBuf::from_path_buf(scratch.path().to_path_buf()).expect("utf-8");
        copy_dir(&checkout.join("projects"), &root.join("projects"));
        copy_dir(&checkout.join("device"), &root.join("device"));

        let cold = match spawn_measured(ipub(&root, "build", project), build_limit) {
            Ok(cold) => cold,
            Err(why) => {
                println!("{project}: cold build {why}");
                continue;
            }
        };
        let plan = phase_ms(&cold.stdout, "plan").unwrap_or(f64::NAN);
        let noop = spawn_measured(ipub(&root, "build", project), build_limit)
            .map_or(f64::NAN, |f| f.seconds * 1000.0);
        let size = package_mb(&root);
        let (edit_ms, edit_queries) = watch_edit(&root, workload);
        std::env::set_current_dir(&checkout).expect("cd");
        let run = match limit.is_zero() {
            true => "run skipped".to_string(),
            false => match spawn_measured(ipub(&root, "run", project), limit) {
                Ok(run) => format!(
                    "run {:.1} s, {:.0} MB peak, {:.1} M tile-cycles/s",
                    run.seconds,
                    run.peak_rss_mb,
                    tile_cycles_per_second(&run.stdout).unwrap_or(f64::NAN) / 1e6
                ),
                Err(why) => format!("run {why}"),
            },
        };
        println!(
            "{project}: cold plan {plan:.0} ms, cold build {:.0} ms ({:.0} MB peak), \
             fresh no-op {noop:.0} ms, one weight edit in watch {edit_ms:.0} ms \
             ({edit_queries} queries), package {size:.1} MB, {run}",
            cold.seconds * 1000.0,
            cold.peak_rss_mb,
        );
    }
}
