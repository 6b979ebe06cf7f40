//! ipub's diagnostics in the protocol's shape.

use super::position::LineIndex;
use crate::db::Database;
use crate::diagnostic::{Diagnostic, Severity};
use camino::Utf8Path;
use lsp_types::{DiagnosticSeverity, DiagnosticTag, NumberOrString};

/// Codes of warnings about something that does nothing, which editors
/// show faded.
const UNNECESSARY: &[&str] = &["unused-tensor", "unread-result", "unused-include"];

/// `diagnostic` with its span converted against `text`, its file's
/// current contents. The label and the notes follow the message on lines
/// of their own, as most editors show one message per diagnostic.
pub(super) fn to_lsp(diagnostic: &Diagnostic, text: &str) -> lsp_types::Diagnostic {
    let index = LineIndex::new(text);
    let range = diagnostic
        .location
        .as_ref()
        .map_or_else(|| index.range(0..0), |l| index.range(l.span.clone()));
    let mut message = diagnostic.message.clone();
    if !diagnostic.label.is_empty() {
        message.push('\n');
        message.push_str(&diagnostic.label);
    }
    for note in &diagnostic.notes {
        message.push('\n');
        message.push_str(note);
    }
    let unnecessary = diagnostic
        .code
        .as_deref()
        .is_some_and(|code| UNNECESSARY.contains(&code));
    lsp_types::Diagnostic {
        range,
        severity: Some(match diagnostic.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: diagnostic.code.clone().map(NumberOrString::String),
        source: Some("ipub".to_string()),
        message,
        tags: unnecessary.then(|| vec![DiagnosticTag::UNNECESSARY]),
        ..lsp_types::Diagnostic::default()
    }
}

/// The problems of a TOML file no known project includes, read as if it
/// were a project of its own but without the project-level checks (it
/// has no `[project]` or `[check]` of its own): syntax, unknown keys,
/// includes that cannot be found or that cycle.
pub(super) fn orphan_diagnostics(db: &Database, path: &Utf8Path) -> Vec<Diagnostic> {
    use crate::db::Db as _;
    let read = |p: &Utf8Path| db.file(p).contents(db).clone();
    crate::project::load::load(path, &read).diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_become_utf16_ranges_and_notes_follow_the_message() {
        let text = "name = \"é\"\nshap = 1\n";
        let start = text.find("shap").unwrap();
        let diagnostic = Diagnostic::error("unknown field `shap`")
            .at(Utf8Path::new("x.toml"), start..start + 4)
            .help("did you mean `shape`?")
            .code("unknown-key");
        let lsp = to_lsp(&diagnostic, text);
        assert_eq!(lsp.range.start, lsp_types::Position::new(1, 0));
        assert_eq!(lsp.range.end, lsp_types::Position::new(1, 4));
        assert_eq!(
            lsp.message,
            "unknown field `shap`\nhelp: did you mean `shape`?"
        );
        assert_eq!(lsp.severity, Some(DiagnosticSeverity::ERROR));
        assert_eq!(lsp.tags, None);
    }
}
