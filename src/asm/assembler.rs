//! Pass one: walks the preprocessed lines, expands `.macro`, `.rept` and
//! `.if`, defines labels and lays out every item (instruction, bundle, data,
//! padding) at its section offset. Sizes never depend on values that come
//! later, so one walk fixes the layout; pass two (`encode.rs`) then encodes.

use super::expr::{self, Base, EvalError, EvalErrorKind, Expr, Val};
use super::lex::{self, Token};
use super::limits::{
    MAX_ERRORS, MAX_EXPANDED_LINES, MAX_MACRO_DEPTH, MAX_MACRO_LINE_BYTES, MAX_OBJECT_BYTES,
};
use super::object::Param;
use super::parse::{self, InstSyntax};
use super::source::{AsmError, ErrorKind, Expansion, Line, LineBuilder, Pos, Sources};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

pub(super) struct SectionState {
    pub name: String,
    pub code: bool,
    pub align: u32,
    pub size: u32,
}

pub(super) enum SymDef {
    Label {
        section: usize,
        offset: u32,
    },
    Value(Val),
    /// A `.set` whose expression names a label defined later.
    Deferred {
        expr: Expr,
        line: Arc<Line>,
        dot: (usize, u32),
    },
}

#[derive(Default)]
pub(super) struct SymInfo {
    pub def: Option<SymDef>,
    pub global: bool,
    pub function: bool,
    pub external: bool,
    pub size: Option<(Expr, Arc<Line>, (usize, u32))>,
    /// Where the symbol was defined or declared, for diagnostics.
    pub site: Option<(Arc<Line>, Range<usize>)>,
}

pub(super) enum ItemKind {
    Inst(InstSyntax),
    Bundle(InstSyntax, InstSyntax, Range<usize>),
    Data { width: u8, expr: Expr },
    Bytes(Vec<u8>),
    Nops(u32),
}

pub(super) struct Item {
    pub line: Arc<Line>,
    pub section: usize,
    pub offset: u32,
    pub kind: ItemKind,
}

pub(super) struct FunctionDecl {
    pub symbol: String,
    pub params: Vec<Param>,
    pub cost: Option<String>,
}

struct AsmMacro {
    params: Vec<(String, Option<String>)>,
    body: Vec<Arc<Line>>,
}

struct Cond {
    active: bool,
    taken: bool,
    outer: bool,
    seen_else: bool,
    line: Arc<Line>,
    span: Range<usize>,
}

pub(super) struct Assembler {
    pub sources: Sources,
    pub errors: Vec<AsmError>,
    pub sections: Vec<SectionState>,
    pub current: usize,
    pub symbols: HashMap<String, SymInfo>,
    pub symbol_order: Vec<String>,
    pub items: Vec<Item>,
    pub functions: Vec<FunctionDecl>,
    pub current_function: Option<usize>,
    pub encoder: &'static dyn super::Encoder,
    macros: HashMap<String, AsmMacro>,
    depth: usize,
    expanded_lines: usize,
    /// Set when the assembly stops early (too many errors).
    stopped: bool,
}

impl Assembler {
    pub(super) fn new(sources: Sources, encoder: &'static dyn super::Encoder) -> Assembler {
        Assembler {
            encoder,
            sources,
            errors: Vec::new(),
            sections: vec![SectionState {
                name: ".text".into(),
                code: true,
                align: 4,
                size: 0,
            }],
            current: 0,
            symbols: HashMap::new(),
            symbol_order: Vec::new(),
            items: Vec::new(),
            functions: Vec::new(),
            current_function: None,
            macros: HashMap::new(),
            depth: 0,
            expanded_lines: 0,
            stopped: false,
        }
    }

