use super::cache::{cache_key, CachedKernel, KernelCache};
use super::*;
use crate::target::IPU21;
use crate::vfs::MemoryFs;
use expect_test::expect;

const KERNEL: &str = r#"#include "common.inc"
    .text
    .globl gemm
    .type gemm, @function
    .ipub_param out, 0, ptr
    .ipub_param rows, 4, u32
    .ipub_param scale, 8, f16
    .ipub_cost "K * C * R / 128 + 40"
gemm:
    .size gemm, . - gemm
    .data
blocks: .word K / BLOCK
"#;

fn fs() -> MemoryFs {
    let fs = MemoryFs::new();
    fs.write("device/gemm.S", KERNEL);
    fs.write(
        "device/common.inc",
        "#define BLOCK 8\n#define OVERHEAD 40\n",
    );
    fs.write(
        "device/cast.S",
        ".text\n.globl cast\ncast:\n.data\n.word 7\n",
    );
    fs
}

fn gemm(k: i64) -> Variant {
    Variant::new(format!("gemm_f8_interleaved_k{k}_c16_r2"), "device/gemm.S")
        .define("K", k)
        .define("C", 16)
        .define("R", 2)
}

fn key(fs: &MemoryFs, variant: &Variant) -> String {
    let pre = crate::asm::preprocess(fs, &variant.source, &variant.defines, &variant.include_dirs);
    assert!(pre.errors.is_empty(), "{:?}", pre.errors);
    cache_key(&pre.files_read(), variant, &IPU21)
}

