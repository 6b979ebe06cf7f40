//! Diagnostics: user errors as data, rendered like rustc.
//!
//! A [`Diagnostic`] carries the file, a byte span and a message; it does not
//! carry line numbers, because those are derived from the file's contents at
//! render time (the same data renders as text for the terminal and as
//! line/column ranges for an editor).

use camino::{Utf8Path, Utf8PathBuf};
use std::fmt::Write as _;
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    Error,
    Warning,
}

/// A place in a source file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    pub file: Utf8PathBuf,
    /// Byte range; may be empty (it then points at one column).
    pub span: Range<usize>,
}

/// One user-facing problem.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    /// Where the problem is; `None` for problems with no source (a missing
    /// root file).
    pub location: Option<Location>,
    /// Text printed under the caret.
    pub label: String,
    /// Extra lines (`= note: ...`, `= help: ...`), without the prefix.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            location: None,
            label: String::new(),
            notes: Vec::new(),
        }
    }

    pub fn at(mut self, file: &Utf8Path, span: Range<usize>) -> Diagnostic {
        self.location = Some(Location {
            file: file.to_owned(),
            span,
        });
        self
    }

    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("note: {}", note.into()));
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("help: {}", help.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Renders `diagnostic` like rustc. `source` returns a file's current
/// contents; when it returns `None` the location is printed without the
/// source excerpt.
pub fn render(diagnostic: &Diagnostic, source: &dyn Fn(&Utf8Path) -> Option<String>) -> String {
    let mut out = String::new();
    let severity = match diagnostic.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let _ = writeln!(out, "{severity}: {}", diagnostic.message);
    let excerpt = diagnostic
        .location
        .as_ref()
        .map(|location| (location, source(&location.file)));
    match excerpt {
        Some((location, Some(text))) => {
            let (line, column) = line_column(&text, location.span.start);
            let line_text = text.lines().nth(line - 1).unwrap_or("");
            let gutter = " ".repeat(line.to_string().len());
            let _ = writeln!(out, "{gutter}--> {}:{line}:{column}", location.file);
            let _ = writeln!(out, "{gutter} |");
            let _ = writeln!(out, "{line} | {line_text}");
            // The caret covers the span on its first line (at least one column).
            let start = floor_char_boundary(&text, location.span.start.min(text.len()));
            let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
            let end = floor_char_boundary(&text, location.span.end.clamp(start, line_end));
            let width = text[start..end].chars().count().max(1);
            let label = if diagnostic.label.is_empty() {
                String::new()
            } else {
                format!(" {}", diagnostic.label)
            };
            let _ = writeln!(
                out,
                "{gutter} | {}{}{label}",
                " ".repeat(column - 1),
                "^".repeat(width)
            );
            for note in &diagnostic.notes {
                let _ = writeln!(out, "{gutter} = {note}");
            }
        }
        Some((location, None)) => {
            let _ = writeln!(out, " --> {}", location.file);
            for note in &diagnostic.notes {
                let _ = writeln!(out, "  = {note}");
            }
        }
        None => {
            for note in &diagnostic.notes {
                let _ = writeln!(out, "  = {note}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn renders_like_rustc_with_a_caret_under_the_span() {
        let text = "[project]\nname = \"x\"\ntiles = 99999\n";
        let start = text.find("99999").unwrap();
        let diagnostic = Diagnostic::error("`tiles` is beyond the target")
            .at(Utf8Path::new("p.toml"), start..start + 5)
            .label("ipu21 has 1472 tiles")
            .help("use at most 1472");
        let rendered = render(&diagnostic, &|_| Some(text.to_string()));
        expect![[r#"
            error: `tiles` is beyond the target
             --> p.toml:3:9
              |
            3 | tiles = 99999
              |         ^^^^^ ipu21 has 1472 tiles
              = help: use at most 1472
        "#]]
        .assert_eq(&rendered);
    }

    #[test]
    fn line_and_column_count_characters_and_survive_odd_offsets() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é=1", 2), (1, 2));
        assert_eq!(line_column("é=1", 1), (1, 1));
        assert_eq!(line_column("x", 99), (1, 2));
    }
}
