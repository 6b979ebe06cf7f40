//! Views of a profile: text summaries, a Chrome trace and an HTML report.

use super::{Profile, StepKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Cycles attributed to one key (a kernel, an operation, a step kind, a tile).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    pub key: String,
    /// Steps (or tile-steps, for kernels and tiles) counted.
    pub count: u64,
    pub cycles: u64,
}

fn sorted(rows: BTreeMap<String, Row>, top: usize) -> Vec<Row> {
    let mut rows: Vec<Row> = rows.into_values().collect();
    rows.sort_by(|a, b| b.cycles.cmp(&a.cycles).then_with(|| a.key.cmp(&b.key)));
    rows.truncate(top);
    rows
}

fn add(rows: &mut BTreeMap<String, Row>, key: &str, cycles: u64) {
    let row = rows.entry(key.to_string()).or_insert_with(|| Row {
        key: key.to_string(),
        ..Row::default()
    });
    row.count += 1;
    row.cycles += cycles;
}

/// Busy tile-cycles per kernel.
pub fn by_kernel(profile: &Profile, top: usize) -> Vec<Row> {
    let mut rows = BTreeMap::new();
    for step in profile.steps.iter().filter(|s| s.kind == StepKind::Compute) {
        for tile in &step.tiles {
            if let Some(kernel) = &tile.kernel {
                add(&mut rows, kernel, tile.busy_cycles);
            }
        }
    }
    sorted(rows, top)
}

/// Step cycles per operation (its compute and the exchange feeding it).
pub fn by_op(profile: &Profile, top: usize) -> Vec<Row> {
    let mut rows = BTreeMap::new();
    for step in &profile.steps {
        if let Some(op) = &step.op {
            add(&mut rows, op, step.cycles);
        }
    }
    sorted(rows, top)
}

/// Step cycles per step kind: compute, exchange, sync, host.
pub fn by_phase(profile: &Profile) -> Vec<Row> {
    let mut rows = BTreeMap::new();
    for step in &profile.steps {
        let kind = match step.kind {
            StepKind::Compute => "compute",
            StepKind::Exchange => "exchange",
            StepKind::Sync => "sync",
            StepKind::Host => "host",
        };
        add(&mut rows, kind, step.cycles);
    }
    sorted(rows, usize::MAX)
}

/// Busy cycles per tile (its idle time is the run's total minus this).
pub fn by_tile(profile: &Profile, top: usize) -> Vec<Row> {
    let mut rows = BTreeMap::new();
    for step in &profile.steps {
        for tile in &step.tiles {
            add(
                &mut rows,
                &format!("tile {:>4}", tile.tile),
                tile.busy_cycles,
            );
        }
    }
    sorted(rows, top)
}

/// The text summary `ipub profile` prints.
pub fn summary(profile: &Profile, top: usize) -> String {
    let mut out = String::new();
    let total = profile.total_cycles.max(1);
    let _ = writeln!(
        out,
        "{}: {} cycles measured ({:.1} us at {:.2} GHz), {} estimated",
        profile.project,
        profile.total_cycles,
        profile.micros(profile.total_cycles),
        profile.clock_hz as f64 / 1e9,
        profile.estimated_cycles
    );
    let section = |out: &mut String, title: &str, unit: &str, rows: &[Row], share: bool| {
        let _ = writeln!(out, "\n{title}");
        for row in rows {
            let percent = if share {
                format!("{:>6.1}%", 100.0 * row.cycles as f64 / total as f64)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  {:<40} {:>12} {unit} {percent} ({} x)",
                row.key, row.cycles, row.count
            );
        }
    };
    section(&mut out, "by step kind", "cycles", &by_phase(profile), true);
    section(
        &mut out,
        "by operation",
        "cycles",
        &by_op(profile, top),
        true,
    );
    section(
        &mut out,
        "by kernel",
        "tile-cycles",
        &by_kernel(profile, top),
        false,
    );
    section(
        &mut out,
        "by tile (busiest)",
        "busy cycles",
        &by_tile(profile, top),
        false,
    );
    out
}

