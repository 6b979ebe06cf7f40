//! Pass two: evaluates every operand now that all labels are known, encodes
//! instructions through `crate::isa`, resolves pc-relative references within
//! a section, records relocations for everything else, and builds the
//! [`Object`].

use super::assembler::{Assembler, Item, ItemKind, SymDef};
use super::expr::{Base, EvalError, Val};
use super::object::{FunctionInfo, Object, Relocation, Section, Symbol};
use super::parse::{InstSyntax, OperandSyntax};
use super::source::{ErrorKind, Line};
use crate::isa::{self, Operand, RelocKind, Value};
use std::ops::Range;

impl Assembler {
    /// Runs pass two; the object is `None` when any error was found.
    pub(super) fn finish(&mut self) -> Option<Object> {
        let mut sections: Vec<Section> = self
            .sections
            .iter()
            .map(|s| Section {
                name: s.name.clone(),
                code: s.code,
                align: s.align,
                bytes: vec![0; s.size as usize],
            })
            .collect();
        let mut relocations = Vec::new();
        let items = std::mem::take(&mut self.items);
        let mut nop: Option<Result<u32, String>> = None;
        for item in &items {
            let at = item.offset as usize;
            match &item.kind {
                ItemKind::Bytes(bytes) => {
                    sections[item.section].bytes[at..at + bytes.len()].copy_from_slice(bytes)
                }
                ItemKind::Nops(count) => {
                    let word = nop.get_or_insert_with(|| {
                        self.encoder
                            .assemble("nop", &[])
                            .map(|e| e.word)
                            .map_err(|e| e.message)
                    });
                    match word.clone() {
                        Ok(word) => {
                            for i in 0..*count as usize {
                                let place = at + 4 * i;
                                sections[item.section].bytes[place..place + 4]
                                    .copy_from_slice(&word.to_le_bytes());
                            }
                        }
                        Err(message) => {
                            let message = format!("cannot pad code with `nop`: {message}");
                            self.error(
                                ErrorKind::BadInstruction,
                                message,
                                &item.line,
                                0..item.line.text.len(),
                            );
                        }
                    }
                }
                ItemKind::Inst(inst) => {
                    if let Some(word) = self.encode(inst, item, item.offset, &mut relocations) {
                        sections[item.section].bytes[at..at + 4]
                            .copy_from_slice(&word.to_le_bytes());
                    }
                }
                ItemKind::Bundle(main, aux, span) => {
                    let main_word = self.encode(main, item, item.offset, &mut relocations);
                    let aux_word = self.encode(aux, item, item.offset + 4, &mut relocations);
                    if let (Some(m), Some(a)) = (main_word, aux_word) {
                        if let Err(e) = self.encoder.check_bundle(m, a) {
                            let message = format!("invalid bundle: {}", e.message);
                            self.error(
                                ErrorKind::BadInstruction,
                                message,
                                &item.line,
                                span.clone(),
                            );
                        }
                        sections[item.section].bytes[at..at + 4].copy_from_slice(&m.to_le_bytes());
                        sections[item.section].bytes[at + 4..at + 8]
                            .copy_from_slice(&a.to_le_bytes());
                    }
                }
                ItemKind::Data { width, expr } => {
                    let value = self.eval(expr, (item.section, item.offset));
                    let Some(value) = self.value_or_error(value, &item.line) else {
                        continue;
                    };
                    let bytes = self.data_value(*width, value, item, expr.span(), &mut relocations);
                    if let Some(bytes) = bytes {
                        sections[item.section].bytes[at..at + usize::from(*width)]
                            .copy_from_slice(&bytes[..usize::from(*width)]);
                    }
                }
            }
        }
        let symbols = self.symbol_table(&sections);
        let functions = self.function_table();
        if !self.errors.is_empty() {
            return None;
        }
        let mut object = Object {
            sections,
            symbols,
            relocations,
            functions,
        };
        drop_unused_sections(&mut object);
        Some(object)
    }

    fn value_or_error(&mut self, value: Result<Val, EvalError>, line: &Line) -> Option<Val> {
        match value {
            Ok(v) if v.base.as_ref().is_some_and(|b| b.symbol == ".") => {
                let span = 0..line.text.len();
                self.error(
                    ErrorKind::BadExpression,
                    "`.` can only be used in a constant difference (e.g. `. - label`)",
                    line,
                    span,
                );
                None
            }
            Ok(v) => Some(v),
            Err(e) => {
                self.eval_error(e, line);
                None
            }
        }
    }