    /// Records an error; past [`MAX_ERRORS`] the assembly stops, with a
    /// last error saying so.
    pub(super) fn push_error(&mut self, error: AsmError) {
        if self.stopped {
            return;
        }
        if self.errors.len() + 1 >= MAX_ERRORS {
            let mut last = error;
            last.notes
                .push(format!("stopped after {MAX_ERRORS} errors"));
            self.errors.push(last);
            self.stopped = true;
            return;
        }
        self.errors.push(error);
    }

    pub(crate) fn error(
        &mut self,
        kind: ErrorKind,
        message: impl Into<String>,
        line: &Line,
        span: Range<usize>,
    ) {
        let len = span.len().max(1);
        let error = self.sources.error_in(kind, message, line, span.start, len);
        self.push_error(error);
    }

    pub(super) fn error_labelled(
        &mut self,
        kind: ErrorKind,
        message: impl Into<String>,
        label: impl Into<String>,
        line: &Line,
        span: Range<usize>,
    ) {
        let count = self.errors.len();
        self.error(kind, message, line, span);
        if self.errors.len() > count {
            if let Some(last) = self.errors.last_mut() {
                last.label = label.into();
            }
        }
    }

    pub(super) fn eval_error(&mut self, error: EvalError, line: &Line) {
        let kind = match error.kind {
            EvalErrorKind::Bad => ErrorKind::BadExpression,
            EvalErrorKind::Undefined => ErrorKind::UndefinedSymbol,
            EvalErrorKind::TooDeep => ErrorKind::TooDeep,
        };
        // An undefined name is most often a misspelt label or `.set` value.
        let help = (kind == ErrorKind::UndefinedSymbol)
            .then(|| line.text.get(error.span.clone()))
            .flatten()
            .and_then(|name| {
                let defined = self
                    .symbols
                    .iter()
                    .filter(|(_, info)| info.def.is_some())
                    .map(|(n, _)| n.as_str());
                crate::suggest::did_you_mean(name, defined)
            });
        self.error(kind, error.message, line, error.span);
        if let Some(last) = self.errors.last_mut() {
            last.help = help;
        }
    }

    pub(super) fn dot(&self) -> (usize, u32) {
        (self.current, self.sections[self.current].size)
    }

    /// The symbol's entry, created (and remembered in order) on first use.
    pub(super) fn symbol_mut(&mut self, name: &str) -> &mut SymInfo {
        if !self.symbols.contains_key(name) {
            self.symbol_order.push(name.to_string());
        }
        self.symbols.entry(name.to_string()).or_default()
    }

    /// Evaluates `expr` with `.` at `dot`. Labels defined so far resolve to
    /// section offsets; `.set` values resolve recursively.
    pub(super) fn eval(&self, expr: &Expr, dot: (usize, u32)) -> Result<Val, EvalError> {
        self.eval_depth(expr, dot, 0)
    }

    fn eval_depth(&self, expr: &Expr, dot: (usize, u32), depth: usize) -> Result<Val, EvalError> {
        expr::eval(expr, &mut |name, span| self.resolve(name, span, dot, depth))
    }

    fn resolve(
        &self,
        name: &str,
        span: Range<usize>,
        dot: (usize, u32),
        depth: usize,
    ) -> Result<Val, EvalError> {
        if name == "." {
            return Ok(Val {
                base: Some(Base {
                    symbol: ".".into(),
                    section: Some(dot.0),
                    offset: i64::from(dot.1),
                }),
                addend: 0,
            });
        }
        let undefined = || EvalError {
            kind: EvalErrorKind::Undefined,
            message: format!("undefined symbol `{name}`"),
            span: span.clone(),
        };
        let Some(info) = self.symbols.get(name) else {
            return Err(undefined());
        };
        match &info.def {
            Some(SymDef::Label { section, offset }) => Ok(Val {
                base: Some(Base {
                    symbol: name.to_string(),
                    section: Some(*section),
                    offset: i64::from(*offset),
                }),
                addend: 0,
            }),
            Some(SymDef::Value(v)) => Ok(v.clone()),
            Some(SymDef::Deferred { expr, dot, .. }) => {
                if depth > MAX_MACRO_DEPTH {
                    return Err(EvalError::bad(
                        format!("`{name}` is defined in terms of itself"),
                        span,
                    ));
                }
                // Errors inside the definition are reported at the use.
                self.eval_depth(expr, *dot, depth + 1).map_err(|mut e| {
                    e.span = span.clone();
                    e
                })
            }
            None if info.external => Ok(Val {
                base: Some(Base {
                    symbol: name.to_string(),
                    section: None,
                    offset: 0,
                }),
                addend: 0,
            }),
            None => Err(undefined()),
        }
    }

