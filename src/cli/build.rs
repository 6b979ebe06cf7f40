//! `ipub build`: run the pipeline's phases on a project, one line each.

use super::message::{BuildFinished, Message, PhaseRecord};
use super::output::{self, MessageArgs};
use super::progress::Progress;
use super::stamp::{package_path, Change, Stamp};
use crate::db::{Database, Db, SourceFile};
use crate::diagnostic::Diagnostic;
use crate::graph::OpId;
use crate::pipeline::{self, BuildError};
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The project to build.
    #[arg(value_name = "PROJECT.toml")]
    pub project: Utf8PathBuf,
    /// Print an IR dump after building: graph, fusion, plan, shards, exchanges,
    /// placement or tile=N (repeatable).
    #[arg(long, value_name = "IR", value_parser = parse_emit)]
    pub emit: Vec<Emit>,
    /// Where the package goes (default `target/ipub/<project>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    /// List, per phase, what was recomputed and what was reused, and the
    /// input change behind each recomputed item.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub message: MessageArgs,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
}

/// `ipub explain`: a build that always explains itself.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The project to build.
    #[arg(value_name = "PROJECT.toml")]
    pub project: Utf8PathBuf,
    /// Where the package goes (default `target/ipub/<project>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    Graph,
    /// What fusion merged (`crate::fuse`).
    Fusion,
    Plan,
    Shards,
    Exchanges,
    Placement,
    /// One tile's image: segments, step entries, kernels, disassembly.
    Tile(u32),
}

fn parse_emit(text: &str) -> Result<Emit, String> {
    Ok(match text {
        "graph" => Emit::Graph,
        "fusion" => Emit::Fusion,
        "plan" => Emit::Plan,
        "shards" => Emit::Shards,
        "exchanges" => Emit::Exchanges,
        "placement" => Emit::Placement,
        _ => match text.strip_prefix("tile=").map(str::parse::<u32>) {
            Some(Ok(tile)) => Emit::Tile(tile),
            _ => {
                let known = [
                    "graph",
                    "fusion",
                    "plan",
                    "shards",
                    "exchanges",
                    "placement",
                    "tile=",
                ];
                let hint = crate::suggest::did_you_mean(text, known)
                    .map_or(String::new(), |help| format!(" ({help})"));
                return Err(format!(
                    "unknown IR `{text}`{hint}: use graph, fusion, plan, shards, exchanges, placement or tile=N"
                ));
            }
        },
    })
}

pub fn run(args: &BuildArgs) -> anyhow::Result<i32> {
    output::set_format(args.message.message_format);
    let _remote = args.remote.install()?;
    let mut db = Database::on_disk();
    let built = build_to_file(&mut db, &args.project, args.out.as_deref(), args.explain)?;
    // Dumps come from the build's own queries, and a failed build still
    // shows what it got to (the plan when placement does not fit).
    let file = db.file(&args.project);
    for emit in &args.emit {
        output::text(&dump(&db, file, *emit));
    }
    // The process ends next and its memory goes with it: freeing the
    // database's results one by one would take a tenth of a second at
    // full-chip scale. Nothing in it needs dropping (the store was
    // flushed by the build).
    std::mem::forget(db);
    match built {
        Some(path) => {
            tracing::debug!(%path, "build finished");
            Ok(0)
        }
        None => Ok(1),
    }
}

pub fn run_explain(args: &ExplainArgs) -> anyhow::Result<i32> {
    run(&BuildArgs {
        project: args.project.clone(),
        emit: Vec::new(),
        out: args.out.clone(),
        explain: true,
        message: MessageArgs::default(),
        remote: args.remote.clone(),
    })
}

