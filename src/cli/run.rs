//! `ipub run`: build a project's package, run it on the embedded IPU21
//! model, check its outputs against the host reference and write the
//! cycle profile.

use super::message::{Message, OutputCheck, RunFinished};
use super::output::{self, MessageArgs};
use super::progress::Progress;
use crate::db::{Database, SourceFile};
use crate::device::embedded::{Device, EmbeddedModel};
use crate::device::lock::{default_lock_path, DeviceLock};
use crate::device::model::HostBuffers;
use crate::package::{Call, Package, Step};
use crate::pipeline::{self, BuildError};
use anyhow::anyhow;
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The project to build and run, or a package (`.ipuexe`) to run as is.
    #[arg(value_name = "PROJECT.toml|PACKAGE.ipuexe")]
    pub project: Utf8PathBuf,
    /// Where the package and the profile go (default `target/ipub/<project>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    /// Stop the run when it passes this many cycles (default: 100 times
    /// the package's estimate, at least 10 million, at most 2 billion).
    #[arg(long, value_name = "CYCLES")]
    pub watchdog: Option<u64>,
    /// Write every checked output, as the device and as the reference
    /// computed it, into DIR (`.npy` files, one `.safetensors` per side
    /// and `index.json`).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<Utf8PathBuf>,
    /// With `--dump`: also every materialised intermediate, those inside a
    /// repeat body as its last iteration left them (the package is built to
    /// read them back, into `<out>/dump-all/`).
    #[arg(long, requires = "dump")]
    pub dump_all: bool,
    /// Run on these inputs instead of the project's: a `.safetensors`
    /// file whose keys are input names (no rebuild).
    #[arg(long, value_name = "FILE.safetensors")]
    pub inputs: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub message: MessageArgs,
    #[command(flatten)]
    pub remote: crate::cli::remote::RemoteArgs,
}

/// What a run does besides running and checking.
#[derive(Clone, Debug, Default)]
pub(super) struct RunOptions {
    pub watchdog: Option<u64>,
    /// `--dump DIR`.
    pub dump: Option<Utf8PathBuf>,
    /// `--inputs FILE.safetensors`.
    pub inputs: Option<Utf8PathBuf>,
    /// The package was read with `package::file::read`, which validated
    /// it; the device need not validate it again.
    pub validated: bool,
}

pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    output::set_format(args.message.message_format);
    let options = RunOptions {
        watchdog: args.watchdog,
        dump: args.dump.clone(),
        inputs: args.inputs.clone(),
        // Both ways below run a package read back from its file.
        validated: true,
    };
    if args.project.extension() == Some("ipuexe") {
        if args.dump_all {
            anyhow::bail!("`--dump-all` builds the project to read back its intermediates; give the project file, not a package");
        }
        let package = crate::package::file::read(&args.project).map_err(|e| anyhow!("{e}"))?;
        let out = args.out.clone().unwrap_or_else(|| {
            args.project
                .parent()
                .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned)
        });
        return run_package_with(&package, &out, &options, &args.project);
    }
    let _remote = args.remote.install()?;
    let mut db = crate::db::Database::on_disk();
    // A package that reads back every intermediate is another build, kept
    // apart so that it never stands for the project's ordinary package.
    let out_dir = if args.dump_all {
        db.set_read_back(crate::db::ReadBack::All);
        // Beside the project's ordinary package, in the directory named
        // for the project (the file's name when it does not validate,
        // which the build then reports).
        let file = crate::db::Db::file(&db, &args.project);
        let name = match &crate::project::project_graph(&db, file).graph {
            Some(graph) => graph.name.clone(),
            None => args.project.file_stem().unwrap_or("project").to_string(),
        };
        let base = args
            .out
            .clone()
            .unwrap_or_else(|| Utf8PathBuf::from("target/ipub").join(name));
        Some(base.join("dump-all"))
    } else {
        args.out.clone()
    };
    let Some(path) =
        crate::cli::build::build_to_file(&mut db, &args.project, out_dir.as_deref(), false)?
    else {
        return Ok(1);
    };
    // The build's results are not needed to run its package: they are
    // freed while the model runs instead of holding the memory until the
    // end (at full-chip scale, hundreds of megabytes).
    std::thread::spawn(move || drop(db));
    let out = path
        .parent()
        .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned);
    // Run what was written: the package is read back and validated.
    let package = crate::package::file::read(&path).map_err(|e| anyhow!("{e}"))?;
    run_package_with(&package, &out, &options, &path)
}

