//! The kernel assembler: preprocessor, two-pass assembler, object format and
//! linker (see `book/src/assembler.md` and `book/src/object-format.md`).
//!
//! The flow is `preprocess` (C-like, through a [`Vfs`](crate::vfs::Vfs) so tests run in
//! memory) → pass one (`assembler.rs`: macros, repetition, conditionals,
//! layout) → pass two (`encode.rs`: operands, encoding through
//! [`crate::isa`], relocations) → [`Object`]. The linker places objects'
//! sections at tile addresses and applies relocations.
//!
//! Errors are collected, not fatal: one run reports every problem it can,
//! each with `file:line:column` through includes and macro expansions.

mod assembler;
mod directives;
mod encode;
pub(crate) mod expr;
pub(crate) mod lex;
pub(crate) mod limits;
pub mod link;
pub(crate) mod object;
pub(crate) mod parse;
pub mod preprocess;
pub(crate) mod source;

#[cfg(test)]
mod tests;

pub use link::{link, LinkError, Linked, Placement};
pub use object::{
    FunctionInfo, Object, ObjectError, Param, ParamKind, Relocation, Section, Symbol,
};
pub use preprocess::{preprocess, Preprocessed};
pub use source::{AsmError, ErrorKind, Location, Sources};

use crate::isa;
use crate::vfs::FileSource;
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an assembly depends on besides the source file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssembleOptions {
    /// Predefined preprocessor macros (`-D NAME=VALUE`).
    pub defines: BTreeMap<String, String>,
    /// Directories searched for `#include` after the including file's own.
    pub include_dirs: Vec<Utf8PathBuf>,
}

/// The result of assembling one source: the object (when there were no
/// errors), every file read, and the diagnostics.
#[derive(Debug)]
pub struct Assembly {
    pub object: Option<Object>,
    pub sources: Sources,
    pub errors: Vec<AsmError>,
}

impl Assembly {
    /// Every distinct file read, with its contents (the cache hashes these).
    pub(crate) fn files_read(&self) -> Vec<(Utf8PathBuf, Arc<str>)> {
        let mut seen = std::collections::HashSet::new();
        self.sources
            .files
            .iter()
            .filter(|f| seen.insert(f.path.clone()))
            .map(|f| (f.path.clone(), f.text.clone()))
            .collect()
    }

    /// The errors rendered rustc-style, with source lines and carets.
    pub fn render_errors(&self) -> String {
        self.sources.render(&self.errors)
    }
}

/// Preprocesses and assembles the file at `path`.
pub fn assemble_file(fs: &dyn FileSource, path: &Utf8Path, options: &AssembleOptions) -> Assembly {
    assemble_preprocessed(preprocess(
        fs,
        path,
        &options.defines,
        &options.include_dirs,
    ))
}

/// Encodes instructions. The assembler always uses [`Isa`] (the crate's
/// instruction set); the seam exists so the assembler's handling of
/// instructions (operand columns, bundles, fixups, padding) is tested
/// against a small fixed encoding of its own.
pub(crate) trait Encoder: Sync {
    fn assemble(
        &self,
        mnemonic: &str,
        operands: &[isa::Operand],
    ) -> Result<isa::Encoded, isa::InstError>;
    fn check_bundle(&self, main: u32, aux: u32) -> Result<(), isa::InstError>;
}

/// The real instruction set, [`crate::isa`].
pub(crate) struct Isa;

impl Encoder for Isa {
    fn assemble(
        &self,
        mnemonic: &str,
        operands: &[isa::Operand],
    ) -> Result<isa::Encoded, isa::InstError> {
        isa::assemble(mnemonic, operands)
    }

    fn check_bundle(&self, main: u32, aux: u32) -> Result<(), isa::InstError> {
        isa::check_bundle(main, aux)
    }
}

/// Assembles already preprocessed lines (the cache preprocesses first to
/// learn the included files, then assembles without reading them again).
pub(crate) fn assemble_preprocessed(pre: Preprocessed) -> Assembly {
    assemble_with(pre, &Isa)
}

