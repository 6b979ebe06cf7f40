//! Go to definition: a tensor name to where it is defined, an include to
//! its file, an op's kind to the kernel source its chosen plan runs, and in
//! kernel sources a symbol to its label, macro or define, an `#include` to
//! its file.

use super::position::LineIndex;
use super::session::Session;
use super::uri::uri_of;
use crate::db::Db as _;
use crate::project::index::IndexItem;
use camino::{Utf8Path, Utf8PathBuf};
use lsp_types::{GotoDefinitionResponse, Location, Position, Uri};
use std::ops::Range;

pub(crate) fn definition(
    session: &Session,
    uri: &Uri,
    position: Position,
) -> Option<GotoDefinitionResponse> {
    let (path, text) = session.document(uri)?;
    let offset = LineIndex::new(&text).offset(position);
    let (file, span) = if path.extension() == Some("toml") {
        project_definition(session, &path, offset)?
    } else {
        super::kernel::definition(session, &path, &text, offset)?
    };
    let target_text = session.text(&file).unwrap_or_default();
    let range = LineIndex::new(&target_text).range(span);
    Some(GotoDefinitionResponse::Scalar(Location::new(
        uri_of(&file),
        range,
    )))
}

fn project_definition(
    session: &Session,
    path: &Utf8Path,
    offset: usize,
) -> Option<(Utf8PathBuf, Range<usize>)> {
    let root = session.root_of(path)?;
    let index = crate::project::project_index(&session.db, session.db.file(&root));
    match index.at(path, offset)? {
        IndexItem::Reference(reference) => {
            let definition = index.resolve(reference)?;
            Some((definition.file.clone(), definition.name_span.clone()))
        }
        IndexItem::Definition(definition) => {
            Some((definition.file.clone(), definition.name_span.clone()))
        }
        IndexItem::Include(include) => Some((include.target.clone(), 0..0)),
        IndexItem::OpKind(kind) => {
            let partition = super::hover::chosen_partition(session, &root, &kind.op)?;
            let source = super::hover::kernel_source(session, &root, &partition)?;
            Some((source, 0..0))
        }
    }
}
