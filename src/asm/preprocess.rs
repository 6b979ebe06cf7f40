//! The C-like preprocessor that runs before assembly.
//!
//! It handles `#define` (object-like and function-like), `#undef`, `#if`,
//! `#elif`, `#ifdef`, `#ifndef`, `#else`, `#endif`, `#include "file"` and
//! `#error`, and strips comments (`/* */`, `//`, and `#` when it does not
//! start a directive). A `#` directly followed by a letter at the start of a
//! line is a directive; `# text` is a comment.
//!
//! Files are read through [`Vfs`](crate::vfs::Vfs), so tests run in memory, and every file
//! read is recorded in [`Sources`]: the kernel cache hashes exactly those.
//! Each output [`Line`] remembers the origin of every byte.

use super::expr::{self, EvalErrorKind};
use super::lex::{self, Tok, Token};
use super::limits::{
    MAX_ERRORS, MAX_EXPANDED_LINE_BYTES, MAX_EXPANSION_DEPTH, MAX_INCLUDE_DEPTH,
    MAX_PREPROCESSED_BYTES, MAX_SOURCE_BYTES,
};
use super::source::{AsmError, ErrorKind, Expansion, Line, LineBuilder, Pos, SourceText, Sources};
use crate::vfs::{normalize, FileSource, ReadError};
use camino::{Utf8Path, Utf8PathBuf};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// The preprocessor's output: logical lines to assemble, every file read
/// and the errors met.
#[derive(Debug, Default)]
pub struct Preprocessed {
    pub lines: Vec<Line>,
    pub sources: Sources,
    pub errors: Vec<AsmError>,
}

impl Preprocessed {
    /// Every distinct file read, in first-read order, with its contents.
    pub(crate) fn files_read(&self) -> Vec<(Utf8PathBuf, Arc<str>)> {
        let mut seen = HashSet::new();
        self.sources
            .files
            .iter()
            .filter(|f| seen.insert(f.path.clone()))
            .map(|f| (f.path.clone(), f.text.clone()))
            .collect()
    }
}

#[derive(Clone, Debug)]
struct Macro {
    params: Option<Vec<String>>,
    body: String,
}

struct Conditional {
    /// Whether lines in the current branch are kept.
    active: bool,
    /// Whether some branch of this `#if` was already taken.
    taken: bool,
    /// Whether the enclosing region is active.
    outer: bool,
    seen_else: bool,
    pos: Pos,
}

struct Preprocessor<'a> {
    fs: &'a dyn FileSource,
    include_dirs: &'a [Utf8PathBuf],
    macros: HashMap<String, Macro>,
    out: Preprocessed,
    stack: Vec<Utf8PathBuf>,
    /// The expansion in progress (one line or `#if`): bytes it may still
    /// produce, and whether it ran out or nested too deep. Expansion
    /// borrows the macro table, so these are cells.
    budget: Cell<usize>,
    exhausted: Cell<bool>,
    too_deep: Cell<bool>,
    /// Bytes of preprocessed text produced and of source read so far.
    output_bytes: usize,
    source_bytes: usize,
    /// Set when a limit stops the whole preprocessing.
    stopped: bool,
}

/// Why a macro expansion was abandoned.
enum ExpansionProblem {
    TooLarge,
    TooDeep,
}

/// Preprocesses `root` with `defines` (`NAME` → value text) predefined.
pub fn preprocess(
    fs: &dyn FileSource,
    root: &Utf8Path,
    defines: &BTreeMap<String, String>,
    include_dirs: &[Utf8PathBuf],
) -> Preprocessed {
    let mut p = Preprocessor {
        fs,
        include_dirs,
        macros: defines
            .iter()
            .map(|(name, value)| {
                (
                    name.clone(),
                    Macro {
                        params: None,
                        body: value.clone(),
                    },
                )
            })
            .collect(),
        out: Preprocessed::default(),
        stack: Vec::new(),
        budget: Cell::new(0),
        exhausted: Cell::new(false),
        too_deep: Cell::new(false),
        output_bytes: 0,
        source_bytes: 0,
        stopped: false,
    };
    let root = normalize(root);
    match fs.read(&root) {
        Ok(text) => {
            p.source_bytes = text.len();
            p.file(root, text, None);
        }
        Err(problem) => {
            let kind = match problem {
                ReadError::Missing => ErrorKind::IncludeNotFound,
                _ => ErrorKind::Unreadable,
            };
            let error = p.out.sources.error_nowhere(
                kind,
                format!("cannot read kernel source `{root}`: {problem}"),
            );
            p.out.errors.push(error);
        }
    }
    p.out
}