    fn data_value(
        &mut self,
        width: u8,
        value: Val,
        item: &Item,
        span: Range<usize>,
        relocations: &mut Vec<Relocation>,
    ) -> Option<[u8; 4]> {
        match value.base {
            None => {
                let v = value.addend;
                let bits = u32::from(width) * 8;
                let (min, max) = (-(1i64 << (bits - 1)), (1i64 << bits) - 1);
                if v < min || v > max {
                    let message = format!("value {v} does not fit in {bits} bits");
                    self.error(ErrorKind::ValueOutOfRange, message, &item.line, span);
                    return None;
                }
                Some((v as u32).to_le_bytes())
            }
            Some(Base { symbol, .. }) if width == 4 => {
                relocations.push(Relocation {
                    section: item.section as u32,
                    offset: item.offset,
                    kind: RelocKind::Abs32,
                    symbol,
                    addend: value.addend,
                });
                Some([0; 4])
            }
            Some(Base { symbol, .. }) => {
                let message = format!(
                    "a {width}-byte value cannot hold the address of `{symbol}`; use `.word`"
                );
                self.error(ErrorKind::BadOperand, message, &item.line, span);
                None
            }
        }
    }

    /// Encodes one instruction at `offset` of the item's section.
    fn encode(
        &mut self,
        inst: &InstSyntax,
        item: &Item,
        offset: u32,
        relocations: &mut Vec<Relocation>,
    ) -> Option<u32> {
        let mut operands = Vec::new();
        let mut failed = false;
        for operand in &inst.operands {
            match operand {
                OperandSyntax::Reg { name, .. } => operands.push(Operand::Register(name.clone())),
                OperandSyntax::Expr(expr) => {
                    let value = self.eval(expr, (item.section, offset));
                    match self.value_or_error(value, &item.line) {
                        Some(Val { base: None, addend }) => {
                            operands.push(Operand::Value(Value::Const(addend)))
                        }
                        Some(Val {
                            base: Some(base),
                            addend,
                        }) => operands.push(Operand::Value(Value::Symbol {
                            name: base.symbol,
                            addend,
                        })),
                        None => failed = true,
                    }
                }
            }
        }
        if failed {
            return None;
        }
        let encoded = match self.encoder.assemble(&inst.mnemonic, &operands) {
            Ok(encoded) => encoded,
            Err(e) => {
                match e.operand.and_then(|i| inst.operands.get(i)) {
                    Some(operand) => {
                        self.error(ErrorKind::BadOperand, e.message, &item.line, operand.span())
                    }
                    None if e.message.starts_with("unknown instruction") => self.error(
                        ErrorKind::UnknownInstruction,
                        e.message,
                        &item.line,
                        inst.span.clone(),
                    ),
                    None => self.error(
                        ErrorKind::BadInstruction,
                        e.message,
                        &item.line,
                        inst.span.clone(),
                    ),
                }
                return None;
            }
        };
        let Some(fixup) = encoded.fixup else {
            return Some(encoded.word);
        };
        let local = self
            .label_of(&fixup.symbol)
            .filter(|(section, _)| *section == item.section);
        if let (true, Some((_, target))) = (fixup.kind.is_pc_relative(), local) {
            let value = i64::from(target) + fixup.addend;
            return match isa::apply_reloc(fixup.kind, encoded.word, value, offset) {
                Ok(word) => Some(word),
                Err(problem) => {
                    let span =
                        operand_naming(inst, &operands, &fixup.symbol).unwrap_or(inst.span.clone());
                    let message = problem.to_string();
                    self.error(ErrorKind::ValueOutOfRange, message, &item.line, span);
                    None
                }
            };
        }
        relocations.push(Relocation {
            section: item.section as u32,
            offset,
            kind: fixup.kind,
            symbol: fixup.symbol,
            addend: fixup.addend,
        });
        Some(encoded.word)
    }