#[test]
fn metadata_has_entries_conventions_costs_and_sections() {
    let (_dir, _root, cache) = temporary_cache();
    let kernel = cache
        .get_or_build(&fs(), &gemm(32), &IPU21)
        .expect("builds");
    assert!(kernel.built);
    assert_eq!(kernel.metadata.name, "gemm_f8_interleaved_k32_c16_r2");
    let mut metadata = kernel.metadata.clone();
    metadata.key = "<key>".into();
    metadata.object_hash = "<hash>".into();
    metadata.assembler = "<identity>".into();
    metadata.checksum = "<checksum>".into();
    expect![[r#"
        {
          "format": 2,
          "key": "<key>",
          "name": "gemm_f8_interleaved_k32_c16_r2",
          "source": "device/gemm.S",
          "target": "ipu21",
          "defines": {
            "C": "16",
            "K": "32",
            "R": "2"
          },
          "files": [
            "device/gemm.S",
            "device/common.inc"
          ],
          "entries": [
            {
              "symbol": "gemm",
              "section": ".text",
              "offset": 0,
              "size": 0,
              "params": [
                {
                  "name": "out",
                  "offset": 0,
                  "kind": "ptr"
                },
                {
                  "name": "rows",
                  "offset": 4,
                  "kind": "u32"
                },
                {
                  "name": "scale",
                  "offset": 8,
                  "kind": "f16"
                }
              ],
              "cost": {
                "formula": "K * C * R / 128 + 40",
                "cycles": 48
              }
            }
          ],
          "sections": [
            {
              "name": ".text",
              "code": true,
              "align": 4,
              "size": 0
            },
            {
              "name": ".data",
              "code": false,
              "align": 4,
              "size": 4
            }
          ],
          "object_hash": "<hash>",
          "assembler": "<identity>",
          "checksum": "<checksum>"
        }"#]]
    .assert_eq(&serde_json::to_string_pretty(&metadata).expect("json"));
}

#[test]
fn editing_one_source_changes_only_its_variants_keys() {
    let fs = fs();
    let cast = Variant::new("cast_f16_f8", "device/cast.S");
    let before = [key(&fs, &gemm(32)), key(&fs, &gemm(64)), key(&fs, &cast)];
    assert_ne!(before[0], before[1], "defines are part of the key");
    fs.write(
        "device/common.inc",
        "#define BLOCK 16\n#define OVERHEAD 40\n",
    );
    let after = [key(&fs, &gemm(32)), key(&fs, &gemm(64)), key(&fs, &cast)];
    assert_ne!(before[0], after[0]);
    assert_ne!(before[1], after[1]);
    assert_eq!(before[2], after[2]);
    fs.write(
        "device/cast.S",
        ".text\n.globl cast\ncast:\n.data\n.word 8\n",
    );
    let last = [key(&fs, &gemm(32)), key(&fs, &gemm(64)), key(&fs, &cast)];
    assert_eq!(after[..2], last[..2]);
    assert_ne!(after[2], last[2]);
}

#[test]
fn a_corrupted_entry_is_detected_and_rebuilt() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let first = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let hit = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("hits");
    assert!(!hit.built);
    assert_eq!(hit.object, first.object);

    let mut bytes = std::fs::read(&first.object_path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&first.object_path, &bytes).expect("corrupt");
    let rebuilt = cache
        .get_or_build(&fs, &gemm(32), &IPU21)
        .expect("rebuilds");
    assert!(rebuilt.built, "a corrupted object must be rebuilt");
    assert_eq!(
        std::fs::read(&first.object_path).expect("read"),
        first.object.write()
    );

    std::fs::write(&first.metadata_path, b"{ not json").expect("corrupt");
    assert!(
        cache
            .get_or_build(&fs, &gemm(32), &IPU21)
            .expect("rebuilds")
            .built
    );
    assert!(hits(&cache, &fs, 32));
}

/// `edit` applied to the metadata of the cached `gemm(32)` entry must make
/// the next read rebuild it (and remove the damaged metadata meanwhile);
/// the rebuilt entry is the one a clean cache gives.
fn damaged_metadata_is_rebuilt(edit: impl Fn(&str) -> String) {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let first = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let json = std::fs::read_to_string(&first.metadata_path).expect("read");
    let damaged = edit(&json);
    assert_ne!(damaged, json, "the edit changes the metadata");
    std::fs::write(&first.metadata_path, damaged).expect("damage");
    let rebuilt = cache
        .get_or_build(&fs, &gemm(32), &IPU21)
        .expect("rebuilds");
    assert!(rebuilt.built, "damaged metadata must not be served");
    assert_eq!(rebuilt.metadata, first.metadata);
    assert_eq!(
        std::fs::read_to_string(&first.metadata_path).expect("read"),
        json
    );
}

#[test]
fn a_changed_parameter_offset_in_the_metadata_is_rebuilt() {
    damaged_metadata_is_rebuilt(|json| json.replacen("\"offset\": 4", "\"offset\": 5", 1));
}

#[test]
fn a_changed_cost_formula_in_the_metadata_is_rebuilt() {
    damaged_metadata_is_rebuilt(|json| json.replace("/ 128 + 40", "/ 128 + 41"));
}

/// An entry of the format before the checksum (format 1, no checksum) is
/// stale: rebuilt, never an error.
#[test]
fn an_entry_of_the_previous_format_is_rebuilt() {
    damaged_metadata_is_rebuilt(|json| {
        let mut value: serde_json::Value = serde_json::from_str(json).expect("json");
        let fields = value.as_object_mut().expect("object");
        fields.remove("checksum");
        fields.insert("format".into(), 1.into());
        serde_json::to_string_pretty(&value).expect("json")
    });
}

/// Another kernel's whole entry filed under this key, with its metadata's
/// `key` edited to match, is not served: the checksum covers the key.
#[test]
fn another_kernels_entry_filed_under_a_key_is_rebuilt() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let ours = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let other = cache.get_or_build(&fs, &gemm(64), &IPU21).expect("builds");
    std::fs::copy(&other.object_path, &ours.object_path).expect("copy");
    let json = std::fs::read_to_string(&other.metadata_path).expect("read");
    std::fs::write(&ours.metadata_path, json.replace(&other.key, &ours.key)).expect("forge");
    let rebuilt = cache
        .get_or_build(&fs, &gemm(32), &IPU21)
        .expect("rebuilds");
    assert!(rebuilt.built, "a foreign entry must not be served");
    assert_eq!(rebuilt.object, ours.object);
    assert_eq!(rebuilt.metadata, ours.metadata);
}

/// `clean` removes the cache's entries and nothing else it finds under
/// `kernels/`: a cache root may be a project directory whose kernel
/// sources live there.
#[test]
fn clean_removes_entries_and_keeps_foreign_files() {
    let (_dir, root, cache) = temporary_cache();
    let fs = fs();
    let built = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let kernels = root.join("kernels");
    let foreign = [
        kernels.join("gemm.S"),
        kernels.join("include").join("common.inc"),
        kernels.join(&built.key).join("notes.txt"),
        kernels.join("a".repeat(64)).join("sub").join("x"),
    ];
    for file in &foreign {
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, b"the user's").expect("write");
    }
    let cleaned = cache.clean().expect("clean");
    assert!(cleaned.found);
    assert_eq!((cleaned.files, cleaned.kept), (2, 4));
    assert!(!built.object_path.exists() && !built.metadata_path.exists());
    for file in &foreign {
        assert_eq!(std::fs::read(file).expect("kept"), b"the user's");
    }
    let empty = tempfile::tempdir().expect("tempdir");
    let absent = KernelCache::new(Utf8PathBuf::from_path_buf(empty.path().into()).expect("utf-8"));
    assert!(!absent.clean().expect("clean").found);
}