/// Replaces comments with spaces, keeping newlines and string literals, so
/// byte columns stay true.
pub(super) fn strip_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let mut line_start = true;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            out.push(c);
            line_start = true;
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |e| i + 2 + e + 2);
            for &b in &bytes[i..end] {
                out.push(if b == b'\n' { b'\n' } else { b' ' });
            }
            i = end;
            continue;
        }
        let directive =
            line_start && c == b'#' && bytes.get(i + 1).is_some_and(u8::is_ascii_alphabetic);
        if (c == b'/' && bytes.get(i + 1) == Some(&b'/')) || (c == b'#' && !directive) {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
            continue;
        }
        if c == b'"' {
            let end = match lex::lex_string(text, i) {
                Ok((_, end)) => end,
                Err(_) => text[i..].find('\n').map_or(bytes.len(), |e| i + e),
            };
            out.extend_from_slice(&bytes[i..end]);
            i = end;
            line_start = false;
            continue;
        }
        if !c.is_ascii_whitespace() {
            line_start = false;
        }
        out.push(c);
        i += 1;
    }
    // Only ASCII bytes were replaced, on ASCII boundaries.
    String::from_utf8(out).unwrap_or_default()
}

impl Preprocessor<'_> {
    fn file(&mut self, path: Utf8PathBuf, text: Arc<str>, included_from: Option<Pos>) {
        let file = self.out.sources.files.len() as u32;
        self.out
            .sources
            .files
            .push(SourceText::new(path.clone(), text.clone(), included_from));
        self.stack.push(path);
        let code = strip_comments(&text);
        let physical: Vec<&str> = code.split('\n').collect();
        let mut conditionals: Vec<Conditional> = Vec::new();
        let mut index = 0;
        while index < physical.len() && !self.stopped {
            let number = index as u32 + 1;
            let mut content = physical[index].trim_end_matches('\r').to_string();
            index += 1;
            let trimmed = content.trim_start();
            let indent = content.len() - trimmed.len();
            let active = conditionals.last().is_none_or(|c| c.active);
            if trimmed.starts_with('#') {
                // Directive lines may continue with a trailing backslash.
                while content.ends_with('\\') && index < physical.len() {
                    content.pop();
                    content.push(' ');
                    content.push_str(physical[index].trim_end_matches('\r'));
                    index += 1;
                }
                let line = Line::original(content.clone(), file, number);
                self.directive(&line, indent, &mut conditionals, active, file);
                continue;
            }
            if !active || trimmed.is_empty() {
                continue;
            }
            let line = Line::original(content, file, number);
            let Some(expanded) = self.expand_line(&line) else {
                continue;
            };
            self.output_bytes += expanded.text.len() + 1;
            if self.output_bytes > MAX_PREPROCESSED_BYTES {
                self.error(
                    ErrorKind::TooLarge,
                    format!(
                        "the preprocessed kernel exceeds {} of text",
                        crate::fsutil::size_text(MAX_PREPROCESSED_BYTES as u64)
                    ),
                    &line,
                    indent..line.text.len(),
                );
                self.stopped = true;
                break;
            }
            self.out.lines.push(expanded);
        }
        for open in conditionals {
            let error = self.out.sources.error(
                ErrorKind::Unterminated,
                "`#if` without `#endif`",
                open.pos,
                3,
                None,
            );
            self.push_error(error);
        }
        self.stack.pop();
    }

    fn error(
        &mut self,
        kind: ErrorKind,
        message: impl Into<String>,
        line: &Line,
        span: std::ops::Range<usize>,
    ) {
        let len = span.len().max(1);
        let error = self
            .out
            .sources
            .error_in(kind, message, line, span.start, len);
        self.push_error(error);
    }

    /// Records an error; past [`MAX_ERRORS`] the preprocessing stops.
    fn push_error(&mut self, error: AsmError) {
        if self.out.errors.len() >= MAX_ERRORS {
            self.stopped = true;
            return;
        }
        self.out.errors.push(error);
    }

    /// Starts one expansion with a fresh budget.
    fn begin_expansion(&self) {
        self.budget.set(MAX_EXPANDED_LINE_BYTES);
        self.exhausted.set(false);
        self.too_deep.set(false);
    }

    /// Takes `bytes` of the expansion's budget; false (and the expansion
    /// abandoned) when there is not enough left.
    fn spend(&self, bytes: usize) -> bool {
        if self.exhausted.get() || bytes > self.budget.get() {
            self.exhausted.set(true);
            return false;
        }
        self.budget.set(self.budget.get() - bytes);
        true
    }

    /// Whether the expansion in progress was abandoned, and why.
    fn expansion_problem(&self) -> Option<ExpansionProblem> {
        if self.exhausted.get() {
            Some(ExpansionProblem::TooLarge)
        } else if self.too_deep.get() {
            Some(ExpansionProblem::TooDeep)
        } else {
            None
        }
    }

    /// Reports an abandoned expansion at `span` of `line`.
    fn report_expansion(
        &mut self,
        problem: ExpansionProblem,
        line: &Line,
        span: std::ops::Range<usize>,
    ) {
        let (kind, message) = match problem {
            ExpansionProblem::TooLarge => (
                ErrorKind::TooLarge,
                format!(
                    "macro expansion exceeds {} (a macro that uses another several times grows exponentially)",
                    crate::fsutil::size_text(MAX_EXPANDED_LINE_BYTES as u64)
                ),
            ),
            ExpansionProblem::TooDeep => (
                ErrorKind::TooDeep,
                format!("macro expansion nested deeper than {MAX_EXPANSION_DEPTH} levels"),
            ),
        };
        self.error(kind, message, line, span);
    }

    fn directive(
        &mut self,
        line: &Line,
        indent: usize,
        conditionals: &mut Vec<Conditional>,
        active: bool,
        file: u32,
    ) {
        let text = &line.text;
        let name_start = indent + 1;
        let name_end = text[name_start..]
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .map_or(text.len(), |e| name_start + e);
        let name = &text[name_start..name_end];
        let rest_start = name_end;
        let pos = line.origin(indent).0;
        match name {
            "if" | "ifdef" | "ifndef" => {
                let value = if active {
                    self.condition(name, line, rest_start)
                } else {
                    false
                };
                conditionals.push(Conditional {
                    active: active && value,
                    taken: value,
                    outer: active,
                    seen_else: false,
                    pos,
                });
            }
            "elif" | "else" => {
                let Some(top) = conditionals.last() else {
                    self.error(
                        ErrorKind::Unmatched,
                        format!("`#{name}` without `#if`"),
                        line,
                        indent..name_end,
                    );
                    return;
                };
                if top.seen_else {
                    self.error(
                        ErrorKind::Unmatched,
                        format!("`#{name}` after `#else`"),
                        line,
                        indent..name_end,
                    );
                    return;
                }
                let (outer, taken) = (top.outer, top.taken);
                let value = if name == "else" {
                    !taken
                } else if outer && !taken {
                    self.condition("if", line, rest_start)
                } else {
                    false
                };
                if let Some(top) = conditionals.last_mut() {
                    top.active = outer && !taken && value;
                    top.taken |= value;
                    top.seen_else = name == "else";
                }
            }
            "endif" => {
                if conditionals.pop().is_none() {
                    self.error(
                        ErrorKind::Unmatched,
                        "`#endif` without `#if`",
                        line,
                        indent..name_end,
                    );
                }
            }
            _ if !active => {}
            "define" => self.define(line, rest_start),
            "undef" => {
                let name = text[rest_start..].trim();
                self.macros.remove(name);
            }
            "include" => self.include(line, rest_start, file),
            "error" => {
                let message = text[rest_start..].trim();
                self.error(
                    ErrorKind::UserError,
                    format!("#error {message}"),
                    line,
                    indent..text.trim_end().len(),
                );
            }
            _ => self.error(
                ErrorKind::UnknownPreprocessorDirective,
                format!("unknown preprocessor directive `#{name}`"),
                line,
                indent..name_end,
            ),
        }
    }

    fn define(&mut self, line: &Line, start: usize) {
        let text = &line.text;
        let rest = &text[start..];
        let name_offset = start + (rest.len() - rest.trim_start().len());
        let name_end = text[name_offset..]
            .find(|c: char| !lex::is_ident_char(c))
            .map_or(text.len(), |e| name_offset + e);
        let name = &text[name_offset..name_end];
        if name.is_empty() || !name.starts_with(lex::is_ident_start) {
            self.error(
                ErrorKind::Syntax,
                "expected a macro name after `#define`",
                line,
                name_offset..name_offset + 1,
            );
            return;
        }
        let (params, body_start) = if text[name_end..].starts_with('(') {
            let Some(close) = text[name_end..].find(')').map(|c| name_end + c) else {
                self.error(
                    ErrorKind::Syntax,
                    "expected `)` after macro parameters",
                    line,
                    name_end..text.len(),
                );
                return;
            };
            let params: Vec<String> = text[name_end + 1..close]
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect();
            (Some(params), close + 1)
        } else {
            (None, name_end)
        };
        self.macros.insert(
            name.to_string(),
            Macro {
                params,
                body: text[body_start..].trim().to_string(),
            },
        );
    }

    fn include(&mut self, line: &Line, start: usize, file: u32) {
        let text = &line.text;
        let rest = text[start..].trim();
        let offset = start + (text[start..].len() - text[start..].trim_start().len());
        let (name, local) = if let Some(quoted) = rest.strip_prefix('"') {
            (
                quoted.split('"').next().filter(|_| quoted.contains('"')),
                true,
            )
        } else if let Some(angled) = rest.strip_prefix('<') {
            (
                angled.split('>').next().filter(|_| angled.contains('>')),
                false,
            )
        } else {
            (None, false)
        };
        let span = offset..offset + rest.len();
        let Some(name) = name else {
            self.error(
                ErrorKind::Syntax,
                "expected `\"file\"` or `<file>` after `#include`",
                line,
                span,
            );
            return;
        };
        let here = self.out.sources.files[file as usize].path.clone();
        let mut candidates = Vec::new();
        if local {
            let dir = here.parent().unwrap_or(Utf8Path::new(""));
            candidates.push(normalize(&dir.join(name)));
        }
        candidates.extend(self.include_dirs.iter().map(|d| normalize(&d.join(name))));
        // The first candidate that exists is the one meant: one that cannot
        // be read (a device, a FIFO, a huge file) is an error, not a reason
        // to look further.
        let mut found = None;
        for candidate in &candidates {
            match self.fs.read(candidate) {
                Ok(text) => {
                    found = Some((candidate.clone(), text));
                    break;
                }
                Err(ReadError::Missing) => {}
                Err(problem) => {
                    let mut error = self.out.sources.error_in(
                        ErrorKind::Unreadable,
                        format!("cannot read include file `{name}`: {problem}"),
                        line,
                        span.start,
                        span.len(),
                    );
                    error.label = format!("read as `{candidate}`");
                    self.push_error(error);
                    return;
                }
            }
        }
        let Some((path, contents)) = found else {
            let searched = candidates
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            let mut error = self.out.sources.error_in(
                ErrorKind::IncludeNotFound,
                format!("include file `{name}` not found"),
                line,
                span.start,
                span.len(),
            );
            error.notes.insert(0, format!("searched: {searched}"));
            self.push_error(error);
            return;
        };
        if self.stack.contains(&path) {
            let chain = self
                .stack
                .iter()
                .map(|p| p.as_str())
                .chain(std::iter::once(path.as_str()))
                .collect::<Vec<_>>()
                .join(" -> ");
            let mut error = self.out.sources.error_in(
                ErrorKind::IncludeCycle,
                format!("include cycle through `{name}`"),
                line,
                span.start,
                span.len(),
            );
            error.label = "this include closes the cycle".into();
            error.notes.insert(0, format!("cycle: {chain}"));
            self.push_error(error);
            return;
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            self.error(
                ErrorKind::TooDeep,
                format!("includes nested deeper than {MAX_INCLUDE_DEPTH}"),
                line,
                span,
            );
            return;
        }
        // A file included again is read again: count every time, so that
        // a header included a million times stops here.
        self.source_bytes += contents.len();
        if self.source_bytes > MAX_SOURCE_BYTES {
            self.error(
                ErrorKind::TooLarge,
                format!(
                    "the kernel's sources and includes exceed {} in all",
                    crate::fsutil::size_text(MAX_SOURCE_BYTES as u64)
                ),
                line,
                span,
            );
            self.stopped = true;
            return;
        }
        let from = line.origin(span.start).0;
        self.file(path, contents, Some(from));
    }

    /// Evaluates the condition of `#if`/`#ifdef`/`#ifndef`/`#elif`.
    fn condition(&mut self, kind: &str, line: &Line, start: usize) -> bool {
        let text = &line.text;
        let start = start + (text[start..].len() - text[start..].trim_start().len());
        if kind != "if" {
            let name = text[start..].trim();
            if name.is_empty() {
                self.error(
                    ErrorKind::Syntax,
                    format!("expected a name after `#{kind}`"),
                    line,
                    start..text.len(),
                );
                return false;
            }
            return self.macros.contains_key(name) == (kind == "ifdef");
        }
        // Replace `defined X` and `defined(X)` first, then expand macros,
        // then evaluate; leftover names are 0 as in C.
        let tokens = match lex::lex(&text[start..]) {
            Ok(tokens) => tokens,
            Err(e) => {
                self.error(
                    ErrorKind::BadExpression,
                    e.message,
                    line,
                    start + e.span.start..start + e.span.end,
                );
                return false;
            }
        };
        let mut replaced = String::new();
        let mut i = 0;
        let mut last = 0;
        let body = &text[start..];
        while i < tokens.len() {
            if tokens[i].ident() == Some("defined") {
                let (name, used) = match (tokens.get(i + 1), tokens.get(i + 2), tokens.get(i + 3)) {
                    (Some(open), Some(name), Some(close)) if open.is("(") && close.is(")") => {
                        (name.ident(), 4)
                    }
                    (Some(name), _, _) => (name.ident(), 2),
                    _ => (None, 1),
                };
                let Some(name) = name else {
                    let span = tokens[i].span.clone();
                    self.error(
                        ErrorKind::BadExpression,
                        "expected a name after `defined`",
                        line,
                        start + span.start..start + span.end,
                    );
                    return false;
                };
                replaced.push_str(&body[last..tokens[i].span.start]);
                replaced.push_str(if self.macros.contains_key(name) {
                    " 1 "
                } else {
                    " 0 "
                });
                last = tokens[i + used - 1].span.end;
                i += used;
                continue;
            }
            i += 1;
        }
        replaced.push_str(&body[last..]);
        self.begin_expansion();
        let expanded = self.expand_text(&replaced, &HashSet::new(), 0);
        if let Some(problem) = self.expansion_problem() {
            self.report_expansion(problem, line, start..text.trim_end().len());
            return false;
        }
        let tokens = match lex::lex(&expanded) {
            Ok(tokens) => tokens,
            Err(e) => {
                self.error(
                    ErrorKind::BadExpression,
                    format!("in `#if`: {}", e.message),
                    line,
                    start..text.len(),
                );
                return false;
            }
        };
        if tokens.is_empty() {
            self.error(
                ErrorKind::BadExpression,
                "`#if` needs a condition",
                line,
                start..text.len(),
            );
            return false;
        }
        let result = expr::parse_all(&tokens, expanded.len())
            .and_then(|e| expr::eval_const(&e, &|_| Some(0)));
        match result {
            Ok(v) => v != 0,
            Err(e) => {
                let kind = match e.kind {
                    EvalErrorKind::Bad | EvalErrorKind::Undefined => ErrorKind::BadExpression,
                    EvalErrorKind::TooDeep => ErrorKind::TooDeep,
                };
                self.error(
                    kind,
                    format!("in `#if`: {}", e.message),
                    line,
                    start..text.trim_end().len(),
                );
                false
            }
        }
    }

    /// Expands macros in a source line, keeping origins: text a macro
    /// produced points at the macro's use. `None` when the expansion went
    /// past a limit (reported here).
    fn expand_line(&mut self, line: &Line) -> Option<Line> {
        let tokens = match lex::lex(&line.text) {
            Ok(tokens) => tokens,
            // The assembler reports lexical errors with their position.
            Err(_) => return Some(line.clone()),
        };
        if !tokens
            .iter()
            .any(|t| t.ident().is_some_and(|n| self.macros.contains_key(n)))
        {
            return Some(line.clone());
        }
        self.begin_expansion();
        let mut builder = LineBuilder::new();
        let mut copied = 0;
        let mut i = 0;
        while i < tokens.len() {
            let found = self.invocation(&line.text, &tokens, i, &HashSet::new(), 0);
            if let Some(problem) = self.expansion_problem() {
                let span = tokens[i].span.clone();
                self.report_expansion(problem, line, span);
                return None;
            }
            let Some((replacement, used)) = found else {
                i += 1;
                continue;
            };
            let start = tokens[i].span.start;
            let name = tokens[i].ident().unwrap_or_default().to_string();
            builder.push_original(line, copied..start);
            let site = line.origin(start).0;
            builder.push_expanded(
                &replacement,
                Arc::new(Expansion {
                    macro_name: name,
                    preprocessor: true,
                    site,
                    parent: None,
                }),
            );
            copied = tokens[i + used - 1].span.end;
            i += used;
        }
        builder.push_original(line, copied..line.text.len());
        Some(builder.finish(line.origin(0).0))
    }

    /// If `tokens[i]` starts a macro use, returns its full expansion and the
    /// number of tokens it spans.
    fn invocation(
        &self,
        text: &str,
        tokens: &[Token],
        i: usize,
        disabled: &HashSet<String>,
        depth: usize,
    ) -> Option<(String, usize)> {
        let name = tokens[i].ident()?;
        if disabled.contains(name) || self.exhausted.get() || self.too_deep.get() {
            return None;
        }
        let mac = self.macros.get(name)?;
        if depth > MAX_EXPANSION_DEPTH {
            self.too_deep.set(true);
            return None;
        }
        let mut inner = disabled.clone();
        inner.insert(name.to_string());
        let Some(params) = &mac.params else {
            return Some((self.expand_text(&mac.body, &inner, depth + 1), 1));
        };
        if !tokens.get(i + 1).is_some_and(|t| t.is("(")) {
            return None;
        }
        // Collect the arguments up to the matching parenthesis.
        let mut nesting = 0;
        let mut args = Vec::new();
        let mut arg_start = tokens[i + 1].span.end;
        let mut end = None;
        for (j, token) in tokens.iter().enumerate().skip(i + 1) {
            match &token.tok {
                Tok::Punct("(") => nesting += 1,
                Tok::Punct(")") => {
                    nesting -= 1;
                    if nesting == 0 {
                        args.push(text[arg_start..token.span.start].trim().to_string());
                        end = Some(j);
                        break;
                    }
                }
                Tok::Punct(",") if nesting == 1 => {
                    args.push(text[arg_start..token.span.start].trim().to_string());
                    arg_start = token.span.end;
                }
                _ => {}
            }
        }
        let end = end?;
        if args.len() == 1 && args[0].is_empty() && params.is_empty() {
            args.clear();
        }
        if args.len() != params.len() {
            return None;
        }
        let args: Vec<String> = args
            .iter()
            .map(|a| self.expand_text(a, disabled, depth + 1))
            .collect();
        // Each use of a parameter copies its argument: the text is
        // charged as it is built, not after.
        let substituted = substitute(&mac.body, params, &args, self.budget.get());
        let Some(substituted) = substituted.filter(|s| self.spend(s.len())) else {
            self.exhausted.set(true);
            return None;
        };
        let expanded = self.expand_text(&substituted, &inner, depth + 1);
        if self.exhausted.get() || self.too_deep.get() {
            return None;
        }
        Some((expanded, end - i + 1))
    }

    /// Expands every macro use in `text` (no origins: used inside expansions).
    fn expand_text(&self, text: &str, disabled: &HashSet<String>, depth: usize) -> String {
        let Ok(tokens) = lex::lex(text) else {
            return text.to_string();
        };
        let mut out = String::new();
        let mut copied = 0;
        let mut i = 0;
        while i < tokens.len() {
            match self.invocation(text, &tokens, i, disabled, depth) {
                Some((replacement, used)) => {
                    let before = &text[copied..tokens[i].span.start];
                    if !self.spend(before.len() + replacement.len()) {
                        return out;
                    }
                    out.push_str(before);
                    out.push_str(&replacement);
                    copied = tokens[i + used - 1].span.end;
                    i += used;
                }
                None if self.exhausted.get() || self.too_deep.get() => return out,
                None => i += 1,
            }
        }
        if !self.spend(text.len() - copied) {
            return out;
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Replaces parameter names in a macro body by argument texts.
/// `None` when the result would be longer than `limit` bytes.
fn substitute(body: &str, params: &[String], args: &[String], limit: usize) -> Option<String> {
    let Ok(tokens) = lex::lex(body) else {
        return (body.len() <= limit).then(|| body.to_string());
    };
    let mut out = String::new();
    let mut copied = 0;
    for token in &tokens {
        if let Some(index) = token
            .ident()
            .and_then(|n| params.iter().position(|p| p == n))
        {
            let before = &body[copied..token.span.start];
            if out.len() + before.len() + args[index].len() > limit {
                return None;
            }
            out.push_str(before);
            out.push_str(&args[index]);
            copied = token.span.end;
        }
    }
    if out.len() + body.len() - copied > limit {
        return None;
    }
    out.push_str(&body[copied..]);
    Some(out)
}
