//! The assembler's resource limits, in one place (and listed in
//! `book/src/limits.md`).
//!
//! Kernel sources can come from anywhere, so everything that grows with
//! what a source asks for (nesting, macro expansions, repetitions, output
//! bytes, diagnostics) stops at a limit with an error at the source line
//! that asked for more. Each limit is far above what a real kernel uses.

/// Deepest `#include` nesting.
pub(super) const MAX_INCLUDE_DEPTH: usize = 64;

/// Most bytes of source one assembly may read, counting a file again each
/// time it is included.
pub(super) const MAX_SOURCE_BYTES: usize = 64 << 20;

/// Deepest `#define` macro-within-macro expansion.
pub(super) const MAX_EXPANSION_DEPTH: usize = 64;

/// Most bytes the `#define` expansion of one line (or `#if` condition)
/// may produce, counting the text of nested expansions as they are built:
/// a macro defined as two copies of the one before doubles with each
/// level, so the work stops here rather than at the host's memory.
pub(super) const MAX_EXPANDED_LINE_BYTES: usize = 1 << 20;

/// Most bytes of preprocessed text one assembly may produce.
pub(super) const MAX_PREPROCESSED_BYTES: usize = 64 << 20;

/// Deepest expression: parentheses, unary operators, `?:` and chains of
/// binary operators all count, since the parser and the evaluator recurse
/// through each of them.
pub(super) const MAX_EXPRESSION_DEPTH: usize = 256;

/// Deepest `.macro`/`.rept` nesting (and `.set` chains).
pub(super) const MAX_MACRO_DEPTH: usize = 64;

/// Most lines `.rept` and macro uses may produce in one assembly; an empty
/// `.rept` body counts as one line per repetition.
pub(super) const MAX_EXPANDED_LINES: usize = 1 << 20;

/// Longest line a `.macro` expansion may produce.
pub(super) const MAX_MACRO_LINE_BYTES: usize = 1 << 20;

/// Largest `.align` (one memory element).
pub(super) const MAX_ALIGN: i64 = 0x4000;

/// Most bytes all sections of one object may hold together: all of tile
/// memory (`.space` is limited to the same).
pub(super) const MAX_OBJECT_BYTES: u32 = 0x9C000;

/// Most diagnostics one assembly reports; beyond it the assembly stops
/// (a million-line repetition of a mistake says nothing a thousand do not).
pub(super) const MAX_ERRORS: usize = 1000;