/// The package of a project, from the pipeline's queries.
pub fn package(db: &Database, file: SourceFile) -> Result<Package, BuildError> {
    Ok((*pipeline::package::package(db, file).clone()?).clone())
}

/// Runs a package on the model and checks its numerics. Exit code 0 when
/// every checked output passes. `watchdog` (cycles of one host call)
/// defaults to one derived from the package's estimate.
pub(super) fn run_package(
    package: &Package,
    out: &Utf8Path,
    watchdog: Option<u64>,
    path: &Utf8Path,
) -> anyhow::Result<i32> {
    let options = RunOptions {
        watchdog,
        ..RunOptions::default()
    };
    run_package_with(package, out, &options, path)
}

/// [`run_package`] with inputs given at run time and dumps.
pub(super) fn run_package_with(
    package: &Package,
    out: &Utf8Path,
    options: &RunOptions,
    path: &Utf8Path,
) -> anyhow::Result<i32> {
    let watchdog = options.watchdog;
    let overrides = match &options.inputs {
        Some(file) => {
            let overrides = super::tensors::read_overrides(package, file)?;
            output::result_line(format!("    inputs: {} from {file}", overrides.len()));
            overrides
        }
        None => super::tensors::Overrides::default(),
    };
    let graph = &package.graph;
    // The profile is named after the graph: a name read from a file is
    // never a path of its own (validation refuses such names; this is the
    // writer's own guard).
    if let Some(problem) = crate::project::limits::file_name_problem(&graph.name) {
        anyhow::bail!("the package's name cannot name its profile file: {problem}");
    }
    let profile_path = out.join(format!("{}.profile.json", graph.name));
    let estimate = package.profile.estimated_cycles;
    let watchdog = watchdog.unwrap_or_else(|| crate::device::model::default_watchdog(estimate));
    let lock = DeviceLock::acquire(&default_lock_path())?;
    let progress = Progress::start(
        "run",
        format!("{} on the {} model", graph.name, graph.target),
    );
    let total_steps = crate::device::model::records_in(package.call(Call::Run));
    let report = progress.reporter();
    let mut model =
        EmbeddedModel::new(watchdog).with_progress(std::sync::Arc::new(move |steps, _| {
            report(steps, total_steps)
        }));
    if options.validated {
        model = model.with_validated_packages();
    }
    let mut device: Box<dyn Device> = Box::new(model);
    let clock_hz = graph.target.spec().clock_hz;
    let package = Arc::new(package.clone());
    device.open().map_err(|e| anyhow!("{e}"))?;
    device
        .load(Arc::clone(&package))
        .map_err(|e| anyhow!("{e}"))?;
    let mut host = super::tensors::host_inputs(&package, &overrides);
    device
        .call(Call::Initialize, &mut host)
        .map_err(|e| anyhow!("{e}"))?;
    // The host reference needs nothing from the device: it is evaluated on
    // its own thread while the model runs, sharing rayon's pool with it.
    let (called, simulated, reference) = std::thread::scope(|scope| {
        let reference = scope.spawn(|| super::tensors::reference(&package, &overrides));
        let start = std::time::Instant::now();
        let called = device.call(Call::Run, &mut host);
        let simulated = start.elapsed();
        let reference = reference
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (called, simulated, reference)
    });
    progress.finish();
    let record = match called {
        Ok(record) => record,
        Err(error) => {
            output::error(format!("the device faulted: {error}"));
            if let crate::device::model::DeviceError::Fault(fault) = &error {
                if matches!(
                    fault.cause,
                    crate::device::model::FaultCause::Watchdog { .. }
                ) {
                    output::help(format!(
                        "the watchdog allowed {watchdog} cycles (the package estimates {estimate}); raise it with `ipub run --watchdog CYCLES`"
                    ));
                }
            }
            output::result_line(format!(
                "numericalTest={} package={path} tiles={} hardwareTest={}",
                output::verdict("FAIL"),
                package.tiles.len(),
                output::verdict("FAIL"),
            ));
            output::message(&Message::RunFinished(RunFinished {
                package: path.as_str(),
                name: &graph.name,
                success: false,
                numerical_test: "FAIL",
                hardware_test: "FAIL",
                tiles: package.tiles.len(),
                cycles: None,
                estimated_cycles: package.profile.estimated_cycles,
                profile: None,
                outputs: &[],
                fault: Some(error.to_string()),
            }));
            return Ok(1);
        }
    };
    drop(lock);

    let package_hash = std::fs::read(path)
        .map(|bytes| blake3::hash(&bytes).to_hex().to_string())
        .unwrap_or_default();
    let profile = crate::profile::collect::profile(
        &package,
        &record.steps,
        record.cycles,
        clock_hz,
        &crate::profile::collect::PackageFile {
            path: relative_path(out, path).as_str(),
            hash: &package_hash,
        },
    );

    let checking = Progress::start("check", "outputs against the host reference");
    let reference = reference?;
    let checked = compare_outputs(&package, &host, &reference);
    checking.finish();
    let mut min_cos = f64::INFINITY;
    let mut max_abs = 0f64;
    let mut outputs = Vec::new();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, shape, comparison) in checked {
        let infinities = match comparison.equal_infinities {
            0 => String::new(),
            n => format!(" ({n} values infinite on both sides)"),
        };
        output::result_line(format!(
            "    output {name}: cosine similarity {}, maximum absolute error {}{infinities}{}",
            crate::compare::format_cosine(comparison.cosine_similarity),
            comparison.max_abs_error,
            comparison.nan_note()
        ));
        // An undefined similarity stays undefined in the minimum.
        min_cos = if comparison.cosine_similarity.is_nan() || min_cos.is_nan() {
            f64::NAN
        } else {
            min_cos.min(comparison.cosine_similarity)
        };
        max_abs = max_abs.max(f64::from(comparison.max_abs_error));
        compared += comparison.count;
        let failure = comparison.failure_message();
        if let Some(report) = comparison.failure_report(Some(&shape)) {
            failures.push(format!("{name}: {report}"));
        }
        outputs.push(OutputCheck {
            name,
            cosine_similarity: Some(comparison.cosine_similarity).filter(|c| c.is_finite()),
            max_abs_error: comparison.max_abs_error,
            passed: failure.is_none(),
            failure,
        });
    }
    // A check that compared nothing proves nothing (validation makes every
    // checked output one the run reads back, so this is a guard).
    if compared == 0 {
        failures.push("the check compared no values".to_string());
    }
    // The verdict stands whether or not the profile can be written; the
    // last run's profile stays beside the new one, so `ipub profile diff`
    // can say what changed since then.
    let previous = out.join(format!("{}.previous.profile.json", graph.name));
    let kept = profile_path.exists() && std::fs::rename(&profile_path, &previous).is_ok();
    let written = crate::fsutil::write_atomic(&profile_path, profile.to_json().as_bytes());
    let kept = if kept {
        format!("\n    the last run's profile is kept as {previous}: `ipub profile diff {previous} {profile_path}`")
    } else {
        String::new()
    };
    output::result_line(format!(
        "    cycles {} measured, {} estimated; profile {profile_path}{kept}",
        record.cycles, package.profile.estimated_cycles
    ));
    let rate = SimulationRate {
        cycles: record.cycles,
        tiles: package.tiles.len() as u64,
        seconds: simulated.as_secs_f64(),
    };
    tracing::info!(
        call = "run",
        cycles = rate.cycles,
        tiles = rate.tiles,
        elapsed_ms = simulated.as_millis(),
        tile_cycles_per_second = rate.per_second() as u64,
        "simulated host call"
    );
    output::result_line(format!("    model {rate}"));
    let mut dump_error = None;
    if let Some(dir) = &options.dump {
        match super::tensors::write_dump(dir, &package, &host, &reference) {
            Ok(count) => output::result_line(format!(
                "    dump: {count} tensors in {dir} (index {dir}/index.json)"
            )),
            Err(error) => dump_error = Some(error),
        }
    }
    if let Some(error) = &dump_error {
        output::error(format!("cannot write the dump: {error:#}"));
    }
    if let Err(error) = &written {
        output::error(format!("cannot write the profile {profile_path}: {error}"));
    }
    let passed = failures.is_empty();
    let verdict = if passed { "PASS" } else { "FAIL" };
    output::result_line(format!(
        "referenceMinimumCosineSimilarity={} referenceMaximumAbsoluteError={max_abs} numericalTest={} cycles={} package={path} tiles={} hardwareTest={}",
        crate::compare::format_cosine(min_cos),
        output::verdict(verdict),
        record.cycles,
        package.tiles.len(),
        output::verdict("PASS"),
    ));
    for failure in &failures {
        output::error(failure);
    }
    output::message(&Message::RunFinished(RunFinished {
        package: path.as_str(),
        name: &graph.name,
        // The run's files are part of what it was asked for.
        success: passed && dump_error.is_none() && written.is_ok(),
        numerical_test: verdict,
        hardware_test: "PASS",
        tiles: package.tiles.len(),
        cycles: Some(record.cycles),
        estimated_cycles: package.profile.estimated_cycles,
        profile: Some(profile_path.as_str()),
        outputs: &outputs,
        fault: None,
    }));
    if written.is_err() || dump_error.is_some() {
        return Ok(1);
    }
    Ok(i32::from(!passed))
}

