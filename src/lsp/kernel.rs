//! Kernel sources in the editor: assembled as the projects use them.
//!
//! A kernel source is assembled once per variant the open projects'
//! programs run from it (each with its own defines), or, when no open
//! project's program uses it, on its own with no defines, as `ipub kernel
//! compile` would.
//! Assembly goes straight through the assembler over the database's files
//! (so unsaved text is what is assembled), not through the kernel cache,
//! so half-typed sources never reach the disk.

use super::session::Session;
use crate::asm::{Assembly, Object};
use crate::db::{Db as _, DbFiles};
use crate::diagnostic::Diagnostic;
use crate::kernels::Variant;
use camino::{Utf8Path, Utf8PathBuf};
use std::fmt::Write as _;

/// The variants of `roots`' programs built from `path` (as their source
/// or one of its includes), each assembled; or `path` alone.
pub(super) fn assemblies(
    session: &Session,
    roots: &[Utf8PathBuf],
    path: &Utf8Path,
) -> Vec<(Variant, Assembly)> {
    let db = &session.db;
    let mut variants: Vec<Variant> = Vec::new();
    for root in roots {
        let file = db.file(root);
        let Ok(program) = crate::pipeline::program(db, file).clone() else {
            continue;
        };
        let kernel_dir = crate::pipeline::tiles::kernel_dir(db, file).clone();
        for run in program.kernel_runs() {
            let Some(variant) = crate::pipeline::kernels::variant_of(run.kernel, &kernel_dir)
            else {
                continue;
            };
            if !variants
                .iter()
                .any(|v| v.source == variant.source && v.defines == variant.defines)
            {
                variants.push(variant);
            }
        }
    }
    let header = !matches!(path.extension(), Some("S" | "s"));
    let mut found: Vec<(Variant, Assembly)> = variants
        .into_iter()
        .filter(|v| header || v.source == path)
        .map(|v| {
            let assembly = assemble(session, &v);
            (v, assembly)
        })
        .filter(|(_, a)| a.sources.files.iter().any(|f| f.path == path))
        .collect();
    if found.is_empty() && !header {
        let name = path.file_stem().unwrap_or("kernel");
        let variant = Variant::new(name, path);
        let assembly = assemble(session, &variant);
        found.push((variant, assembly));
    }
    found
}

fn assemble(session: &Session, variant: &Variant) -> Assembly {
    crate::asm::assemble_file(
        &DbFiles(&session.db),
        &variant.source,
        &crate::kernels::options(variant),
    )
}

/// The assembler's errors for `path` across its variants, each once.
pub(super) fn diagnostics(
    session: &Session,
    roots: &[Utf8PathBuf],
    path: &Utf8Path,
) -> Vec<Diagnostic> {
    let mut found: Vec<Diagnostic> = Vec::new();
    for (_, assembly) in assemblies(session, roots, path) {
        for error in &assembly.errors {
            let diagnostic = error.to_diagnostic();
            let here = diagnostic.location.as_ref().is_none_or(|l| l.file == path);
            if here && !found.contains(&diagnostic) {
                found.push(diagnostic);
            }
        }
    }
    found
}

/// The identifier around byte `offset` of `text`, with its span.
pub(super) fn word_at(text: &str, offset: usize) -> Option<(&str, std::ops::Range<usize>)> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$');
    let offset = offset.min(text.len());
    if !text.is_char_boundary(offset) {
        return None;
    }
    let start = text[..offset]
        .rfind(|c: char| !is_word(c))
        .map_or(0, |i| i + 1);
    let end = text[offset..]
        .find(|c: char| !is_word(c))
        .map_or(text.len(), |i| offset + i);
    (start < end).then(|| (&text[start..end], start..end))
}

/// Hover text for the symbol at `offset` of a kernel source: an entry
/// point's parameters and cost, or where a label is.
pub(super) fn hover(
    session: &Session,
    path: &Utf8Path,
    text: &str,
    offset: usize,
) -> Option<String> {
    let (word, _) = word_at(text, offset)?;
    let roots = session.open_roots_of(path);
    let mut assemblies = assemblies(session, &roots, path);
    let mut note = "";
    if assemblies.iter().all(|(_, a)| a.object.is_none()) {
        // Half-typed text does not assemble; the saved file usually does.
        assemblies = assemblies
            .into_iter()
            .map(|(variant, _)| {
                let saved = crate::asm::assemble_file(
                    &crate::vfs::OsFs,
                    &variant.source,
                    &crate::kernels::options(&variant),
                );
                (variant, saved)
            })
            .collect();
        note = "\n\n(from the saved file: the text being edited does not assemble)";
    }
    let object = assemblies.iter().find_map(|(_, a)| a.object.as_ref())?;
    if let Some(function) = object.functions.iter().find(|f| f.symbol == word) {
        let mut out = format!("**kernel entry** `{word}`\n\n");
        if function.params.is_empty() {
            out.push_str("no parameters\n");
        } else {
            out.push_str("| parameter | offset | kind |\n|---|---|---|\n");
            let mut params = function.params.clone();
            params.sort_by_key(|p| p.offset);
            for param in &params {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} |",
                    param.name,
                    param.offset,
                    param.kind.name()
                );
            }
        }
        match &function.cost {
            Some(formula) => {
                let _ = writeln!(out, "\ncost: `{}` cycles", formula.trim());
                let costs = variant_costs(&assemblies, word, formula);
                if !costs.is_empty() {
                    out.push_str("\nin the projects' variants:\n");
                    out.push_str(&costs);
                }
            }
            None => out.push_str("\nno `.ipub_cost`\n"),
        }
        out.push_str(note);
        return Some(out);
    }
    let symbol = object.symbols.iter().find(|s| s.name == word)?;
    Some(describe_symbol(object, symbol) + note)
}

