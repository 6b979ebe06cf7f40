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
    /// root file). Boxed to keep `Result<_, Diagnostic>` small.
    pub location: Option<Box<Location>>,
    /// Text printed under the caret.
    pub label: String,
    /// Extra lines (`= note: ...`, `= help: ...`), without the prefix.
    pub notes: Vec<String>,
    /// A stable name for the kind of problem (`unused-tensor`,
    /// `undefined-symbol`), for machine-readable output and editors.
    pub code: Option<String>,
}

impl Diagnostic {
    pub(crate) fn error(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            location: None,
            label: String::new(),
            notes: Vec::new(),
            code: None,
        }
    }

    pub(crate) fn warning(message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(message)
        }
    }

    pub(crate) fn code(mut self, code: impl Into<String>) -> Diagnostic {
        self.code = Some(code.into());
        self
    }

    pub(crate) fn at(mut self, file: &Utf8Path, span: Range<usize>) -> Diagnostic {
        self.location = Some(Box::new(Location {
            file: file.to_owned(),
            span,
        }));
        self
    }

    pub(crate) fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub(crate) fn note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("note: {}", note.into()));
        self
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("help: {}", help.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
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

/// The styles a rendering uses; [`Palette::plain`] renders no escape codes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Palette {
    pub error: anstyle::Style,
    pub warning: anstyle::Style,
    /// The message after `error:`.
    pub message: anstyle::Style,
    /// Line numbers, `-->`, `|` and `=`.
    pub gutter: anstyle::Style,
    /// `note` and `help`.
    pub note: anstyle::Style,
}

impl Palette {
    pub(crate) const fn plain() -> Palette {
        let none = anstyle::Style::new();
        Palette {
            error: none,
            warning: none,
            message: none,
            gutter: none,
            note: none,
        }
    }

    /// rustc's colours: red errors, yellow warnings, blue gutter, bold
    /// messages (stripped again when the stream is not a terminal).
    pub(crate) const fn terminal() -> Palette {
        use anstyle::AnsiColor;
        Palette {
            error: AnsiColor::BrightRed.on_default().bold(),
            warning: AnsiColor::BrightYellow.on_default().bold(),
            message: anstyle::Style::new().bold(),
            gutter: AnsiColor::BrightBlue.on_default().bold(),
            note: anstyle::Style::new().bold(),
        }
    }
}

/// Renders `diagnostic` like rustc. `source` returns a file's current
/// contents; when it returns `None` the location is printed without the
/// source excerpt.
pub fn render(diagnostic: &Diagnostic, source: &dyn Fn(&Utf8Path) -> Option<String>) -> String {
    render_with(diagnostic, source, &Palette::plain())
}

/// [`render`] with styles.
pub(crate) fn render_with(
    diagnostic: &Diagnostic,
    source: &dyn Fn(&Utf8Path) -> Option<String>,
    palette: &Palette,
) -> String {
    let mut out = String::new();
    let (severity, level) = match diagnostic.severity {
        Severity::Error => ("error", palette.error),
        Severity::Warning => ("warning", palette.warning),
    };
    let g = palette.gutter;
    let m = palette.message;
    let _ = writeln!(
        out,
        "{level}{severity}{level:#}{m}: {}{m:#}",
        diagnostic.message
    );
    // `note: text` with the kind in bold.
    let note = |note: &str| -> String {
        match note.split_once(": ") {
            Some((kind, text)) => format!("{n}{kind}{n:#}: {text}", n = palette.note),
            None => note.to_string(),
        }
    };
    let excerpt = diagnostic
        .location
        .as_ref()
        .map(|location| (location, source(&location.file)));
    match excerpt {
        Some((location, Some(text))) => {
            let (line, column) = line_column(&text, location.span.start);
            let line_text = text.lines().nth(line - 1).unwrap_or("");
            let gutter = " ".repeat(line.to_string().len());
            let _ = writeln!(out, "{gutter}{g}-->{g:#} {}:{line}:{column}", location.file);
            let _ = writeln!(out, "{gutter} {g}|{g:#}");
            let _ = writeln!(out, "{g}{line} |{g:#} {line_text}");
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
                "{gutter} {g}|{g:#} {}{level}{}{label}{level:#}",
                " ".repeat(column - 1),
                "^".repeat(width)
            );
            for text in &diagnostic.notes {
                let _ = writeln!(out, "{gutter} {g}={g:#} {}", note(text));
            }
        }
        Some((location, None)) => {
            let _ = writeln!(out, " {g}-->{g:#} {}", location.file);
            for text in &diagnostic.notes {
                let _ = writeln!(out, "  {g}={g:#} {}", note(text));
            }
        }
        None => {
            for text in &diagnostic.notes {
                let _ = writeln!(out, "  {g}={g:#} {}", note(text));
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
        // Styled, the same text with escape codes around its parts.
        let styled = render_with(
            &diagnostic,
            &|_| Some(text.to_string()),
            &Palette::terminal(),
        );
        assert!(styled.contains("\u{1b}["));
        let stripped: String = anstream::adapter::strip_str(&styled).to_string();
        assert_eq!(stripped, rendered);
    }

    #[test]
    fn line_and_column_count_characters_and_survive_odd_offsets() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("é=1", 2), (1, 2));
        assert_eq!(line_column("é=1", 1), (1, 1));
        assert_eq!(line_column("x", 99), (1, 2));
    }
}