/// Chrome trace-event JSON: one track per tile, one slice per busy tile
/// per step; times in microseconds.
pub fn chrome_trace(profile: &Profile) -> String {
    let mut events = Vec::new();
    for step in &profile.steps {
        let start = profile.micros(step.start_cycle);
        events.push(serde_json::json!({
            "name": step.label, "cat": format!("{:?}", step.kind).to_lowercase(), "ph": "X",
            "ts": start, "dur": profile.micros(step.cycles), "pid": 0, "tid": "steps",
        }));
        for tile in &step.tiles {
            let name = tile.kernel.clone().unwrap_or_else(|| step.label.clone());
            events.push(serde_json::json!({
                "name": name, "cat": format!("{:?}", step.kind).to_lowercase(), "ph": "X",
                "ts": start, "dur": profile.micros(tile.busy_cycles), "pid": 1, "tid": tile.tile,
                "args": { "cycles": tile.busy_cycles, "instructions": tile.instructions, "op": step.op },
            }));
        }
    }
    serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ns" }).to_string()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A self-contained HTML report: the summary tables and a bar per step.
pub fn html(profile: &Profile, top: usize) -> String {
    let mut out = String::new();
    let total = profile.total_cycles.max(1) as f64;
    let _ = write!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{0} profile</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{padding:2px 8px;text-align:right}}\
         td:first-child{{text-align:left}}.bar{{height:10px;display:inline-block}}.compute{{background:#4a7}}.exchange{{background:#47c}}\
         .sync{{background:#c74}}.host{{background:#999}}</style></head><body><h1>{0}</h1><p>{1} cycles measured, {2} estimated</p>",
        escape(&profile.project),
        profile.total_cycles,
        profile.estimated_cycles
    );
    let table = |out: &mut String, title: &str, rows: &[Row]| {
        let _ = write!(
            out,
            "<h2>{title}</h2><table><tr><th>name</th><th>cycles</th><th>count</th></tr>"
        );
        for row in rows {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&row.key),
                row.cycles,
                row.count
            );
        }
        out.push_str("</table>");
    };
    table(&mut out, "By step kind", &by_phase(profile));
    table(&mut out, "By operation", &by_op(profile, top));
    table(
        &mut out,
        "By kernel (tile-cycles)",
        &by_kernel(profile, top),
    );
    table(&mut out, "Busiest tiles", &by_tile(profile, top));
    out.push_str("<h2>Timeline</h2><div>");
    for step in &profile.steps {
        let kind = format!("{:?}", step.kind).to_lowercase();
        let width = (1000.0 * step.cycles as f64 / total).max(1.0);
        let _ = write!(
            out,
            "<span class=\"bar {kind}\" style=\"width:{width:.1}px\" title=\"{} ({} cycles)\"></span>",
            escape(&step.label),
            step.cycles
        );
    }
    out.push_str("</div></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;
    use expect_test::expect;

    #[test]
    fn summaries_attribute_cycles() {
        expect![[r#"
            sample: 3000 cycles measured (2.0 us at 1.50 GHz), 2800 estimated

            by step kind
              compute                                          2200 cycles   73.3% (2 x)
              sync                                              600 cycles   20.0% (1 x)
              exchange                                          200 cycles    6.7% (1 x)

            by operation
              qkv                                              1200 cycles   40.0% (1 x)
              softmax                                          1200 cycles   40.0% (2 x)

            by kernel
              gemm_f8_k64_c16_r4                               2300 tile-cycles  (2 x)
              softmax_f16                                      1900 tile-cycles  (2 x)

            by tile (busiest)
              tile    0                                        2300 busy cycles  (3 x)
              tile    1                                        2150 busy cycles  (3 x)
        "#]]
        .assert_eq(&summary(&sample(), 10));
    }

    #[test]
    fn chrome_traces_are_trace_event_json() {
        let trace: serde_json::Value =
            serde_json::from_str(&chrome_trace(&sample())).expect("json");
        let events = trace["traceEvents"].as_array().expect("events");
        assert_eq!(events.len(), 4 + 6);
        assert!(events.iter().all(|e| e["ph"] == "X"));
        assert_eq!(events[1]["name"], "gemm_f8_k64_c16_r4");
        assert_eq!(events[1]["tid"], 0);
    }

    #[test]
    fn html_reports_escape_labels() {
        let mut profile = sample();
        profile.project = "<script>".into();
        let page = html(&profile, 5);
        assert!(page.contains("&lt;script&gt;"));
        assert!(!page.contains("<script>"));
    }
}
