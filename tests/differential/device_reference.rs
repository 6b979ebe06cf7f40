//! Device against reference: every generated project must either pass its
//! check on the model or be rejected by validation with a located error. A
//! build, lowering or placement error after validation accepted the
//! project, a panic, a device fault or a failed check is a failure.
//!
//! The fixed-seed slice (small projects) runs in `cargo test`; the long run
//! is `IPUB_DIFF_COUNT=500 cargo test --release --test differential
//! generated` (larger projects, some of today's model shapes;
//! `IPUB_DIFF_SEED` picks the first seed, `IPUB_DIFF_LIMITS=fast` keeps the
//! small ones, `IPUB_DIFF_SAVE=DIR` writes each failing project there).
//! Every failure prints its seed, and one failure of each kind its files;
//! `IPUB_DIFF_COUNT=1 IPUB_DIFF_SEED=S` shows the project of seed `S`.

use crate::generate::{self, Generated, Limits, Thresholds, ROOT};
use crate::support;
use camino::Utf8Path;
use ipub::db::Db;
use ipub::device::embedded::{Device, EmbeddedModel};
use ipub::graph::{DType, OpKind, ReferencePrecision};
use ipub::package::Call;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Seeds in the fixed slice.
const FAST_SEEDS: u64 = 40;

/// Cycles a tile may spend in one step before the model stops it: far
/// beyond what any generated project needs.
const WATCHDOG: u64 = 200_000_000;

/// How a project fared.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed,
    /// Validation rejected it; the first error as `ipub check` prints it.
    Rejected(String),
    Failed {
        kind: &'static str,
        detail: String,
    },
}

/// Builds the project in `files` (rooted at `root`) in memory, runs it on
/// the model and checks its outputs as `ipub run` does.
pub fn check(files: &[(String, String)], root: &str) -> Outcome {
    let fs = support::memory_tree(files);
    let db = support::clean_database(&fs);
    let file = db.file(Utf8Path::new(root));
    let validated = ipub::project::project_graph(&db, file);
    if validated.graph.is_none() {
        let errors: Vec<_> = validated
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .cloned()
            .collect();
        let text = support::rendered(&db, &errors[..errors.len().min(1)]);
        if errors.is_empty() || errors.iter().any(|d| d.location.is_none()) {
            return Outcome::Failed {
                kind: "rejected without a location",
                detail: support::rendered(&db, &errors),
            };
        }
        return Outcome::Rejected(text);
    }
    let built = catch_unwind(AssertUnwindSafe(|| support::build(&db, file)));
    let bytes = match built {
        Ok(support::Built::Package(bytes)) => bytes,
        Ok(support::Built::Failed(_)) => {
            let error = ipub::pipeline::package::package_bytes(&db, file)
                .clone()
                .err();
            let kind = match &error {
                Some(ipub::pipeline::BuildError::Project(_)) => "project error after validation",
                Some(ipub::pipeline::BuildError::Lower(_)) => "lowering error",
                Some(ipub::pipeline::BuildError::Placement(_)) => "placement error",
                Some(ipub::pipeline::BuildError::Kernel(_)) => "kernel error",
                Some(ipub::pipeline::BuildError::Emit(_)) => "emission error",
                Some(ipub::pipeline::BuildError::RunTooLong(_)) => "run too long to record",
                Some(ipub::pipeline::BuildError::ExchangeTooLarge(_)) => {
                    "exchanges too large for a package"
                }
                Some(ipub::pipeline::BuildError::TensorFile(_)) => "tensor file error",
                None => "build failed without an error",
            };
            return Outcome::Failed {
                kind,
                detail: support::build_errors(&db, file),
            };
        }
        Err(payload) => {
            return Outcome::Failed {
                kind: "panic while building",
                detail: support::panic_text(&*payload),
            }
        }
    };
    // Run what a build writes: the package is parsed back from its bytes.
    let ran = catch_unwind(AssertUnwindSafe(|| run(&bytes)));
    match ran {
        Ok(outcome) => outcome,
        Err(payload) => Outcome::Failed {
            kind: "panic while running",
            detail: support::panic_text(&*payload),
        },
    }
}

