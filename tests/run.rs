//! `ipub run` end to end: build, run on the embedded model, check numerics.

use std::process::Command;

fn ipub(args: &[&str], cache: &std::path::Path) -> (i32, String, String) {
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

/// What `ipub build PROJECT --emit WHAT` prints, the build succeeding.
fn emitted(project: &str, what: &str) -> String {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let (code, stdout, stderr) = ipub(
        &[
            "build",
            project,
            "--out",
            out.to_str().expect("utf-8"),
            "--emit",
            what,
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    stdout
}

fn run_passes(project: &str) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let (code, stdout, stderr) = ipub(
        &["run", project, "--out", out.to_str().expect("utf-8")],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains("numericalTest=PASS"), "{stdout}");
    assert!(last.contains("hardwareTest=PASS"), "{stdout}");
    assert!(
        stdout.contains("cycles ") && stdout.contains("estimated"),
        "{stdout}"
    );
    let name = std::path::Path::new(project)
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap();
    assert!(out.join(format!("{name}.ipuexe")).exists());
    assert!(out.join(format!("{name}.profile.json")).exists());
    // The written package runs as is, and a damaged copy is refused.
    let package = out.join(format!("{name}.ipuexe"));
    let (code, stdout, stderr) = ipub(&["run", package.to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    let mut bytes = std::fs::read(&package).expect("package");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    let damaged = dir.path().join("damaged.ipuexe");
    std::fs::write(&damaged, bytes).expect("write");
    let (code, _, stderr) = ipub(&["run", damaged.to_str().unwrap()], dir.path());
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("error") && !stderr.contains("panicked"),
        "{stderr}"
    );
    // The package reads back and inspects.
    let (code, stdout, stderr) = ipub(
        &[
            "inspect",
            out.join(format!("{name}.ipuexe")).to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
}

#[test]
fn matmul_f8_passes_on_the_model() {
    run_passes("projects/matmul-f8.toml");
}

#[test]
fn a_mixed_f16_fp8_project_passes_with_implicit_casts_and_unread_work_removed() {
    run_passes("projects/mixed-f8.toml");
}

/// K split eight ways: partials on every tile, a reduction phase and
/// reduce runs, uneven bands of rows and a padded channel block.
#[test]
fn a_matmul_with_a_split_inner_dimension_passes_on_the_model() {
    run_passes("tests/data/dumps/ksplit-small.toml");
}

/// Shards of 4 rows by 384 columns: the kernel computes the transposed
/// product, its output lands in row blocks.
#[test]
fn a_matmul_in_the_swapped_orientation_passes_on_the_model() {
    run_passes("tests/data/dumps/swapped-small.toml");
}

/// `mul`, `sub` and `div` broadcasting a row, a column and a scalar,
/// `silu`, `gelu_tanh` and `rmsnorm`, in f16 and f32, on rows that start
/// misaligned.
#[test]
fn elementwise_ops_and_rmsnorm_pass_on_the_model() {
    run_passes("tests/data/ops/elementwise-and-norms.toml");
}

/// Elementwise operations on 7 rows over 64 tiles, spread as ranges of
/// elements that cross rows: broadcast bias rows and columns sliced to each
/// range, a short last range, a GELU storing FP8 and an add with its cast
/// fused.
#[test]
fn elementwise_ops_on_fewer_rows_than_tiles_pass_as_element_ranges() {
    run_passes("tests/data/ops/elements-over-tiles.toml");
}

/// Layer and RMS normalisations and softmaxes on fewer rows than tiles,
/// each row cut into segments on several tiles with the statistics
/// exchanged between the two kernels: an f16 result, one with its cast to
/// FP8 fused, row lengths whose last segment is shorter, a 1 x 8192
/// softmax, two rows to a group, a softmax stored as FP8. The planner
/// chooses the segmented plan for all eight, so the test covers it.
#[test]
fn row_operations_with_rows_cut_over_tiles_pass_on_the_model() {
    let project = "tests/data/ops/segments.toml";
    run_passes(project);
    let stdout = emitted(project, "plan");
    let chosen: Vec<&str> = stdout.lines().filter(|l| l.starts_with(" *")).collect();
    assert_eq!(chosen.len(), 8, "{stdout}");
    for line in chosen {
        assert!(
            line.contains(" segment ") && line.contains("_seg "),
            "{line}"
        );
    }
}

/// Masked softmaxes of long rows cut into segments on several tiles, with
/// partly and fully removed rows, segments that keep nothing, an f16 mask
/// at the input's shape and f32 masks broadcast to it. The planner chooses
/// the segmented plan for all three.
#[test]
fn masked_softmax_rows_cut_over_tiles_pass_on_the_model() {
    let project = "tests/data/ops/masked-segments.toml";
    run_passes(project);
    let stdout = emitted(project, "plan");
    let chosen: Vec<&str> = stdout.lines().filter(|l| l.starts_with(" *")).collect();
    assert_eq!(chosen.len(), 3, "{stdout}");
    for line in chosen {
        assert!(
            line.contains(" segment ") && line.contains("_mask_f") && line.contains("_seg "),
            "{line}"
        );
    }
}

/// A kernel source that predates the segmented form (here: its
/// normalising kernel declares no `segments`) is refused when a plan needs
/// that form, rather than run without the parameter.
#[test]
fn a_kernel_source_without_the_segmented_form_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let device = dir.path().join("device");
    std::fs::create_dir_all(device.join("include")).expect("device folder");
    for entry in std::fs::read_dir("device")
        .expect("device/")
        .chain(std::fs::read_dir("device/include").expect("device/include"))
    {
        let path = entry.expect("entry").path();
        if path.is_file() {
            let relative = path.strip_prefix("device").expect("under device/");
            let text = std::fs::read_to_string(&path).expect("source");
            let text = text.replace(".ipub_param segments, PARTIALS_OFF + 4, u32", "");
            std::fs::write(device.join(relative), text).expect("copy");
        }
    }
    let project = std::fs::read_to_string("tests/data/ops/segments.toml")
        .expect("project")
        .replace("kernels = \"../../../device\"", "kernels = \"device\"");
    let path = dir.path().join("segments.toml");
    std::fs::write(&path, project).expect("project copy");
    let (code, stdout, stderr) = ipub(&["build", path.to_str().unwrap()], dir.path());
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("declares no state field `segments`") && stderr.contains("layernorm_f16.S"),
        "{stderr}"
    );
}

/// The SigLIP-so400m MLP in f16 throughout places on the whole chip and
/// passes (its GELU as element ranges over 1469 tiles). It takes minutes
/// on the model, so it runs behind `IPUB_SLOW_TESTS=1`.
#[test]
fn siglip_mlp_f16_places_and_passes_on_the_whole_chip() {
    if std::env::var_os("IPUB_SLOW_TESTS").is_none() {
        return;
    }
    run_passes("tests/data/fullchip/siglip-mlp-f16.toml");
}

/// Programs whose operations' plans each fit but together overfilled a
/// tile, and re-planning did not relieve it: they place now, and run and
/// pass (`tests/data/fit/`, each says what in its comment).
#[test]
fn programs_that_once_did_not_fit_their_tiles_place_and_pass() {
    for project in [
        "tests/data/fit/mlp-f16-on-12-tiles.toml",
        "tests/data/fit/mlp-f16-on-15-tiles.toml",
        "tests/data/fit/attention-f16-on-2-tiles.toml",
    ] {
        run_passes(project);
    }
}

/// Matrix products with an f32 result: f16 x f16 with K split over eight
/// tiles (f32 partials and their f32 reduction), FP8 x FP8 and f16 x FP8
/// (operands read as f16), checked to f32 rounding.
#[test]
fn matmuls_with_an_f32_result_pass_on_the_model() {
    run_passes("tests/data/ops/matmul-f32-out.toml");
}

/// Matrix products with their cast to FP8 fused: a split inner dimension
/// (the reduction's sum cast on each tile), a single inner block (the
/// GEMM's own output cast) and padded channel blocks, all PASS; the
/// device's bytes are those of the unfused program, which the reference
/// at device precision reproduces.
#[test]
fn matrix_products_with_a_fused_cast_to_fp8_pass() {
    run_passes("tests/data/ops/matmul-cast-f8.toml");
}

/// Matrix products with elementwise steps fused after them: a bias add,
/// GELU and cast to FP8 over padded channel blocks, a residual add, a SiLU
/// gate times another product, a tanh GELU, steps after a split inner
/// dimension's reduction. Every chain fuses (the fusion dump says so) and
/// every output is within a few f16 steps of the reference.
#[test]
fn matrix_products_with_fused_epilogues_pass_on_the_model() {
    let project = "tests/data/ops/matmul-epilogues.toml";
    run_passes(project);
    let stdout = emitted(project, "fusion");
    for chain in [
        "y1+y1b+g1+g1_f8: matmul -> add -> gelu -> cast",
        "y2+h2: matmul -> add",
        "gate+gate_act+gated: matmul -> silu -> mul",
        "t+t_act: matmul -> gelu_tanh",
        "long+long_b+long_f8: matmul -> add -> cast",
        "e+e_b: matmul -> add",
    ] {
        assert!(stdout.contains(chain), "{chain}: {stdout}");
    }
}

/// Softmax masks as tensors: a key-padding mask, a sliding window shared
/// by every head and a query-padding mask with fully masked rows, each
/// over an attention block's scores.
#[test]
fn softmax_masks_pass_on_the_model() {
    run_passes("tests/data/ops/attention-masks.toml");
}

/// `concat` along the first, a middle and the last axis, of f16, f32 and
/// FP8, from weights, inputs, activations, a slice and a transpose, read by
/// matrix products; the copies are bit-exact.
#[test]
fn concat_passes_on_the_model() {
    run_passes("tests/data/ops/concat.toml");
}

/// `reduce_sum`, `reduce_mean` and `reduce_max` in f16 and f32 on rows
/// that start misaligned, a mean broadcast back over its rows, and a
/// single row of 1001.
#[test]
fn reductions_pass_on_the_model() {
    run_passes("tests/data/ops/reductions.toml");
}

/// Reductions over rows cut into segments on several tiles: a row longer
/// than a tile holds, an odd row length, an f32 maximum broadcast back
/// over its row and a batched f32 mean. The planner chooses the segmented
/// plan for all four.
#[test]
fn reductions_of_rows_cut_over_tiles_pass_on_the_model() {
    let project = "tests/data/ops/long-reductions.toml";
    run_passes(project);
    let stdout = emitted(project, "plan");
    let chosen: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with(" *") && l.contains(" kernel reduce_"))
        .collect();
    assert_eq!(chosen.len(), 4, "{stdout}");
    for line in chosen {
        assert!(line.contains(" segment "), "{line}");
    }
}

/// A row of a prime length is cut into six pieces of unequal length, one
/// to each worker: it took one worker 2,035 cycles when pieces had to
/// divide the row.
#[test]
fn a_row_of_a_prime_length_is_reduced_by_six_workers() {
    let project = "tests/data/estimates/reduce-row-of-a-prime-length.toml";
    let plan = emitted(project, "plan");
    assert!(
        plan.contains(" segment 572 kernel reduce_sum_f32 "),
        "{plan}"
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let stdout = run_in(std::path::Path::new(project), dir.path(), &[]);
    let cycles: u64 = stdout
        .split_whitespace()
        .find_map(|word| word.strip_prefix("cycles=")?.parse().ok())
        .expect("cycles");
    assert!(cycles < 1200, "{stdout}");
}

/// RMSNorm, causal attention and a SwiGLU MLP.
#[test]
fn llama_block_f16_passes_on_the_model() {
    run_passes("projects/llama-block-f16.toml");
}

#[test]
fn vit_fp8_passes_on_the_model() {
    run_passes("projects/vit-fp8.toml");
}

/// Slices as views: one head cut out of a fused QKV projection and the
/// class token cut out before the head's layernorm and classifier.
#[test]
fn a_vit_head_with_slices_passes_on_the_model() {
    run_passes("projects/vit-head-f16.toml");
}

/// Too few tiles for vit-fp8: on two, its weights alone do not fit and
/// validation says so with the numbers, before anything is planned; on
/// nine they fit, and placement reports the tile that overflows.
#[test]
fn vit_fp8_on_too_few_tiles_fails_early_or_at_placement() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/projects/vit-fp8.toml"
    ))
    .expect("project");
    let projects = dir.path().join("projects");
    std::fs::create_dir_all(projects.join("layers")).expect("mkdir");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/projects/layers/vit-encoder.toml"
        ),
        projects.join("layers/vit-encoder.toml"),
    )
    .expect("copy include");
    let project = projects.join("vit-fp8.toml");
    for (tiles, expected) in [
        ("2", "the project's inputs and weights need 5480448 bytes, more than the 1275744 bytes of memory of its 2 tiles"),
        ("9", "bytes over"),
    ] {
        std::fs::write(
            &project,
            source.replace("tiles = 64", &format!("tiles = {tiles}")).replace(
                "seed = 0",
                concat!(
                    "seed = 0\nkernels = \"",
                    env!("CARGO_MANIFEST_DIR"),
                    "/device\""
                ),
            ),
        )
        .expect("write");
        let (code, stdout, stderr) = ipub(&["build", project.to_str().unwrap()], dir.path());
        assert_eq!(code, 1, "{stdout}\n{stderr}");
        assert!(stderr.contains(expected), "{tiles} tiles: {stderr}");
        let advice = match tiles {
            "2" => "each tile holds 637872 bytes: use at least 9 tiles",
            _ => "try more tiles",
        };
        assert!(stderr.contains(advice), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn runs_are_deterministic_across_thread_counts() {
    let run_with = |threads: &str| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let out = dir.path().join("out");
        let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args([
                "run",
                "projects/vit-fp8.toml",
                "--out",
                out.to_str().unwrap(),
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("IPUB_CACHE_DIR", dir.path())
            .env("IPUB_DEVICE_LOCK", dir.path().join("device.lock"))
            .env("IPUB_LOG", "warn")
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("run ipub");
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let results: Vec<String> = stdout
            .lines()
            .filter(|l| l.contains("output ") || l.contains("numericalTest="))
            .map(|l| l.replace(out.to_str().unwrap(), "OUT"))
            .collect();
        let profile = std::fs::read(out.join("vit-fp8.profile.json")).expect("profile");
        let package = std::fs::read(out.join("vit-fp8.ipuexe")).expect("package");
        (results, profile, package)
    };
    let one = run_with("1");
    let two = run_with("2");
    assert!(!one.0.is_empty());
    assert_eq!(one.0, two.0, "outputs, errors and cycles");
    assert!(one.1 == two.1, "profiles differ between 1 and 2 threads");
    assert!(one.2 == two.2, "packages differ between 1 and 2 threads");
}

/// A product whose operand is rearranged on a full tile fits with the
/// rearranges in a compute step of their own (`tests/data/fit/`; it
/// cannot take `--dump-all`, which keeps the rearranged operand alive).
#[test]
fn a_full_tile_rearranges_in_a_step_of_its_own() {
    run_passes("tests/data/fit/rearranged-operand-on-a-full-tile.toml");
}

/// Runs `project` with its output in `dir` (and `extra` arguments),
/// which must pass its check; returns what it printed.
fn run_in(project: &std::path::Path, dir: &std::path::Path, extra: &[&str]) -> String {
    let out = dir.join("out");
    let mut args = vec![
        "run",
        project.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
    ];
    args.extend(extra);
    let (code, stdout, stderr) = ipub(&args, dir);
    assert_eq!(
        code,
        0,
        "{} {extra:?}:\n{stdout}\n{stderr}",
        project.display()
    );
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    stdout
}

/// Small projects that once computed wrong values or crashed the compiler
/// (`tests/data/regressions/`, each says what in its comment): every one
/// builds, runs on the model and passes its check, and again built to read
/// back every intermediate (`--dump-all`).
#[test]
fn regression_projects_pass_on_the_model() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/regressions");
    let mut projects: Vec<_> = std::fs::read_dir(&root)
        .expect("regressions directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    projects.sort();
    assert!(projects.len() >= 5, "the regression projects went missing");
    let dir = tempfile::tempdir().expect("temporary directory");
    for project in projects {
        let stdout = run_in(&project, dir.path(), &[]);
        if project.ends_with("fp8-overflow.toml") {
            // The overflow really happens, on both sides alike.
            assert!(stdout.contains("infinite on both sides"), "{stdout}");
        }
        if project.ends_with("casts-through-views.toml") {
            // Both casts moved before their views and folded.
            let fusion = emitted(project.to_str().expect("utf-8"), "fusion");
            assert!(
                fusion.contains("p+h_next: matmul -> cast")
                    && fusion.contains("ln+y: layernorm -> cast"),
                "{fusion}"
            );
        }
        let dump = dir.path().join("dump");
        let dump_arg = dump.to_str().expect("utf-8");
        run_in(&project, dir.path(), &["--dump", dump_arg, "--dump-all"]);
        let index = std::fs::read_to_string(dump.join("index.json")).expect("the dump's index");
        if project.ends_with("repeats-sharing-body-names.toml") {
            // Each body's intermediates under its qualified name.
            assert!(
                index.contains("\"name\": \"enc.out\"") && index.contains("\"name\": \"dec.out\""),
                "{index}"
            );
        }
        if project.ends_with("input-sliced-and-cast-in-a-body.toml") {
            // The body's intermediates, as the last iteration left them.
            assert!(
                index.contains("\"name\": \"fc\"")
                    && index.contains("\"last_iteration_of\": \"layers\""),
                "{index}"
            );
        }
    }
}

/// `--dump-all`'s package goes beside the project's ordinary one, in the
/// directory named for the project, whatever its file is called.
#[test]
fn dump_all_builds_under_the_project_s_name() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/regressions/casts-through-views.toml");
    let device = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("device");
    let text = std::fs::read_to_string(source).expect("the project");
    let text = text.replace(
        "\"../../../device\"",
        &format!("{:?}", device.to_str().expect("utf-8")),
    );
    std::fs::write(dir.path().join("p.toml"), text).expect("write the project");
    // Run where the project is: the package's default place is relative.
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(["run", "p.toml", "--dump", "dump", "--dump-all"])
        .current_dir(dir.path())
        .env("IPUB_CACHE_DIR", dir.path())
        .env("IPUB_DEVICE_LOCK", dir.path().join("device.lock"))
        .output()
        .expect("run ipub");
    let (code, stdout, stderr) = (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let package = "target/ipub/casts-through-views/dump-all/casts-through-views.ipuexe";
    assert!(dir.path().join(package).is_file(), "{stdout}");
    assert!(!dir.path().join("target/ipub/p").exists());
}

/// The model's cycle accounting is the specification (`book/src/isa.md`):
/// making the model faster must change neither a cycle nor an output bit.
/// vit-fp8's total cycles, every step's cycles and the bytes of every
/// output it reads back are pinned here. A change to the compiler that
/// changes the program re-blesses them (`UPDATE_EXPECT=1`); a change to
/// the model alone must not.
#[test]
fn vit_fp8_cycles_and_output_bits_are_pinned() {
    use ipub::db::{Database, Db};
    use ipub::device::engine::ExecEngine;
    use ipub::device::model::ModelDevice;
    use ipub::package::Call;
    use std::sync::Arc;

    let db = Database::new(Arc::new(ipub::vfs::OsFs));
    let path = camino::Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("projects/vit-fp8.toml");
    let package = Arc::new(ipub::cli::run::package(&db, db.file(&path)).expect("vit-fp8 builds"));
    let mut device = ModelDevice::load(Arc::clone(&package)).expect("loads");
    let engine = ExecEngine::new(device.target(), &package);
    let mut host = ipub::cli::run::seeded_inputs(&package);
    device
        .run_call(Call::Initialize, &engine, &mut host)
        .expect("initializes");
    let record = device
        .run_call(Call::Run, &engine, &mut host)
        .expect("runs");
    let mut steps = blake3::Hasher::new();
    for step in &record.steps {
        steps.update(&step.start_cycle.to_le_bytes());
        steps.update(&step.cycles.to_le_bytes());
        for tile in &step.tiles {
            steps.update(&tile.tile.to_le_bytes());
            steps.update(&tile.busy_cycles.to_le_bytes());
            steps.update(&tile.instructions.to_le_bytes());
        }
    }
    let mut outputs = blake3::Hasher::new();
    for (binding, bytes) in &host.outputs {
        outputs.update(&binding.to_le_bytes());
        outputs.update(bytes);
    }
    let summary = format!(
        "cycles {}, {} steps {}, outputs {}",
        record.cycles,
        record.steps.len(),
        &steps.finalize().to_hex()[..16],
        &outputs.finalize().to_hex()[..16],
    );
    expect_test::expect!["cycles 506574, 116 steps 6caf600f6c3ff4af, outputs f179f9cd93bcef77"]
        .assert_eq(&summary);
}
