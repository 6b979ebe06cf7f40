//! `--explain`: per phase, what a build recomputed and what it reused, and
//! for each recomputed item the input change that caused it.
//!
//! Recomputed items are the pipeline's expensive queries that salsa
//! executed, named by phase and item, minus those whose query reused a
//! stored result (a store or kernel cache hit; see `pipeline::items`); input
//! changes come from the build stamp (a fresh process) or from the watcher
//! (in one process). Causes follow the query graph: a kernel recompiles
//! because one of its source files changed, a tile's image is re-emitted
//! because it runs a recompiled kernel or its own work changed, plans and
//! the program follow the project's changed keys.

use super::stamp::Change;
use camino::Utf8PathBuf;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The phases in pipeline order, with how many items each has in total.
pub(super) type Totals = Vec<(&'static str, usize)>;

/// What the causes are computed from.
pub(crate) struct Context<'a> {
    pub changes: &'a [Change],
    pub computed: &'a [(&'static str, String)],
    pub totals: &'a Totals,
    /// Each kernel variant's source files.
    pub kernel_sources: &'a BTreeMap<String, Vec<Utf8PathBuf>>,
    /// The kernel variants each tile runs.
    pub tile_kernels: &'a BTreeMap<u32, Vec<String>>,
    /// No earlier build is known: everything is new, nothing is explained.
    pub first: bool,
    /// A new process: phases that are not persisted run again whatever
    /// changed.
    pub fresh_process: bool,
}

/// How many items of one cause are named before "and N more".
const NAMED: usize = 6;

pub(crate) fn render(context: &Context) -> String {
    let mut out = String::new();
    if context.first {
        out.push_str("explain: no earlier build of this project into this directory is recorded\n");
    } else if context.changes.is_empty() {
        out.push_str("explain: no input changed since the last build\n");
    } else {
        let _ = writeln!(out, "explain: {} input(s) changed:", context.changes.len());
        for change in context.changes {
            let _ = writeln!(out, "  {change}");
        }
    }
    let project_keys: Vec<String> = context
        .changes
        .iter()
        .filter(|c| c.path.extension() == Some("toml"))
        .map(ToString::to_string)
        .collect();
    let project_cause = if project_keys.is_empty() {
        "a change upstream".to_string()
    } else {
        project_keys.join("; ")
    };
    let changed_paths: BTreeSet<&Utf8PathBuf> = context.changes.iter().map(|c| &c.path).collect();
    let recompiled: BTreeSet<&str> = context
        .computed
        .iter()
        .filter(|(phase, _)| *phase == "kernels")
        .filter_map(|(_, item)| item.strip_prefix("kernel "))
        .collect();
    for (phase, total) in context.totals {
        let items: Vec<&String> = context
            .computed
            .iter()
            .filter(|(p, _)| p == phase)
            .map(|(_, item)| item)
            .collect();
        let _ = writeln!(
            out,
            "{phase:>10}: {} recomputed, {} reused",
            items.len(),
            total.saturating_sub(items.len())
        );
        if context.first {
            continue;
        }
        let mut by_cause: BTreeMap<String, Vec<&String>> = BTreeMap::new();
        for item in items {
            let cause = match *phase {
                "kernels" => {
                    let name = item.strip_prefix("kernel ").unwrap_or(item);
                    let sources: Vec<String> = context
                        .kernel_sources
                        .get(name)
                        .into_iter()
                        .flatten()
                        .filter(|p| changed_paths.contains(p))
                        .map(ToString::to_string)
                        .collect();
                    if sources.is_empty() {
                        "not in the kernel cache".to_string()
                    } else {
                        format!("source changed: {}", sources.join(", "))
                    }
                }
                "emit" if !context.fresh_process => {
                    let tile = item
                        .strip_prefix("image of tile ")
                        .and_then(|t| t.parse::<u32>().ok());
                    let kernels: Vec<&str> = tile
                        .and_then(|t| context.tile_kernels.get(&t))
                        .into_iter()
                        .flatten()
                        .map(String::as_str)
                        .filter(|k| recompiled.contains(k))
                        .collect();
                    if kernels.is_empty() {
                        "its steps or addresses changed".to_string()
                    } else {
                        format!("it runs recompiled {}", kernels.join(", "))
                    }
                }
                "lower" | "schedule" | "place" | "emit" | "weights" | "package"
                    if context.fresh_process =>
                {
                    "this phase is not persisted, so a new process computes it again".to_string()
                }
                "place" => format!("{project_cause}: its buffers or steps changed"),
                "weights" => "a weight's declaration or its buffers changed".to_string(),
                "package" => "a part above changed".to_string(),
                _ => project_cause.clone(),
            };
            by_cause.entry(cause).or_default().push(item);
        }
        for (cause, mut items) in by_cause {
            // Tiles ran in parallel: name them in order ("tile 2" before
            // "tile 16").
            items.sort_by_key(|item| {
                let text = item.trim_end_matches(|c: char| c.is_ascii_digit());
                (text, item[text.len()..].parse::<u64>().ok())
            });
            let mut named: Vec<String> = items.iter().take(NAMED).map(|i| i.to_string()).collect();
            if items.len() > NAMED {
                named.push(format!("and {} more", items.len() - NAMED));
            }
            let _ = writeln!(out, "            because {cause}: {}", named.join("; "));
        }
    }
    out
}
