//! Assembler file tests: every `tests/data/asm/*.S` is assembled and its
//! object listing, or its rendered diagnostics, compared with the companion
//! `.expected` file (bless with `UPDATE_EXPECT=1 cargo test --test
//! asm_files`). Files named `error-*.S` must fail; the others must assemble.
//! The command-line tests check `ipub kernel compile` and `disasm` end to end.

use camino::{Utf8Path, Utf8PathBuf};
use ipub::asm::{assemble_file, AssembleOptions};
use ipub::vfs::OsFs;
use std::process::Command;

const CORPUS: &str = "tests/data/asm";

fn sources() -> Vec<Utf8PathBuf> {
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS);
    let mut files: Vec<Utf8PathBuf> = std::fs::read_dir(&root)
        .expect("corpus directory")
        .map(|e| Utf8PathBuf::from_path_buf(e.expect("entry").path()).expect("utf-8"))
        .filter(|p| p.extension() == Some("S"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_source_gives_its_expected_listing_or_diagnostics() {
    let files = sources();
    assert!(files.len() >= 15, "the corpus went missing");
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).expect("cd");
    for file in files {
        let name = file.file_name().expect("name").to_string();
        let relative = Utf8PathBuf::from(CORPUS).join(&name);
        let assembly = assemble_file(&OsFs, &relative, &AssembleOptions::default());
        let actual = match &assembly.object {
            Some(object) => {
                assert!(!name.starts_with("error-"), "{name} should fail");
                object.dump()
            }
            None => {
                assert!(
                    name.starts_with("error-"),
                    "{name} failed:\n{}",
                    assembly.render_errors()
                );
                let kinds: Vec<&str> = assembly.errors.iter().map(|e| e.kind.name()).collect();
                format!(
                    "kinds: {}\n\n{}",
                    kinds.join(", "),
                    assembly.render_errors()
                )
            }
        };
        expect_test::expect_file![file.with_extension("expected").as_std_path()].assert_eq(&actual);
    }
}

fn ipub(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .output()
        .expect("run ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn kernel_compile_writes_an_object_that_disasm_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8");
    let (code, stdout, stderr) = ipub(&[
        "kernel",
        "compile",
        "tests/data/asm/kernel.S",
        "-D",
        "K=32",
        "--out",
        out,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("compiled kernel kernel object="),
        "{stdout}"
    );
    let object = format!("{out}/kernel.o");
    let (code, stdout, stderr) = ipub(&["kernel", "disasm", &object]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("section 0 .text code"), "{stdout}");
    let json = std::fs::read_to_string(format!("{out}/kernel.json")).expect("metadata");
    assert!(json.contains("\"K\": \"32\""), "{json}");

    let mut bytes = std::fs::read(&object).expect("read");
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&object, bytes).expect("truncate");
    let (code, _, stderr) = ipub(&["kernel", "disasm", &object]);
    assert_eq!(code, 1);
    assert!(stderr.contains("kernel object is truncated"), "{stderr}");
}

#[test]
fn kernel_compile_of_a_bad_source_exits_1_with_located_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8");
    let (code, stdout, stderr) = ipub(&[
        "kernel",
        "compile",
        "tests/data/asm/error-duplicate-label.S",
        "--out",
        out,
    ]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(" --> tests/data/asm/error-duplicate-label.S:3:1"),
        "{stderr}"
    );
    assert!(stderr.ends_with("due to 1 previous error\n"), "{stderr}");
    assert!(!stderr.contains("panicked"));
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("list").count(),
        0,
        "no artifact on failure"
    );
}

#[test]
fn no_prefix_of_any_corpus_file_panics() {
    // Cutting sources anywhere produces unterminated strings, macros,
    // conditionals and expressions: all must be errors, never panics.
    let fs = ipub::vfs::MemoryFs::new();
    // Includes resolve to the real files, read into memory once.
    for include in [
        "inc/constants.inc",
        "inc/broken.inc",
        "inc/cycle-a.inc",
        "inc/cycle-b.inc",
    ] {
        let text = std::fs::read_to_string(
            Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(CORPUS)
                .join(include),
        )
        .expect("read include");
        fs.write(format!("{CORPUS}/{include}"), &text);
    }
    for file in sources() {
        let text = std::fs::read_to_string(&file).expect("read");
        let path = Utf8PathBuf::from(CORPUS).join(file.file_name().expect("name"));
        for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            fs.write(path.clone(), &text[..cut]);
            let assembly = assemble_file(&fs, &path, &AssembleOptions::default());
            let _ = assembly.render_errors();
        }
    }
}

