//! The page of `ipub profile diff --html`: totals and step kinds before
//! and after, operations by change, a chip heatmap of each tile's change in
//! busy cycles, and what the build changed.

use super::summary::stacked_bar;
use super::{code_spans, escape, page, signed_thousands, thousands};
use super::{COMMON_JS, HEATMAP_JS, TABLE_JS};
use crate::profile::diff::Diff;
use crate::profile::html::heatmap::COLUMNS;
use crate::profile::{Profile, StepKind};
use serde_json::json;
use std::fmt::Write as _;

fn percent(before: u64, after: u64) -> String {
    if before == 0 {
        return "-".into();
    }
    format!("{:+.1} %", 100.0 * (after as f64 / before as f64 - 1.0))
}

pub(crate) fn report(diff: &Diff, before: &Profile, after: &Profile) -> String {
    let mut body = String::new();
    let (a, b) = diff.total;
    let _ = write!(
        body,
        "<header><h1>{} <span class=\"dim\">→</span> {}</h1></header>\
         <section id=\"summary\"><h2>Summary</h2><div class=\"cards\">\
         <div class=\"card\"><div class=\"dim\">Before</div><div class=\"big\">{} cycles</div><div class=\"dim\">{:.1} µs; estimated {}</div></div>\
         <div class=\"card\"><div class=\"dim\">After</div><div class=\"big\">{} cycles</div><div class=\"dim\">{:.1} µs; estimated {}</div></div>\
         <div class=\"card\"><div class=\"dim\">Change</div><div class=\"big {}\">{}</div><div class=\"dim\">{}</div></div></div>",
        escape(&diff.before_name),
        escape(&diff.after_name),
        thousands(a),
        before.micros(a),
        thousands(diff.estimated.0),
        thousands(b),
        after.micros(b),
        thousands(diff.estimated.1),
        if b > a { "bad" } else { "good" },
        signed_thousands(b as i64 - a as i64),
        percent(a, b),
    );
    let kinds = |k: &crate::profile::analysis::KindCycles| {
        StepKind::ALL
            .into_iter()
            .map(|kind| {
                (
                    kind.name().to_string(),
                    k.get(kind),
                    super::kind_colour(kind).to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let scale = a.max(b);
    let _ = write!(
        body,
        "<h3>Before</h3>{}<h3>After</h3>{}</section>",
        stacked_bar(&kinds(&diff.kinds.0), scale),
        stacked_bar(&kinds(&diff.kinds.1), scale)
    );

    body.push_str(
        "<section id=\"operations\"><h2>Operations by change</h2>\
         <table class=\"data sortable\"><thead><tr><th>operation</th><th>before</th><th>after</th>\
         <th>change</th><th>change %</th><th class=\"bars\">change</th><th>tiles</th><th>estimated</th></tr></thead><tbody>",
    );
    let widest = diff
        .ops
        .iter()
        .map(|o| o.delta().unsigned_abs())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    for op in &diff.ops {
        let (before_cycles, after_cycles) = op.cycles();
        let delta = op.delta();
        let width = 50.0 * delta.unsigned_abs() as f64 / widest;
        let bar = if delta < 0 {
            format!(
                "<span class=\"dbar good\" style=\"margin-left:{:.2}%;width:{width:.2}%\"></span>",
                50.0 - width
            )
        } else {
            format!("<span class=\"dbar bad\" style=\"margin-left:50%;width:{width:.2}%\"></span>")
        };
        let tiles = |r: &Option<crate::profile::analysis::OpRow>| {
            r.as_ref().map_or("-".to_string(), |r| r.tiles.to_string())
        };
        let estimate = |r: &Option<crate::profile::analysis::OpRow>| {
            r.as_ref()
                .and_then(|r| r.estimated)
                .map_or("-".to_string(), |e| thousands(e.total()))
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td data-v=\"{before_cycles}\">{}</td><td data-v=\"{after_cycles}\">{}</td>\
             <td data-v=\"{delta}\" class=\"{}\">{}</td><td>{}</td><td class=\"bars\" data-v=\"{delta}\">{bar}</td>\
             <td>{} → {}</td><td>{} → {}</td></tr>",
            escape(&op.name),
            thousands(before_cycles),
            thousands(after_cycles),
            if delta > 0 { "bad" } else if delta < 0 { "good" } else { "" },
            signed_thousands(delta),
            percent(before_cycles, after_cycles),
            tiles(&op.before),
            tiles(&op.after),
            estimate(&op.before),
            estimate(&op.after),
        );
    }
    body.push_str("</tbody></table></section>");

    body.push_str(
        "<section id=\"chip\"><h2>Tiles whose time changed</h2>\
         <p class=\"dim\">Each tile's change in busy cycles (compute and exchange): green is faster, red slower, grey unused in both runs.</p>\
         <div class=\"heatmaps\"><figure class=\"heatmap\"><figcaption>Change in busy cycles</figcaption>\
         <canvas id=\"heat-delta\" class=\"heat\"></canvas><div class=\"scale\" id=\"heat-delta-scale\"></div></figure>\
         <div><table class=\"data sortable\"><thead><tr><th>tile</th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>",
    );
    for tile in diff.tiles.iter().take(15).filter(|t| t.delta() != 0) {
        let (x, y) = tile.busy_cycles();
        let _ = write!(
            body,
            "<tr><td>tile {}{}</td><td data-v=\"{x}\">{}</td><td data-v=\"{y}\">{}</td><td data-v=\"{}\" class=\"{}\">{}</td></tr>",
            tile.tile,
            tile.note()
                .map_or(String::new(), |n| format!(" <span class=\"dim\">({n})</span>")),
            thousands(x),
            thousands(y),
            tile.delta(),
            if tile.delta() > 0 { "bad" } else { "good" },
            signed_thousands(tile.delta())
        );
    }
    body.push_str("</tbody></table></div></div></section>");

    body.push_str("<section id=\"build\"><h2>What the build changed</h2><ul class=\"changes\">");
    for line in &diff.build {
        let _ = write!(body, "<li>{}</li>", code_spans(line));
    }
    body.push_str("</ul></section>");

    let count = after.target().tiles as usize;
    let mut used = vec![0u8; count];
    let mut values = vec![0i64; count];
    for tile in &diff.tiles {
        if let Some(slot) = used.get_mut(tile.tile as usize) {
            *slot = 1;
            values[tile.tile as usize] = tile.delta();
        }
    }
    let data = json!({
        "heatmap": {
            "columns": COLUMNS,
            "tiles": count,
            "used": used,
            "metrics": [{
                "id": "delta", "title": "Change in busy cycles", "unit": "cycles",
                "values": values, "diverging": true,
            }],
        },
    });
    page(
        &format!("{} → {}", diff.before_name, diff.after_name),
        &body,
        &data,
        &[COMMON_JS, HEATMAP_JS, TABLE_JS],
    )
}
