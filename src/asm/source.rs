//! Source text, positions and diagnostics for the assembler.
//!
//! The preprocessor and the assembler's own macros rewrite lines, so every
//! byte of a rewritten [`Line`] remembers where it came from: a column of a
//! physical line of some file, and, when it was produced by a macro, which
//! expansion. Errors are reported against those origins, so a mistake inside
//! an included file or a macro body points at the place the user wrote, with
//! notes for the include chain and the macro expansions that led there.

use crate::diagnostic::{self, Diagnostic};
use camino::{Utf8Path, Utf8PathBuf};
use std::fmt;
use std::sync::Arc;

/// A place in a source file: file index, 1-based line, 0-based byte column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pos {
    pub file: u32,
    pub line: u32,
    pub col: u32,
}

/// A file the preprocessor read, and where it was included from.
#[derive(Clone, Debug)]
pub struct SourceText {
    pub path: Utf8PathBuf,
    pub text: Arc<str>,
    pub included_from: Option<Pos>,
    line_starts: Vec<usize>,
}

impl SourceText {
    pub(super) fn new(path: Utf8PathBuf, text: Arc<str>, included_from: Option<Pos>) -> SourceText {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceText {
            path,
            text,
            included_from,
            line_starts,
        }
    }

    /// Byte offset of a 1-based line and a byte column, clamped to the text.
    pub(super) fn offset(&self, line: u32, col: u32) -> usize {
        let start = self
            .line_starts
            .get((line as usize).saturating_sub(1))
            .copied()
            .unwrap_or(self.text.len());
        (start + col as usize).min(self.text.len())
    }
}

/// Why a stretch of a line exists: a macro was expanded there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// `#define` macro or `.macro`.
    pub macro_name: String,
    pub preprocessor: bool,
    /// Where the macro was used.
    pub site: Pos,
    /// The expansion the use itself came from, if any.
    pub parent: Option<Arc<Expansion>>,
}

/// One stretch of a line: output bytes from `out` on come from source
/// column `src` on (or, inside an expansion, from the macro's use site).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    out: u32,
    pos: Pos,
    expansion: Option<Arc<Expansion>>,
}

/// A logical line after preprocessing, with the origin of every byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    segments: Vec<Segment>,
    /// The `.macro` expansion this whole line belongs to.
    pub context: Option<Arc<Expansion>>,
}

impl Line {
    /// A line copied unchanged from `file` at 1-based `line`.
    pub(super) fn original(text: String, file: u32, line: u32) -> Line {
        Line {
            text,
            segments: vec![Segment {
                out: 0,
                pos: Pos { file, line, col: 0 },
                expansion: None,
            }],
            context: None,
        }
    }

    /// Whether output byte `offset` was produced by a `#define` expansion
    /// (its position is then the macro's use, one column wide).
    pub(super) fn is_expanded(&self, offset: usize) -> bool {
        let offset = offset.min(self.text.len()) as u32;
        let index = self
            .segments
            .partition_point(|s| s.out <= offset)
            .saturating_sub(1);
        self.segments
            .get(index)
            .is_some_and(|s| s.expansion.is_some())
    }

    /// The source position of output byte `offset`, and the expansion that
    /// produced it.
    pub(super) fn origin(&self, offset: usize) -> (Pos, Option<Arc<Expansion>>) {
        let offset = offset.min(self.text.len()) as u32;
        let index = self
            .segments
            .partition_point(|s| s.out <= offset)
            .saturating_sub(1);
        let Some(segment) = self.segments.get(index) else {
            let pos = Pos {
                file: 0,
                line: 1,
                col: 0,
            };
            return (pos, self.context.clone());
        };
        let mut pos = segment.pos;
        if segment.expansion.is_none() {
            pos.col += offset - segment.out;
        }
        (
            pos,
            segment.expansion.clone().or_else(|| self.context.clone()),
        )
    }
}

/// Builds a rewritten line piece by piece, keeping origins.
#[derive(Default)]
pub(super) struct LineBuilder {
    line: Line,
}

impl LineBuilder {
    pub(super) fn new() -> LineBuilder {
        LineBuilder::default()
    }

    /// Bytes of text so far.
    pub(crate) fn len(&self) -> usize {
        self.line.text.len()
    }

