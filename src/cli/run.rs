//! `ipub run`: build a project's package, run it on the embedded IPU21
//! model, check its outputs against the host reference and write the
//! cycle profile.

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
}

pub fn run(args: &RunArgs) -> anyhow::Result<i32> {
    if args.project.extension() == Some("ipuexe") {
        let package = crate::package::file::read(&args.project).map_err(|e| anyhow!("{e}"))?;
        let out = args.out.clone().unwrap_or_else(|| {
            args.project
                .parent()
                .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned)
        });
        return run_package(&package, &out, args.watchdog, &args.project);
    }
    let Some(path) = crate::cli::build::build_to_file(&args.project, args.out.as_deref(), false)?
    else {
        return Ok(1);
    };
    let out = path
        .parent()
        .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned);
    // Run what was written: the package is read back and validated.
    let package = crate::package::file::read(&path).map_err(|e| anyhow!("{e}"))?;
    run_package(&package, &out, args.watchdog, &path)
}

/// The package of a project, from the pipeline's queries.
pub fn package(db: &Database, file: SourceFile) -> Result<Package, BuildError> {
    Ok((*pipeline::package::package(db, file).clone()?).clone())
}

/// Runs a package on the model and checks its numerics. Exit code 0 when
/// every checked output passes. `watchdog` (cycles of one host call)
/// defaults to one derived from the package's estimate.
pub fn run_package(
    package: &Package,
    out: &Utf8Path,
    watchdog: Option<u64>,
    path: &Utf8Path,
) -> anyhow::Result<i32> {
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
    let mut device: Box<dyn Device> = Box::new(EmbeddedModel::new(watchdog));
    let clock_hz = crate::target::target_by_name(&graph.target)
        .map_or(crate::target::IPU21.clock_hz, |t| t.clock_hz);
    let package = Arc::new(package.clone());
    device.open().map_err(|e| anyhow!("{e}"))?;
    device
        .load(Arc::clone(&package))
        .map_err(|e| anyhow!("{e}"))?;
    let mut host = seeded_inputs(&package);
    device
        .call(Call::Initialize, &mut host)
        .map_err(|e| anyhow!("{e}"))?;
    let record = match device.call(Call::Run, &mut host) {
        Ok(record) => record,
        Err(error) => {
            eprintln!("error: {error}");
            if let crate::device::model::DeviceError::Fault(fault) = &error {
                if matches!(
                    fault.cause,
                    crate::device::model::FaultCause::Watchdog { .. }
                ) {
                    eprintln!(
                        "  = help: the watchdog allowed {watchdog} cycles (the package estimates {estimate}); raise it with `ipub run --watchdog CYCLES`"
                    );
                }
            }
            println!(
                "numericalTest=FAIL package={path} tiles={} hardwareTest=FAIL",
                package.tiles.len()
            );
            return Ok(1);
        }
    };
    drop(lock);

    let profile = crate::profile::Profile {
        format_version: crate::profile::FORMAT_VERSION,
        project: graph.name.clone(),
        target: graph.target.clone(),
        clock_hz,
        total_cycles: record.cycles,
        estimated_cycles: package.profile.estimated_cycles,
        steps: record.steps.clone(),
    };

    let reference = crate::reference::evaluate(graph, graph.check.reference_precision)
        .map_err(|e| anyhow!("host reference: {e}"))?;
    let mut min_cos = f64::INFINITY;
    let mut max_abs = 0f64;
    let mut failures = Vec::new();
    let mut compared = 0;
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
        println!(
            "    output {}: cosine similarity {:.9}, maximum absolute error {}",
            tensor.name, comparison.cosine_similarity, comparison.max_abs_error
        );
        min_cos = min_cos.min(comparison.cosine_similarity);
        max_abs = max_abs.max(f64::from(comparison.max_abs_error));
        compared += comparison.count;
        if let Some(message) = comparison.failure_message() {
            failures.push(format!("{}: {message}", tensor.name));
        }
    }
    // A check that compared nothing proves nothing (validation makes every
    // checked output one the run reads back, so this is a guard).
    if compared == 0 {
        failures.push("the check compared no values".to_string());
    }
    println!(
        "    cycles {} measured, {} estimated; profile {profile_path}",
        record.cycles, package.profile.estimated_cycles
    );
    let verdict = if failures.is_empty() { "PASS" } else { "FAIL" };
    println!(
        "referenceMinimumCosineSimilarity={min_cos:.9} referenceMaximumAbsoluteError={max_abs} numericalTest={verdict} cycles={} package={path} tiles={} hardwareTest=PASS",
        record.cycles,
        package.tiles.len()
    );
    for failure in &failures {
        eprintln!("error: {failure}");
    }
    // The verdict stands whether or not the profile can be written.
    if let Err(error) = crate::fsutil::write_atomic(&profile_path, profile.to_json().as_bytes()) {
        eprintln!("error: cannot write the profile {profile_path}: {error}");
        return Ok(1);
    }
    Ok(i32::from(!failures.is_empty()))
}

/// Host buffers holding every streamed input of `package`'s run call, from
/// the project's seeded generator.
pub fn seeded_inputs(package: &Package) -> HostBuffers {
    let mut host = HostBuffers::default();
    for step in &package.run.steps {
        if let Step::HostWrite { binding } = step {
            let b = &package.bindings[*binding as usize];
            host.inputs.insert(
                *binding,
                crate::reference::init::tensor_bytes(&package.graph, b.tensor, b.iteration),
            );
        }
    }
    host
}
