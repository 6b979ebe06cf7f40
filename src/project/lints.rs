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

use super::index::{DefinitionKind, ProjectIndex, ReferenceSite};
use crate::diagnostic::Diagnostic;
use crate::graph::{Graph, Role};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::{BTreeSet, HashMap, HashSet};

/// The warnings of a valid project, in file order and then by position.
pub(super) fn warnings(index: &ProjectIndex, graph: &Graph) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    let read: HashSet<&str> = index
        .references
        .iter()
        .filter(|r| r.site != ReferenceSite::CheckOutput)
        .map(|r| r.name.as_str())
        .collect();
    let checked: HashSet<&str> = index
        .references
        .iter()
        .filter(|r| r.site == ReferenceSite::CheckOutput)
        .map(|r| r.name.as_str())
        .collect();
    for definition in &index.definitions {
        let name = definition.name.as_str();
        let at = |d: Diagnostic| d.at(&definition.file, definition.name_span.clone());
        match definition.kind {
            DefinitionKind::Tensor | DefinitionKind::BodyTensor
                if !read.contains(name) && !checked.contains(name) =>
            {
                warnings.push(
                    at(Diagnostic::warning(format!("unused tensor `{name}`")))
                        .label("no op or repeat reads it")
                        .help("remove it, or use it as an op's input")
                        .code("unused-tensor"),
                );
            }
            DefinitionKind::Op | DefinitionKind::BodyOp | DefinitionKind::Repeat
                if !read.contains(name) && !checked.contains(name) =>
            {
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
    let live = live_names(index);
    let mut warnings = Vec::new();
    for include in &index.includes {
        let files = reached_files(index, &include.target);
        let contributes = index
            .definitions
            .iter()
            .any(|d| files.contains(&d.file) && live.contains(d.name.as_str()));
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

/// Names the checked outputs depend on: the outputs, and everything a live
/// op reads; a live repeat reads its input and result, and a live body op
/// its inputs.
fn live_names(index: &ProjectIndex) -> HashSet<&str> {
    let mut reads: HashMap<&str, Vec<&str>> = HashMap::new();
    for reference in &index.references {
        let reader = match &reference.site {
            ReferenceSite::OpInput { op } => op.as_str(),
            ReferenceSite::RepeatInput { repeat } | ReferenceSite::RepeatResult { repeat } => {
                repeat.as_str()
            }
            ReferenceSite::CheckOutput => continue,
        };
        reads.entry(reader).or_default().push(&reference.name);
    }
    let mut live = HashSet::new();
    let mut pending: Vec<&str> = index
        .references
        .iter()
        .filter(|r| r.site == ReferenceSite::CheckOutput)
        .map(|r| r.name.as_str())
        .collect();
    while let Some(name) = pending.pop() {
        if live.insert(name) {
            pending.extend(reads.get(name).into_iter().flatten().copied());
        }
    }
    live
}
