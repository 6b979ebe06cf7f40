//! Incrementality of vit-fp8 builds: cold, no-op in a fresh process, no-op
//! in watch, one kernel edit and one operation-shape edit, each with the
//! queries it recomputed. `cargo bench --bench incremental`.
//!
//! Works on a copy of `projects/` and `device/` in a temporary directory
//! with its own cache, so the edits never touch the checkout. Fresh-process
//! builds spawn the `ipub` binary; watch rebuilds run in this process the
//! way `ipub watch` does (refresh the edited file, rebuild through the same
//! database, write the package if it changed).

mod common;

use camino::{Utf8Path, Utf8PathBuf};
use common::copy_dir;
use ipub::cli::build::build;
use ipub::cli::watch::keep_package;
use ipub::db::{Database, Db};
use std::process::Command;
use std::time::Instant;

const PROJECT: &str = "projects/vit-fp8.toml";

/// Runs `ipub build` in a new process; returns milliseconds and the queries
/// its phase lines say were recomputed.
fn fresh_build(root: &Utf8Path) -> (f64, usize) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(["build", PROJECT])
        .current_dir(root)
        .output()
        .expect("runs ipub");
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let recomputed = stdout
        .lines()
        .filter_map(|line| {
            let at = line.find(" quer")?;
            line[..at].rsplit('(').next()?.trim().parse::<usize>().ok()
        })
        .sum();
    (elapsed, recomputed)
}

/// One watch rebuild: refresh `edited`, rebuild, write if changed. Returns
/// milliseconds in all and writing, recomputed queries and items.
fn watch_rebuild(
    db: &mut Database,
    file: ipub::db::SourceFile,
    edited: &[Utf8PathBuf],
    written: &mut Option<std::sync::Arc<ipub::package::file::Encoded>>,
) -> (f64, f64, usize, usize) {
    // Saves are seconds apart: the previous rebuild's results have been
    // persisted by the time the next one starts.
    if let Some(store) = db.store() {
        store.flush();
    }
    let started = Instant::now();
    for path in edited {
        db.refresh_file(path);
    }
    let outcome = build(db, file, false);
    assert!(outcome.ok, "the edited project builds");
    // As `ipub watch` does: the package written if it changed, the stamp
    // saved.
    let write_started = Instant::now();
    let wrote =
        keep_package(db, Utf8Path::new(PROJECT), None, &outcome, written.as_ref()).expect("writes");
    let writing = write_started.elapsed().as_secs_f64() * 1000.0;
    if wrote {
        *written = outcome.package.clone();
    }
    (
        started.elapsed().as_secs_f64() * 1000.0,
        writing,
        outcome.recomputed,
        outcome.computed.len(),
    )
}

fn main() {
    let checkout = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().expect("temporary directory");
    let root = Utf8PathBuf::from_path_buf(scratch.path().to_path_buf()).expect("utf-8");
    copy_dir(&checkout.join("projects"), &root.join("projects"));
    copy_dir(&checkout.join("device"), &root.join("device"));
    std::env::set_var("IPUB_CACHE_DIR", root.join("cache"));

    let (cold, cold_queries) = fresh_build(&root);
    println!(
        "vit-fp8 cold build (fresh process, empty caches): {cold:.0} ms, {cold_queries} queries"
    );
    let mut best = f64::MAX;
    for _ in 0..3 {
        let (noop, queries) = fresh_build(&root);
        assert_eq!(queries, 0, "a no-op build recomputes nothing");
        best = best.min(noop);
    }
    println!("vit-fp8 no-op build in a fresh process: {best:.1} ms (best of 3), 0 queries");

    std::env::set_current_dir(&root).expect("cd");
    let mut db = Database::on_disk();
    let file = db.file(Utf8Path::new(PROJECT));
    let mut written = None;
    let (warm, _, queries, items) = watch_rebuild(&mut db, file, &[], &mut written);
    println!(
        "vit-fp8 first build in watch (plans and images from the store): {warm:.0} ms, {queries} queries, {items} items computed"
    );
    let known = db.known_files();
    let mut best = (f64::MAX, 0.0, 0, 0);
    for _ in 0..5 {
        let run = watch_rebuild(&mut db, file, &known, &mut written);
        if run.0 < best.0 {
            best = run;
        }
    }
    println!(
        "vit-fp8 no-op rebuild in watch: {:.3} ms (best of 5), {} queries, {} items computed",
        best.0, best.2, best.3
    );

    // Kernel edits that keep the kernel's size and its results: the two
    // final multiplies swap (x * 0.5 is exact), the two erf lines swap
    // (independent halves), or both. Each is a kernel never seen before.
    let gelu = Utf8PathBuf::from("device/gelu_f16.S");
    let source = std::fs::read_to_string(&gelu).expect("gelu source");
    let swaps = [
        (
            "        f32v2mul \\x, \\x, $a12:13\n        f32v2mul \\x, \\x, \\t\n",
            "        f32v2mul \\x, \\x, \\t\n        f32v2mul \\x, \\x, $a12:13\n",
        ),
        (
            "        f32erf  \\tlo, \\tlo\n        f32erf  \\thi, \\thi\n",
            "        f32erf  \\thi, \\thi\n        f32erf  \\tlo, \\tlo\n",
        ),
    ];
    for (from, _) in &swaps {
        assert!(
            source.contains(from),
            "the gelu kernel has the edited lines"
        );
    }
    let edits = [
        source.replace(swaps[0].0, swaps[0].1),
        source.replace(swaps[1].0, swaps[1].1),
        source
            .replace(swaps[0].0, swaps[0].1)
            .replace(swaps[1].0, swaps[1].1),
    ];
    let mut times = Vec::new();
    let mut counts = (0, 0);
    for edit in &edits {
        std::fs::write(&gelu, edit).expect("edit");
        let (ms, writing, queries, items) =
            watch_rebuild(&mut db, file, std::slice::from_ref(&gelu), &mut written);
        times.push((ms, writing));
        counts = (queries, items);
    }
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!(
        "vit-fp8 rebuild in watch after one kernel edit (gelu_f16.S, same size, 3 distinct edits): best {:.1} ms, median {:.1} ms (of which writing the package {:.1} ms), {} queries, {} items computed",
        times[0].0, times[1].0, times[1].1, counts.0, counts.1
    );
    std::fs::write(&gelu, &source).expect("revert");
    let (revert, _, queries, items) = watch_rebuild(&mut db, file, &[gelu], &mut written);
    println!(
        "vit-fp8 rebuild in watch after reverting the kernel edits (images from the store): {revert:.1} ms, {queries} queries, {items} items computed"
    );

    // An operation-shape edit: the MLP's width (fc1's output) 1536 -> 1024.
    let encoder = Utf8PathBuf::from("projects/layers/vit-encoder.toml");
    let text = std::fs::read_to_string(&encoder).expect("encoder");
    std::fs::write(&encoder, text.replace("1536", "1024")).expect("edit");
    let (shape, _, queries, items) =
        watch_rebuild(&mut db, file, std::slice::from_ref(&encoder), &mut written);
    println!(
        "vit-fp8 rebuild in watch after one op-shape edit (MLP width 1536 -> 1024): {shape:.0} ms, {queries} queries, {items} items computed"
    );
    std::fs::write(&encoder, &text).expect("revert");
    let (revert, _, queries, items) = watch_rebuild(&mut db, file, &[encoder], &mut written);
    println!(
        "vit-fp8 rebuild in watch after reverting it: {revert:.0} ms, {queries} queries, {items} items computed"
    );
}
