//! The assembler's directives (pass one): sections, symbols, data, layout
//! and the `.ipub_*` kernel metadata.

use super::assembler::{Assembler, FunctionDecl, ItemKind, SectionState, SymDef};
use super::expr;
use super::lex::{Tok, Token};
use super::limits::{MAX_ALIGN, MAX_OBJECT_BYTES};
use super::object::{Param, ParamKind};
use super::parse;
use super::source::{ErrorKind, Line};
use std::ops::Range;
use std::sync::Arc;

/// Largest `.space` accepted (all of tile memory).
const MAX_SPACE: i64 = MAX_OBJECT_BYTES as i64;

impl Assembler {
    pub(super) fn directive(&mut self, name: &str, statement: &[Token], line: &Arc<Line>) {
        let head = statement[0].span.clone();
        let args = parse::split_args(&statement[1..]);
        let eol = parse::end_of(statement, head.end);
        match name {
            ".text" | ".data" => {
                if self.no_args(&args, line, &head) {
                    self.switch_section(name, name == ".text");
                }
            }
            ".section" => self.section(&args, line, &head),
            ".globl" | ".global" | ".extern" => {
                for arg in &args {
                    let Some((symbol, span)) = self.name_arg(arg, line, eol) else {
                        continue;
                    };
                    let info = self.symbol_mut(&symbol);
                    if name == ".extern" {
                        info.external = true;
                    } else {
                        info.global = true;
                    }
                    if info.site.is_none() {
                        info.site = Some((line.clone(), span));
                    }
                }
            }
            ".type" => self.type_directive(&args, line, &head, eol),
            ".size" => {
                let [symbol, value] = args.as_slice() else {
                    return self.error(
                        ErrorKind::Syntax,
                        "expected `.size symbol, expression`",
                        line,
                        head,
                    );
                };
                let Some((symbol, _)) = self.name_arg(symbol, line, eol) else {
                    return;
                };
                match expr::parse_all(value, eol) {
                    Ok(e) => {
                        let dot = self.dot();
                        self.symbol_mut(&symbol).size = Some((e, line.clone(), dot));
                    }
                    Err(e) => self.eval_error(e, line),
                }
            }
            ".set" | ".equ" => {
                let [symbol, value] = args.as_slice() else {
                    return self.error(
                        ErrorKind::Syntax,
                        format!("expected `{name} symbol, expression`"),
                        line,
                        head,
                    );
                };
                if let Some((symbol, span)) = self.name_arg(symbol, line, eol) {
                    self.set(&symbol, span, value, line);
                }
            }
            ".align" | ".balign" => self.align(&args, line, &head),
            ".word" | ".long" | ".int" => self.data(4, &args, line, eol),
            ".half" | ".short" => self.data(2, &args, line, eol),
            ".byte" => self.data(1, &args, line, eol),
            ".space" | ".skip" | ".zero" => self.space(&args, line, &head),
            ".ascii" | ".asciz" | ".string" => {
                for arg in &args {
                    let [Token {
                        tok: Tok::Str(text),
                        ..
                    }] = arg
                    else {
                        let span = arg.first().map_or(head.clone(), |t| t.span.clone());
                        self.error(ErrorKind::Syntax, "expected a string", line, span);
                        continue;
                    };
                    let mut bytes = text.as_bytes().to_vec();
                    if name != ".ascii" {
                        bytes.push(0);
                    }
                    self.data_bytes(bytes, line);
                }
            }
            ".ipub_param" => self.param(&args, line, &head, eol),
            ".ipub_cost" => self.cost(&args, line, &head),
            _ => self.error(
                ErrorKind::UnknownDirective,
                format!("unknown directive `{name}`"),
                line,
                head,
            ),
        }
    }

    fn no_args(&mut self, args: &[&[Token]], line: &Line, head: &Range<usize>) -> bool {
        if let Some(extra) = args.first().and_then(|a| a.first()) {
            self.error(
                ErrorKind::Syntax,
                "this directive takes no arguments",
                line,
                extra.span.clone(),
            );
            return false;
        }
        let _ = head;
        true
    }