    fn symbol_table(&mut self, sections: &[Section]) -> Vec<Symbol> {
        let mut symbols = Vec::new();
        for name in self.symbol_order.clone() {
            let Some(info) = self.symbols.get(&name) else {
                continue;
            };
            let (global, function, site) = (info.global, info.function, info.site.clone());
            let size_expr = info.size.clone();
            let place = match &info.def {
                Some(SymDef::Label { section, offset }) => {
                    Some((Some(*section), i64::from(*offset)))
                }
                Some(SymDef::Value(v)) => Some(self.place_of(v)),
                Some(SymDef::Deferred { expr, line, dot }) => {
                    let (expr, line, dot) = (expr.clone(), line.clone(), *dot);
                    let value = self.eval(&expr, dot);
                    self.value_or_error(value, &line).map(|v| self.place_of(&v))
                }
                None if global && !info.external => {
                    if let Some((line, span)) = site {
                        self.error(
                            ErrorKind::UndefinedSymbol,
                            format!("`{name}` is declared global but never defined"),
                            &line,
                            span,
                        );
                    }
                    None
                }
                None => None,
            };
            let Some((section, value)) = place else {
                continue;
            };
            let mut size = 0;
            if let Some((expr, line, dot)) = size_expr {
                let result = self.eval(&expr, dot);
                match self.value_or_error(result, &line).map(|v| v.as_const()) {
                    Some(Some(s))
                        if s >= 0
                            && section
                                .is_some_and(|i| value + s <= sections[i].bytes.len() as i64) =>
                    {
                        size = s as u32
                    }
                    Some(Some(s)) => {
                        self.error(
                            ErrorKind::ValueOutOfRange,
                            format!("size {s} of `{name}` runs past its section"),
                            &line,
                            expr.span(),
                        );
                        continue;
                    }
                    Some(None) => {
                        self.error(
                            ErrorKind::BadExpression,
                            "`.size` must be a constant",
                            &line,
                            expr.span(),
                        );
                        continue;
                    }
                    None => continue,
                }
            }
            // Local constants stay in the assembly; labels and global
            // values go into the object.
            if section.is_none() && !global {
                continue;
            }
            symbols.push(Symbol {
                name: name.clone(),
                section: section.map(|s| s as u32),
                value,
                size,
                global,
                function,
            });
        }
        symbols
    }

    /// Where a `.set` value lives: a section offset or an absolute value.
    /// A value relative to an external symbol cannot be a symbol itself.
    fn place_of(&self, value: &Val) -> (Option<usize>, i64) {
        match &value.base {
            Some(Base {
                section: Some(s),
                offset,
                ..
            }) => (Some(*s), offset + value.addend),
            _ => (None, value.addend),
        }
    }

    fn function_table(&mut self) -> Vec<FunctionInfo> {
        let mut functions = Vec::new();
        for decl in std::mem::take(&mut self.functions) {
            let code = self
                .label_of(&decl.symbol)
                .is_some_and(|(s, _)| self.sections[s].code);
            if !code {
                let site = self.symbols.get(&decl.symbol).and_then(|s| s.site.clone());
                if let Some((line, span)) = site {
                    let message = format!(
                        "function `{}` must be a label in a code section",
                        decl.symbol
                    );
                    self.error(ErrorKind::UndefinedSymbol, message, &line, span);
                }
                continue;
            }
            functions.push(FunctionInfo {
                symbol: decl.symbol,
                params: decl.params,
                cost: decl.cost,
            });
        }
        functions
    }
}

/// Removes sections that hold nothing and name nothing (the implicit
/// `.text` of a data-only source), renumbering the references.
fn drop_unused_sections(object: &mut Object) {
    let used: Vec<bool> = (0..object.sections.len())
        .map(|i| {
            !object.sections[i].bytes.is_empty()
                || object.symbols.iter().any(|s| s.section == Some(i as u32))
        })
        .collect();
    let mut renumber = Vec::new();
    let mut next = 0u32;
    for &keep in &used {
        renumber.push(next);
        next += u32::from(keep);
    }
    for symbol in &mut object.symbols {
        if let Some(s) = symbol.section.as_mut() {
            *s = renumber[*s as usize];
        }
    }
    for relocation in &mut object.relocations {
        relocation.section = renumber[relocation.section as usize];
    }
    let mut index = 0;
    object.sections.retain(|_| {
        index += 1;
        used[index - 1]
    });
}

/// The span of the operand that named `symbol`.
fn operand_naming(inst: &InstSyntax, operands: &[Operand], symbol: &str) -> Option<Range<usize>> {
    operands
        .iter()
        .position(|o| matches!(o, Operand::Value(Value::Symbol { name, .. }) if name == symbol))
        .and_then(|i| inst.operands.get(i))
        .map(OperandSyntax::span)
}