/// Like [`assemble_preprocessed`] with another instruction encoder.
pub(crate) fn assemble_with(pre: Preprocessed, encoder: &'static dyn Encoder) -> Assembly {
    let Preprocessed {
        lines,
        sources,
        errors,
    } = pre;
    let lines: Vec<Arc<source::Line>> = lines.into_iter().map(Arc::new).collect();
    let mut asm = assembler::Assembler::new(sources, encoder);
    asm.errors = errors;
    asm.run(&lines);
    let object = asm.finish();
    let mut errors = asm.errors;
    // Report in source order (files in the order they were read), as a
    // reader would meet the problems.
    let order = |path: &Utf8Path| asm.sources.files.iter().position(|f| f.path == path);
    errors.sort_by_key(|e| {
        e.location
            .as_ref()
            .map(|l| (order(&l.path), l.line, l.column))
    });
    Assembly {
        object,
        sources: asm.sources,
        errors,
    }
}

/// Why a cost formula does not parse or evaluate, at which bytes of it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FormulaError {
    pub message: String,
    pub span: std::ops::Range<usize>,
}

impl From<expr::EvalError> for FormulaError {
    fn from(error: expr::EvalError) -> Self {
        FormulaError {
            message: error.message,
            span: error.span,
        }
    }
}

impl From<lex::LexError> for FormulaError {
    fn from(error: lex::LexError) -> Self {
        FormulaError {
            message: error.message,
            span: error.span,
        }
    }
}

/// A parsed cost formula: `name = expr;` bindings, each seeing the names
/// before it, then the expression whose value is the cost. Parsing once and
/// evaluating many times is what the planner does with the kernels'
/// formulas.
#[derive(Clone, Debug)]
pub(crate) struct CostFormula {
    bindings: Vec<(String, expr::Expr)>,
    result: expr::Expr,
}

impl CostFormula {
    pub(crate) fn parse(formula: &str) -> Result<CostFormula, FormulaError> {
        parse_cost_formula(formula)
    }

    /// The formula's value with `lookup` giving each free name's value.
    pub(crate) fn eval(&self, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64, FormulaError> {
        let mut bound: Vec<(&str, i64)> = Vec::new();
        // The latest binding of a name wins; free names go to `lookup`.
        let value_of = |bound: &[(&str, i64)], name: &str| {
            bound
                .iter()
                .rev()
                .find(|(b, _)| *b == name)
                .map(|(_, v)| *v)
                .or_else(|| lookup(name))
        };
        for (name, value) in &self.bindings {
            let v = expr::eval_const(value, &|n| value_of(&bound, n))?;
            bound.push((name, v));
        }
        Ok(expr::eval_const(&self.result, &|n| value_of(&bound, n))?)
    }
}

fn parse_cost_formula(formula: &str) -> Result<CostFormula, FormulaError> {
    let tokens = lex::lex(formula)?;
    let mut statements: Vec<&[lex::Token]> = tokens.split(|t| t.is(";")).collect();
    let result = statements.pop().unwrap_or(&[]);
    let mut bindings = Vec::new();
    for statement in statements {
        let (Some(name), Some(true)) = (
            statement.first().and_then(lex::Token::ident),
            statement.get(1).map(|t| t.is("=")),
        ) else {
            let start = statement.first().map_or(0, |t| t.span.start);
            let end = statement.last().map_or(start, |t| t.span.end);
            return Err(FormulaError {
                message: "expected `name = expression;` before the last `;`".into(),
                span: start..end,
            });
        };
        let value = expr::parse_all(&statement[2..], formula.len())?;
        bindings.push((name.to_string(), value));
    }
    let result = expr::parse_all(result, formula.len())?;
    Ok(CostFormula { bindings, result })
}

/// Checks that a cost formula is an expression, optionally after
/// `name = expr;` bindings (other names are the variant's defines and the
/// run's parameters, bound when the formula is evaluated).
/// Constant parts must evaluate (`1/0` is refused here, not when the
/// planner first evaluates the formula).
pub(crate) fn check_cost_formula(formula: &str) -> Result<(), FormulaError> {
    let parsed = parse_cost_formula(formula)?;
    for expr in parsed
        .bindings
        .iter()
        .map(|(_, e)| e)
        .chain([&parsed.result])
    {
        expr::check_constant_parts(expr)?;
    }
    Ok(())
}

/// Evaluates a cost formula with `lookup` giving each free name's value.
pub(crate) fn eval_cost_formula(
    formula: &str,
    lookup: &dyn Fn(&str) -> Option<i64>,
) -> Result<i64, FormulaError> {
    parse_cost_formula(formula)?.eval(lookup)
}
