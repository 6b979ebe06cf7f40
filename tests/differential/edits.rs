//! Seeded random edits of a copy of a shipped project and the kernel
//! sources: comments, inits, shapes, dtypes, scales, tile counts, repeat
//! counts, check settings, kernel code and kernel comments, include edits,
//! reverts to an earlier state, and saves that change nothing.
//!
//! Edits work on the text, line by line, as a user would; most keep the
//! project valid, some do not (a shape changed in one place only), and a
//! broken state is as much a test as a valid one: incremental and clean
//! builds must then report the same errors.

use crate::rng::Rng;
use std::collections::BTreeMap;

/// A tree of files by path (relative to the tree's root).
pub type Tree = BTreeMap<String, String>;

/// One edit: what it did, and the paths it wrote or removed (a save that
/// changes nothing is listed too).
#[derive(Clone, Debug)]
pub struct Edit {
    pub description: String,
    pub paths: Vec<String>,
}

/// Makes edits of one project's tree.
pub struct Editor {
    rng: Rng,
    root: String,
    history: Vec<Tree>,
    /// Whether each state of `history` built (as [`Editor::built`] said).
    good: Vec<bool>,
    counter: usize,
    /// Whether an include edit may put its file in a directory that does
    /// not exist yet.
    new_directories: bool,
}

const KINDS: &[(&str, u32)] = &[
    ("comment", 9),
    ("init", 7),
    ("shape", 12),
    ("dtype", 7),
    ("scale", 8),
    ("tiles", 7),
    ("repeat count", 5),
    ("check", 9),
    ("kernel code", 7),
    ("kernel comment", 6),
    ("include", 7),
    ("revert", 7),
    ("touch", 6),
];

impl Editor {
    pub fn new(seed: u64, root: &str, start: &Tree, new_directories: bool) -> Editor {
        Editor {
            rng: Rng::new(seed),
            root: root.to_string(),
            history: vec![start.clone()],
            good: vec![true],
            counter: 0,
            new_directories,
        }
    }

    /// Says whether the state after the last edit built; a broken state
    /// is usually fixed next, as a user would.
    pub fn built(&mut self, ok: bool) {
        if let Some(last) = self.good.last_mut() {
            *last = ok;
        }
    }

    /// Applies one random edit to `tree`.
    pub fn next(&mut self, tree: &mut Tree) -> Edit {
        self.counter += 1;
        let weights: Vec<u32> = KINDS.iter().map(|(_, w)| *w).collect();
        let broken = !self.good.last().copied().unwrap_or(true);
        let kind = if broken && self.rng.chance(0.7) {
            "fix"
        } else {
            KINDS[self.rng.weighted(&weights)].0
        };
        let edit = self
            .edit(kind, tree)
            .unwrap_or_else(|| self.comment(tree).expect("a project file to comment"));
        self.history.push(tree.clone());
        self.good.push(true);
        edit
    }

    fn edit(&mut self, kind: &str, tree: &mut Tree) -> Option<Edit> {
        match kind {
            "comment" => self.comment(tree),
            "init" => self.init(tree),
            "shape" => self.shape(tree),
            "dtype" => self.dtype(tree),
            "scale" => self.scale(tree),
            "tiles" => self.replace_value(tree, "tiles", &|rng, old| {
                let tiles: i64 = old.parse().unwrap_or(16);
                let new = match rng.weighted(&[50, 30, 20]) {
                    0 => (tiles + rng.range(-8, 8)).clamp(1, 96),
                    1 => rng.range(1, 16),
                    _ => rng.range(1, 96),
                };
                new.to_string()
            }),
            "repeat count" => {
                self.replace_value(tree, "count", &|rng, _| rng.range(1, 4).to_string())
            }
            "check" => self.check(tree),
            "kernel code" => self.kernel_code(tree),
            "kernel comment" => self.kernel_comment(tree),
            "include" => self.include(tree),
            "revert" => self.revert(tree, false),
            "fix" => self.revert(tree, true),
            _ => self.touch(tree),
        }
    }