    fn switch_section(&mut self, name: &str, code: bool) {
        self.current = match self.sections.iter().position(|s| s.name == name) {
            Some(index) => index,
            None => {
                self.sections.push(SectionState {
                    name: name.to_string(),
                    code,
                    align: 4,
                    size: 0,
                });
                self.sections.len() - 1
            }
        };
    }

    /// `.section name[, "flags"]`: `x` in the flags, or a name starting
    /// with `.text`, makes a code section.
    fn section(&mut self, args: &[&[Token]], line: &Line, head: &Range<usize>) {
        let name = match args.first() {
            Some(
                [Token {
                    tok: Tok::Ident(n), ..
                }],
            ) => n.clone(),
            Some(
                [Token {
                    tok: Tok::Str(n), ..
                }],
            ) if !n.is_empty() => n.clone(),
            _ => {
                return self.error(
                    ErrorKind::Syntax,
                    "expected a section name",
                    line,
                    head.clone(),
                )
            }
        };
        let code = match args.get(1) {
            None => name == ".text" || name.starts_with(".text."),
            Some(
                [Token {
                    tok: Tok::Str(flags),
                    span,
                }],
            ) => {
                if let Some(bad) = flags.chars().find(|c| !"awx".contains(*c)) {
                    return self.error(
                        ErrorKind::Syntax,
                        format!("unknown section flag `{bad}` (use a, w, x)"),
                        line,
                        span.clone(),
                    );
                }
                flags.contains('x')
            }
            Some(other) => {
                let span = other.first().map_or(head.clone(), |t| t.span.clone());
                return self.error(
                    ErrorKind::Syntax,
                    "expected section flags as a string, e.g. \"ax\"",
                    line,
                    span,
                );
            }
        };
        if let Some(existing) = self.sections.iter().find(|s| s.name == name) {
            if args.len() > 1 && existing.code != code {
                return self.error(
                    ErrorKind::Syntax,
                    format!("section `{name}` was declared with other flags"),
                    line,
                    head.clone(),
                );
            }
        }
        self.switch_section(&name, code);
    }

    fn name_arg(
        &mut self,
        arg: &[Token],
        line: &Line,
        eol: usize,
    ) -> Option<(String, Range<usize>)> {
        match arg {
            [t] if t.ident().is_some_and(|n| n != ".") => {
                Some((t.ident().unwrap_or_default().to_string(), t.span.clone()))
            }
            _ => {
                let span = arg.first().map_or(eol..eol + 1, |t| t.span.clone());
                self.error(ErrorKind::Syntax, "expected a symbol name", line, span);
                None
            }
        }
    }

    fn type_directive(
        &mut self,
        args: &[&[Token]],
        line: &Arc<Line>,
        head: &Range<usize>,
        eol: usize,
    ) {
        let [symbol, kind] = args else {
            return self.error(
                ErrorKind::Syntax,
                "expected `.type symbol, @function`",
                line,
                head.clone(),
            );
        };
        let Some((symbol, _)) = self.name_arg(symbol, line, eol) else {
            return;
        };
        let kind_name = match kind {
            [at, t] if at.is("@") || at.is("%") => t.ident().unwrap_or_default().to_string(),
            [Token {
                tok: Tok::Str(s), ..
            }] => s.clone(),
            _ => String::new(),
        };
        match kind_name.as_str() {
            "function" => {
                self.symbol_mut(&symbol).function = true;
                self.current_function = Some(
                    match self.functions.iter().position(|f| f.symbol == symbol) {
                        Some(index) => index,
                        None => {
                            self.functions.push(FunctionDecl {
                                symbol,
                                params: Vec::new(),
                                cost: None,
                            });
                            self.functions.len() - 1
                        }
                    },
                );
            }
            "object" => self.symbol_mut(&symbol).function = false,
            _ => {
                let span = kind.first().map_or(head.clone(), |t| {
                    t.span.start..parse::end_of(kind, t.span.end)
                });
                self.error(
                    ErrorKind::Syntax,
                    "expected `@function` or `@object`",
                    line,
                    span,
                );
            }
        }
    }