    /// Appends `source.text[range]` with its own origins.
    pub(super) fn push_original(&mut self, source: &Line, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let start = range.start;
        let (pos, expansion) = source.origin(start);
        self.push_segment(pos, expansion);
        // Origins change inside the range where the source has segment
        // boundaries; copy those too.
        for segment in &source.segments {
            let at = segment.out as usize;
            if at > start && at < range.end {
                let out = (self.line.text.len() + at - start) as u32;
                self.line.segments.push(Segment {
                    out,
                    pos: segment.pos,
                    expansion: segment.expansion.clone(),
                });
            }
        }
        self.line.text.push_str(&source.text[range]);
    }

    /// Appends text produced by a macro expansion used at `site`.
    pub(super) fn push_expanded(&mut self, text: &str, expansion: Arc<Expansion>) {
        if text.is_empty() {
            return;
        }
        let site = expansion.site;
        self.push_segment(site, Some(expansion));
        self.line.text.push_str(text);
    }

    fn push_segment(&mut self, pos: Pos, expansion: Option<Arc<Expansion>>) {
        self.line.segments.push(Segment {
            out: self.line.text.len() as u32,
            pos,
            expansion,
        });
    }

    /// Marks the whole line as part of a `.macro` expansion.
    pub(super) fn context(&mut self, context: Option<Arc<Expansion>>) {
        self.line.context = context;
    }

    /// The finished line; `fallback` is its origin when nothing was pushed.
    pub(super) fn finish(mut self, fallback: Pos) -> Line {
        if self.line.segments.is_empty() {
            self.line.segments.push(Segment {
                out: 0,
                pos: fallback,
                expansion: None,
            });
        }
        self.line
    }
}

/// What went wrong, as data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A token sequence the grammar does not accept.
    Syntax,
    UnknownDirective,
    UnknownPreprocessorDirective,
    UnknownInstruction,
    /// The instruction exists but an operand is wrong.
    BadOperand,
    /// The instruction encoder refused the instruction as a whole (or the
    /// bundle pairing).
    BadInstruction,
    UndefinedSymbol,
    DuplicateSymbol,
    /// `.macro`, `.rept`, `.if` or `#if` without its end.
    Unterminated,
    /// `.endm`, `.endr`, `.endif`, `#endif`, `#else` without a start.
    Unmatched,
    IncludeNotFound,
    IncludeCycle,
    BadExpression,
    ValueOutOfRange,
    Misaligned,
    /// `#error` in the source.
    UserError,
    /// Macro, include or expression nesting beyond the limits.
    TooDeep,
    /// An include or source that exists but is not a regular file of text
    /// within the size limit.
    Unreadable,
    /// A macro expansion, repetition or section beyond the size limits.
    TooLarge,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::UnknownDirective => "unknown-directive",
            ErrorKind::UnknownPreprocessorDirective => "unknown-preprocessor-directive",
            ErrorKind::UnknownInstruction => "unknown-instruction",
            ErrorKind::BadOperand => "bad-operand",
            ErrorKind::BadInstruction => "bad-instruction",
            ErrorKind::UndefinedSymbol => "undefined-symbol",
            ErrorKind::DuplicateSymbol => "duplicate-symbol",
            ErrorKind::Unterminated => "unterminated",
            ErrorKind::Unmatched => "unmatched",
            ErrorKind::IncludeNotFound => "include-not-found",
            ErrorKind::IncludeCycle => "include-cycle",
            ErrorKind::BadExpression => "bad-expression",
            ErrorKind::ValueOutOfRange => "value-out-of-range",
            ErrorKind::Misaligned => "misaligned",
            ErrorKind::UserError => "user-error",
            ErrorKind::TooDeep => "too-deep",
            ErrorKind::Unreadable => "unreadable",
            ErrorKind::TooLarge => "too-large",
        }
    }
}

/// A resolved location: path, 1-based line and column, byte span in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: Utf8PathBuf,
    pub line: u32,
    pub column: u32,
    pub span: std::ops::Range<usize>,
}

/// One assembler diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsmError {
    pub kind: ErrorKind,
    pub message: String,
    pub location: Option<Location>,
    /// Text printed under the caret.
    pub label: String,
    /// Include chain and macro expansions, innermost first.
    pub notes: Vec<String>,
    /// A suggestion (`did you mean ...`), printed after the notes.
    pub help: Option<String>,
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(l) => write!(
                f,
                "{}:{}:{}: {} [{}]",
                l.path,
                l.line,
                l.column,
                self.message,
                self.kind.name()
            ),
            None => write!(f, "{} [{}]", self.message, self.kind.name()),
        }
    }
}

