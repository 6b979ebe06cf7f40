//! Machine-readable output: `--message-format json` on `check`, `build`,
//! `run` and `watch`.
//!
//! One JSON object per line on stdout, each with a `reason`, in the shape
//! cargo uses (`book/src/messages.md` documents every field). Diagnostics
//! are `compiler-message`s whose `message` has cargo's diagnostic fields
//! (`message`, `code`, `level`, `spans` with byte offsets and 1-based
//! lines and columns, `children` for notes and help, `rendered`); each
//! command ends a project with a `*-finished` message carrying its result.

use crate::diagnostic::{line_column, render, Diagnostic, Severity};
use camino::Utf8Path;
use serde::Serialize;

/// One line of JSON output.
#[derive(Debug, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
// The variants' names are the `reason` values the JSON carries
// (`compiler-message` among them), so one ends with the enum's name.
#[allow(clippy::enum_variant_names)]
pub(super) enum Message<'a> {
    /// An error or a warning.
    CompilerMessage {
        /// The project the diagnostic belongs to.
        project: &'a str,
        message: DiagnosticMessage,
    },
    /// `ipub check` of one project.
    CheckFinished(CheckFinished<'a>),
    /// A build of one project (also from `run` and `watch`).
    BuildFinished(BuildFinished<'a>),
    /// A run on the device and its numerics check.
    RunFinished(RunFinished<'a>),
    /// `ipub watch` after a change: every project rebuilt.
    RebuildFinished(RebuildFinished<'a>),
}

/// A diagnostic in cargo's shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct DiagnosticMessage {
    pub message: String,
    pub code: Option<DiagnosticCode>,
    /// `error`, `warning`, `note` or `help`.
    pub level: &'static str,
    pub spans: Vec<DiagnosticSpan>,
    /// Notes and help, each a message without spans.
    pub children: Vec<DiagnosticMessage>,
    /// The diagnostic as the terminal shows it (without colour); `null`
    /// for children.
    pub rendered: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct DiagnosticCode {
    pub code: String,
    pub explanation: Option<String>,
}

/// Where a diagnostic points. Lines and columns are 1-based, columns count
/// characters; all are 0 when the file could not be read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct DiagnosticSpan {
    pub file_name: String,
    pub byte_start: usize,
    pub byte_end: usize,
    pub line_start: usize,
    pub line_end: usize,
    pub column_start: usize,
    pub column_end: usize,
    pub is_primary: bool,
    /// The source lines the span covers, with the highlighted columns.
    pub text: Vec<SpanLine>,
    pub label: Option<String>,
    pub suggested_replacement: Option<String>,
    pub suggestion_applicability: Option<String>,
    pub expansion: Option<()>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct SpanLine {
    pub text: String,
    pub highlight_start: usize,
    pub highlight_end: usize,
}

impl DiagnosticMessage {
    /// The message of `diagnostic`, with `source` giving its file's text.
    pub(super) fn of(
        diagnostic: &Diagnostic,
        source: &dyn Fn(&Utf8Path) -> Option<String>,
    ) -> DiagnosticMessage {
        let spans = diagnostic
            .location
            .iter()
            .map(|location| {
                let text = source(&location.file);
                let (line_start, column_start, line_end, column_end, lines) = match &text {
                    Some(text) => {
                        let (ls, cs) = line_column(text, location.span.start);
                        let (le, ce) = line_column(text, location.span.end);
                        let lines = text
                            .lines()
                            .enumerate()
                            .skip(ls - 1)
                            .take(le + 1 - ls)
                            .map(|(i, line)| SpanLine {
                                text: line.to_string(),
                                highlight_start: if i + 1 == ls { cs } else { 1 },
                                highlight_end: if i + 1 == le {
                                    ce
                                } else {
                                    line.chars().count() + 1
                                },
                            })
                            .collect();
                        (ls, cs, le, ce, lines)
                    }
                    None => (0, 0, 0, 0, Vec::new()),
                };
                DiagnosticSpan {
                    file_name: location.file.to_string(),
                    byte_start: location.span.start,
                    byte_end: location.span.end,
                    line_start,
                    line_end,
                    column_start,
                    column_end,
                    is_primary: true,
                    text: lines,
                    label: (!diagnostic.label.is_empty()).then(|| diagnostic.label.clone()),
                    suggested_replacement: None,
                    suggestion_applicability: None,
                    expansion: None,
                }
            })
            .collect();
        let children = diagnostic
            .notes
            .iter()
            .map(|note| {
                let (level, text) = match note.split_once(": ") {
                    Some(("help", text)) => ("help", text),
                    Some(("note", text)) => ("note", text),
                    _ => ("note", note.as_str()),
                };
                DiagnosticMessage {
                    message: text.to_string(),
                    code: None,
                    level,
                    spans: Vec::new(),
                    children: Vec::new(),
                    rendered: None,
                }
            })
            .collect();
        DiagnosticMessage {
            message: diagnostic.message.clone(),
            code: diagnostic.code.as_ref().map(|code| DiagnosticCode {
                code: code.clone(),
                explanation: None,
            }),
            level: match diagnostic.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            spans,
            children,
            rendered: Some(render(diagnostic, source)),
        }
    }
}

/// What a validated project holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct GraphSummary {
    pub name: String,
    pub tensors: usize,
    pub ops: usize,
    pub repeats: usize,
    pub tiles: u32,
}

impl GraphSummary {
    pub(super) fn of(graph: &crate::graph::Graph) -> GraphSummary {
        GraphSummary {
            name: graph.name.clone(),
            tensors: graph.tensors.len(),
            ops: graph.ops.len(),
            repeats: graph.repeats.len(),
            tiles: graph.tiles,
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct CheckFinished<'a> {
    pub project: &'a str,
    pub success: bool,
    pub errors: usize,
    pub warnings: usize,
    /// Present when the project is valid.
    pub graph: Option<GraphSummary>,
    /// With `--fit`: whether the project places (`null` without it).
    pub fits: Option<bool>,
}

/// One phase of a build, as its status line shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PhaseRecord {
    pub phase: String,
    pub summary: String,
    /// Queries executed (not reused) in the phase.
    pub recomputed: usize,
    pub elapsed_ms: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct BuildFinished<'a> {
    pub project: &'a str,
    pub success: bool,
    /// True when the build stamp showed nothing changed, so nothing ran.
    pub fresh: bool,
    /// The package written (or found up to date).
    pub package: Option<&'a str>,
    pub package_bytes: Option<usize>,
    /// Tiles the package loads; `null` when no package was built (a fresh
    /// build ran nothing, a failed one made none).
    pub tiles: Option<usize>,
    pub estimated_cycles: Option<u64>,
    /// Queries executed across all phases.
    pub recomputed: usize,
    pub elapsed_ms: f64,
    pub errors: usize,
    pub warnings: usize,
    pub phases: &'a [PhaseRecord],
}

/// One checked output of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct OutputCheck {
    pub name: String,
    /// `null` when undefined (a NaN or an unmatched infinity).
    pub cosine_similarity: Option<f64>,
    pub max_abs_error: f32,
    pub passed: bool,
    /// The seed-shaped failure message.
    pub failure: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct RunFinished<'a> {
    pub package: &'a str,
    /// The project's name (a package may be run without its project file).
    pub name: &'a str,
    pub success: bool,
    /// `PASS` or `FAIL`, as the seed's `numericalTest=`.
    pub numerical_test: &'a str,
    /// `PASS`, or `FAIL` when the device faulted.
    pub hardware_test: &'a str,
    pub tiles: usize,
    /// Measured on the device; `null` when it faulted.
    pub cycles: Option<u64>,
    pub estimated_cycles: u64,
    pub profile: Option<&'a str>,
    pub outputs: &'a [OutputCheck],
    /// The device fault, when there was one.
    pub fault: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct RebuildFinished<'a> {
    /// The changed files, with the TOML keys an edit touched.
    pub changes: &'a [String],
    pub success: bool,
    pub recomputed: usize,
    pub elapsed_ms: f64,
}

/// A message as one line of JSON.
pub(super) fn to_line(message: &Message<'_>) -> String {
    let mut line = serde_json::to_string(message).unwrap_or_else(|error| {
        // Every field is a plain value, so this would be a bug in the shapes.
        format!(r#"{{"reason":"internal-error","message":"{error}"}}"#)
    });
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn diagnostics_have_cargo_fields_with_lines_columns_and_children() {
        let text = "[project]\nname = \"é\"\ntiles = 99999\n";
        let start = text.find("99999").unwrap();
        let diagnostic = Diagnostic::error("`tiles` is beyond the target")
            .at(Utf8Path::new("p.toml"), start..start + 5)
            .label("ipu21 has 1472 tiles")
            .help("use at most 1472")
            .code("tiles-range");
        let message = Message::CompilerMessage {
            project: "p.toml",
            message: DiagnosticMessage::of(&diagnostic, &|_| Some(text.to_string())),
        };
        let value: serde_json::Value =
            serde_json::from_str(&to_line(&message)).expect("one JSON object");
        expect![[r#"
            {
              "message": {
                "children": [
                  {
                    "children": [],
                    "code": null,
                    "level": "help",
                    "message": "use at most 1472",
                    "rendered": null,
                    "spans": []
                  }
                ],
                "code": {
                  "code": "tiles-range",
                  "explanation": null
                },
                "level": "error",
                "message": "`tiles` is beyond the target",
                "rendered": "error: `tiles` is beyond the target\n --> p.toml:3:9\n  |\n3 | tiles = 99999\n  |         ^^^^^ ipu21 has 1472 tiles\n  = help: use at most 1472\n",
                "spans": [
                  {
                    "byte_end": 35,
                    "byte_start": 30,
                    "column_end": 14,
                    "column_start": 9,
                    "expansion": null,
                    "file_name": "p.toml",
                    "is_primary": true,
                    "label": "ipu21 has 1472 tiles",
                    "line_end": 3,
                    "line_start": 3,
                    "suggested_replacement": null,
                    "suggestion_applicability": null,
                    "text": [
                      {
                        "highlight_end": 14,
                        "highlight_start": 9,
                        "text": "tiles = 99999"
                      }
                    ]
                  }
                ]
              },
              "project": "p.toml",
              "reason": "compiler-message"
            }"#]]
        .assert_eq(&serde_json::to_string_pretty(&value).expect("pretty"));
    }
}