    /// Evaluates an expression that must be a constant now (pass one).
    pub(super) fn eval_now(
        &mut self,
        tokens: &[Token],
        line: &Arc<Line>,
        what: &str,
    ) -> Option<i64> {
        let eol = parse::end_of(tokens, line.text.len());
        let result = expr::parse_all(tokens, eol).and_then(|e| {
            let value = self.eval(&e, self.dot())?;
            value.as_const().ok_or_else(|| {
                EvalError::bad(
                    format!("{what} must be a constant, not a symbol address"),
                    e.span(),
                )
            })
        });
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.eval_error(e, line);
                None
            }
        }
    }

    pub(super) fn define_label(&mut self, name: &str, line: &Arc<Line>, span: Range<usize>) {
        let (section, offset) = self.dot();
        if let Some(previous) = self.symbols.get(name).filter(|s| s.def.is_some()) {
            let note = previous
                .site
                .as_ref()
                .map(|(l, s)| self.sources.describe(l.origin(s.start).0));
            let count = self.errors.len();
            self.error_labelled(
                ErrorKind::DuplicateSymbol,
                format!("symbol `{name}` is already defined"),
                "redefined here",
                line,
                span,
            );
            if let (Some(note), Some(last)) = (note, self.errors.get_mut(count)) {
                last.notes.insert(0, format!("first defined at {note}"));
            }
            return;
        }
        let info = self.symbol_mut(name);
        info.def = Some(SymDef::Label { section, offset });
        info.site = Some((line.clone(), span));
    }

    /// Runs pass one over `lines`.
    pub(super) fn run(&mut self, lines: &[Arc<Line>]) {
        let mut conds: Vec<Cond> = Vec::new();
        let mut i = 0;
        while i < lines.len() && !self.stopped {
            let line = lines[i].clone();
            i += 1;
            let active = conds.last().is_none_or(|c| c.active);
            let tokens = match lex::lex(&line.text) {
                Ok(tokens) => tokens,
                Err(e) => {
                    if active {
                        self.error(ErrorKind::Syntax, e.message, &line, e.span);
                    }
                    continue;
                }
            };
            for statement in parse::split_statements(&tokens) {
                let active = conds.last().is_none_or(|c| c.active);
                let mut statement = statement;
                while let [name, colon, rest @ ..] = statement {
                    let (Some(label), true) = (name.ident(), colon.is(":")) else {
                        break;
                    };
                    if active {
                        self.define_label(label, &line, name.span.clone());
                    }
                    statement = rest;
                }
                let Some(head) = statement.first() else {
                    continue;
                };
                let word = head
                    .ident()
                    .map(str::to_ascii_lowercase)
                    .unwrap_or_default();
                match word.as_str() {
                    ".if" | ".ifdef" | ".ifndef" | ".else" | ".elseif" | ".endif" => {
                        self.conditional(&word, statement, &line, &mut conds, active);
                    }
                    ".macro" | ".rept" => {
                        let end = if word == ".macro" { ".endm" } else { ".endr" };
                        let Some((body, next)) =
                            self.block(lines, i, &word, end, &line, head.span.clone())
                        else {
                            i = lines.len();
                            continue;
                        };
                        i = next;
                        if !active {
                            continue;
                        }
                        if word == ".macro" {
                            self.define_macro(statement, body, &line);
                        } else {
                            self.rept(statement, &body, &line);
                        }
                    }
                    _ if !active => {}
                    ".endm" | ".endr" => {
                        self.error(
                            ErrorKind::Unmatched,
                            format!("`{word}` without a matching start"),
                            &line,
                            head.span.clone(),
                        );
                    }
                    _ => self.statement(statement, &line),
                }
            }
        }
        for cond in conds {
            self.error(
                ErrorKind::Unterminated,
                "`.if` without `.endif`",
                &cond.line,
                cond.span,
            );
        }
    }

    /// Collects the lines of a `.macro` or `.rept` body up to its end
    /// directive; returns the body and the index after the end.
    fn block(
        &mut self,
        lines: &[Arc<Line>],
        from: usize,
        start: &str,
        end: &str,
        line: &Line,
        span: Range<usize>,
    ) -> Option<(Vec<Arc<Line>>, usize)> {
        let mut nesting = 0;
        for (j, candidate) in lines.iter().enumerate().skip(from) {
            let word = first_word(&candidate.text);
            if word.as_deref() == Some(start) {
                nesting += 1;
            } else if word.as_deref() == Some(end) {
                if nesting == 0 {
                    return Some((lines[from..j].to_vec(), j + 1));
                }
                nesting -= 1;
            }
        }
        self.error(
            ErrorKind::Unterminated,
            format!("`{start}` without `{end}`"),
            line,
            span,
        );
        None
    }

    fn conditional(
        &mut self,
        word: &str,
        statement: &[Token],
        line: &Arc<Line>,
        conds: &mut Vec<Cond>,
        active: bool,
    ) {
        let head = statement[0].span.clone();
        let args = &statement[1..];
        let value = |this: &mut Assembler| -> bool {
            match word {
                ".ifdef" | ".ifndef" => {
                    let defined = args.first().and_then(Token::ident).is_some_and(|n| {
                        this.symbols
                            .get(n)
                            .is_some_and(|s| s.def.is_some() || s.external)
                    });
                    defined == (word == ".ifdef")
                }
                _ => this
                    .eval_now(args, line, "a `.if` condition")
                    .is_some_and(|v| v != 0),
            }
        };
        match word {
            ".if" | ".ifdef" | ".ifndef" => {
                let v = active && value(self);
                conds.push(Cond {
                    active: v,
                    taken: v,
                    outer: active,
                    seen_else: false,
                    line: line.clone(),
                    span: head,
                });
            }
            ".endif" => {
                if conds.pop().is_none() {
                    self.error(ErrorKind::Unmatched, "`.endif` without `.if`", line, head);
                }
            }
            _ => {
                let Some(top) = conds.last() else {
                    self.error(
                        ErrorKind::Unmatched,
                        format!("`{word}` without `.if`"),
                        line,
                        head,
                    );
                    return;
                };
                if top.seen_else {
                    self.error(
                        ErrorKind::Unmatched,
                        format!("`{word}` after `.else`"),
                        line,
                        head,
                    );
                    return;
                }
                let (outer, taken) = (top.outer, top.taken);
                let v = if word == ".else" {
                    !taken
                } else {
                    outer && !taken && value(self)
                };
                if let Some(top) = conds.last_mut() {
                    top.active = outer && !taken && v;
                    top.taken |= v;
                    top.seen_else = word == ".else";
                }
            }
        }
    }

    fn define_macro(&mut self, statement: &[Token], body: Vec<Arc<Line>>, line: &Arc<Line>) {
        let Some(name) = statement.get(1).and_then(Token::ident) else {
            let span = statement[0].span.clone();
            self.error(
                ErrorKind::Syntax,
                "expected a macro name after `.macro`",
                line,
                span,
            );
            return;
        };
        let mut params = Vec::new();
        for arg in parse::split_args(&statement[2..]) {
            match arg {
                [p] if p.ident().is_some() => {
                    params.push((p.ident().unwrap_or_default().to_string(), None))
                }
                [p, eq, rest @ ..] if p.ident().is_some() && eq.is("=") && !rest.is_empty() => {
                    let text = &line.text[rest[0].span.start..parse::end_of(rest, 0)];
                    params.push((
                        p.ident().unwrap_or_default().to_string(),
                        Some(text.to_string()),
                    ));
                }
                _ => {
                    let span = arg.first().map_or(statement[1].span.clone(), |t| {
                        t.span.start..parse::end_of(arg, t.span.end)
                    });
                    self.error(
                        ErrorKind::Syntax,
                        "expected a parameter name (or `name=default`)",
                        line,
                        span,
                    );
                    return;
                }
            }
        }
        self.macros
            .insert(name.to_ascii_lowercase(), AsmMacro { params, body });
    }

    fn rept(&mut self, statement: &[Token], body: &[Arc<Line>], line: &Arc<Line>) {
        let Some(count) = self.eval_now(&statement[1..], line, "the `.rept` count") else {
            return;
        };
        // An empty body still costs a turn of the loop per repetition.
        let lines = (count as usize).saturating_mul(body.len().max(1));
        if count < 0 || lines > MAX_EXPANDED_LINES {
            let span = statement[1].span.start..parse::end_of(statement, 0);
            self.error(
                ErrorKind::ValueOutOfRange,
                format!(
                    "`.rept` count {count} is negative or expands past {MAX_EXPANDED_LINES} lines"
                ),
                line,
                span,
            );
            return;
        }
        if !self.enter(line, statement[0].span.clone(), lines) {
            return;
        }
        if !body.is_empty() {
            for _ in 0..count {
                if self.stopped {
                    break;
                }
                self.run(body);
            }
        }
        self.depth -= 1;
    }

    fn enter(&mut self, line: &Line, span: Range<usize>, lines: usize) -> bool {
        self.expanded_lines = self.expanded_lines.saturating_add(lines);
        if self.depth >= MAX_MACRO_DEPTH || self.expanded_lines > MAX_EXPANDED_LINES {
            self.error(
                ErrorKind::TooDeep,
                format!(
                    "macro or `.rept` expansion nested deeper than {MAX_MACRO_DEPTH} or past {MAX_EXPANDED_LINES} lines"
                ),
                line,
                span,
            );
            // Past the line budget every further repetition would fail the
            // same way.
            self.stopped |= self.expanded_lines > MAX_EXPANDED_LINES;
            return false;
        }
        self.depth += 1;
        true
    }

    /// Whether `size` more bytes fit in the object beside everything laid
    /// out so far; reports the line that asks for too much.
    pub(super) fn room_for(&mut self, size: u64, line: &Line, span: Range<usize>) -> bool {
        let laid_out: u64 = self.sections.iter().map(|s| u64::from(s.size)).sum();
        if laid_out + size <= u64::from(MAX_OBJECT_BYTES) {
            return true;
        }
        self.error(
            ErrorKind::TooLarge,
            format!(
                "the object would hold {} bytes, more than tile memory ({MAX_OBJECT_BYTES:#x} bytes)",
                laid_out + size
            ),
            line,
            span,
        );
        // Later items cannot fit either: one error says it.
        self.stopped = true;
        false
    }

    /// One statement after its labels: assignment, directive, bundle, macro
    /// use or instruction.
    fn statement(&mut self, statement: &[Token], line: &Arc<Line>) {
        let head = &statement[0];
        if let (Some(name), Some(eq)) = (head.ident(), statement.get(1)) {
            if eq.is("=") {
                self.set(name, head.span.clone(), &statement[2..], line);
                return;
            }
        }
        if head.is("{") {
            self.bundle(statement, line);
            return;
        }
        let Some(word) = head.ident() else {
            self.error(
                ErrorKind::Syntax,
                "expected a label, directive or instruction",
                line,
                head.span.clone(),
            );
            return;
        };
        if word.starts_with('.') && word.len() > 1 {
            self.directive(&word.to_ascii_lowercase(), statement, line);
            return;
        }
        if let Some(mac) = self.macros.get(&word.to_ascii_lowercase()) {
            let expanded = expand_macro(mac, word, statement, line);
            match expanded {
                Ok(lines) => {
                    if self.enter(line, head.span.clone(), lines.len()) {
                        self.run(&lines);
                        self.depth -= 1;
                    }
                }
                Err((kind, message, span)) => self.error(kind, message, line, span),
            }
            return;
        }
        match parse::parse_inst(statement, line.text.len()) {
            Ok(inst) => self.place_code(ItemKind::Inst(inst), 4, line, head.span.clone()),
            Err(e) => self.eval_error(e, line),
        }
    }

    fn bundle(&mut self, statement: &[Token], line: &Arc<Line>) {
        let span = statement[0].span.clone();
        match parse::parse_bundle(statement) {
            Ok((main, aux)) => {
                let whole = span.start..parse::end_of(statement, span.end);
                self.place_code(ItemKind::Bundle(main, aux, whole), 8, line, span);
            }
            Err(e) => self.eval_error(e, line),
        }
    }

    fn place_code(&mut self, kind: ItemKind, size: u32, line: &Arc<Line>, span: Range<usize>) {
        if !self.room_for(u64::from(size), line, span.clone()) {
            return;
        }
        let section = &self.sections[self.current];
        if !section.code {
            let message = format!(
                "instructions must be in a code section, not `{}`",
                section.name
            );
            self.error(ErrorKind::BadInstruction, message, line, span);
            return;
        }
        if !section.size.is_multiple_of(size) {
            let what = if size == 8 { "bundle" } else { "instruction" };
            let message = format!(
                "{what} at offset {:#x} is not {size}-byte aligned",
                section.size
            );
            self.error_labelled(
                ErrorKind::Misaligned,
                message,
                format!("add `.align {size}` before it"),
                line,
                span,
            );
            return;
        }
        self.push_item(kind, size, line);
        let section = &mut self.sections[self.current];
        section.align = section.align.max(size);
    }

    pub(super) fn push_item(&mut self, kind: ItemKind, size: u32, line: &Arc<Line>) {
        let (section, offset) = self.dot();
        self.items.push(Item {
            line: line.clone(),
            section,
            offset,
            kind,
        });
        let state = &mut self.sections[self.current];
        state.size = state.size.saturating_add(size);
    }

    /// `.set name, expr` / `name = expr`.
    pub(super) fn set(
        &mut self,
        name: &str,
        span: Range<usize>,
        value: &[Token],
        line: &Arc<Line>,
    ) {
        if self
            .symbols
            .get(name)
            .is_some_and(|s| matches!(s.def, Some(SymDef::Label { .. })))
        {
            let message = format!("symbol `{name}` is already defined as a label");
            self.error(ErrorKind::DuplicateSymbol, message, line, span);
            return;
        }
        let eol = parse::end_of(value, span.end);
        let expr = match expr::parse_all(value, eol) {
            Ok(expr) => expr,
            Err(e) => return self.eval_error(e, line),
        };
        let dot = self.dot();
        let def = match self.eval(&expr, dot) {
            Ok(v) => SymDef::Value(v),
            Err(e) if e.kind == EvalErrorKind::Undefined => SymDef::Deferred {
                expr,
                line: line.clone(),
                dot,
            },
            Err(e) => return self.eval_error(e, line),
        };
        let info = self.symbol_mut(name);
        info.def = Some(def);
        info.site = Some((line.clone(), span));
    }
}