impl std::error::Error for AsmError {}

impl AsmError {
    /// The shared diagnostic form (for the terminal and editors).
    pub(crate) fn to_diagnostic(&self) -> Diagnostic {
        let mut diagnostic = Diagnostic::error(&self.message)
            .label(&self.label)
            .code(self.kind.name());
        if let Some(location) = &self.location {
            diagnostic = diagnostic.at(&location.path, location.span.clone());
        }
        for note in &self.notes {
            diagnostic = diagnostic.note(note);
        }
        if let Some(help) = &self.help {
            diagnostic = diagnostic.help(help);
        }
        diagnostic
    }
}

/// Every file of one assembly, for locating and rendering errors.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub files: Vec<SourceText>,
}

impl Sources {
    pub(super) fn path(&self, file: u32) -> &Utf8Path {
        self.files
            .get(file as usize)
            .map_or(Utf8Path::new("<unknown>"), |f| f.path.as_path())
    }

    /// Formats `pos` as `path:line:column` (1-based column).
    pub(crate) fn describe(&self, pos: Pos) -> String {
        format!("{}:{}:{}", self.path(pos.file), pos.line, pos.col + 1)
    }

    /// An error at `pos`, `len` bytes wide, with notes for the expansions
    /// and includes that led there.
    pub(crate) fn error(
        &self,
        kind: ErrorKind,
        message: impl Into<String>,
        pos: Pos,
        len: usize,
        expansion: Option<&Arc<Expansion>>,
    ) -> AsmError {
        let location = self.files.get(pos.file as usize).map(|file| {
            let start = file.offset(pos.line, pos.col);
            Location {
                path: file.path.clone(),
                line: pos.line,
                column: column_chars(file, pos),
                span: start..(start + len).min(file.text.len()),
            }
        });
        let mut notes = Vec::new();
        let mut next = expansion.cloned();
        while let Some(e) = next {
            let what = if e.preprocessor { "macro" } else { ".macro" };
            notes.push(format!(
                "in expansion of {what} `{}` at {}",
                e.macro_name,
                self.describe(e.site)
            ));
            next = e.parent.clone();
        }
        let mut file = Some(pos.file);
        if let Some(e) = expansion {
            // The include chain of the outermost use site is the one that matters.
            let mut outer = e.clone();
            while let Some(parent) = outer.parent.clone() {
                outer = parent;
            }
            file = Some(outer.site.file);
        }
        while let Some(from) = file
            .and_then(|f| self.files.get(f as usize))
            .and_then(|f| f.included_from)
        {
            notes.push(format!("included from {}", self.describe(from)));
            file = Some(from.file);
        }
        AsmError {
            kind,
            message: message.into(),
            location,
            label: String::new(),
            notes,
            help: None,
        }
    }

    /// An error at byte `offset` of `line`, `len` bytes wide.
    pub(super) fn error_in(
        &self,
        kind: ErrorKind,
        message: impl Into<String>,
        line: &Line,
        offset: usize,
        len: usize,
    ) -> AsmError {
        let (pos, expansion) = line.origin(offset);
        let len = if line.is_expanded(offset) { 1 } else { len };
        self.error(kind, message, pos, len, expansion.as_ref())
    }

    /// An error about a whole file (no position).
    pub(super) fn error_nowhere(&self, kind: ErrorKind, message: impl Into<String>) -> AsmError {
        AsmError {
            kind,
            message: message.into(),
            location: None,
            label: String::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Renders errors rustc-style with source excerpts and carets.
    pub(crate) fn render(&self, errors: &[AsmError]) -> String {
        let lookup = |path: &Utf8Path| {
            self.files
                .iter()
                .find(|f| f.path == path)
                .map(|f| f.text.to_string())
        };
        errors
            .iter()
            .map(|e| diagnostic::render(&e.to_diagnostic(), &lookup))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// 1-based column in characters of a byte position.
fn column_chars(file: &SourceText, pos: Pos) -> u32 {
    let start = file.offset(pos.line, 0);
    let end = file.offset(pos.line, pos.col);
    let mut end = end;
    while end > start && !file.text.is_char_boundary(end) {
        end -= 1;
    }
    file.text[start..end].chars().count() as u32 + 1
}
