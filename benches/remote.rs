//! The shared cache's worth: for vit-fp8 and a full-chip project
//! (1472 tiles), a truly cold build (empty local store, no remote) against
//! a build with an empty local store and a warm remote cache, and the
//! bytes each moved. `cargo bench --bench remote`.
//!
//! The remote is nginx with WebDAV on 127.0.0.1 (see
//! `tests/remote/nginx.rs`); without nginx the bench says so and prints
//! nothing else. Every build is a fresh `ipub build` process with its own
//! local store ("machine"):
//!
//! - *cold*: no remote; everything computed;
//! - *cold + upload*: the first machine with the remote, which computes
//!   everything and uploads it (the uploads overlap the build and are
//!   flushed before the process exits);
//! - *remote hit*: another machine into another directory: the pipeline
//!   runs, with plans, kernels and tile images from the remote;
//! - *remote package*: another machine into the first one's directory:
//!   the stamp shows nothing changed and the package comes from the remote.

#[path = "../tests/remote/nginx.rs"]
mod nginx;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const PROJECTS: &[(&str, &str)] = &[
    ("vit-fp8", "projects/vit-fp8.toml"),
    ("chip-1472", "tests/data/projects/chip/chip-1472.toml"),
];

/// One build's wall time and the remote line it printed.
struct Run {
    ms: f64,
    remote: String,
    package: Vec<u8>,
}

/// `ipub build project --out out` with its own store under `machine`.
fn build(machine: &Path, project: &Path, out: &Path, remote: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ipub"));
    command
        .arg("build")
        .arg(project)
        .arg("--out")
        .arg(out)
        .env("IPUB_CACHE_DIR", machine.join("cache"))
        .env("XDG_CONFIG_HOME", machine.join("config"))
        .env_remove("IPUB_REMOTE_CACHE")
        .env_remove("IPUB_LOG")
        .env_remove("RUST_LOG");
    match remote {
        Some(url) => command.args(["--remote-cache", url]),
        None => command.arg("--no-remote-cache"),
    };
    let started = Instant::now();
    let output = command.output().expect("runs ipub");
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let name = project.file_stem().expect("name").to_string_lossy();
    Run {
        ms,
        remote: stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("remote "))
            .map(|l| l.split_once(": ").map_or(l, |(_, rest)| rest).to_string())
            .unwrap_or_else(|| "-".into()),
        package: std::fs::read(out.join(format!("{name}.ipuexe"))).expect("package"),
    }
}

/// Runs per figure; the median is printed, the machine being shared.
const RUNS: usize = 3;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

const LABELS: [&str; 4] = ["cold", "cold + upload", "remote hit", "remote package"];

/// The four builds of `project` against a new, empty server: their runs
/// and the bytes the server holds afterwards.
fn round(server: &nginx::Nginx, project: &Path, name: &str) -> ([Run; 4], u64) {
    let url = server.url();
    let work = tempfile::tempdir().expect("temporary directory");
    let machine = |n: &str| work.path().join(n);
    let out = |n: &str| work.path().join("out").join(n);
    let cold = build(&machine("cold"), project, &out("cold"), None);
    let first = build(&machine("first"), project, &out("first"), Some(&url));
    let hit = build(&machine("hit"), project, &out("hit"), Some(&url));
    std::fs::remove_file(out("first").join(format!("{name}.ipuexe"))).expect("remove");
    let restored = build(&machine("restored"), project, &out("first"), Some(&url));
    for run in [&first, &hit, &restored] {
        assert!(run.package == cold.package, "{name}: packages differ");
    }
    ([cold, first, hit, restored], server.bytes_held())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if nginx::Nginx::start().is_none() {
        return;
    }
    println!(
        "{:<10} {:<15} {:>10}  remote traffic (median of {RUNS} runs)",
        "project", "build", "ms"
    );
    for (name, path) in PROJECTS {
        let project = root.join(path);
        let mut times = vec![Vec::new(); LABELS.len()];
        let mut last = None;
        for _ in 0..RUNS {
            let server = nginx::Nginx::start().expect("nginx starts");
            let (runs, held) = round(&server, &project, name);
            for (time, run) in times.iter_mut().zip(&runs) {
                time.push(run.ms);
            }
            last = Some((runs, held));
        }
        let (runs, held) = last.expect("a run");
        let medians: Vec<f64> = times.into_iter().map(median).collect();
        for ((label, run), ms) in LABELS.iter().zip(&runs).zip(&medians) {
            println!("{name:<10} {label:<15} {ms:>10.1}  {}", run.remote);
        }
        println!(
            "{name:<10} the server holds {:.2} MB for it; remote hit {:.2}x faster than cold",
            held as f64 / 1e6,
            medians[0] / medians[2]
        );
    }
}
