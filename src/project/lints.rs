//! Warnings about valid projects: work and declarations that contribute
//! nothing, located like errors.
//!
//! - `unused-tensor`: a declared tensor no operation or repeat reads;
//! - `unread-result`: an op or repeat whose result nobody reads (it is
//!   removed before planning, see [`crate::legalize`]);
//! - `unused-include`: an included file nothing the checked outputs depend
//!   on comes from;
//! - `checked-declared-tensor`: a `[check]` output that is an input or a
//!   weight, which the program does not compute (it is not checked).
//!
//! Warnings carry positions, so they are kept out of
//! [`ProjectResult`](super::ProjectResult), whose equality after an edit
//! that only moves text is what stops recomputation there. They are
//! computed on demand from the parsed files ([`super::project_warnings`]).

use super::index::{Definition, DefinitionKind, ProjectIndex, ReferenceSite};
use crate::diagnostic::Diagnostic;
use crate::graph::{Graph, Role};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The warnings of a valid project, in file order and then by position.
pub(super) fn warnings(index: &ProjectIndex, graph: &Graph) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    // Definitions are told apart by address: two repeats' bodies may
    // define the same name.
    let read: HashSet<*const Definition> = index
        .references
        .iter()
        .filter_map(|r| index.resolve(r))
        .map(std::ptr::from_ref)
        .collect();
    for definition in &index.definitions {
        let name = definition.name.as_str();
        let unread = !read.contains(&std::ptr::from_ref(definition));
        let at = |d: Diagnostic| d.at(&definition.file, definition.name_span.clone());
        match definition.kind {
            DefinitionKind::Tensor | DefinitionKind::BodyTensor if unread => {
                warnings.push(
                    at(Diagnostic::warning(format!("unused tensor `{name}`")))
                        .label("no op or repeat reads it")
                        .help("remove it, or use it as an op's input")
                        .code("unused-tensor"),
                );
            }
            DefinitionKind::Op | DefinitionKind::BodyOp | DefinitionKind::Repeat if unread => {
                warnings.push(
                    at(Diagnostic::warning(format!(
                        "the result of {} `{name}` is never read",
                        definition.kind.describe()
                    )))
                    .label("nothing reads this")
                    .note("it is removed before planning and costs no tiles or cycles")
                    .help("read it in another op, or list it in `[check] outputs`")
                    .code("unread-result"),
                );
            }
            _ => {}
        }
    }
    for reference in &index.references {
        if reference.site != ReferenceSite::CheckOutput {
            continue;
        }
        let role = graph
            .tensors
            .iter()
            .find(|t| t.name == reference.name)
            .map(|t| t.role);
        let what = match role {
            Some(Role::Input) => "an input",
            Some(Role::Weight) => "a weight",
            _ => continue,
        };
        warnings.push(
            Diagnostic::warning(format!(
                "`{}` is {what}, not something the program computes",
                reference.name
            ))
            .at(&reference.file, reference.span.clone())
            .label("not checked")
            .note("the device would only give back the values the host gave it")
            .help("check the output of an op that reads it instead")
            .code("checked-declared-tensor"),
        );
    }
    warnings.extend(unused_includes(index));
    let order: HashMap<&Utf8Path, usize> = index
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_path(), i))
        .collect();
    warnings.sort_by_key(|d| {
        d.location
            .as_ref()
            .map(|l| (order.get(l.file.as_path()).copied(), l.span.start))
    });
    warnings
}

/// Includes through which no definition the checked outputs depend on
/// comes into the project.
fn unused_includes(index: &ProjectIndex) -> Vec<Diagnostic> {
    let live = live_definitions(index);
    let mut warnings = Vec::new();
    for include in &index.includes {
        let files = reached_files(index, &include.target);
        let contributes = index
            .definitions
            .iter()
            .any(|d| files.contains(&d.file) && live.contains(&std::ptr::from_ref(d)));
        if contributes {
            continue;
        }
        warnings.push(
            Diagnostic::warning(format!("include `{}` contributes nothing", include.text))
                .at(&include.file, include.span.clone())
                .label("nothing the checked outputs depend on comes from this file")
                .help("remove the include, or read what it defines")
                .code("unused-include"),
        );
    }
    warnings
}

/// `target` and the files it includes, directly or not.
fn reached_files(index: &ProjectIndex, target: &Utf8Path) -> BTreeSet<Utf8PathBuf> {
    let mut reached = BTreeSet::new();
    let mut pending = vec![target.to_owned()];
    while let Some(file) = pending.pop() {
        if !reached.insert(file.clone()) {
            continue;
        }
        pending.extend(
            index
                .includes
                .iter()
                .filter(|i| i.file == file)
                .map(|i| i.target.clone()),
        );
    }
    reached
}

/// The definitions the checked outputs depend on: the outputs, and
/// everything a live op reads; a live repeat reads its input and result,
/// and a live body op its inputs.
fn live_definitions(index: &ProjectIndex) -> HashSet<*const Definition> {
    let mut reads: HashMap<*const Definition, Vec<&Definition>> = HashMap::new();
    let mut pending: Vec<&Definition> = Vec::new();
    for reference in &index.references {
        let Some(read) = index.resolve(reference) else {
            continue;
        };
        let reader = match &reference.site {
            ReferenceSite::OpInput { op } => index.definition_in(op, reference.scope.as_deref()),
            ReferenceSite::RepeatInput { repeat } | ReferenceSite::RepeatResult { repeat } => {
                index.definition_in(repeat, None)
            }
            ReferenceSite::CheckOutput => {
                pending.push(read);
                continue;
            }
        };
        if let Some(reader) = reader {
            reads
                .entry(std::ptr::from_ref(reader))
                .or_default()
                .push(read);
        }
    }
    let mut live = HashSet::new();
    while let Some(definition) = pending.pop() {
        let key = std::ptr::from_ref(definition);
        if live.insert(key) {
            pending.extend(reads.get(&key).into_iter().flatten().copied());
        }
    }
    live
}