/// Builds `project` into its package file, printing one line per phase, or
/// finds it up to date from the build stamp without building. Returns the
/// package's path, or `None` when the build failed (errors are printed).
pub(super) fn build_to_file(
    db: &mut Database,
    project: &Utf8Path,
    out: Option<&Utf8Path>,
    explain: bool,
) -> anyhow::Result<Option<Utf8PathBuf>> {
    let started = Instant::now();
    let store = crate::store::Store::default_location();
    let out_key = out.unwrap_or(Utf8Path::new(super::stamp::DEFAULT_OUT));
    let previous = Stamp::load(&store, project, out_key);
    let changes = previous.as_ref().map(Stamp::changes);
    if let (Some(stamp), Some(changes)) = (&previous, &changes) {
        let fresh = changes.is_empty()
            && (stamp.package_intact() || stamp.package_rehashed(&store, project, out_key));
        // Another machine's build of the same files at the same paths
        // left its package in the remote cache.
        let restored = (changes.is_empty() && !fresh)
            .then(|| stamp.restore_package(&store, project, out))
            .flatten();
        if fresh || restored.is_some() {
            let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
            let from = if restored.is_some() {
                ", package from the remote cache"
            } else {
                ""
            };
            output::status(
                "package",
                format!(
                    "{} is up to date ({} inputs unchanged{from}, {elapsed_ms:.1} ms)",
                    stamp.package,
                    stamp.inputs.len(),
                ),
            );
            if explain {
                output::text(
                    "explain: no input changed since the last build; nothing recomputed\n",
                );
            }
            output::message(&Message::BuildFinished(BuildFinished {
                project: project.as_str(),
                success: true,
                fresh: true,
                package: Some(stamp.package.as_str()),
                package_bytes: None,
                tiles: None,
                estimated_cycles: None,
                recomputed: 0,
                elapsed_ms,
                errors: 0,
                warnings: 0,
                phases: &[],
            }));
            return Ok(Some(stamp.package.clone()));
        }
    }
    let mut file = db.file(project);
    let mut outcome = build(db, file, true);
    // Results are persisted in the background; they must be on disk
    // before this process ends, whether or not the build succeeded.
    if let Some(results) = db.store() {
        results.flush();
    }
    // A stored result that fails a later phase's verification (an entry
    // damaged with a valid checksum, or left by a compiler bug) must not
    // fail every build until `ipub clean`: build again without reading the
    // store, which also replaces the stored results.
    let used_store = db.store().is_some_and(|s| s.hits() > 0);
    if !outcome.ok && outcome.internal_error() && used_store {
        output::warning(format!(
            "the build failed after using results from the store ({}); building again without them",
            store.root()
        ));
        *db = Database::on_disk().with_store(store.without_reads());
        file = db.file(project);
        outcome = build(db, file, true);
        if let Some(results) = db.store() {
            results.flush();
        }
    }
    let errors = report_outcome(db, file, &outcome);
    let Some(bytes) = outcome.package.clone().filter(|_| outcome.ok) else {
        finished_message(project, &outcome, errors, None, started);
        return Ok(None);
    };
    let written = Instant::now();
    // Validation refuses such names; the writer does not rely on it.
    if let Some(problem) = crate::project::limits::file_name_problem(&outcome.name) {
        anyhow::bail!("the project name cannot name its package file: {problem}");
    }
    let path = package_path(out, &outcome.name);
    tracing::info!(tiles = outcome.tiles, "writing application package");
    bytes.write(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    tracing::info!("application package written");
    output::status(
        "write",
        format!(
            "wrote {path} ({:.1} MB, {:.1} ms)",
            bytes.len() as f64 / 1e6,
            written.elapsed().as_secs_f64() * 1000.0
        ),
    );
    output::warning_summary(&outcome.name, outcome.warnings.len());
    finished_message(project, &outcome, errors, Some(&path), started);
    Stamp::record(db, &path, &bytes).save(&store, project, out_key, &bytes);
    evict_to_budgets(&store);
    if explain {
        let first = changes.is_none();
        let changes = changes.unwrap_or_default();
        output::text(&explain_build(db, file, &changes, &outcome, first, true));
    }
    Ok(Some(path))
}

/// After a build that wrote its package (`ipub build` and `ipub run`, and
/// each rebuild of `ipub watch` and `ipub lsp`), evicts the result store
/// and the kernel cache down to their budgets, so neither grows without
/// `ipub clean`.
pub(crate) fn evict_to_budgets(store: &crate::store::Store) {
    let evicted = store.evict_to_budget();
    if evicted > 0 {
        tracing::info!(evicted, "evicted old results from the store");
    }
    let kernels = crate::kernels::cache::KernelCache::new(crate::store::cache_root());
    let evicted = kernels.evict_to_budget();
    if evicted > 0 {
        tracing::info!(
            evicted,
            "evicted least recently used kernels from the kernel cache"
        );
    }
}

/// Prints what a build found: its warnings, and its errors as located
/// diagnostics with a closing line, as rustc ends a failed compilation.
/// Returns the number of errors printed, which the finished message
/// reports: one failed build can print several (a syntax error in an
/// include and the include it breaks).
pub(super) fn report_outcome(db: &Database, file: SourceFile, outcome: &Outcome) -> usize {
    let project = file.path(db);
    output::diagnostics(db, project, &outcome.warnings);
    let Some(error) = &outcome.error else {
        return 0;
    };
    let diagnostics = super::located::build_error_diagnostics(db, file, error);
    output::diagnostics(db, project, &diagnostics);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if output::is_json() {
        return errors;
    }
    match error {
        BuildError::Project(_) => output::error(format!(
            "could not build the project due to {}",
            previous_errors(errors)
        )),
        _ => output::error(format!(
            "could not build `{}` due to {}",
            project,
            previous_errors(errors)
        )),
    }
    errors
}

fn previous_errors(n: usize) -> String {
    format!("{n} previous error{}", if n == 1 { "" } else { "s" })
}

/// The JSON message of a finished build, with the `errors` its
/// [`report_outcome`] printed.
pub(super) fn finished_message(
    project: &Utf8Path,
    outcome: &Outcome,
    errors: usize,
    package: Option<&Utf8Path>,
    started: Instant,
) {
    output::message(&Message::BuildFinished(BuildFinished {
        project: project.as_str(),
        success: outcome.ok && package.is_some(),
        fresh: false,
        package: package.map(Utf8Path::as_str),
        package_bytes: outcome.package.as_ref().map(|p| p.len()),
        tiles: outcome.package.as_ref().map(|_| outcome.tiles),
        estimated_cycles: outcome.estimated_cycles,
        recomputed: outcome.recomputed,
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        errors,
        warnings: outcome.warnings.len(),
        phases: &outcome.phases,
    }));
}

/// The `--explain` report of a finished build.
pub(super) fn explain_build(
    db: &Database,
    file: SourceFile,
    changes: &[Change],
    outcome: &Outcome,
    first: bool,
    fresh_process: bool,
) -> String {
    let kernel_sources = pipeline::project_kernels(db, file)
        .as_ref()
        .map(|kernels| {
            kernels
                .iter()
                .map(|(name, k)| (name.clone(), k.sources.clone()))
                .collect()
        })
        .unwrap_or_default();
    let tile_kernels = pipeline::tiles::tile_works(db, file)
        .as_ref()
        .map(|works| {
            works
                .iter()
                .map(|(tile, work)| {
                    let names = work.kernels().iter().map(ToString::to_string).collect();
                    (*tile, names)
                })
                .collect()
        })
        .unwrap_or_default();
    super::explain::render(&super::explain::Context {
        changes,
        computed: &outcome.computed,
        totals: &outcome.totals,
        kernel_sources: &kernel_sources,
        tile_kernels: &tile_kernels,
        first,
        fresh_process,
    })
}

/// What a build did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub ok: bool,
    /// Queries executed (not reused) across all phases.
    pub recomputed: usize,
    /// The project's name.
    pub name: String,
    /// Tiles the package loads.
    pub tiles: usize,
    /// The encoded package, when every phase succeeded.
    pub package: Option<Arc<crate::package::file::Encoded>>,
    /// What the expensive queries recomputed, by phase: the ones executed
    /// minus the results they reused from persisted results.
    pub computed: Vec<(&'static str, String)>,
    /// How many items each phase has.
    pub totals: super::explain::Totals,
    /// Each phase that ran, as its status line says it.
    pub phases: Vec<PhaseRecord>,
    /// Why the build stopped, when it did.
    pub error: Option<BuildError>,
    /// The project's warnings (see [`crate::project::lints`]).
    pub warnings: Vec<Diagnostic>,
    /// The cost model's cycles for the whole placed program.
    pub estimated_cycles: Option<u64>,
}

impl Outcome {
    /// Whether the build stopped in a phase that checks its own results:
    /// lowering and emission verify what they produce (and a stored plan or
    /// image feeds them); the other errors are the project's or its
    /// kernels'.
    pub(super) fn internal_error(&self) -> bool {
        matches!(self.error, Some(BuildError::Lower(_) | BuildError::Emit(_)))
    }
}

/// One phase's line: what ran, how many queries executed, how long (with
/// a live status line while it runs, on a terminal).
struct PhaseLine {
    started: Instant,
    progress: Option<Progress>,
}

impl PhaseLine {
    fn start(db: &Database, verbose: bool, phase: &str) -> PhaseLine {
        db.execution_log().start();
        PhaseLine {
            started: Instant::now(),
            progress: verbose.then(|| Progress::start(phase, "running")),
        }
    }

    fn finish(self, db: &Database, outcome: &mut Outcome, verbose: bool, phase: &str, what: &str) {
        if let Some(progress) = self.progress {
            progress.finish();
        }
        let executed = db.execution_log().take().len();
        outcome.recomputed += executed;
        let elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        outcome.phases.push(PhaseRecord {
            phase: phase.to_string(),
            summary: what.to_string(),
            recomputed: executed,
            elapsed_ms,
        });
        if verbose {
            output::status(
                phase,
                format!(
                    "{what} ({executed} {} recomputed, {elapsed_ms:.1} ms)",
                    if executed == 1 { "query" } else { "queries" },
                ),
            );
        }
    }
}

/// Plans the project's distinct signatures on a few threads, each with its
/// own handle on the database, so the plan phase after it finds them
/// memoized. Each signature is its own query and they share nothing, so
/// salsa runs them concurrently; one signature's refinement often keeps a
/// single thread busy (the analytical best is refined alone, see
/// `pipeline::refine`), and the other threads plan the other signatures.
/// The threads are plain threads, not rayon tasks: refinement uses rayon
/// inside a query, and a rayon thread waiting there could otherwise pick
/// up another signature's query, which salsa refuses (one database per
/// thread while a query runs). The status line counts signatures planned.
fn plan_in_parallel(db: &Database, file: SourceFile, line: &PhaseLine) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<&crate::plan::signature::OpSignature> = pipeline::op_signatures(db, file)
        .iter()
        .filter(|s| seen.insert(*s))
        .collect();
    let total = distinct.len() as u64;
    let report = line.progress.as_ref().map(|progress| {
        progress.set(0, total);
        progress.set_text(format!("{total} distinct operations"));
        progress.reporter()
    });
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let threads = rayon::current_num_threads().clamp(1, distinct.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let db = db.clone();
            let (distinct, next, done, report) = (&distinct, &next, &done, &report);
            scope.spawn(move || {
                while let Some(signature) = distinct.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let signature = pipeline::Signature::new(&db, (*signature).clone());
                    let _ = pipeline::operator_plans(&db, signature);
                    let planned = done.fetch_add(1, Ordering::Relaxed) as u64 + 1;
                    if let Some(report) = report {
                        report(planned, total);
                    }
                }
            });
        }
    });
}