    /// The project's TOML files: the root and what it includes.
    pub fn project_files(&self, tree: &Tree) -> Vec<String> {
        let mut files = vec![self.root.clone()];
        let mut i = 0;
        while i < files.len() {
            if let Some(text) = tree.get(&files[i]) {
                for include in includes(text) {
                    let path = resolve(&files[i], &include);
                    if !files.contains(&path) && tree.contains_key(&path) {
                        files.push(path);
                    }
                }
            }
            i += 1;
        }
        files
    }

    fn kernel_files(tree: &Tree) -> Vec<String> {
        tree.keys()
            .filter(|p| p.starts_with("device/"))
            .cloned()
            .collect()
    }

    /// A line of a project file for which `pick` holds.
    fn pick_line(&mut self, tree: &Tree, pick: &dyn Fn(&str) -> bool) -> Option<(String, usize)> {
        let mut found = Vec::new();
        for path in self.project_files(tree) {
            for (i, line) in tree[&path].lines().enumerate() {
                if pick(line) {
                    found.push((path.clone(), i));
                }
            }
        }
        (!found.is_empty()).then(|| found[self.rng.below(found.len())].clone())
    }

    fn comment(&mut self, tree: &mut Tree) -> Option<Edit> {
        let files = self.project_files(tree);
        let path = self.rng.pick(&files).clone();
        let mut lines = lines_of(&tree[&path]);
        let at = self.rng.below(lines.len() + 1);
        lines.insert(at, format!("# note {}", self.counter));
        set(tree, &path, &lines);
        Some(edit(format!("comment at {path}:{}", at + 1), &path))
    }

    fn init(&mut self, tree: &mut Tree) -> Option<Edit> {
        let (path, i) = self.pick_line(tree, &|l| l.starts_with("init = {"))?;
        let new = match self.rng.weighted(&[40, 30, 15, 15]) {
            0 => format!(
                "init = {{ dist = \"normal\", std = {:?} }}",
                self.rng.pick(&[0.02, 0.05, 0.1, 0.5, 1.0])
            ),
            1 => format!(
                "init = {{ dist = \"uniform\", scale = {:?} }}",
                self.rng.pick(&[0.1, 0.5, 1.0, 2.0])
            ),
            2 => "init = { dist = \"zeros\" }".to_string(),
            _ => "init = { dist = \"ones\" }".to_string(),
        };
        Some(self.replace_line(tree, &path, i, new))
    }

