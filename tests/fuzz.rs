//! The fuzz targets of `ipub::fuzzing` in every `cargo test`, without
//! cargo-fuzz: each target gets its seeds (`fuzz/seeds/<target>/`), every
//! input that once broke it (`tests/data/fuzz/<target>/`), and a fixed set
//! of mutations of the seeds from a seeded generator, so a run is the same
//! everywhere. Longer, coverage-guided runs are `cargo fuzz run <target>`
//! (see `fuzz/README.md`); whatever they find goes into
//! `tests/data/fuzz/<target>/`.

use camino::{Utf8Path, Utf8PathBuf};
use ipub::fuzzing::TARGETS;

/// Mutations tried per seed and target.
const MUTATIONS_PER_SEED: usize = 300;

/// Named inputs, in name order.
type Inputs = Vec<(Utf8PathBuf, Vec<u8>)>;

fn inputs(dir: &Utf8Path) -> Inputs {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Inputs = entries
        .map(|e| Utf8PathBuf::from_path_buf(e.expect("entry").path()).expect("utf-8"))
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read input");
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// splitmix64: small, seeded, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that tend to matter to the readers: delimiters, digits, NUL (the
/// fuzz inputs' file separator) and the extremes.
const INTERESTING: &[u8] = b"()[]{}\"'=,;:.#\\\n\0 09-+*/x\xff";

/// Numbers that tend to find overflows and limits.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551616",
    "1e308",
    "65535",
];

/// One to four random edits of `seed`, some of which borrow from `other`.
fn mutate(seed: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(7) {
            0 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let end = (at + 1 + rng.below(64)).min(data.len());
                data.drain(at.min(end)..end);
            }
            3 => {
                // Repeat a stretch many times: nesting, bombs, long lists.
                let end = (at + 1 + rng.below(16)).min(data.len());
                let piece = data[at.min(end)..end].to_vec();
                let times = 1 + rng.below(400);
                let copies: Vec<u8> = piece
                    .iter()
                    .copied()
                    .cycle()
                    .take(piece.len() * times)
                    .collect();
                data.splice(at..at, copies);
            }
            4 if !other.is_empty() => {
                let start = rng.below(other.len());
                let end = (start + 1 + rng.below(256)).min(other.len());
                data.splice(at..at, other[start..end].iter().copied());
            }
            5 => {
                let number = NUMBERS[rng.below(NUMBERS.len())].as_bytes();
                let end = data[at..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(data.len(), |p| at + p);
                data.splice(at..end, number.iter().copied());
            }
            _ => {
                let value = (rng.next() as u32).to_le_bytes();
                let end = (at + 4).min(data.len());
                data.splice(at..end, value);
            }
        }
    }
    data
}

/// The seeds and the regressions of `target`.
fn corpus(target: &str) -> (Inputs, Inputs) {
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    (
        inputs(&root.join("fuzz/seeds").join(target)),
        inputs(&root.join("tests/data/fuzz").join(target)),
    )
}

fn replay(name: &str) {
    let target = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .expect("a target");
    let (seeds, regressions) = corpus(name);
    assert!(!seeds.is_empty(), "no seeds for {name}");
    for (path, bytes) in seeds.iter().chain(&regressions) {
        let outcome = std::panic::catch_unwind(|| target(bytes));
        assert!(outcome.is_ok(), "{name} failed on {path}");
    }
    let mut rng = Rng(0x1505_2026 ^ name.len() as u64);
    for (index, (path, seed)) in seeds.iter().enumerate() {
        let other = &seeds[(index + 1) % seeds.len()].1;
        for round in 0..MUTATIONS_PER_SEED {
            let input = mutate(seed, other, &mut rng);
            if std::panic::catch_unwind(|| target(&input)).is_err() {
                let saved = std::env::temp_dir().join(format!("ipub-fuzz-{name}-{index}-{round}"));
                let _ = std::fs::write(&saved, &input);
                panic!(
                    "{name} failed on mutation {round} of {path}; the input is in {} (add it to tests/data/fuzz/{name}/)",
                    saved.display()
                );
            }
        }
    }
}

#[test]
fn project_loader() {
    replay("project");
}

#[test]
fn assembler() {
    replay("assembler");
}

#[test]
fn package_reader() {
    replay("package");
}

#[test]
fn profile_reader() {
    replay("profile");
}

#[test]
fn store_entry_reader() {
    replay("store_entry");
}

#[test]
fn tensor_file_readers() {
    replay("tensor_file");
}

/// Every target has a libFuzzer wrapper in `fuzz/`, so the two lists
/// cannot drift apart.
#[test]
fn every_target_has_a_libfuzzer_wrapper() {
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    for (name, _) in TARGETS {
        let wrapper = root.join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&wrapper).expect("a wrapper");
        assert!(
            text.contains(&format!("ipub::fuzzing::fuzz_{name}")),
            "{wrapper}"
        );
        assert!(manifest.contains(&format!("name = \"{name}\"")), "{name}");
    }
}
