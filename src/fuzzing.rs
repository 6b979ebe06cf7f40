//! Fuzz targets: one function per reader of untrusted input, each taking
//! arbitrary bytes.
//!
//! A target must return for every input: no panic, no abort, no stack
//! overflow, no allocation beyond the limits of `book/src/limits.md`. Each
//! also asserts a property of what it read (every assembler error has a
//! location, a package that reads back encodes to the same package), so a
//! fuzzer finds wrong answers as well as crashes. The `fuzz/` crate runs
//! them under libFuzzer (`cargo fuzz run <target>`); `tests/fuzz.rs`
//! replays the seeds, the regressions in `tests/data/fuzz/` and a fixed
//! set of seeded mutations in every `cargo test`.

use crate::asm::{self, AssembleOptions, Object};
use crate::db::{Database, Db};
use crate::package::file::{assemble, PART_NAMES};
use crate::profile::Profile;
use crate::vfs::MemoryFs;
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;

/// A fuzz target: bytes in, nothing out but a panic when it finds one.
pub(crate) type Target = fn(&[u8]);

/// The targets by name (as `fuzz/` and `tests/data/fuzz/` name them).
pub const TARGETS: [(&str, Target); 6] = [
    ("project", fuzz_project),
    ("assembler", fuzz_assembler),
    ("package", fuzz_package),
    ("profile", fuzz_profile),
    ("store_entry", fuzz_store_entry),
    ("tensor_file", fuzz_tensor_file),
];

/// The files a project input holds, in order: the input is split at NUL
/// bytes, one piece per file (TOML text never holds a NUL).
pub(crate) const PROJECT_FILES: [&str; 4] = [
    "p/root.toml",
    "p/layers/a.toml",
    "p/b.toml",
    "p/layers/c.toml",
];

/// The files an assembler input holds, split the same way: a kernel, the
/// header the device kernels include, and two more includes.
pub(crate) const ASSEMBLER_FILES: [&str; 4] = ["k.S", "include/rows.h", "inc/a.inc", "inc/b.inc"];

/// Splits `data` at NUL bytes into the texts of `names` (missing pieces
/// are absent files, extra ones join the last).
fn files(data: &[u8], names: &[&str]) -> MemoryFs {
    let fs = MemoryFs::new();
    let mut pieces = data.splitn(names.len(), |&b| b == 0);
    for name in names {
        let Some(piece) = pieces.next() else {
            break;
        };
        fs.write(*name, &String::from_utf8_lossy(piece));
    }
    fs
}

/// The project loader and validator, with includes among four files. A
/// valid project's graph must pass the check a package's graph gets (it
/// is written back as a project and validates to itself).
pub fn fuzz_project(data: &[u8]) {
    let fs = files(data, &PROJECT_FILES);
    let db = Database::new(Arc::new(fs));
    let root = db.file(Utf8Path::new(PROJECT_FILES[0]));
    let result = crate::project::project_graph(&db, root);
    for diagnostic in &result.diagnostics {
        let _ = crate::diagnostic::render(diagnostic, &|path: &Utf8Path| {
            db.file(path)
                .contents(&db)
                .as_deref()
                .ok()
                .map(str::to_string)
        });
    }
    if let Some(graph) = &result.graph {
        if let Err(error) = crate::package::graph_check::check(graph) {
            panic!("a valid project's graph fails the package graph check: {error}");
        }
        let _ = graph.dump();
    }
}