    fn align(&mut self, args: &[&[Token]], line: &Arc<Line>, head: &Range<usize>) {
        let [value] = args else {
            return self.error(
                ErrorKind::Syntax,
                "expected `.align bytes`",
                line,
                head.clone(),
            );
        };
        let Some(align) = self.eval_now(value, line, "the alignment") else {
            return;
        };
        let span = value[0].span.start..parse::end_of(value, 0);
        if align <= 0 || align > MAX_ALIGN || (align & (align - 1)) != 0 {
            return self.error(
                ErrorKind::ValueOutOfRange,
                format!("alignment {align} is not a power of two up to {MAX_ALIGN:#x}"),
                line,
                span,
            );
        }
        let align = align as u32;
        let section = &self.sections[self.current];
        let padding = section.size.next_multiple_of(align) - section.size;
        let code = section.code;
        self.sections[self.current].align = section.align.max(align);
        if padding == 0 || !self.room_for(u64::from(padding), line, head.clone()) {
            return;
        }
        if code {
            if !padding.is_multiple_of(4) {
                let message = format!(
                    "code at offset {:#x} is not word aligned, so it cannot be padded with `nop`",
                    self.sections[self.current].size
                );
                return self.error(ErrorKind::Misaligned, message, line, head.clone());
            }
            self.push_item(ItemKind::Nops(padding / 4), padding, line);
        } else {
            self.push_item(ItemKind::Bytes(vec![0; padding as usize]), padding, line);
        }
    }

    fn data(&mut self, width: u8, args: &[&[Token]], line: &Arc<Line>, eol: usize) {
        if args.is_empty() {
            return self.error(
                ErrorKind::Syntax,
                "expected at least one value",
                line,
                eol..eol + 1,
            );
        }
        for arg in args {
            let offset = self.sections[self.current].size;
            let expr = match expr::parse_all(arg, eol) {
                Ok(e) => e,
                Err(e) => {
                    self.eval_error(e, line);
                    continue;
                }
            };
            if !offset.is_multiple_of(u32::from(width)) {
                let message =
                    format!("{width}-byte value at offset {offset:#x} is not naturally aligned");
                self.error(ErrorKind::Misaligned, message, line, expr.span());
                continue;
            }
            if !self.room_for(u64::from(width), line, expr.span()) {
                return;
            }
            self.push_item(ItemKind::Data { width, expr }, u32::from(width), line);
        }
    }

    fn data_bytes(&mut self, bytes: Vec<u8>, line: &Arc<Line>) {
        let len = bytes.len() as u32;
        if self.room_for(u64::from(len), line, 0..line.text.len()) {
            self.push_item(ItemKind::Bytes(bytes), len, line);
        }
    }

    fn space(&mut self, args: &[&[Token]], line: &Arc<Line>, head: &Range<usize>) {
        let (count, fill) = match args {
            [count] => (*count, None),
            [count, fill] => (*count, Some(*fill)),
            _ => {
                return self.error(
                    ErrorKind::Syntax,
                    "expected `.space bytes[, fill]`",
                    line,
                    head.clone(),
                )
            }
        };
        let Some(n) = self.eval_now(count, line, "the size") else {
            return;
        };
        let span = count[0].span.start..parse::end_of(count, 0);
        if !(0..=MAX_SPACE).contains(&n) {
            return self.error(
                ErrorKind::ValueOutOfRange,
                format!("`.space` size {n} is outside 0..={MAX_SPACE:#x}"),
                line,
                span,
            );
        }
        let byte = match fill {
            None => 0,
            Some(fill) => {
                let Some(v) = self.eval_now(fill, line, "the fill byte") else {
                    return;
                };
                if !(-128..=255).contains(&v) {
                    let span = fill[0].span.start..parse::end_of(fill, 0);
                    return self.error(
                        ErrorKind::ValueOutOfRange,
                        format!("fill value {v} does not fit in a byte"),
                        line,
                        span,
                    );
                }
                v as u8
            }
        };
        if self.sections[self.current].code && n > 0 {
            return self.error(
                ErrorKind::BadInstruction,
                "`.space` in a code section; use `.align` or instructions",
                line,
                head.clone(),
            );
        }
        // Checked before the fill bytes are allocated.
        if self.room_for(n as u64, line, span) {
            self.push_item(ItemKind::Bytes(vec![byte; n as usize]), n as u32, line);
        }
    }