/// The first directive-like word of a line after its labels, lower-cased.
fn first_word(text: &str) -> Option<String> {
    let tokens = lex::lex(text).ok()?;
    let mut rest = &tokens[..];
    while let [name, colon, tail @ ..] = rest {
        if name.ident().is_some() && colon.is(":") {
            rest = tail;
        } else {
            break;
        }
    }
    rest.first()?.ident().map(str::to_ascii_lowercase)
}

/// Expands one use of an assembler macro: `\param` in the body becomes the
/// argument's text, which keeps its own origin (the use site).
fn expand_macro(
    mac: &AsmMacro,
    name: &str,
    statement: &[Token],
    line: &Arc<Line>,
) -> Result<Vec<Arc<Line>>, (ErrorKind, String, Range<usize>)> {
    let args = parse::split_args(&statement[1..]);
    if args.len() > mac.params.len() {
        let extra = args[mac.params.len()];
        let span = extra
            .first()
            .map_or(statement[0].span.clone(), |t| t.span.clone());
        return Err((
            ErrorKind::Syntax,
            format!("macro `{name}` takes {} arguments", mac.params.len()),
            span,
        ));
    }
    let mut values: Vec<Option<Range<usize>>> = Vec::new();
    for (index, (param, default)) in mac.params.iter().enumerate() {
        match args.get(index).filter(|a| !a.is_empty()) {
            Some(arg) => values.push(Some(arg[0].span.start..parse::end_of(arg, 0))),
            None if default.is_some() => values.push(None),
            None => {
                return Err((
                    ErrorKind::Syntax,
                    format!("macro `{name}` needs a value for `{param}`"),
                    statement[0].span.clone(),
                ))
            }
        }
    }
    let too_long = || {
        (
            ErrorKind::TooLarge,
            format!(
                "the expansion of macro `{name}` has a line longer than {}",
                crate::fsutil::size_text(MAX_MACRO_LINE_BYTES as u64)
            ),
            statement[0].span.clone(),
        )
    };
    let site: Pos = line.origin(statement[0].span.start).0;
    let context = Arc::new(Expansion {
        macro_name: name.to_string(),
        preprocessor: false,
        site,
        parent: line.context.clone(),
    });
    let mut out = Vec::new();
    for body_line in &mac.body {
        let text = &body_line.text;
        let mut builder = LineBuilder::new();
        builder.context(Some(context.clone()));
        let mut copied = 0;
        let mut i = 0;
        while let Some(at) = text[i..].find('\\').map(|p| p + i) {
            let name_end = text[at + 1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(text.len(), |e| at + 1 + e);
            let word = &text[at + 1..name_end];
            if text[at + 1..].starts_with("()") {
                builder.push_original(body_line, copied..at);
                copied = at + 3;
                i = at + 3;
                continue;
            }
            let Some(index) = mac.params.iter().position(|(p, _)| p == word) else {
                i = at + 1;
                continue;
            };
            // Checked before each copy: a body line that uses a long
            // argument many times must not be built first.
            let argument = match &values[index] {
                Some(range) => range.len(),
                None => mac.params[index].1.as_ref().map_or(0, String::len),
            };
            if builder.len() + (at - copied) + argument > MAX_MACRO_LINE_BYTES {
                return Err(too_long());
            }
            builder.push_original(body_line, copied..at);
            match &values[index] {
                Some(range) => builder.push_original(line, range.clone()),
                None => {
                    let default = mac.params[index].1.clone().unwrap_or_default();
                    builder.push_original(
                        &Line::original(default, site.file, site.line),
                        0..mac.params[index].1.as_ref().map_or(0, String::len),
                    );
                }
            }
            copied = name_end;
            i = name_end;
        }
        builder.push_original(body_line, copied..text.len());
        let expanded = builder.finish(body_line.origin(0).0);
        // Arguments substituted into arguments grow with each level of a
        // recursive macro.
        if expanded.text.len() > MAX_MACRO_LINE_BYTES {
            return Err(too_long());
        }
        out.push(Arc::new(expanded));
    }
    Ok(out)
}