fn run(bytes: &[u8]) -> Outcome {
    let package = match ipub::package::file::parse(bytes) {
        Ok(package) => Arc::new(package),
        Err(error) => {
            return Outcome::Failed {
                kind: "package does not read back",
                detail: error.to_string(),
            }
        }
    };
    let mut device = EmbeddedModel::new(WATCHDOG);
    let mut host = ipub::cli::run::seeded_inputs(&package);
    let session = device
        .open()
        .and_then(|()| device.load(Arc::clone(&package)))
        .and_then(|()| device.call(Call::Initialize, &mut host))
        .and_then(|_| device.call(Call::Run, &mut host));
    if let Err(error) = session {
        return Outcome::Failed {
            kind: "device fault",
            detail: error.to_string(),
        };
    }
    let checked = match ipub::cli::run::checked_outputs(&package, &host) {
        Ok(checked) => checked,
        Err(error) => {
            return Outcome::Failed {
                kind: "host reference error",
                detail: error.to_string(),
            }
        }
    };
    let failures: Vec<String> = checked
        .iter()
        .filter_map(|(name, c)| c.failure_message().map(|m| format!("{name}: {m}")))
        .collect();
    if failures.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed {
            kind: "numerics",
            detail: failures.join("\n"),
        }
    }
}

/// Thresholds for a generated project from the host reference alone: how
/// far its two precisions lie apart bounds the rounding noise of this
/// graph, and the device may differ from the reference by a few times that.
pub fn calibrate(generated: &Generated) -> Thresholds {
    let placeholder = Thresholds {
        min_cosine_similarity: 0.0,
        max_abs_error: 1.0,
    };
    // The same tree `check` builds from (kernel sources included), so the
    // project validates here exactly when it validates there.
    let fs = support::memory_tree(&generated.with_check(placeholder));
    let read = |path: &Utf8Path| ipub::vfs::Vfs::read(&fs, path);
    let result = ipub::project::validate_with(Utf8Path::new(ROOT), &read, None);
    let Some(graph) = result.graph else {
        // Validation will say what is wrong; the thresholds do not matter.
        return placeholder;
    };
    let (Ok(device), Ok(wide)) = (
        ipub::reference::evaluate(&graph, ReferencePrecision::Device),
        ipub::reference::evaluate(&graph, ReferencePrecision::F32),
    ) else {
        return placeholder;
    };
    // The softmaxes the device may compute in f16 before rounding them to
    // FP8, evaluated again with their scale moved by a few f16 steps either
    // way: how far that moves the outputs is what a code flipped by the
    // fused kernel's f16 exponentials can.
    let fp8_softmaxes = softmaxes_rounded_to_fp8(&graph);
    let shifted: Vec<_> = [1.0 + SOFTMAX_SHIFT, 1.0 - SOFTMAX_SHIFT]
        .into_iter()
        .filter(|_| !fp8_softmaxes.is_empty())
        .filter_map(|factor| {
            let mut moved = (*graph).clone();
            for &op in &fp8_softmaxes {
                if let OpKind::Softmax { scale, .. } = &mut moved.ops[op].kind {
                    *scale *= factor;
                }
            }
            ipub::reference::evaluate(&moved, ReferencePrecision::Device).ok()
        })
        .collect();
    let mut max_abs: f64 = 0.0;
    let mut min_cos: f64 = 0.9999;
    // The lowest similarity between the two precisions themselves: an
    // output whose values underflow to zero in one of them (a GELU of
    // large negative numbers) has none to speak of, and no floor can ask
    // the device for more.
    let mut lowest_noise: f64 = 1.0;
    for &output in &graph.check.outputs {
        let (Some(a), Some(b)) = (device.get(output), wide.get(output)) else {
            continue;
        };
        let noise = ipub::compare::compare(a, b, 0.0, f64::MAX);
        let peak = a
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f32, |m, v| m.max(v.abs()));
        // A device may round the other way from the reference: allow a few
        // units in the last place of the output's format at its peak (one
        // code of an FP8 output).
        let mantissa_bits = match graph.tensor(output).dtype {
            DType::F32 | DType::F16 => 8,
            DType::F143 => 3,
            DType::F152 => 2,
        };
        let floor = f64::from(peak).max(1e-2) * 2f64.powi(-mantissa_bits) * 1.01;
        let mut allowed = if noise.max_abs_error.is_finite() {
            (8.0 * f64::from(noise.max_abs_error)).max(floor)
        } else {
            1e300
        };
        for values in shifted.iter().filter_map(|evaluated| evaluated.get(output)) {
            let flips = ipub::compare::compare(a, values, 0.0, f64::MAX);
            if flips.max_abs_error.is_finite() {
                allowed = allowed.max(2.0 * f64::from(flips.max_abs_error));
            }
        }
        max_abs = max_abs.max(allowed);
        // Cosine distance gets more room than the absolute error: a code
        // flipped in an FP8 intermediate (an implicit cast) moves it more
        // than the two precisions' difference shows.
        min_cos = min_cos.min(1.0 - 16.0 * (1.0 - noise.cosine_similarity) - 1e-4);
        lowest_noise = lowest_noise.min(noise.cosine_similarity);
    }
    Thresholds {
        min_cosine_similarity: round_down(min_cos.max(0.5).min(lowest_noise - 1e-4).max(-1.0)),
        max_abs_error: round_up(max_abs.max(1e-6)),
    }
}