    /// `.ipub_param name, offset, kind`: one field of the current
    /// function's state struct.
    fn param(&mut self, args: &[&[Token]], line: &Arc<Line>, head: &Range<usize>, eol: usize) {
        let [name, offset, kind] = args else {
            return self.error(
                ErrorKind::Syntax,
                "expected `.ipub_param name, offset, kind`",
                line,
                head.clone(),
            );
        };
        let Some(function) = self.current_function else {
            return self.error(
                ErrorKind::Syntax,
                "`.ipub_param` must follow `.type symbol, @function`",
                line,
                head.clone(),
            );
        };
        let Some((name, name_span)) = self.name_arg(name, line, eol) else {
            return;
        };
        let Some(offset_value) = self.eval_now(offset, line, "the parameter offset") else {
            return;
        };
        let kind_span = kind.first().map_or(head.clone(), |t| t.span.clone());
        let Some(kind) = kind
            .first()
            .and_then(Token::ident)
            .and_then(ParamKind::from_name)
            .filter(|_| kind.len() == 1)
        else {
            let names: Vec<&str> = ParamKind::ALL.iter().map(|k| k.name()).collect();
            return self.error(
                ErrorKind::Syntax,
                format!("expected a parameter kind: {}", names.join(", ")),
                line,
                kind_span,
            );
        };
        let offset_span = offset[0].span.start..parse::end_of(offset, 0);
        if !(0..=0xFFFF).contains(&offset_value)
            || !(offset_value as u32).is_multiple_of(kind.size())
        {
            let message = format!(
                "offset {offset_value} of a {} parameter must be a multiple of {} in 0..=0xffff",
                kind.name(),
                kind.size()
            );
            return self.error(ErrorKind::ValueOutOfRange, message, line, offset_span);
        }
        let offset = offset_value as u32;
        let params = &self.functions[function].params;
        if params.iter().any(|p| p.name == name) {
            return self.error(
                ErrorKind::DuplicateSymbol,
                format!("parameter `{name}` is already declared"),
                line,
                name_span,
            );
        }
        if let Some(other) = params
            .iter()
            .find(|p| offset < p.offset + p.kind.size() && p.offset < offset + kind.size())
        {
            let message = format!(
                "parameter `{name}` overlaps `{}` at offset {}",
                other.name, other.offset
            );
            return self.error(ErrorKind::ValueOutOfRange, message, line, offset_span);
        }
        self.functions[function]
            .params
            .push(Param { name, offset, kind });
    }

    /// `.ipub_cost "formula"`: the current function's cycle cost, an
    /// expression over the variant's defines (checked for syntax here).
    fn cost(&mut self, args: &[&[Token]], line: &Arc<Line>, head: &Range<usize>) {
        let [[Token {
            tok: Tok::Str(formula),
            span,
        }]] = args
        else {
            return self.error(
                ErrorKind::Syntax,
                "expected `.ipub_cost \"formula\"`",
                line,
                head.clone(),
            );
        };
        let Some(function) = self.current_function else {
            return self.error(
                ErrorKind::Syntax,
                "`.ipub_cost` must follow `.type symbol, @function`",
                line,
                head.clone(),
            );
        };
        if let Err(message) = crate::asm::check_cost_formula(formula) {
            return self.error(
                ErrorKind::BadExpression,
                format!("bad cost formula: {message}"),
                line,
                span.clone(),
            );
        }
        self.functions[function].cost = Some(formula.clone());
    }

    /// Whether `name` is a label (for pass two's pc-relative resolution).
    pub(super) fn label_of(&self, name: &str) -> Option<(usize, u32)> {
        match self.symbols.get(name)?.def {
            Some(SymDef::Label { section, offset }) => Some((section, offset)),
            _ => None,
        }
    }
}
