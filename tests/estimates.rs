//! The cost model against the model device: every shipped project the
//! planner supports, and a few projects of other shapes
//! (`tests/data/estimates/`), is built and run, and the planner's
//! whole-program estimate (host transfers included) must be within 10 % of
//! the measured cycles, and every operation that takes a real share of the
//! run within 15 % of its own measured cycles (compute, exchange and sync).
//!
//! The full-chip projects run behind `IPUB_SLOW_TESTS=1`.

use ipub::profile::{analysis, Profile};
use std::process::Command;

/// Operations below this share of a run are launch and sync overhead of a
/// few hundred cycles, where a fixed error is a large fraction; they are
/// listed in the report but not held to the per-operation bound.
const MINOR_SHARE: f64 = 0.01;

/// Operations whose estimate is known to be beyond 15 %, with the reason;
/// they are reported but not asserted, and any other one fails, as does an
/// entry whose gap has closed or whose operation is gone. (An operation
/// with no exchange phase is estimated without exchange or sync, and one
/// that reads pieces another gathered without those bytes, from the
/// lowered program: `pipeline::package::lowered_exchange`; the rearranges
/// of the pieces a tile holds count in its compute, as lowered:
/// `pipeline::refine::held_rearrange_cycles`.)
///
/// None today. The last ones, the small GEMMs `scores` (of attention-f16
/// and of vit-b16-fp8's heads) and llama's batched `context_heads`, were
/// the busiest tile's rearrange of rows it held, which the estimate left
/// out. (The elementwise operations after a matmul that gathered its blocks
/// from few senders, before them, now run in the matmul's epilogue.)
const KNOWN_GAPS: [(&str, &str); 0] = [];

/// Builds and runs `project`, then checks its profile's estimates.
fn check(project: &str) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("out");
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(["run", project, "--out", out.to_str().expect("utf-8")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("IPUB_CACHE_DIR", dir.path())
        .env("IPUB_DEVICE_LOCK", dir.path().join("device.lock"))
        .env("IPUB_LOG", "warn")
        .output()
        .expect("run ipub");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let profile_path = std::fs::read_dir(&out)
        .expect("output directory")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".profile.json"))
        .expect("a profile");
    let profile = Profile::read(&camino::Utf8PathBuf::try_from(profile_path).expect("utf-8"))
        .expect("profile reads");
    let measured = profile.total_cycles as f64;
    let whole = profile.estimated_cycles as f64 / measured - 1.0;
    let mut report = format!(
        "{project}: {} measured, {} estimated ({:+.1} %)\n",
        profile.total_cycles,
        profile.estimated_cycles,
        100.0 * whole
    );
    let mut bad = whole.abs() > 0.10;
    let rows = analysis::op_rows(&profile);
    // A known gap names an operation the project still has.
    for &(_, name) in KNOWN_GAPS.iter().filter(|(p, _)| *p == project) {
        if !rows.iter().any(|row| row.name == name) {
            report += &format!("  {name}: a known gap the project no longer has\n");
            bad = true;
        }
    }
    for row in rows {
        let Some(estimated) = row.estimated.map(|e| e.total()) else {
            continue;
        };
        let error = estimated as f64 / row.total().max(1) as f64 - 1.0;
        let minor = (row.total() as f64) < MINOR_SHARE * measured;
        let known = KNOWN_GAPS.contains(&(project, row.name.as_str()));
        let off = !minor && !known && error.abs() > 0.15;
        // A gap the estimate has closed leaves the list, so the list stays
        // what is still wrong.
        let closed = known && error.abs() <= 0.15;
        bad |= off || closed;
        report += &format!(
            "  {:<20} {:>9} measured {:>9} estimated {:+6.1} %{}\n",
            row.name,
            row.total(),
            estimated,
            100.0 * error,
            if off {
                "  <- beyond 15 %"
            } else if closed {
                "  <- within 15 %: no longer a known gap"
            } else if known {
                "  (known gap)"
            } else if minor {
                "  (minor)"
            } else {
                ""
            }
        );
    }
    println!("{report}");
    assert!(!bad, "estimates off:\n{report}");
}

#[test]
fn matmul_f8() {
    check("projects/matmul-f8.toml");
}

#[test]
fn mixed_f8() {
    check("projects/mixed-f8.toml");
}

#[test]
fn mlp_f16() {
    check("projects/mlp-f16.toml");
}

#[test]
fn attention_f16() {
    check("projects/attention-f16.toml");
}

#[test]
fn vit_fp8() {
    check("projects/vit-fp8.toml");
}

#[test]
fn siglip_mlp_f8() {
    check("projects/siglip-mlp-f8.toml");
}

#[test]
fn llama_block_f16() {
    check("projects/llama-block-f16.toml");
}

#[test]
fn vit_head_f16() {
    check("projects/vit-head-f16.toml");
}

/// Shapes the shipped projects do not have (`tests/data/estimates/`, each
/// says what in its comment).
#[test]
fn f32_activations_on_one_tile() {
    check("tests/data/estimates/f32-activations.toml");
}

#[test]
fn causal_rows_of_tall_scores() {
    check("tests/data/estimates/causal-rows-of-tall-scores.toml");
}

#[test]
fn repeat_of_a_short_body() {
    check("tests/data/estimates/repeat-of-a-short-body.toml");
}

#[test]
fn reads_a_product_on_two_tiles() {
    check("tests/data/estimates/reads-a-product-on-two-tiles.toml");
}

#[test]
fn norms_of_rows_two_past_a_quad() {
    check("tests/data/estimates/norms-of-rows-two-past-a-quad.toml");
}

#[test]
fn norms_of_odd_rows() {
    check("tests/data/estimates/norms-of-odd-rows.toml");
}

#[test]
fn causal_row_a_tile() {
    check("tests/data/estimates/causal-row-a-tile.toml");
}

#[test]
fn masked_rows_cut_over_tiles() {
    check("tests/data/ops/masked-segments.toml");
}

#[test]
fn reductions_of_rows_cut_over_tiles() {
    check("tests/data/ops/long-reductions.toml");
    check("tests/data/estimates/reduce-row-shorter-than-its-segment.toml");
    check("tests/data/estimates/reduce-row-of-a-prime-length.toml");
}

#[test]
fn repeats_entered_on_the_device() {
    check("tests/data/estimates/repeat-of-a-computed-input.toml");
    check("tests/data/regressions/repeat-from-a-weight.toml");
}

/// The full-chip projects take minutes each on the model.
#[test]
fn full_chip_projects() {
    if std::env::var_os("IPUB_SLOW_TESTS").is_none() {
        return;
    }
    check("projects/vit-b16-fp8.toml");
    check("projects/gemm-131072x64x64-f8.toml");
    check("projects/siglip-block-f8.toml");
}