/// How fast the model simulated a host call: the call's cycles on every
/// tile the package loads, per second of wall time (the measure of
/// `benches/model.rs`).
struct SimulationRate {
    cycles: u64,
    tiles: u64,
    seconds: f64,
}

impl SimulationRate {
    fn per_second(&self) -> f64 {
        (self.cycles as f64 * self.tiles as f64) / self.seconds.max(1e-9)
    }
}

impl std::fmt::Display for SimulationRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "simulated {} cycles on {} tiles in {:.2} s: {:.1} M tile-cycles/s",
            self.cycles,
            self.tiles,
            self.seconds,
            self.per_second() / 1e6
        )
    }
}

/// `path` as seen from directory `dir` (a profile names its package this
/// way, so a directory of runs moves as a whole); absolute when `path`
/// lies outside `dir`.
fn relative_path(dir: &Utf8Path, path: &Utf8Path) -> Utf8PathBuf {
    let absolute = |p: &Utf8Path| p.canonicalize_utf8().unwrap_or_else(|_| p.to_path_buf());
    let (dir, path) = (absolute(dir), absolute(path));
    path.strip_prefix(&dir)
        .map_or_else(|_| path.clone(), Utf8Path::to_path_buf)
}

/// Each checked output of a finished run (read back into `host`) compared
/// with the host reference, in the order the run reads them back. Tests
/// that drive the device themselves judge their runs with this, so they
/// apply exactly the check `ipub run` applies.
pub fn checked_outputs(
    package: &Package,
    host: &HostBuffers,
) -> anyhow::Result<Vec<(String, crate::compare::Comparison)>> {
    let reference = super::tensors::reference(package, &super::tensors::Overrides::default())?;
    Ok(compare_outputs(package, host, &reference)
        .into_iter()
        .map(|(name, _, comparison)| (name, comparison))
        .collect())
}

