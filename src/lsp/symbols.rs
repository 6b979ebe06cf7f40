//! Document symbols: a project file's tensors, ops and repeats (with their
//! bodies nested), a kernel source's labels, macros and defines.

use super::position::LineIndex;
use super::session::Session;
use crate::db::Db as _;
use crate::project::index::{Definition, DefinitionKind};
use lsp_types::{DocumentSymbol, DocumentSymbolResponse, SymbolKind, Uri};

pub(crate) fn document_symbols(session: &Session, uri: &Uri) -> Option<DocumentSymbolResponse> {
    let (path, text) = session.document(uri)?;
    let lines = LineIndex::new(&text);
    let symbols = if path.extension() == Some("toml") {
        let root = session.root_of(&path).unwrap_or_else(|| path.clone());
        let index = crate::project::project_index(&session.db, session.db.file(&root));
        let here: Vec<&Definition> = index
            .definitions
            .iter()
            .filter(|d| d.file == path)
            .collect();
        here.iter()
            .filter(|d| d.repeat.is_none())
            .map(|d| {
                let children: Vec<DocumentSymbol> = here
                    .iter()
                    .filter(|c| c.repeat.as_deref() == Some(d.name.as_str()))
                    .map(|c| symbol(c, &lines, None))
                    .collect();
                symbol(d, &lines, (!children.is_empty()).then_some(children))
            })
            .collect()
    } else {
        kernel_symbols(&text, &lines)
    };
    Some(DocumentSymbolResponse::Nested(symbols))
}

#[allow(deprecated)] // `deprecated` is a required field of the struct.
fn symbol(
    d: &Definition,
    lines: &LineIndex,
    children: Option<Vec<DocumentSymbol>>,
) -> DocumentSymbol {
    let kind = match d.kind {
        DefinitionKind::Tensor | DefinitionKind::BodyTensor => SymbolKind::VARIABLE,
        DefinitionKind::Carry => SymbolKind::TYPE_PARAMETER,
        DefinitionKind::Op | DefinitionKind::BodyOp => SymbolKind::FUNCTION,
        DefinitionKind::Repeat => SymbolKind::NAMESPACE,
    };
    let item = d.item_span.start.min(d.name_span.start)..d.item_span.end.max(d.name_span.end);
    DocumentSymbol {
        name: d.name.clone(),
        detail: Some(d.kind.describe().to_string()),
        kind,
        tags: None,
        deprecated: None,
        range: lines.range(item),
        selection_range: lines.range(d.name_span.clone()),
        children,
    }
}

/// Labels, `.macro`s and `#define`s, in source order.
#[allow(deprecated)] // `deprecated` is a required field of the struct.
fn kernel_symbols(text: &str, lines: &LineIndex) -> Vec<DocumentSymbol> {
    let mut symbols = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let ident_len = |s: &str| {
            s.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$')))
                .unwrap_or(s.len())
        };
        let found = if let Some(rest) = trimmed
            .strip_prefix(".macro")
            .or_else(|| trimmed.strip_prefix("#define"))
        {
            let name = rest.trim_start();
            let at = indent + (trimmed.len() - name.len());
            let kind = if trimmed.starts_with('#') {
                SymbolKind::CONSTANT
            } else {
                SymbolKind::FUNCTION
            };
            Some((at, ident_len(name), kind))
        } else {
            let len = ident_len(trimmed);
            (len > 0 && trimmed[len..].starts_with(':')).then_some((
                indent,
                len,
                SymbolKind::FUNCTION,
            ))
        };
        if let Some((at, len, kind)) = found.filter(|(_, len, _)| *len > 0) {
            let span = start + at..start + at + len;
            symbols.push(DocumentSymbol {
                name: text[span.clone()].to_string(),
                detail: None,
                kind,
                tags: None,
                deprecated: None,
                range: lines.range(start..start + line.trim_end().len()),
                selection_range: lines.range(span),
                children: None,
            });
        }
        start += line.len();
    }
    symbols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_sources_list_labels_macros_and_defines() {
        let text = "#define ROWS 4\n  .macro BODY n\n  .endm\ngemm_amp:\n  nop\n.Lloop: br $m0\n";
        let names: Vec<String> = kernel_symbols(text, &LineIndex::new(text))
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["ROWS", "BODY", "gemm_amp", ".Lloop"]);
    }
}