/// Each variant's cost where its defines alone determine it.
fn variant_costs(assemblies: &[(Variant, Assembly)], entry: &str, formula: &str) -> String {
    let mut out = String::new();
    for (variant, assembly) in assemblies {
        let exports = variant.entry.as_deref().is_none_or(|e| e == entry);
        if !exports || assembly.object.is_none() || variant.defines.is_empty() {
            continue;
        }
        let defines = variant
            .defines
            .iter()
            .filter_map(|(k, v)| crate::asm::lex::parse_int(v.trim()).map(|n| (k.clone(), n)))
            .collect();
        let cost = match crate::kernels::eval_cost(formula, &defines) {
            Ok(cycles) => format!("{cycles} cycles"),
            Err(_) => "depends on the run's parameters".to_string(),
        };
        let _ = writeln!(out, "- `{}`: {cost}", variant.name);
    }
    out
}

fn describe_symbol(object: &Object, symbol: &crate::asm::Symbol) -> String {
    match symbol.section.and_then(|s| object.sections.get(s as usize)) {
        Some(section) => format!(
            "**label** `{}` in `{}` at offset {:#x}{}{}",
            symbol.name,
            section.name,
            symbol.value,
            if symbol.size > 0 {
                format!(", {} bytes", symbol.size)
            } else {
                String::new()
            },
            if symbol.global { ", global" } else { "" }
        ),
        None => format!("**symbol** `{}` = {}", symbol.name, symbol.value),
    }
}

/// Where the symbol at `offset` is defined (a label, `.set`/`.equ`, a
/// `.macro` or a `#define`), or the file an `#include` on that line reads.
pub(crate) fn definition(
    session: &Session,
    path: &Utf8Path,
    text: &str,
    offset: usize,
) -> Option<(Utf8PathBuf, std::ops::Range<usize>)> {
    let roots = session.open_roots_of(path);
    let assemblies = assemblies(session, &roots, path);
    let (_, assembly) = assemblies.first()?;
    let sources = &assembly.sources.files;
    let line = text[..offset.min(text.len())].matches('\n').count() as u32 + 1;
    let line_text = text.lines().nth(line as usize - 1).unwrap_or("");
    if line_text.trim_start().starts_with("#include") {
        let included = sources.iter().find(|f| {
            f.included_from.is_some_and(|at| {
                at.line == line
                    && sources
                        .get(at.file as usize)
                        .is_some_and(|s| s.path == path)
            })
        })?;
        return Some((included.path.clone(), 0..0));
    }
    let (word, _) = word_at(text, offset)?;
    for file in sources {
        let mut start = 0;
        for line in file.text.split_inclusive('\n') {
            if let Some(span) = defines(line, word) {
                return Some((file.path.clone(), start + span.start..start + span.end));
            }
            start += line.len();
        }
    }
    None
}

/// Where `line` defines `name`, if it does.
fn defines(line: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    if trimmed
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with(':'))
    {
        return Some(indent..indent + name.len());
    }
    for directive in [".macro", "#define", ".set", ".equ"] {
        if let Some(rest) = trimmed.strip_prefix(directive) {
            let after = rest.trim_start();
            let at = indent + directive.len() + (rest.len() - after.len());
            let ends = after[name.len().min(after.len())..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            if after.starts_with(name) && ends {
                return Some(at..at + name.len());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_definitions_are_found_on_lines() {
        let text = "  ld32 $m0, $m1, loop_start\n";
        let at = text.find("start").unwrap();
        assert_eq!(word_at(text, at).map(|w| w.0), Some("loop_start"));
        assert_eq!(word_at(text, 0), None);
        assert_eq!(defines("loop_start:\n", "loop_start"), Some(0..10));
        assert_eq!(defines("    .macro BODY n\n", "BODY"), Some(11..15));
        assert_eq!(defines("#define ROWS 4\n", "ROWS"), Some(8..12));
        assert_eq!(defines("#define ROWS2 4\n", "ROWS"), None);
        assert_eq!(defines("  call loop_start\n", "loop_start"), None);
    }
}