    /// A dimension changed everywhere it appears in a `shape` (most of the
    /// time) or in one place only.
    fn shape(&mut self, tree: &mut Tree) -> Option<Edit> {
        let (path, i) = self.pick_line(tree, &|l| l.starts_with("shape = ["))?;
        let dims = numbers(tree[&path].lines().nth(i).expect("line"));
        let dims: Vec<i64> = dims.into_iter().filter(|&d| d > 0).collect();
        if dims.is_empty() {
            return None;
        }
        let old = *self.rng.pick(&dims);
        let mut new = old;
        while new == old {
            new = *self
                .rng
                .pick(&[1, 3, 7, 8, 16, 17, 24, 32, 48, 64, 96, 100, 128]);
        }
        if self.rng.chance(0.2) {
            let line = tree[&path].lines().nth(i).expect("line").to_string();
            let edited = replace_number(&line, old, new);
            let mut e = self.replace_line(tree, &path, i, edited);
            e.description = format!("shape {old} -> {new} at {path}:{} only", i + 1);
            return Some(e);
        }
        let mut paths = Vec::new();
        for file in self.project_files(tree) {
            let lines: Vec<String> = tree[&file]
                .lines()
                .map(|l| {
                    if l.starts_with("shape = [") {
                        replace_number(l, old, new)
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            if lines != lines_of(&tree[&file]) {
                set(tree, &file, &lines);
                paths.push(file);
            }
        }
        Some(Edit {
            description: format!("shape {old} -> {new} everywhere"),
            paths,
        })
    }

    fn dtype(&mut self, tree: &mut Tree) -> Option<Edit> {
        if self.rng.chance(0.5) {
            return self.fp8_format(tree);
        }
        let (path, i) = self.pick_line(tree, &|l| l.starts_with("dtype = \""))?;
        let new = *self.rng.pick(&["f16", "f143", "f152", "f32"]);
        let mut lines = lines_of(&tree[&path]);
        lines[i] = format!("dtype = \"{new}\"");
        // An integer `scale` in the same block belongs to FP8 only.
        if !matches!(new, "f143" | "f152") {
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].starts_with('['))
                .unwrap_or(lines.len());
            let start = (0..i)
                .rev()
                .find(|&j| lines[j].starts_with('['))
                .unwrap_or(0);
            if let Some(j) =
                (start..end).find(|&j| lines[j].starts_with("scale = ") && !lines[j].contains('.'))
            {
                lines.remove(j);
            }
        }
        set(tree, &path, &lines);
        Some(edit(format!("dtype {new} at {path}:{}", i + 1), &path))
    }

    /// Every F143 tensor and operation made F152, or the other way round.
    fn fp8_format(&mut self, tree: &mut Tree) -> Option<Edit> {
        let (from, to) = if self.rng.chance(0.5) {
            ("\"f143\"", "\"f152\"")
        } else {
            ("\"f152\"", "\"f143\"")
        };
        let mut paths = Vec::new();
        for file in self.project_files(tree) {
            let before = tree[&file].clone();
            let after = before.replace(&format!("dtype = {from}"), &format!("dtype = {to}"));
            if after != before {
                tree.insert(file.clone(), after);
                paths.push(file);
            }
        }
        (!paths.is_empty()).then(|| Edit {
            description: format!("every {from} made {to}"),
            paths,
        })
    }

    /// An FP8 scale moved, or a softmax multiplier changed (zeros of both
    /// signs included).
    fn scale(&mut self, tree: &mut Tree) -> Option<Edit> {
        let (path, i) = self.pick_line(tree, &|l| l.starts_with("scale = "))?;
        let line = tree[&path].lines().nth(i).expect("line").to_string();
        let value = line.trim_start_matches("scale = ").trim();
        let new = if value.contains('.') {
            self.rng
                .pick(&["0.125", "0.0625", "0.5", "1.0", "0.0", "-0.0", "2.0"])
                .to_string()
        } else {
            let old: i64 = value.parse().unwrap_or(0);
            let mut delta = 0;
            while delta == 0 {
                delta = self.rng.range(-2, 2);
            }
            (old + delta).clamp(-32, 31).to_string()
        };
        Some(self.replace_line(tree, &path, i, format!("scale = {new}")))
    }

    fn check(&mut self, tree: &mut Tree) -> Option<Edit> {
        match self.rng.below(4) {
            0 => self.replace_value(tree, "min_cosine_similarity", &|rng, _| {
                rng.pick(&["0.99", "0.995", "0.5", "0.0", "-0.0", "1.0"])
                    .to_string()
            }),
            1 => self.replace_value(tree, "max_abs_error", &|rng, _| {
                rng.pick(&["0.05", "0.5", "0.1", "0.0", "-0.0", "0.001"])
                    .to_string()
            }),
            2 => self.replace_value(tree, "reference_precision", &|_, old| {
                if old.contains("device") {
                    "\"f32\"".to_string()
                } else {
                    "\"device\"".to_string()
                }
            }),
            _ => self.outputs(tree),
        }
    }

    /// Adds a computed tensor to the checked outputs, or drops one.
    fn outputs(&mut self, tree: &mut Tree) -> Option<Edit> {
        let (path, i) = self.pick_line(tree, &|l| l.starts_with("outputs = ["))?;
        let line = tree[&path].lines().nth(i).expect("line").to_string();
        let mut outputs: Vec<String> = line
            .trim_start_matches("outputs = [")
            .trim_end_matches(']')
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if outputs.len() > 1 && self.rng.chance(0.5) {
            outputs.remove(self.rng.below(outputs.len()));
        } else {
            // Names of operations outside repeat bodies.
            let mut names = Vec::new();
            for file in self.project_files(tree) {
                let mut outer = false;
                for l in tree[&file].lines() {
                    if l.starts_with('[') {
                        outer = l == "[[op]]" || l == "[[repeat]]";
                    } else if outer && l.starts_with("name = ") {
                        names.push(l.trim_start_matches("name = ").to_string());
                    }
                }
            }
            names.retain(|n| !outputs.contains(n));
            if names.is_empty() {
                return None;
            }
            outputs.push(self.rng.pick(&names).clone());
        }
        Some(self.replace_line(
            tree,
            &path,
            i,
            format!("outputs = [{}]", outputs.join(", ")),
        ))
    }

    /// Replaces the value of `key = ...` on a line of its own.
    fn replace_value(
        &mut self,
        tree: &mut Tree,
        key: &str,
        new: &dyn Fn(&mut Rng, &str) -> String,
    ) -> Option<Edit> {
        let prefix = format!("{key} = ");
        let (path, i) = self.pick_line(tree, &|l| l.starts_with(&prefix))?;
        let line = tree[&path].lines().nth(i).expect("line").to_string();
        let value = new(&mut self.rng, &line[prefix.len()..]);
        Some(self.replace_line(tree, &path, i, format!("{prefix}{value}")))
    }

    fn replace_line(&mut self, tree: &mut Tree, path: &str, i: usize, new: String) -> Edit {
        let mut lines = lines_of(&tree[path]);
        let description = format!("{path}:{}: {} -> {new}", i + 1, lines[i]);
        lines[i] = new;
        set(tree, path, &lines);
        edit(description, path)
    }

    /// An instruction line of a kernel duplicated: new code, new size.
    fn kernel_code(&mut self, tree: &mut Tree) -> Option<Edit> {
        let files: Vec<String> = Self::kernel_files(tree)
            .into_iter()
            .filter(|p| p.ends_with(".S"))
            .collect();
        let path = self.rng.pick(&files).clone();
        let mut lines = lines_of(&tree[&path]);
        let instructions: Vec<usize> = (0..lines.len())
            .filter(|&i| {
                let l = lines[i].trim_start();
                lines[i].starts_with(char::is_whitespace)
                    && l.starts_with(|c: char| c.is_ascii_lowercase())
                    && !l.contains(':')
                    && !l.contains("//")
            })
            .collect();
        if instructions.is_empty() {
            return None;
        }
        let i = *self.rng.pick(&instructions);
        let line = lines[i].clone();
        lines.insert(i, line.clone());
        set(tree, &path, &lines);
        Some(edit(
            format!("kernel code: {path}:{} `{}` duplicated", i + 1, line.trim()),
            &path,
        ))
    }

    fn kernel_comment(&mut self, tree: &mut Tree) -> Option<Edit> {
        let files = Self::kernel_files(tree);
        let path = self.rng.pick(&files).clone();
        let mut lines = lines_of(&tree[&path]);
        let at = self.rng.below(lines.len() + 1);
        lines.insert(at, format!("// note {}", self.counter));
        set(tree, &path, &lines);
        Some(edit(format!("kernel comment at {path}:{}", at + 1), &path))
    }

    /// Moves a tensor declaration of the root into a new included file, or
    /// folds an included file made that way back into the root.
    fn include(&mut self, tree: &mut Tree) -> Option<Edit> {
        let root_text = tree[&self.root].clone();
        let made: Vec<String> = includes(&root_text)
            .into_iter()
            .filter(|i| i.contains("extra-"))
            .collect();
        if !made.is_empty() && self.rng.chance(0.5) {
            let include = self.rng.pick(&made).clone();
            let path = resolve(&self.root, &include);
            let moved = tree.remove(&path).unwrap_or_default();
            let mut lines = lines_of(&set_includes(&root_text, &include, false));
            lines.push(String::new());
            lines.extend(lines_of(&moved));
            set(tree, &self.root, &lines);
            return Some(Edit {
                description: format!("include {include} folded back into the root"),
                paths: vec![self.root.clone(), path],
            });
        }
        let lines = lines_of(&root_text);
        let starts: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i] == "[[tensor]]")
            .collect();
        if starts.is_empty() {
            return None;
        }
        let start = *self.rng.pick(&starts);
        let end = (start + 1..lines.len())
            .find(|&j| lines[j].starts_with('['))
            .unwrap_or(lines.len());
        let block: Vec<String> = lines[start..end].to_vec();
        let mut rest: Vec<String> = lines[..start].to_vec();
        rest.extend_from_slice(&lines[end..]);
        let dir = if self.new_directories && self.rng.chance(0.5) {
            format!("more{}/", self.counter)
        } else {
            String::new()
        };
        let include = format!("{dir}extra-{}.toml", self.counter);
        let path = resolve(&self.root, &include);
        tree.insert(path.clone(), block.join("\n") + "\n");
        let root = set_includes(&(rest.join("\n") + "\n"), &include, true);
        tree.insert(self.root.clone(), root);
        Some(Edit {
            description: format!("tensor block moved into a new include {include}"),
            paths: vec![path, self.root.clone()],
        })
    }

    /// Back to an earlier state (with `good`, one that built).
    fn revert(&mut self, tree: &mut Tree, good: bool) -> Option<Edit> {
        let states: Vec<usize> = (0..self.history.len())
            .filter(|&i| !good || self.good[i])
            .collect();
        let back = *self.rng.pick(&states);
        let earlier = self.history[back].clone();
        let mut paths: Vec<String> = tree
            .keys()
            .chain(earlier.keys())
            .filter(|p| tree.get(*p) != earlier.get(*p))
            .cloned()
            .collect();
        paths.sort();
        paths.dedup();
        *tree = earlier;
        Some(Edit {
            description: format!(
                "{} to the state after edit {back}",
                if good { "fixed: back" } else { "revert" }
            ),
            paths,
        })
    }

    fn touch(&mut self, tree: &mut Tree) -> Option<Edit> {
        let mut files = self.project_files(tree);
        files.extend(Self::kernel_files(tree));
        let path = self.rng.pick(&files).clone();
        Some(edit(format!("save without change of {path}"), &path))
    }
}