/// A cache in a fresh temporary directory, with the directory (removed
/// when dropped) and its root.
fn temporary_cache() -> (tempfile::TempDir, Utf8PathBuf, KernelCache) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
    let cache = KernelCache::new(&root);
    (dir, root, cache)
}

/// Makes `kernel`'s entry look last used `seconds` ago, without waiting.
fn last_used(kernel: &CachedKernel, seconds: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds);
    for path in [&kernel.object_path, &kernel.metadata_path] {
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|file| file.set_modified(when))
            .expect("set the modification time");
    }
}

/// The bytes `kernel`'s entry takes, as eviction counts them.
fn entry_bytes(kernel: &CachedKernel) -> u64 {
    [&kernel.object_path, &kernel.metadata_path]
        .iter()
        .map(|path| std::fs::metadata(path).expect("metadata").len())
        .sum()
}

const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

#[test]
fn eviction_keeps_the_most_recently_used_entries_within_the_budget() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let variants = [gemm(32), gemm(64), gemm(96), gemm(128)];
    let kernels: Vec<CachedKernel> = variants
        .iter()
        .map(|v| cache.get_or_build(&fs, v, &IPU21).expect("builds"))
        .collect();
    for (kernel, age) in kernels.iter().zip([400, 300, 200, 100]) {
        last_used(kernel, age);
    }
    let budget = entry_bytes(&kernels[2]) + entry_bytes(&kernels[3]);
    assert_eq!(cache.evict(budget, HOUR), 2);
    for evicted in &kernels[..2] {
        assert!(
            !evicted.object_path.parent().expect("entry").exists(),
            "the whole entry goes"
        );
    }
    for (kept, k) in kernels[2..].iter().zip([96, 128]) {
        assert!(kept.object_path.exists() && kept.metadata_path.exists());
        assert!(hits(&cache, &fs, k));
    }
    assert_eq!(cache.evict(u64::MAX, HOUR), 0);
}

#[test]
fn eviction_removes_entries_unused_for_longer_than_the_age() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let old = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let recent = cache.get_or_build(&fs, &gemm(64), &IPU21).expect("builds");
    last_used(&old, 2 * 3600);
    last_used(&recent, 10);
    assert_eq!(cache.evict(u64::MAX, HOUR), 1);
    assert!(!old.metadata_path.exists() && !old.object_path.exists());
    assert!(recent.metadata_path.exists() && recent.object_path.exists());
}

/// Eviction removes what ipub wrote in an entry, temporary files of
/// interrupted writes included, and nothing else it finds under
/// `kernels/`, as `clean` does; a directory holding a foreign file stays.
#[test]
fn eviction_keeps_foreign_files() {
    let (_dir, root, cache) = temporary_cache();
    let built = cache
        .get_or_build(&fs(), &gemm(32), &IPU21)
        .expect("builds");
    let kernels = root.join("kernels");
    let entry = kernels.join(&built.key);
    let stray = entry.join(".tmpAb12Cd");
    std::fs::write(&stray, b"half a write").expect("write");
    let foreign = [
        kernels.join("gemm.S"),
        kernels.join("include").join("common.inc"),
        entry.join("notes.txt"),
        kernels.join("a".repeat(64)).join("sub").join("x"),
        kernels.join("b".repeat(64)).join("kernel.json").join("x"),
    ];
    for file in &foreign {
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, b"the user's").expect("write");
    }
    #[cfg(unix)]
    {
        // A key-named link is not an entry: what it names is not ours.
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::fs::write(elsewhere.join("kernel.json"), b"the user's").expect("write");
        std::os::unix::fs::symlink(&elsewhere, kernels.join("c".repeat(64))).expect("link");
        assert_eq!(cache.evict(0, HOUR), 1);
        assert!(elsewhere.join("kernel.json").exists());
    }
    #[cfg(not(unix))]
    assert_eq!(cache.evict(0, HOUR), 1);
    assert!(!built.object_path.exists() && !built.metadata_path.exists() && !stray.exists());
    for file in &foreign {
        assert_eq!(std::fs::read(file).expect("kept"), b"the user's");
    }
    let (_empty, _absent_root, absent) = temporary_cache();
    assert_eq!(absent.evict(0, HOUR), 0);
}

/// A hit counts as a use: eviction removes the least recently used entry,
/// not the oldest written.
#[test]
fn a_hit_counts_as_a_use_for_eviction() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let read = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let unread = cache.get_or_build(&fs, &gemm(64), &IPU21).expect("builds");
    last_used(&read, 200);
    last_used(&unread, 100);
    assert!(hits(&cache, &fs, 32));
    assert_eq!(cache.evict(entry_bytes(&read), HOUR), 1);
    assert!(!unread.metadata_path.exists());
    assert!(hits(&cache, &fs, 32));
}