/// Builds through every phase, printing one line per phase when `verbose`.
/// Errors and warnings are not printed but returned in the outcome (see
/// [`report_outcome`]), so an editor can show them its own way.
pub fn build(db: &Database, file: SourceFile, verbose: bool) -> Outcome {
    // What ran before this build (an editor's hover, say) is not its work.
    pipeline::items::forget(db);
    let mut outcome = build_phases(db, file, verbose);
    // A phase that failed returned before counting what it recomputed.
    outcome.recomputed += db.execution_log().take().len();
    outcome.computed = pipeline::items::recomputed(db);
    // Results to persist were queued while building; write them now that
    // the build no longer needs the cores.
    if let Some(store) = db.store() {
        store.start_queued();
    }
    outcome
}

fn build_phases(db: &Database, file: SourceFile, verbose: bool) -> Outcome {
    let mut outcome = Outcome::default();
    let line = PhaseLine::start(db, verbose, "project");
    let graph = match pipeline::graph(db, file) {
        Ok(graph) => graph,
        Err(error) => return failed(outcome, error),
    };
    outcome.warnings = crate::project::project_warnings(db, file);
    let span = crate::logging::build_span(graph.tiles, graph.ops.len());
    let _entered = span.enter();
    line.finish(
        db,
        &mut outcome,
        verbose,
        "project",
        &format!(
            "{}: {} tensors, {} operations, {} repeats",
            graph.name,
            graph.tensors.len(),
            graph.ops.len(),
            graph.repeats.len()
        ),
    );

    let line = PhaseLine::start(db, verbose, "plan");
    let signatures = pipeline::op_signatures(db, file).len();
    plan_in_parallel(db, file, &line);
    let distinct = crate::logging::phase("plan_package", || {
        let partitions = pipeline::initial_partitions(db, file);
        Ok::<_, BuildError>(partitions.len())
    })
    .unwrap_or(0);
    let unique: std::collections::HashSet<_> = pipeline::op_signatures(db, file).iter().collect();
    line.finish(
        db,
        &mut outcome,
        verbose,
        "plan",
        &format!(
            "{distinct} operations, {} distinct signatures ({signatures} total)",
            unique.len()
        ),
    );

    let line = PhaseLine::start(db, verbose, "lower");
    let program = match crate::logging::phase("lower", || pipeline::program(db, file).clone()) {
        Ok(program) => program,
        Err(error) => return failed(outcome, error),
    };
    let shards = program.buffers.len();
    tracing::info!(
        logical_shards = shards,
        exchange_phases = program.phases.len(),
        "lowered graph for package construction"
    );
    line.finish(
        db,
        &mut outcome,
        verbose,
        "lower",
        &format!(
            "{shards} buffers on {} tiles, {} exchange phases",
            program.tiles().len(),
            program.phases.len()
        ),
    );

    let line = PhaseLine::start(db, verbose, "schedule");
    let mut exchange_cycles = 0u64;
    let mut paired = 0;
    for phase in 0..program.phases.len() as u32 {
        let key = pipeline::PhaseKey::new(db, file, phase);
        if let Some(schedule) = pipeline::phase_schedule(db, key) {
            exchange_cycles += schedule.horizon();
            paired += usize::from(schedule.use_paired);
        }
    }
    line.finish(
        db,
        &mut outcome,
        verbose,
        "schedule",
        &format!(
            "{} phases, {paired} paired, {exchange_cycles} exchange cycles",
            program.phases.len()
        ),
    );

    let line = PhaseLine::start(db, verbose, "place");
    let placement = match crate::logging::phase("place_storage", || {
        // Errors come from the sequential pass, in tile order, with
        // every kernel's errors together.
        let _ = place_tiles_in_parallel(db, file);
        pipeline::placement(db, file).clone()
    }) {
        Ok(placement) => placement,
        Err(error) => return failed(outcome, error),
    };
    line.finish(
        db,
        &mut outcome,
        verbose,
        "place",
        &format!("{} tiles placed", placement.tiles.len()),
    );
    outcome.name = graph.name.clone();
    let kernel_count = pipeline::project_kernels(db, file)
        .as_ref()
        .map_or(0, |k| k.len());

    let line = PhaseLine::start(db, verbose, "emit");
    let tiles = placement.tiles.len();
    let emitted = crate::logging::phase("emit_tile_code", || {
        emit_tiles_in_parallel(db, file)?;
        let images = pipeline::tile_images(db, file)?;
        for image in &images {
            let key = pipeline::TileKey::new(db, file, image.tile);
            pipeline::tiles::tile_weights(db, key).clone()?;
        }
        Ok::<_, BuildError>(images.len())
    });
    let images = match emitted {
        Ok(images) => images,
        Err(error) => return failed(outcome, error),
    };
    line.finish(
        db,
        &mut outcome,
        verbose,
        "emit",
        &format!("{images} tile images and their weights"),
    );

    let line = PhaseLine::start(db, verbose, "package");
    let bytes = match pipeline::package::package_bytes(db, file).clone() {
        Ok(bytes) => bytes,
        Err(error) => return failed(outcome, error),
    };
    if let Ok(estimated) = pipeline::package::estimated_cycles(db, file) {
        tracing::info!(
            final_cycles = estimated,
            final_exchange = exchange_cycles,
            "costed final placed program"
        );
        outcome.estimated_cycles = Some(estimated);
    }
    line.finish(
        db,
        &mut outcome,
        verbose,
        "package",
        &format!("{} tiles, {:.1} MB", tiles, bytes.len() as f64 / 1e6),
    );
    outcome.package = Some(bytes);
    outcome
        .warnings
        .extend(crate::project::value_warnings(db, file));
    outcome.tiles = tiles;
    outcome.totals = vec![
        ("plan", unique.len()),
        ("lower", 1),
        ("schedule", program.phases.len()),
        ("kernels", kernel_count),
        ("place", placement.tiles.len()),
        ("emit", images),
        ("weights", images),
        ("package", 2),
    ];
    outcome.ok = true;
    outcome
}