fn edit(description: String, path: &str) -> Edit {
    Edit {
        description,
        paths: vec![path.to_string()],
    }
}

fn lines_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fn set(tree: &mut Tree, path: &str, lines: &[String]) {
    tree.insert(path.to_string(), lines.join("\n") + "\n");
}

/// The paths of a file's `include = [...]` line.
fn includes(text: &str) -> Vec<String> {
    text.lines()
        .find(|l| l.starts_with("include = ["))
        .map(|l| {
            l.trim_start_matches("include = [")
                .trim_end_matches(']')
                .split(',')
                .map(|s| s.trim().trim_matches('"').to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// `text` with `include` added to (or removed from) its include list.
fn set_includes(text: &str, include: &str, add: bool) -> String {
    let mut list = includes(text);
    if add {
        list.push(include.to_string());
    } else {
        list.retain(|i| i != include);
    }
    let quoted: Vec<String> = list.iter().map(|i| format!("\"{i}\"")).collect();
    let line = format!("include = [{}]", quoted.join(", "));
    let mut lines = lines_of(text);
    match lines.iter().position(|l| l.starts_with("include = [")) {
        Some(i) if list.is_empty() => {
            lines.remove(i);
        }
        Some(i) => lines[i] = line,
        // Before any table, as the format requires.
        None => lines.insert(0, line),
    }
    lines.join("\n") + "\n"
}

/// `include` relative to the directory of `from`, normalised.
pub fn resolve(from: &str, include: &str) -> String {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in include.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

fn numbers(line: &str) -> Vec<i64> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// `line` with every whole-number token `old` replaced by `new`.
fn replace_number(line: &str, old: i64, new: i64) -> String {
    let mut out = String::new();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        if token.parse::<i64>() == Ok(old) && !token.starts_with('-') {
            out.push_str(&new.to_string());
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in line.chars() {
        if c.is_ascii_digit() || (c == '-' && token.is_empty()) {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

/// The differences between two trees, as short unified-style excerpts.
pub fn diff(before: &Tree, after: &Tree) -> String {
    let mut out = String::new();
    for path in before.keys().chain(after.keys()) {
        let (a, b) = (before.get(path), after.get(path));
        if a == b || out.contains(&format!("--- {path}\n")) {
            continue;
        }
        out.push_str(&format!("--- {path}\n"));
        let a: Vec<&str> = a.map(|t| t.lines().collect()).unwrap_or_default();
        let b: Vec<&str> = b.map(|t| t.lines().collect()).unwrap_or_default();
        for line in &a {
            if !b.contains(line) {
                out.push_str(&format!("-{line}\n"));
            }
        }
        for line in &b {
            if !a.contains(line) {
                out.push_str(&format!("+{line}\n"));
            }
        }
    }
    out
}