/// Whether `gemm(k)` comes from the cache rather than being built.
fn hits(cache: &KernelCache, fs: &MemoryFs, k: i64) -> bool {
    !cache
        .get_or_build(fs, &gemm(k), &IPU21)
        .expect("builds")
        .built
}

/// An entry half removed (an eviction killed, or racing a reader) is a
/// miss whichever half is left, and so is an empty entry directory: the
/// kernel is rebuilt, never an error.
#[test]
fn a_half_evicted_entry_is_rebuilt() {
    let (_dir, _root, cache) = temporary_cache();
    let fs = fs();
    let first = cache.get_or_build(&fs, &gemm(32), &IPU21).expect("builds");
    let remove_and_rebuild = |paths: &[&Utf8PathBuf]| {
        for path in paths {
            std::fs::remove_file(path).expect("remove");
        }
        let rebuilt = cache
            .get_or_build(&fs, &gemm(32), &IPU21)
            .expect("rebuilds");
        assert!(rebuilt.built, "{paths:?} removed");
        assert_eq!(rebuilt.object, first.object);
        assert!(rebuilt.object_path.exists() && rebuilt.metadata_path.exists());
    };
    remove_and_rebuild(&[&first.metadata_path]);
    remove_and_rebuild(&[&first.object_path]);
    remove_and_rebuild(&[&first.metadata_path, &first.object_path]);
    assert!(hits(&cache, &fs, 32));
}

#[test]
fn two_threads_building_one_key_both_succeed() {
    let (_dir, root, cache) = temporary_cache();
    let fs = fs();
    for _ in 0..4 {
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| cache.get_or_build(&fs, &gemm(96), &IPU21)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let objects: Vec<_> = results
            .into_iter()
            .map(|r| r.expect("builds").object)
            .collect();
        assert_eq!(objects[0], objects[1]);
    }
    let entries = std::fs::read_dir(root.join("kernels"))
        .expect("list")
        .count();
    assert_eq!(entries, 1);
    let entry = std::fs::read_dir(root.join("kernels").join(key(&fs, &gemm(96))))
        .expect("list")
        .count();
    assert_eq!(entry, 2, "only kernel.o and kernel.json remain");
}

#[test]
fn bad_sources_and_missing_entries_are_errors() {
    let (_dir, root, cache) = temporary_cache();
    let fs = fs();
    fs.write("device/bad.S", ".data\n.word 1 +\n");
    let error = cache
        .get_or_build(&fs, &Variant::new("bad", "device/bad.S"), &IPU21)
        .unwrap_err();
    expect![[r#"
        could not assemble `device/bad.S` due to 1 previous error
        error: expected an expression
         --> device/bad.S:2:10
          |
        2 | .word 1 +
          |          ^
    "#]]
    .assert_eq(&format!(
        "{error}\n{}",
        match &error {
            KernelError::Assembly { rendered, .. } => rendered.as_str(),
            _ => "",
        }
    ));
    let error = cache
        .get_or_build(&fs, &gemm(32).entry("nope"), &IPU21)
        .unwrap_err();
    // Located like the assembler's own errors, at the source.
    let KernelError::Assembly { rendered, .. } = &error else {
        panic!("expected a located error, got {error}");
    };
    expect![[r#"
        error: entry point `nope` of kernel `gemm_f8_interleaved_k32_c16_r2` is not a label in a code section
         --> device/gemm.S:1:1
          |
        1 | #include "common.inc"
          | ^ in this source
    "#]].assert_eq(rendered);
    assert!(
        !root.join("kernels").exists()
            || std::fs::read_dir(root.join("kernels"))
                .expect("list")
                .count()
                == 0
    );
}

#[test]
fn cost_formulas_evaluate_with_bound_names() {
    let values = BTreeMap::from([("K".to_string(), 64), ("C".to_string(), 16)]);
    assert_eq!(eval_cost("K * C / 128 + 40", &values), Ok(48));
    assert_eq!(
        eval_cost("K * X", &values).map_err(|e| e.to_string()),
        Err("unknown name `X`".to_string())
    );
    // Bindings name sub-expressions; later ones see earlier ones and may
    // shadow the variant's names.
    assert_eq!(
        eval_cost("blocks = K / 16; C = C * 2; blocks * C + 1", &values),
        Ok(129)
    );
    assert_eq!(
        eval_cost("blocks K / 16; blocks", &values).map_err(|e| e.to_string()),
        Err("expected `name = expression;` before the last `;`".to_string())
    );
}