/// Computes every tile's image and weights on rayon's threads (see
/// [`per_tile_in_parallel`]).
fn emit_tiles_in_parallel(db: &Database, file: SourceFile) -> Result<(), BuildError> {
    let tiles: Vec<u32> = pipeline::tiles::tile_works(db, file)
        .clone()?
        .keys()
        .copied()
        .collect();
    per_tile_in_parallel(db, &tiles, |db, tile| {
        let key = pipeline::TileKey::new(db, file, tile);
        pipeline::tiles::tile_image(db, key).clone()?;
        pipeline::tiles::tile_weights(db, key).clone()?;
        Ok(())
    })
}

/// Places every tile on rayon's threads (see [`per_tile_in_parallel`]).
fn place_tiles_in_parallel(db: &Database, file: SourceFile) -> Result<(), BuildError> {
    let tiles: Vec<u32> = pipeline::place::place_requests(db, file)
        .clone()?
        .tiles
        .keys()
        .copied()
        .collect();
    per_tile_in_parallel(db, &tiles, |db, tile| {
        pipeline::place::tile_placement(db, pipeline::TileKey::new(db, file, tile)).clone()?;
        Ok(())
    })
}

/// Runs `query` for every tile on as many plain threads as rayon has, each
/// with its own handle on the database and its share of the tiles, so the
/// sequential pass after it finds the results memoized. Tiles are
/// independent queries, so salsa runs them concurrently. Not rayon tasks:
/// a query that uses rayon inside (the seeded weights do) would let a
/// waiting worker pick up another tile's query on another handle, which
/// salsa refuses ("Cannot change database mid-query"). The first failing
/// share's error, in tile order, is returned.
fn per_tile_in_parallel(
    db: &Database,
    tiles: &[u32],
    query: impl Fn(&Database, u32) -> Result<(), BuildError> + Sync,
) -> Result<(), BuildError> {
    let threads = rayon::current_num_threads().max(1);
    let chunk = tiles.len().div_ceil(threads).max(1);
    let query = &query;
    std::thread::scope(|scope| {
        let shares: Vec<_> = tiles
            .chunks(chunk)
            .map(|share| {
                let db = db.clone();
                scope.spawn(move || share.iter().try_for_each(|&tile| query(&db, tile)))
            })
            .collect();
        shares.into_iter().try_for_each(|share| {
            share
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    })
}

/// The outcome of a build that stopped at `error`.
fn failed(mut outcome: Outcome, error: BuildError) -> Outcome {
    outcome.error = Some(error);
    outcome
}

/// The text dump of one IR of a built project.
pub fn dump(db: &Database, file: SourceFile, emit: Emit) -> String {
    let Ok(graph) = pipeline::graph(db, file) else {
        return String::new();
    };
    let names = |op: OpId| graph.op(op).name.clone();
    let program = pipeline::program(db, file).clone();
    match emit {
        Emit::Graph => graph.dump(),
        Emit::Fusion => pipeline::fusion(db, file)
            .as_ref()
            .map(|fusion| fusion.dump())
            .unwrap_or_default(),
        Emit::Plan => {
            let mut out = String::new();
            for (op, signature) in graph
                .ops
                .iter()
                .zip(&pipeline::planned_signatures(db, file))
            {
                let plans =
                    pipeline::operator_plans(db, pipeline::Signature::new(db, signature.clone()));
                out.push_str(&format!("op {}: ", op.name));
                out.push_str(&crate::plan::dump(signature, plans));
            }
            out
        }
        Emit::Shards => program.map(|p| p.dump(&names)).unwrap_or_default(),
        Emit::Exchanges => {
            let Ok(program) = program else {
                return String::new();
            };
            let mut out = String::new();
            for (i, phase) in program.phases.iter().enumerate() {
                let key = pipeline::PhaseKey::new(db, file, i as u32);
                if let Some(s) = pipeline::phase_schedule(db, key) {
                    out.push_str(&format!(
                        "phase {i} ({}): {} transfers, senders={} ordinary={} paired={} chosen={}\n",
                        phase.label(),
                        phase.transfers.len(),
                        s.senders,
                        s.ordinary_horizon,
                        s.paired_horizon,
                        if s.use_paired { "paired" } else { "ordinary" }
                    ));
                }
            }
            if program.phases.is_empty() {
                // Every operand is where its kernels read it (written
                // there by the host or the package).
                out.push_str("no exchange phases\n");
            }
            out
        }
        Emit::Placement => match (program, pipeline::placement(db, file)) {
            (Ok(program), Ok(placement)) => placement.dump(&program),
            _ => String::new(),
        },
        Emit::Tile(tile) => match pipeline::tile_images(db, file) {
            Ok(images) => match images.iter().find(|i| i.tile == tile) {
                Some(image) => tile_dump(image),
                None => {
                    let tiles = pipeline::graph(db, file).map_or(0, |g| g.tiles);
                    match tile >= tiles {
                        true => format!(
                            "tile {tile} is not in the project, whose tiles are 0 to {}\n",
                            tiles.saturating_sub(1)
                        ),
                        false => format!("tile {tile} runs no code\n"),
                    }
                }
            },
            Err(error) => format!("{error}\n"),
        },
    }
}

/// A tile image as text: segments, supervisor entries, kernels and the
/// disassembly of its code.
fn tile_dump(image: &crate::emit::tile::TileImage) -> String {
    use std::fmt::Write as _;
    let mut out = format!("tile {} kernels {}\n", image.tile, image.kernels.join(", "));
    for (step, pc) in &image.entries {
        let _ = writeln!(out, "  step {step} entry {pc:#x}");
    }
    for segment in &image.segments {
        let _ = writeln!(
            out,
            "  segment {:#x} {} bytes {}",
            segment.address,
            segment.bytes.len(),
            if segment.code { "code" } else { "data" }
        );
        if segment.code {
            for line in crate::isa::disassemble(&segment.bytes, segment.address) {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}
