//! The HTML report: one self-contained page (no network, works offline)
//! that answers where the cycles went, which tile is the bottleneck, what
//! occupies memory on a tile and how the estimate compares.
//!
//! The page is server-rendered HTML for what reads as text (the summary,
//! the operation and kernel tables) and canvas for what is drawn at chip
//! scale (the timeline, the heatmaps, the memory map), fed by compact JSON
//! arrays embedded in the page. Each section has its module: [`summary`],
//! [`timeline`], [`heatmap`], [`memory`], [`ops`]; [`diff`] is the page of
//! `ipub profile diff --html`. The scripts and the style sheet are plain
//! files under `assets/`, included at compile time.

pub(crate) mod diff;
pub(super) mod heatmap;
pub(super) mod memory;
pub(super) mod ops;
pub(crate) mod summary;
pub(super) mod timeline;

use super::{Profile, StepKind};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const STYLE: &str = include_str!("assets/report.css");
const COMMON_JS: &str = include_str!("assets/common.js");
const TIMELINE_JS: &str = include_str!("assets/timeline.js");
const HEATMAP_JS: &str = include_str!("assets/heatmap.js");
const MEMORY_JS: &str = include_str!("assets/memory.js");
const TABLE_JS: &str = include_str!("assets/table.js");

/// Text made safe for HTML element content and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Text escaped, with spans between backticks set as code.
pub(super) fn code_spans(text: &str) -> String {
    escape(text)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

/// The colour of a step kind, as the style sheet and the scripts draw it.
pub(super) fn kind_colour(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Compute => "#3f9b6e",
        StepKind::Exchange => "#4a78b5",
        StepKind::Sync => "#d08a2e",
        StepKind::Host => "#9aa1ad",
    }
}

/// Each operation's colour: a hue per kind of operation (every matrix
/// product green, every softmax ochre, ...), lighter or darker per
/// operation of that kind in program order, so a program of thirty
/// operations still reads by kind and neighbours stay apart. Hues avoid
/// the exchange blue and the sync orange.
pub(super) fn op_colours(profile: &Profile) -> BTreeMap<String, String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut colours = BTreeMap::new();
    for op in &profile.ops {
        let (hue, saturation) = match op.kind.as_str() {
            "matmul" => (150, 45),
            "softmax" => (45, 65),
            "gelu" => (275, 40),
            "layernorm" => (330, 45),
            "cast" => (185, 50),
            "add" => (80, 45),
            "rearrange" => (0, 35),
            _ => (120, 10),
        };
        let n = seen.entry(&op.kind).or_default();
        let lightness = [40, 52, 32, 46, 36][*n % 5];
        *n += 1;
        colours
            .entry(op.name.clone())
            .or_insert_with(|| format!("hsl({hue},{saturation}%,{lightness}%)"));
    }
    colours
}

pub(super) use super::{signed_thousands, thousands};

/// JSON for a `<script type="application/json">` element: no `<` may
/// appear in it, or a label could close the element (or open a comment
/// that changes how the parser reads it). In JSON a `<` can only be inside
/// a string, where `\u003c` means the same.
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

/// The page around `body`: style, data and scripts.
pub(crate) fn page(title: &str, body: &str, data: &Value, scripts: &[&str]) -> String {
    let mut out = String::with_capacity(body.len() + 64 * 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n{body}\n\
         <div id=\"tooltip\" role=\"tooltip\" hidden></div>\n\
         <script type=\"application/json\" id=\"report-data\">{}</script>\n<script>\n",
        escape(title),
        script_json(data)
    );
    for script in scripts {
        out.push_str(script);
        out.push('\n');
    }
    out.push_str("</script></body></html>\n");
    out
}

/// The report of one run.
pub(crate) fn report(profile: &Profile) -> String {
    let analysis = summary::Analysis::of(profile);
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header><h1>{} <span class=\"dim\">profile</span></h1>\
         <nav><a href=\"#summary\">Summary</a><a href=\"#timeline\">Timeline</a>\
         <a href=\"#chip\">Chip</a><a href=\"#memory\">Memory</a>\
         <a href=\"#operations\">Operations</a><a href=\"#kernels\">Kernels</a></nav></header>",
        escape(&profile.project)
    );
    body.push_str(&summary::section(profile, &analysis));
    body.push_str(&timeline::section());
    body.push_str(&heatmap::section());
    body.push_str(&memory::section(profile, &analysis));
    body.push_str(&ops::section(profile, &analysis));
    let data = json!({
        "project": profile.project,
        "clockHz": profile.clock_hz,
        "total": profile.total_cycles,
        "bottleneck": super::analysis::bottleneck_tile(&analysis.tiles).map(|(tile, _)| tile),
        "timeline": timeline::data(profile),
        "heatmap": heatmap::data(profile, &analysis.tiles),
        "memory": memory::data(profile),
    });
    page(
        &format!("{} profile", profile.project),
        &body,
        &data,
        &[COMMON_JS, TIMELINE_JS, HEATMAP_JS, MEMORY_JS, TABLE_JS],
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn reports_escape_labels_and_embedded_data() {
        let mut profile = sample();
        profile.project = "<script>".into();
        profile.steps[0].label = "</script><b>".into();
        let page = report(&profile);
        assert!(page.contains("&lt;script&gt;"));
        assert_eq!(page.matches("<script").count(), 2, "only the page's own");
        assert!(!page.contains("</script><b>"));
    }

    #[test]
    fn reports_are_self_contained() {
        let page = report(&sample());
        for external in ["http://", "https://", "src=", "@import", "url("] {
            assert!(!page.contains(external), "{external}");
        }
        for section in [
            "summary",
            "timeline",
            "chip",
            "memory",
            "operations",
            "kernels",
        ] {
            assert!(page.contains(&format!("id=\"{section}\"")), "{section}");
        }
    }
}
