//! Repeat bodies as scopes.
//!
//! A body's names (its carry, weights and ops) are visible only inside it,
//! so two repeats may use the same names (`h`, `ln1`, `w_fc1`). The graph,
//! and everything after it (plans, dumps, the profile, `--explain`), needs
//! one name per tensor and op, so a body name that another repeat's body
//! also uses is known there as `REPEAT.NAME` (`encoder.h`, `decoder.h`).
//! A body name no other repeat uses keeps its own name.

use super::load::LoadedFile;
use std::collections::{HashMap, HashSet};

/// The body names (carries, weights and ops) more than one repeat uses.
pub(crate) fn shared_body_names(files: &[LoadedFile]) -> HashSet<String> {
    let mut owners: HashMap<&str, &str> = HashMap::new();
    let mut shared = HashSet::new();
    for file in files {
        for repeat in &file.ast.repeat {
            let r = repeat.get_ref();
            let owner = r.name.get_ref().as_str();
            let names = std::iter::once(&r.carry)
                .chain(r.tensor.iter().map(|t| &t.get_ref().name))
                .chain(r.op.iter().map(|o| &o.get_ref().name));
            for name in names {
                let name = name.get_ref().as_str();
                match owners.get(name) {
                    Some(first) if *first != owner => {
                        shared.insert(name.to_string());
                    }
                    Some(_) => {}
                    None => {
                        owners.insert(name, owner);
                    }
                }
            }
        }
    }
    shared
}

/// The graph's name for `name` defined in the body of `repeat` (or outside
/// any body).
pub(crate) fn graph_name(repeat: Option<&str>, name: &str, shared: &HashSet<String>) -> String {
    match repeat {
        Some(repeat) if shared.contains(name) => format!("{repeat}.{name}"),
        _ => name.to_string(),
    }
}