/// Assembly -> encoding -> disassembly -> assembly gives the same words,
/// for the corpus and for every device kernel (with representative
/// defines).
#[test]
fn code_disassembles_and_reassembles_to_the_same_words() {
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources: Vec<(Utf8PathBuf, AssembleOptions)> = sources()
        .into_iter()
        .filter(|p| !p.file_name().unwrap_or("").starts_with("error-"))
        .map(|p| (p, AssembleOptions::default()))
        .collect();
    use ipub::graph::DType::{F143, F16};
    use ipub::partition::KernelId;
    let gemm = |fp8, interleaved, k, c, r| KernelId::Gemm {
        fp8,
        interleaved,
        k,
        c,
        r,
    };
    for kernel in [
        gemm(true, true, 64, 32, 8),
        gemm(false, false, 48, 16, 3),
        KernelId::Cast {
            from: F16,
            to: F143,
        },
        KernelId::Add { dtype: F16 },
        KernelId::Gelu {
            dtype: F16,
            add: false,
        },
        KernelId::Gelu {
            dtype: F16,
            add: true,
        },
        KernelId::Softmax {
            dtype: F16,
            causal: true,
            exp_once: false,
        },
        KernelId::Softmax {
            dtype: F16,
            causal: true,
            exp_once: true,
        },
        KernelId::Layernorm { dtype: F16 },
        KernelId::RearrangeBlockMajor {
            dtype: F16,
            rows: 16,
            cols: 4,
        },
    ] {
        let variant = ipub::pipeline::kernels::variant_of(kernel, &root.join("device"))
            .expect("a device kernel");
        sources.push((variant.source.clone(), ipub::kernels::options(&variant)));
    }
    let mut checked = 0;
    for (path, options) in sources {
        let assembly = assemble_file(&OsFs, &path, &options);
        let Some(object) = assembly.object.as_ref() else {
            panic!("{path}: {}", assembly.render_errors());
        };
        for section in object
            .sections
            .iter()
            .filter(|s| s.code && !s.bytes.is_empty())
        {
            let text: String = ipub::isa::disassemble(&section.bytes, 0)
                .iter()
                .map(|line| format!("    {}\n", line.text))
                .collect();
            let words = ipub::isa::text::assemble_program(&text, 0)
                .unwrap_or_else(|e| panic!("{path} {}: {e}\n{text}", section.name));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            assert_eq!(bytes, section.bytes, "{path} {}", section.name);
            checked += 1;
        }
    }
    assert!(checked >= 9, "only {checked} code sections checked");
}

#[test]
fn kernel_run_executes_a_device_kernel_on_the_single_tile_executor() {
    let run = |extra: &[&str]| {
        let mut args = vec!["kernel", "run", "device/add.S", "--entry", "add_f16"];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run ipub")
    };
    let output = run(&[
        "--buffer",
        "in0=64",
        "--buffer",
        "in1=64",
        "--buffer",
        "out=64:zero",
        "--param",
        "rows=2",
        "--param",
        "row_length=16",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("workers ok true"), "{stdout}");
    let missing = run(&["--buffer", "in0=64"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--buffer in1=BYTES"));
    // Values out of their field's range, unknown names and flags, and a
    // name given twice are errors, not truncated or ignored.
    let good =
        "--buffer in0=64 --buffer in1=64 --buffer out=64 --param rows=2 --param row_length=16";
    for (edit, expected) in [
        (("rows=2", "rows=-5"), "out of range for a u32 field"),
        (
            ("rows=2", "rows=4294967296"),
            "out of range for a u32 field",
        ),
        (("rows=2", "rows=2 --param rows=3"), "given twice"),
        (("rows=2", "rows=2 --param bogus=1"), "has no such field"),
        (("rows=2", "rows=2 --param in0=1"), "set with --buffer"),
        (("out=64", "out=64 --buffer typo=64"), "has no such field"),
        (("in0=64", "in0=64:zer0"), "unknown flag `zer0`"),
    ] {
        let line = good.replacen(edit.0, edit.1, 1);
        let args: Vec<&str> = line.split(' ').collect();
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