/// The preprocessor, assembler and object format on a kernel and its
/// includes. Every error must say where it is; an object must survive
/// being written and read back.
pub fn fuzz_assembler(data: &[u8]) {
    let fs = files(data, &ASSEMBLER_FILES);
    let options = AssembleOptions {
        defines: [("K", "32"), ("CAUSAL", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        include_dirs: vec![Utf8PathBuf::from("inc")],
    };
    let assembly = asm::assemble_file(&fs, Utf8Path::new(ASSEMBLER_FILES[0]), &options);
    for error in &assembly.errors {
        assert!(
            error.location.is_some(),
            "an error without a location: {error}"
        );
    }
    let _ = assembly.render_errors();
    if let Some(object) = &assembly.object {
        let bytes = object.write();
        match Object::read(&bytes) {
            Ok(read) => assert_eq!(&read, object, "the object changed through its file"),
            Err(error) => panic!("a written object does not read back: {error}"),
        }
        let _ = object.dump();
        for section in object.sections.iter().filter(|s| s.code) {
            let _ = crate::isa::disassemble(&section.bytes, 0);
        }
    }
}

/// The package reader and validator. The input is tried as a whole file,
/// then as the eight parts of one (each a little-endian `u32` length and
/// that many bytes) in a container with correct checksums, so the fuzzer
/// reaches the parts' decoding. A package that reads back must encode to
/// bytes that read back as the same package.
pub fn fuzz_package(data: &[u8]) {
    read_package(data);
    let mut rest = data;
    let mut parts: Vec<(&str, &[u8])> = Vec::with_capacity(PART_NAMES.len());
    for name in PART_NAMES {
        let length = match rest {
            [a, b, c, d, tail @ ..] => {
                rest = tail;
                u32::from_le_bytes([*a, *b, *c, *d]) as usize
            }
            _ => 0,
        };
        let (part, tail) = rest.split_at(length.min(rest.len()));
        rest = tail;
        parts.push((name, part));
    }
    read_package(&assemble(crate::package::FORMAT_VERSION, &parts));
}

fn read_package(bytes: &[u8]) {
    let Ok(package) = crate::package::parse(bytes) else {
        return;
    };
    let _ = crate::package::inspect::render(&package);
    let encoded = match crate::package::file::encode(&package) {
        Ok(encoded) => encoded,
        Err(error) => panic!("a package that was read does not encode: {error}"),
    };
    match crate::package::parse(&encoded) {
        Ok(again) => assert_eq!(again, package, "the package changed through its file"),
        Err(error) => panic!("an encoded package does not read back: {error}"),
    }
}

/// The profile reader and its reports.
pub fn fuzz_profile(data: &[u8]) {
    let Ok(profile) = Profile::parse(&String::from_utf8_lossy(data)) else {
        return;
    };
    let _ = crate::profile::summary::summary(&profile, 10);
    let _ = crate::profile::html::report(&profile);
    let _ = crate::profile::trace::chrome_trace(&profile);
    match Profile::parse(&profile.to_json()) {
        Ok(again) => assert_eq!(again, profile, "the profile changed through its file"),
        Err(error) => panic!("a written profile does not read back: {error}"),
    }
}

/// The tensor file readers (`.safetensors` and `.npy`) and the conversion
/// of every entry they index to each dtype. An entry's bytes lie in the
/// file and, for a supported type, are exactly what its shape needs, so
/// the conversion gives one element per declared element.
pub fn fuzz_tensor_file(data: &[u8]) {
    use crate::graph::DType;
    for name in ["t.safetensors", "t.npy"] {
        let Ok(index) = crate::data::index(name, data) else {
            continue;
        };
        for entry in index.entries.values() {
            assert!(entry.bytes.end <= data.len(), "an entry beyond the file");
            for dtype in [DType::F32, DType::F16, DType::F143] {
                if let Some(converted) = crate::data::device_bytes(entry, data, dtype, -2) {
                    assert_eq!(
                        converted.bytes.len(),
                        entry.element_count() * dtype.size_bytes(),
                        "converted bytes do not fill the shape"
                    );
                }
            }
        }
    }
}

/// The result store's entry reader, for each kind of result it holds. The
/// input is read under the key its own header names (so real entries get
/// past the header) and, as a payload, inside a header that is right (so
/// the fuzzer reaches the results' decoding).
pub fn fuzz_store_entry(data: &[u8]) {
    let fuzz_key = crate::store::key(&[b"fuzz"]);
    let key = crate::store::entry_key(data).unwrap_or(fuzz_key);
    let wrapped = crate::store::entry(&fuzz_key, data);
    for (bytes, key) in [(data, key), (wrapped.as_slice(), fuzz_key)] {
        let _ = crate::store::decode::<crate::plan::OperatorPlans>(bytes, &key);
        let _ = crate::store::decode::<crate::emit::tile::TileImage>(bytes, &key);
        let _ = crate::store::decode::<crate::cli::stamp::Stamp>(bytes, &key);
    }
}