/// How far [`calibrate`] moves the scale of a softmax rounded to FP8:
/// four f16 steps, about the relative error of the fused kernel's f16
/// exponentials at arguments near 1 (book numerics: `(2 + |a|) 2^-9`).
const SOFTMAX_SHIFT: f32 = 1.0 / 256.0;

/// The f16 softmaxes whose result an FP8 rounding reads (a cast to FP8, or
/// a product whose other factor is FP8, which legalization converts it
/// for), through views: those the fusion may compute with f16
/// exponentials (`softmax_f16_once`).
fn softmaxes_rounded_to_fp8(graph: &ipub::graph::Graph) -> Vec<usize> {
    graph
        .ops
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op.kind, OpKind::Softmax { .. }))
        .filter(|(_, op)| rounded_to_fp8(graph, op.output))
        .map(|(i, _)| i)
        .collect()
}

/// Whether an FP8 rounding reads `tensor`, directly or through views.
fn rounded_to_fp8(graph: &ipub::graph::Graph, tensor: ipub::graph::TensorId) -> bool {
    let fp8 = |t: &ipub::graph::TensorId| {
        !matches!(graph.tensors[t.0 as usize].dtype, DType::F16 | DType::F32)
    };
    graph
        .ops
        .iter()
        .filter(|op| op.inputs.contains(&tensor))
        .any(|op| match op.kind {
            OpKind::Cast => fp8(&op.output),
            OpKind::Matmul { .. } => op.inputs.iter().take(2).any(fp8),
            OpKind::Transpose { .. } | OpKind::Reshape | OpKind::Slice { .. } => {
                rounded_to_fp8(graph, op.output)
            }
            _ => false,
        })
}

/// Six significant digits, rounded towards looser thresholds.
fn round_down(x: f64) -> f64 {
    let factor = 1e6;
    (x * factor).floor() / factor
}

fn round_up(x: f64) -> f64 {
    if !x.is_finite() || x >= 1e300 {
        return x;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 3);
    (x / scale).ceil() * scale
}

/// The counts of a run over many seeds.
#[derive(Default)]
struct Tally {
    generated: usize,
    passed: usize,
    rejected: BTreeMap<String, Vec<u64>>,
    failures: BTreeMap<&'static str, Vec<(u64, String)>>,
    features: BTreeMap<&'static str, usize>,
}

impl Tally {
    fn add(
        &mut self,
        generated: &Generated,
        outcome: Outcome,
        save: Option<&std::path::Path>,
        text: String,
    ) {
        self.generated += 1;
        for feature in &generated.features {
            *self.features.entry(feature).or_default() += 1;
        }
        match outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Rejected(error) => {
                let first = shape_of(error.lines().next().unwrap_or_default());
                self.rejected.entry(first).or_default().push(generated.seed);
            }
            Outcome::Failed { kind, detail } => {
                if let Some(dir) = save {
                    let path = dir.join(format!("seed-{}.toml", generated.seed));
                    let _ = std::fs::create_dir_all(dir);
                    let _ =
                        std::fs::write(&path, format!("# {kind}: {}\n{text}", first_line(&detail)));
                }
                self.failures.entry(kind).or_default().push((
                    generated.seed,
                    format!(
                        "seed {} failed ({kind}):\n{}\n{text}",
                        generated.seed,
                        truncated(&detail)
                    ),
                ));
            }
        }
    }

    fn report(&self, full: bool) -> String {
        let mut out = String::new();
        let rejected: usize = self.rejected.values().map(Vec::len).sum();
        let failed: usize = self.failures.values().map(Vec::len).sum();
        let _ = writeln!(
            out,
            "generated {}, passed {}, rejected by check with a located error {rejected}, failed {failed}",
            self.generated, self.passed
        );
        for (first, seeds) in &self.rejected {
            let seeds: Vec<String> = seeds.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "  rejected {} ({first}): seeds {}",
                seeds.len(),
                seeds.join(", ")
            );
        }
        for (kind, cases) in &self.failures {
            let seeds: Vec<String> = cases.iter().map(|(s, _)| s.to_string()).collect();
            let _ = writeln!(
                out,
                "  failed {} ({kind}): seeds {}",
                cases.len(),
                seeds.join(", ")
            );
        }
        let features: Vec<String> = self
            .features
            .iter()
            .map(|(f, n)| format!("{f} {n}"))
            .collect();
        let _ = writeln!(out, "  features: {}", features.join(", "));
        if full {
            // One full case per kind of failure; the seeds reproduce the rest.
            for cases in self.failures.values() {
                let _ = writeln!(out, "\n{}", cases[0].1);
            }
        }
        out
    }
}