/// Each checked output read back into `host`, with its shape, compared
/// with `reference`.
fn compare_outputs(
    package: &Package,
    host: &HostBuffers,
    reference: &crate::reference::Evaluation,
) -> Vec<(String, Vec<usize>, crate::compare::Comparison)> {
    let graph = &package.graph;
    let mut checked = Vec::new();
    for step in &package.run.steps {
        let Step::HostRead { binding } = step else {
            continue;
        };
        let b = &package.bindings[*binding as usize];
        if !graph.check.outputs.contains(&b.tensor) {
            continue;
        }
        let tensor = graph.tensor(b.tensor);
        let bytes = host.outputs.get(binding).cloned().unwrap_or_default();
        let values = crate::numerics::decode(&bytes, tensor.dtype, tensor.scale);
        let expected = reference.get(b.tensor).unwrap_or(&[]);
        let comparison = crate::compare::compare(
            &values,
            expected,
            graph.check.min_cosine_similarity,
            graph.check.max_abs_error,
        );
        checked.push((tensor.name.clone(), tensor.shape.clone(), comparison));
    }
    checked
}

/// Host buffers holding every streamed input of `package`'s run call: from
/// the project's seeded generator, or the package's values for inputs read
/// from tensor files.
pub fn seeded_inputs(package: &Package) -> HostBuffers {
    super::tensors::host_inputs(package, &super::tensors::Overrides::default())
}
