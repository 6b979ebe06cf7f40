//! The operation table (measured beside estimated cycles and the error,
//! compute and exchange apart, AMP utilisation against the roofline for
//! matrix products, exchange share, imbalance) and the kernel table.
//! Both are plain HTML tables, sortable by any column.

use super::summary::Analysis;
use super::{escape, thousands};
use crate::profile::summary::{by_kernel, signed_percent};
use crate::profile::Profile;
use std::fmt::Write as _;

/// A numeric cell: shown as `text`, sorted by `value`.
fn cell(value: f64, text: &str) -> String {
    format!("<td data-v=\"{value}\">{text}</td>")
}

fn count(value: u64) -> String {
    cell(value as f64, &thousands(value))
}

fn optional(value: Option<u64>) -> String {
    value.map_or_else(|| cell(-1.0, "-"), count)
}

/// A measured figure with its estimate beside it, sorted by the measure.
fn pair(measured: u64, estimated: Option<u64>) -> String {
    let estimate = estimated.map_or("-".to_string(), thousands);
    cell(
        measured as f64,
        &format!(
            "{} <span class=\"dim\">/ {estimate}</span>",
            thousands(measured)
        ),
    )
}

fn error_cell(error: Option<f64>) -> String {
    let class = match error {
        Some(e) if e.abs() >= 0.25 => " class=\"bad\"",
        Some(e) if e.abs() >= 0.10 => " class=\"warn\"",
        _ => "",
    };
    format!(
        "<td data-v=\"{}\"{class}>{}</td>",
        error.unwrap_or(f64::NAN),
        signed_percent(error)
    )
}

fn percent_cell(ratio: Option<f64>) -> String {
    ratio.map_or_else(
        || cell(-1.0, "-"),
        |r| cell(r, &format!("{:.1} %", 100.0 * r)),
    )
}

pub(super) fn section(profile: &Profile, analysis: &Analysis) -> String {
    let total = profile.total_cycles.max(1) as f64;
    let widest = analysis
        .ops
        .iter()
        .map(|o| o.total().max(o.estimated.map_or(0, |e| e.total())))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut out = String::from(
        "<section id=\"operations\"><h2>Operations</h2>\
         <p class=\"dim\">Each operation's steps over the whole run (every iteration of a loop), \
         measured by the model beside the planner's estimate. Error is measured over estimated. \
         AMP utilisation is the roofline (its multiply-accumulates at the AMP peak on every tile the project may use) \
         over the measured cycles. Imbalance is what its tiles wait for the slowest one in its compute steps. \
         Views (reshapes, transposes) run no steps and are left out. Click a column to sort.</p>\
         <div class=\"wide\"><table class=\"data sortable\" id=\"ops-table\"><thead><tr>\
         <th>operation</th><th>kind</th><th>tiles</th><th>steps</th><th>measured</th><th>share</th>\
         <th>estimated</th><th>error</th><th class=\"bars\">measured / estimated</th>\
         <th>compute <span class=\"dim\">/ est.</span></th><th>exchange + sync <span class=\"dim\">/ est.</span></th>\
         <th>AMP utilisation</th><th>exchange share</th><th>imbalance</th></tr></thead><tbody>",
    );
    // Views (reshapes, transposes) run no step and cost nothing.
    for op in analysis
        .ops
        .iter()
        .filter(|o| o.steps > 0 || o.estimated.is_some_and(|e| e.total() > 0))
    {
        let estimated = op.estimated.map(|e| e.total());
        let bar = |cycles: u64, class: &str| {
            format!(
                "<span class=\"hbar {class}\" style=\"width:{:.2}%\"></span>",
                100.0 * cycles as f64 / widest
            )
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td>{}{}{}{}{}{}<td class=\"bars\" data-v=\"{}\">{}{}</td>{}{}{}{}{}</tr>",
            escape(&op.name),
            escape(&op.kind),
            count(u64::from(op.tiles)),
            count(u64::from(op.steps)),
            count(op.total()),
            cell(op.total() as f64 / total, &format!("{:.1} %", 100.0 * op.total() as f64 / total)),
            optional(estimated),
            error_cell(op.error()),
            op.total(),
            bar(op.total(), "measured"),
            estimated.map_or(String::new(), |e| bar(e, "estimated")),
            pair(op.measured.compute, op.estimated.map(|e| e.compute)),
            pair(
                op.measured.exchange + op.measured.sync,
                op.estimated.map(|e| e.exchange + e.sync)
            ),
            percent_cell(op.amp_utilisation()),
            percent_cell(Some(op.exchange_share())),
            count(op.imbalance_cycles),
        );
    }
    out.push_str("</tbody></table></div><p class=\"legend-row\"><span><i class=\"hbar measured\"></i> measured</span> <span><i class=\"hbar estimated\"></i> estimated</span></p>");

    out.push_str(
        "<h2 id=\"kernels\">Kernels</h2><p class=\"dim\">Busy cycles of every tile-step that ran a kernel \
         (kernels a tile runs one after another in a step are joined with +), beside their cost formulas.</p>\
         <table class=\"data sortable\" id=\"kernel-table\"><thead><tr><th>kernel</th><th>tile-steps</th>\
         <th>busy tile-cycles</th><th>mean per tile-step</th><th>estimated</th><th>error</th></tr></thead><tbody>",
    );
    for row in by_kernel(profile) {
        let error = (row.estimated_cycles > 0)
            .then(|| row.estimated_busy_cycles as f64 / row.estimated_cycles as f64 - 1.0);
        let _ = write!(
            out,
            "<tr><td>{}</td>{}{}{}{}{}</tr>",
            escape(&row.kernel),
            count(row.runs),
            count(row.busy_cycles),
            count(row.busy_cycles / row.runs.max(1)),
            optional((row.estimated_cycles > 0).then_some(row.estimated_cycles)),
            error_cell(error),
        );
    }
    out.push_str("</tbody></table></section>\n");
    out
}