/// A message with names and numbers blanked, so that rejections of one
/// kind are counted together.
fn shape_of(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                if quoted {
                    out.push_str("`_`");
                }
            }
            _ if quoted => {}
            '0'..='9' if out.ends_with('N') => {}
            '0'..='9' => out.push('N'),
            _ => out.push(c),
        }
    }
    out
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The first lines of a long error, each cut to a readable length.
fn truncated(text: &str) -> String {
    let mut lines: Vec<String> = text
        .lines()
        .take(12)
        .map(|l| l.chars().take(600).collect())
        .collect();
    if text.lines().count() > 12 {
        lines.push("...".to_string());
    }
    lines.join("\n")
}

/// Generates, calibrates and checks one seed.
pub fn check_seed(seed: u64, limits: Limits) -> (Generated, Outcome, String) {
    let generated = generate::project(seed, limits);
    let thresholds = calibrate(&generated);
    let outcome = check(&generated.with_check(thresholds), ROOT);
    let text = generated.text(thresholds);
    (generated, outcome, text)
}

#[test]
fn generated_projects_pass_on_the_model_or_are_rejected_with_a_location() {
    let long = support::env_count("IPUB_DIFF_COUNT");
    let count = long.unwrap_or(FAST_SEEDS);
    let first = support::env_count("IPUB_DIFF_SEED").unwrap_or(0);
    let fast = long.is_none() || std::env::var("IPUB_DIFF_LIMITS").as_deref() == Ok("fast");
    let limits = if fast { Limits::FAST } else { Limits::LONG };
    let save = std::env::var_os("IPUB_DIFF_SAVE").map(std::path::PathBuf::from);
    let started = std::time::Instant::now();
    let mut tally = Tally::default();
    for seed in first..first + count {
        let (generated, outcome, text) = check_seed(seed, limits);
        if count == 1 {
            // One seed asked for by name: show it, whatever its outcome.
            println!("{text}\n=> {outcome:?}");
        }
        if let (Some(_), Outcome::Failed { kind, .. }) = (long, &outcome) {
            // A long run says as it goes which seeds fail.
            eprintln!("seed {seed}: {kind}");
        }
        tally.add(&generated, outcome, save.as_deref(), text);
    }
    let report = format!(
        "{}\nreproduce one with IPUB_DIFF_COUNT=1 IPUB_DIFF_SEED=<seed>{} cargo test --test differential generated -- --nocapture",
        tally.report(true),
        if fast {
            " IPUB_DIFF_LIMITS=fast"
        } else {
            ""
        }
    );
    println!(
        "{}\n({:.1} s for {count} projects from seed {first})",
        tally.report(false),
        started.elapsed().as_secs_f64()
    );
    assert!(tally.failures.is_empty(), "{report}");
    // The generator writes projects meant to be valid; rejections are its
    // edge cases. Most being rejected means it drifted from the format and
    // tests nothing.
    assert!(
        tally.passed * 2 >= tally.generated,
        "only {} of {} generated projects passed:\n{report}",
        tally.passed,
        tally.generated
    );
}

/// Reduced reproducers of failures the generator found, in
/// `tests/data/differential/`: each states its expected outcome on its
/// first line (`# expect: pass`, `# expect: rejected`, or for projects too
/// large to run in a debug build `# expect: builds (release test runs
/// only)`) and what went wrong.
#[test]
fn reproducers_behave_as_their_first_line_says() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/differential");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/data/differential")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    assert!(!entries.is_empty());
    let mut wrong = Vec::new();
    for path in &entries {
        let text = std::fs::read_to_string(path).expect("reproducer");
        let relative = format!(
            "tests/data/differential/{}",
            path.file_name().and_then(|n| n.to_str()).expect("utf-8")
        );
        let expect = text.lines().next().unwrap_or_default();
        let files = [(relative.clone(), text.clone())];
        let (as_expected, outcome) = match expect {
            "# expect: pass" => {
                let outcome = check(&files, &relative);
                (outcome == Outcome::Passed, format!("{outcome:?}"))
            }
            "# expect: rejected" => {
                let outcome = check(&files, &relative);
                (
                    matches!(outcome, Outcome::Rejected(_)),
                    format!("{outcome:?}"),
                )
            }
            "# expect: builds (release test runs only)" if cfg!(debug_assertions) => continue,
            "# expect: builds (release test runs only)" => {
                let fs = support::memory_tree(&files);
                let db = support::clean_database(&fs);
                let built = support::build(&db, db.file(Utf8Path::new(&relative)));
                (matches!(built, support::Built::Package(_)), built.summary())
            }
            other => {
                panic!("{relative}: the first line must state the expected outcome, not `{other}`")
            }
        };
        if !as_expected {
            wrong.push(format!("{relative} ({expect}): {outcome}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
