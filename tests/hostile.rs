//! Hostile inputs and faults through the command line: files that ask for
//! unbounded time or memory, reach outside the output directory, or damage
//! the result store; kill -9 during builds and runs; concurrent builds;
//! unwritable directories. Each gives a clear error and a non-zero exit (or
//! a correct result), never a panic, a hang or a runaway allocation. The
//! limits themselves are listed in `book/src/limits.md`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

#[path = "hostile/located.rs"]
mod located;

/// A scratch directory with its own cache, store and device lock.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ipub"));
        command
            .args(args)
            .current_dir(MANIFEST)
            .env("IPUB_CACHE_DIR", self.path("cache"))
            .env("IPUB_DEVICE_LOCK", self.path("device.lock"))
            .env("IPUB_LOG", "warn")
            .env_remove("RUST_LOG");
        command
    }

    /// Runs ipub; a run that takes longer than `limit` is killed and fails
    /// the test (a hang is one of the faults under test).
    fn run_within(&self, args: &[&str], limit: Duration) -> (i32, String, String) {
        let child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ipub");
        let output = wait_within(child, limit, args);
        let result = (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        );
        assert!(
            !result.2.contains("panicked") && !result.2.contains("stack overflow"),
            "ipub {args:?} crashed:\n{}",
            result.2
        );
        result
    }

    fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.run_within(args, Duration::from_secs(120))
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
        path.to_str().expect("utf-8").to_string()
    }

    /// Builds `project` into `out` (in the scratch directory) and returns
    /// the package's path.
    fn build(&self, project: &str, out: &str) -> PathBuf {
        let out = self.path(out);
        let (code, stdout, stderr) =
            self.run(&["build", project, "--out", out.to_str().expect("utf-8")]);
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        let name = Path::new(project).file_stem().expect("stem");
        out.join(name).with_extension("ipuexe")
    }
}

fn wait_within(mut child: std::process::Child, limit: Duration, what: &[&str]) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ipub {what:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success());
}

const PROJECT: &str = r#"
[project]
name = "small"
target = "ipu21"
tiles = 4
seed = 3

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[op]]
name = "y"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

// Items 1 and 2: expressions nested thousands deep and macros that double
// with each level stop at a located error, in moments.
#[test]
fn deep_expressions_and_macro_bombs_are_located_errors() {
    let scratch = Scratch::new();
    let parens = format!(
        "  .data\n  .word {}1{}\n",
        "(".repeat(3000),
        ")".repeat(3000)
    );
    let mut bomb = String::from("#define X0 1\n");
    for i in 0..24 {
        bomb.push_str(&format!("#define X{} (X{i} + X{i})\n", i + 1));
    }
    bomb.push_str("  .data\n  .word X24\n");
    for (name, text, message) in [
        (
            "parens.S",
            parens,
            ("expression nested deeper than 256 levels", "parens.S:2:265"),
        ),
        (
            "bomb.S",
            bomb,
            ("macro expansion exceeds 1 MiB", "bomb.S:27:9"),
        ),
    ] {
        let source = scratch.write(name, &text);
        let started = Instant::now();
        let (code, _, stderr) = scratch.run(&[
            "kernel",
            "compile",
            &source,
            "--out",
            scratch.path("obj").to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(message.0) && stderr.contains(message.1),
            "{stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} took {:?}",
            started.elapsed()
        );
    }
}

// Item 3: special files are never read, in projects or kernels.
#[test]
fn includes_of_devices_and_fifos_are_refused_at_once() {
    let scratch = Scratch::new();
    let fifo = scratch.path("fifo.toml");
    mkfifo(&fifo);
    for (include, kind) in [("/dev/zero", "a character device"), ("fifo.toml", "a FIFO")] {
        let project = scratch.write("p.toml", &format!("include = [\"{include}\"]\n{PROJECT}"));
        let (code, _, stderr) = scratch.run_within(&["check", &project], Duration::from_secs(20));
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "cannot read included file `{include}`: it is {kind}, not a regular file"
            )),
            "{stderr}"
        );
    }
    let kernel_fifo = scratch.path("k.fifo");
    mkfifo(&kernel_fifo);
    for (include, kind) in [("/dev/zero", "a character device"), ("k.fifo", "a FIFO")] {
        let source = scratch.write("k.S", &format!("#include \"{include}\"\n  nop\n"));
        let (code, _, stderr) = scratch.run_within(
            &[
                "kernel",
                "compile",
                &source,
                "--out",
                scratch.path("obj").to_str().unwrap(),
            ],
            Duration::from_secs(20),
        );
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(&format!("it is {kind}, not a regular file")),
            "{stderr}"
        );
        assert!(stderr.contains("k.S:1:10"), "{stderr}");
    }
    // A package or profile that is not a regular file is refused too.
    let (code, _, stderr) = scratch.run_within(&["inspect", "/dev/zero"], Duration::from_secs(20));
    assert_eq!(code, 1);
    assert!(stderr.contains("it is a character device"), "{stderr}");
    let (code, _, stderr) = scratch.run_within(
        &["profile", fifo.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("it is a FIFO"), "{stderr}");
}

/// The parts of a package file, by name, in file order.
fn parts(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let count = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    (0..count)
        .map(|i| {
            let entry = &bytes[48 + 64 * i..48 + 64 * (i + 1)];
            let name = String::from_utf8_lossy(&entry[..16])
                .trim_end_matches('\0')
                .to_string();
            let offset = u64::from_le_bytes(entry[16..24].try_into().unwrap()) as usize;
            let length = u64::from_le_bytes(entry[24..32].try_into().unwrap()) as usize;
            (name, bytes[offset..offset + length].to_vec())
        })
        .collect()
}

/// The package at `path` with one part replaced, checksums recomputed.
fn with_part(path: &Path, name: &str, edit: impl Fn(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let parts: Vec<(String, Vec<u8>)> = parts(&std::fs::read(path).expect("package"))
        .into_iter()
        .map(|(n, bytes)| {
            let bytes = if n == name { edit(bytes) } else { bytes };
            (n, bytes)
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = parts
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    ipub::package::file::assemble(ipub::package::FORMAT_VERSION, &refs)
}

fn text_edit(from: &str, to: &str) -> impl Fn(Vec<u8>) -> Vec<u8> {
    let (from, to) = (from.to_string(), to.to_string());
    move |bytes| {
        let text = String::from_utf8(bytes).expect("JSON part");
        assert!(text.contains(&from), "`{from}` is not in {text}");
        text.replacen(&from, &to, 1).into_bytes()
    }
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Items 4, 5, 6 (repeat), 7 (graph name) and 8: packages whose
/// checksums are right and whose contents are not are refused, by
/// `inspect` and `run` alike, before anything is allocated or run.
#[test]
fn crafted_packages_are_refused_before_anything_is_allocated() {
    let scratch = Scratch::new();
    let package = scratch.build("projects/matmul-f8.toml", "out");
    // One transfer to 100,000 tiles' worth of destinations, reused by
    // 120,000 transfers of two bytes each.
    let mut bomb = Vec::new();
    bomb.extend_from_slice(&1u32.to_le_bytes());
    bomb.extend_from_slice(&0u32.to_le_bytes());
    bomb.push(0);
    bomb.extend_from_slice(&0u64.to_le_bytes());
    bomb.extend_from_slice(&120_001u32.to_le_bytes());
    bomb.push(0);
    for value in [0u64, 0x50000, 4, 100_000] {
        varint(&mut bomb, value);
    }
    for d in 0..100_000u64 {
        varint(&mut bomb, d % 64);
        varint(&mut bomb, 0x60000 + 4 * (d / 64));
    }
    for _ in 0..120_000 {
        bomb.extend_from_slice(&[7, 0, 0]);
    }
    // 30,000 segments sharing one payload.
    let shared: String = (0..30_000)
        .map(|i| format!("{{\"address\":{},\"offset\":0,\"bytes\":524288,\"memory_size\":524288,\"kind\":\"data\"}}", 0x4C000 + i))
        .collect::<Vec<_>>()
        .join(",");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "weight-shape",
            with_part(&package, "graph", text_edit("\"shape\":[64,64]", "\"shape\":[1000000000,1000000000]")),
            "invalid package (graph): a tensor of shape [1000000000, 1000000000] in f143 needs 1000000000000000000 bytes",
        ),
        (
            "wrapping-shape",
            with_part(&package, "graph", text_edit("\"shape\":[128,64]", "\"shape\":[9223372036854775809,8192]")),
            "invalid package (graph): dimension 9223372036854775809 is too large",
        ),
        (
            "exchange-bomb",
            with_part(&package, "exchange", |_| bomb.clone()),
            "part `exchange` cannot be decoded",
        ),
        (
            "shared-segments",
            with_part(&package, "tiles", |_| format!("[{{\"tile\":0,\"segments\":[{shared}]}}]").into_bytes()),
            "invalid package (tiles): tile 0 data segment at 0x4c001: overlaps the previous segment or is out of order",
        ),
        (
            "endless-repeat",
            with_part(&package, "calls", |bytes| {
                let text = String::from_utf8(bytes).unwrap();
                text.replacen("\"run\":{\"steps\":[", "\"run\":{\"steps\":[{\"step\":\"repeat\",\"count\":4294967295,\"body\":[{\"step\":\"host_write\",\"binding\":0}]},", 1).into_bytes()
            }),
            "steps (repeats unrolled), more than the 1048576 a run may record",
        ),
        (
            "unknown-check-output",
            with_part(&package, "graph", text_edit("\"outputs\":[3]}", "\"outputs\":[9999]}")),
            "invalid package (graph): tensor 9999 does not exist",
        ),
        (
            "escaping-name",
            with_part(&package, "graph", text_edit("\"name\":\"matmul-f8\"", "\"name\":\"../../x\"")),
            "the project name cannot name a package file: it contains '/'",
        ),
    ];
    for (name, bytes, message) in cases {
        let path = scratch.path(&format!("{name}.ipuexe"));
        std::fs::write(&path, bytes).expect("write");
        let path = path.to_str().unwrap();
        for command in ["inspect", "run"] {
            let (code, stdout, stderr) =
                scratch.run_within(&[command, path], Duration::from_secs(60));
            assert_eq!(code, 1, "{name} {command}: {stdout}\n{stderr}");
            assert!(stderr.contains(message), "{name} {command}: {stderr}");
        }
    }
    // Nothing was written next to the crafted packages.
    assert!(!scratch.path("x.profile.json").exists());
}

/// Item 6: code that never ends stops at a watchdog derived from the
/// package's estimate, in seconds, and says how to raise it.
#[test]
fn code_that_never_ends_stops_at_the_derived_watchdog() {
    let scratch = Scratch::new();
    let path = scratch.build("projects/matmul-f8.toml", "out");
    let mut package =
        ipub::package::read(camino::Utf8Path::from_path(&path).unwrap()).expect("read");
    // Every compute entry point becomes a branch to itself.
    let entries: Vec<(u32, u32)> = package
        .run
        .preorder()
        .into_iter()
        .filter_map(|s| match s {
            ipub::package::Step::Compute { tiles, .. } => Some(tiles.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    for (tile, pc) in entries {
        let word = ipub::isa::assemble(
            "br",
            &[ipub::isa::Operand::Value(ipub::isa::Value::Const(
                i64::from(pc),
            ))],
        )
        .expect("br")
        .word;
        let image = package
            .tiles
            .iter_mut()
            .find(|t| t.tile == tile)
            .expect("tile");
        let segment = image
            .segments
            .iter_mut()
            .find(|s| s.address <= pc && pc < s.address + s.data.len() as u32)
            .expect("code");
        let at = (pc - segment.address) as usize;
        segment.data[at..at + 4].copy_from_slice(&word.to_le_bytes());
    }
    let looping = scratch.path("looping.ipuexe");
    ipub::package::write(camino::Utf8Path::from_path(&looping).unwrap(), &package).expect("write");
    let started = Instant::now();
    let (code, stdout, stderr) = scratch.run_within(
        &["run", looping.to_str().unwrap()],
        Duration::from_secs(120),
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=FAIL"), "{stdout}");
    let watchdog = ipub::device::model::default_watchdog(package.profile.estimated_cycles);
    assert_eq!(watchdog, ipub::device::model::MIN_WATCHDOG_CYCLES);
    assert!(
        stderr.contains(&format!("watchdog: still running after {watchdog} cycles")),
        "{stderr}"
    );
    assert!(
        stderr.contains("raise it with `ipub run --watchdog CYCLES`"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // An explicit watchdog is used as given.
    let (code, _, stderr) = scratch.run_within(
        &["run", looping.to_str().unwrap(), "--watchdog", "1000000"],
        Duration::from_secs(60),
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("still running after 1000000 cycles"),
        "{stderr}"
    );
}

/// Item 7: names read from files are never path components.
#[test]
fn project_names_never_write_outside_the_output_directory() {
    let scratch = Scratch::new();
    for name in [
        "../escaped/evil",
        "/tmp/evil",
        "",
        "a/b",
        ".",
        "..",
        &"n".repeat(300),
    ] {
        let project = scratch.write(
            "p.toml",
            &PROJECT.replace("name = \"small\"", &format!("name = {name:?}")),
        );
        let out = scratch.path("out");
        let (code, _, stderr) = scratch.run(&["build", &project, "--out", out.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(
            stderr.contains("the project name cannot name a package file"),
            "{name}: {stderr}"
        );
    }
    let nul = scratch.write(
        "p.toml",
        &PROJECT.replace("name = \"small\"", "name = \"a\\u0000b\""),
    );
    let (code, _, stderr) = scratch.run(&["check", &nul]);
    assert_eq!(code, 1, "{stderr}");
    assert!(!scratch.path("escaped").exists());
    assert!(!Path::new("/tmp/evil.ipuexe").exists());
}

/// Item 8: a check that compares nothing never passes (the package side
/// is in `crafted_packages_are_refused_before_anything_is_allocated`).
#[test]
fn a_project_cannot_check_an_output_twice() {
    let scratch = Scratch::new();
    let project = scratch.write(
        "p.toml",
        &PROJECT.replace("outputs = [\"y\"]", "outputs = [\"y\", \"y\"]"),
    );
    let (code, _, stderr) = scratch.run(&["check", &project]);
    assert_eq!(code, 1);
    assert!(stderr.contains("`y` is listed twice"), "{stderr}");
}

/// The entry files of a store, by kind.
fn entries(store: &Path, kind: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(store.join(kind))
        .map(|d| d.map(|e| e.expect("entry").path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// Item 9: a store entry copied over another's is detected, removed and
/// recomputed; one forged with a right checksum but the plan of another
/// operation is refused and recomputed. Either way the package is the one
/// a clean build writes.
#[test]
fn store_entries_filed_under_other_keys_never_reach_a_package() {
    let scratch = Scratch::new();
    let project = "projects/attention-f16.toml";
    let clean = std::fs::read(scratch.build(project, "clean")).expect("package");
    let store = scratch.path("cache/store");
    // A build into `out` succeeds, says `warning`, and writes the clean
    // package.
    let builds_clean = |out: &str, warning: &str| {
        let out = scratch.path(out);
        let (code, stdout, stderr) =
            scratch.run(&["build", project, "--out", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        assert!(stderr.contains(warning), "{stderr}");
        assert_eq!(
            std::fs::read(out.join("attention-f16.ipuexe")).unwrap(),
            clean
        );
    };
    let files = entries(&store, "plans");
    assert!(files.len() >= 2, "{files:?}");
    // Swapped: each file now holds the other's entry.
    let (a, b) = (
        std::fs::read(&files[0]).unwrap(),
        std::fs::read(&files[1]).unwrap(),
    );
    std::fs::write(&files[0], &b).unwrap();
    std::fs::write(&files[1], &a).unwrap();
    builds_clean("swapped", "removing corrupted store entry");
    // Forged: another entry's contents under this file's own key. The
    // other is a plan the check always tells apart, one for another kind
    // of operation: two operations of one kind and shape may have
    // interchangeable plans, and then the package is the same anyway.
    let files = entries(&store, "plans");
    let a = std::fs::read(&files[0]).unwrap();
    // A plan's kernel is structured (`{"Gemm":{...}}`): its first word
    // says which kind of operation the plan is for.
    let kind_of = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        text.find("\"kernel\":").map(|at| {
            let rest = &text[at + "\"kernel\":".len()..];
            rest[..rest.find([':', ',']).unwrap_or(rest.len())].to_string()
        })
    };
    let b = files[1..]
        .iter()
        .map(|f| std::fs::read(f).unwrap())
        .find(|b| kind_of(b) != kind_of(&a))
        .expect("a plan the check tells apart");
    let key = ipub::store::entry_key(&a).expect("a header");
    let payload = &b[b.iter().position(|&c| c == b'\n').unwrap() + 1..];
    std::fs::write(&files[0], ipub::store::entry(&key, payload)).unwrap();
    builds_clean("forged", "does not fit what it was stored for");
}

/// Item 11: an unusable cache directory costs recompilation, not the
/// build; an unwritable `--out` still gives the run's verdict; a device
/// lock that is a directory is named.
#[test]
fn unusable_directories_degrade_or_are_named() {
    let scratch = Scratch::new();
    // The cache root is a file: nothing under it can be created.
    std::fs::write(scratch.path("cache"), "not a directory").unwrap();
    let out = scratch.path("out");
    let (code, stdout, stderr) = scratch.run(&[
        "build",
        "projects/matmul-f8.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("cannot write to the kernel cache"),
        "{stderr}"
    );
    std::fs::remove_file(scratch.path("cache")).unwrap();

    let package = out.join("matmul-f8.ipuexe");
    let blocked = scratch.path("blocked");
    std::fs::write(&blocked, "a file").unwrap();
    let unwritable = blocked.join("sub");
    let (code, stdout, stderr) = scratch.run(&[
        "run",
        package.to_str().unwrap(),
        "--out",
        unwritable.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "cannot write the profile {}/matmul-f8.profile.json",
            unwritable.display()
        )),
        "{stderr}"
    );

    let lock = scratch.path("lockdir");
    std::fs::create_dir(&lock).unwrap();
    let (code, _, stderr) = scratch.run_within(
        &[
            "run",
            package.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{stderr}");
    let output = scratch
        .command(&[
            "run",
            package.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .env("IPUB_DEVICE_LOCK", &lock)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("device lock {}", lock.display())),
        "{stderr}"
    );
}

/// kill -9 in the middle of builds and runs never leaves a half-written
/// package or profile: what is there reads back, and the next build is
/// byte-identical to a clean one.
#[test]
fn kill_9_never_leaves_a_half_artifact() {
    let scratch = Scratch::new();
    let project = "projects/attention-f16.toml";
    let clean = std::fs::read(scratch.build(project, "clean")).expect("package");
    std::fs::remove_dir_all(scratch.path("cache")).unwrap();
    let out = scratch.path("out");
    for delay in [50, 200, 400, 800] {
        let mut child = scratch
            .command(&["run", project, "--out", out.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        for file in ["attention-f16.ipuexe", "attention-f16.profile.json"] {
            let path = out.join(file);
            if !path.exists() {
                continue;
            }
            let command = if file.ends_with("ipuexe") {
                "inspect"
            } else {
                "profile"
            };
            let (code, _, stderr) = scratch.run(&[command, path.to_str().unwrap()]);
            assert_eq!(code, 0, "{file} after kill at {delay} ms: {stderr}");
        }
    }
    let package = scratch.build(project, "out");
    assert_eq!(std::fs::read(package).unwrap(), clean);
}

/// Concurrent builds of one project into one directory, sharing a cache:
/// all succeed and agree with a clean build.
#[test]
fn concurrent_builds_agree() {
    let scratch = Scratch::new();
    let project = "projects/attention-f16.toml";
    let out = scratch.path("out");
    let children: Vec<_> = (0..3)
        .map(|_| {
            scratch
                .command(&["build", project, "--out", out.to_str().unwrap()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = wait_within(child, Duration::from_secs(120), &["build"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let built = std::fs::read(out.join("attention-f16.ipuexe")).unwrap();
    std::fs::remove_dir_all(scratch.path("cache")).unwrap();
    let clean = std::fs::read(scratch.build(project, "clean")).unwrap();
    assert_eq!(built, clean);
}

/// Item 10: a repeat of 65,535 iterations of a small body compiles once,
/// but would record more steps than a run may: the build says so, as a
/// limit of the program rather than a compiler bug.
#[test]
fn a_repeat_too_long_to_run_is_a_clear_error() {
    let scratch = Scratch::new();
    let mut body = String::new();
    for i in 0..20 {
        let input = if i == 0 {
            "h".to_string()
        } else {
            format!("g{}", i - 1)
        };
        body.push_str(&format!(
            "\n[[repeat.op]]\nname = \"g{i}\"\nop = \"gelu\"\ninputs = [\"{input}\"]\ndtype = \"f16\"\n"
        ));
    }
    let project = PROJECT.replace(
        "[[op]]\nname = \"y\"\nop = \"gelu\"\ninputs = [\"x\"]\ndtype = \"f16\"\n",
        &format!(
            "[[repeat]]\nname = \"y\"\ncount = 65535\ninput = \"x\"\ncarry = \"h\"\nresult = \"g19\"\n{body}"
        ),
    );
    let project = project.replace(
        "seed = 3",
        &format!("seed = 3\nkernels = \"{MANIFEST}/device\""),
    );
    let path = scratch.write("long.toml", &project);
    let (code, _, stderr) = scratch.run(&[
        "build",
        &path,
        "--out",
        scratch.path("out").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the program is more than a run may execute"),
        "{stderr}"
    );
    assert!(stderr.contains("use fewer repeat iterations"), "{stderr}");
    assert!(!stderr.contains("compiler bug"), "{stderr}");
}

/// Numbers a package cannot hold (an infinite `max_abs_error`, an epsilon
/// that is zero in f32) are refused by `check` at their key, not accepted
/// and then found unreadable or reported as a compiler bug.
#[test]
fn values_outside_what_a_package_holds_are_located_errors() {
    let scratch = Scratch::new();
    let layernorm = PROJECT
        .replace(
            "op = \"gelu\"\ninputs = [\"x\"]",
            "op = \"layernorm\"\ninputs = [\"x\", \"g\", \"b\"]\nepsilon = 1e-300",
        )
        .replace(
            "[[op]]",
            "[[tensor]]\nname = \"g\"\nshape = [16]\ndtype = \"f16\"\nrole = \"weight\"\n\n[[tensor]]\nname = \"b\"\nshape = [16]\ndtype = \"f16\"\nrole = \"weight\"\n\n[[op]]",
        );
    for (text, key, message) in [
        (
            PROJECT.replace("max_abs_error = 0.1", "max_abs_error = inf"),
            "max_abs_error = inf",
            "`max_abs_error` must be a finite number",
        ),
        (
            PROJECT.replace("max_abs_error = 0.1", "max_abs_error = nan"),
            "max_abs_error = nan",
            "`max_abs_error` must be a finite number",
        ),
        (
            layernorm,
            "epsilon = 1e-300",
            "layernorm `epsilon` must be positive within f32 range",
        ),
    ] {
        let project = scratch.write("p.toml", &text);
        let (code, _, stderr) = scratch.run(&["check", &project]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        let line = text.lines().position(|l| l == key).expect("the key's line") + 1;
        assert!(stderr.contains(&format!("p.toml:{line}:")), "{stderr}");
    }
}

/// A project whose kernel directory is not there fails its build with
/// the directory the sources were looked for in.
#[test]
fn a_missing_kernel_source_names_the_kernel_directory() {
    let scratch = Scratch::new();
    let project = scratch.write("projects/p.toml", PROJECT);
    let out = scratch.path("out");
    let (code, _, stderr) =
        scratch.run(&["build", &project, "--out", out.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot read kernel source")
            && stderr.contains("kernel sources are read from")
            && stderr.contains("/device`"),
        "{stderr}"
    );
}

/// Output that cannot be written (a full disk) fails the command with a
/// clear error, for text and for JSON messages alike.
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let scratch = Scratch::new();
    let matmul = format!("{MANIFEST}/projects/matmul-f8.toml");
    for args in [
        vec!["schema"],
        vec!["check", "--message-format", "json", &matmul],
    ] {
        let stdout = std::fs::OpenOptions::new()
            .write(true)
            .open(full)
            .expect("open /dev/full");
        let output = scratch
            .command(&args)
            .stdout(stdout)
            .output()
            .expect("run ipub");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write to standard output") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}

/// `--max-age-days` only qualifies `--keep-mb`; alone it is a usage
/// error, not a request to empty the store.
#[test]
fn clean_refuses_an_age_without_a_size() {
    let scratch = Scratch::new();
    let (code, _, stderr) = scratch.run(&["clean", "--max-age-days", "3650"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--keep-mb"), "{stderr}");
}

/// `ipub clean`, `clean --all` and `clean --keep-mb` (which evicts from
/// the store and the kernel cache) remove what ipub wrote and nothing
/// else: a cache root that is also a project directory keeps the user's
/// notes in `store/` and kernel sources in `kernels/`.
#[test]
fn clean_removes_only_what_ipub_wrote() {
    let scratch = Scratch::new();
    let user_files = [
        scratch.write("cache/store/notes.txt", "my notes"),
        scratch.write("cache/store/plans/README", "about plans"),
        scratch.write("cache/kernels/gemm.S", "; my kernel"),
        scratch.write("cache/kernels/include/common.inc", "; my include"),
    ];
    scratch.build("projects/matmul-f8.toml", "out");
    let count = |dir: &str| {
        std::fs::read_dir(scratch.path(dir))
            .map(|entries| entries.count())
            .unwrap_or(0)
    };
    assert!(count("cache/kernels") > 2 && count("cache/store/plans") > 1);

    let kernels = count("cache/kernels") - 2;
    let (code, stdout, stderr) = scratch.run(&["clean", "--keep-mb", "0"]);
    assert_eq!(
        code, 0,
        "{stdout}
{stderr}"
    );
    assert_eq!(count("cache/store/plans"), 1, "only the README is left");
    // The kernel cache is evicted to the same budget.
    assert_eq!(count("cache/kernels"), 2, "only the user's files are left");
    let from_kernels = format!("from {}", scratch.path("cache/kernels").display());
    let line = stdout.lines().find(|l| l.ends_with(&from_kernels));
    assert!(
        line.is_some_and(|l| l.starts_with(&format!("evicted {kernels} "))),
        "{stdout}"
    );
    for file in &user_files {
        assert!(Path::new(file).is_file(), "{file} was removed");
    }
    let (code, stdout, stderr) = scratch.run(&["clean"]);
    assert_eq!(
        code, 0,
        "{stdout}
{stderr}"
    );
    assert!(stdout.contains("that ipub did not write"), "{stdout}");
    let (code, stdout, stderr) = scratch.run(&["clean", "--all"]);
    assert_eq!(
        code, 0,
        "{stdout}
{stderr}"
    );
    assert_eq!(count("cache/kernels"), 2, "only the user's files are left");
    for file in &user_files {
        assert!(Path::new(file).is_file(), "{file} was removed");
    }
}

/// A clean of a cache that does not exist says so; `--all` does not go
/// with `--keep-mb`, which evicts from the kernel cache as well.
#[test]
fn clean_says_when_there_is_nothing_and_refuses_all_with_a_budget() {
    let scratch = Scratch::new();
    let (code, stdout, stderr) = scratch.run(&["clean", "--all"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("nothing to remove"), "{stdout}");
    assert!(!stdout.contains("removed"), "{stdout}");
    assert!(!scratch.path("cache").exists());
    let (code, _, stderr) = scratch.run(&["clean", "--all", "--keep-mb", "0"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--keep-mb"), "{stderr}");
}

/// A store and a kernel cache that cannot be used at all cost one warning
/// each per build, not one per entry, and none calls the cache's entries
/// corrupted; a store budget that is not a number of megabytes is named.
#[test]
fn an_unusable_cache_warns_once_and_a_bad_budget_is_named() {
    let scratch = Scratch::new();
    scratch.write("cache/store/plans", "a file where a directory goes");
    scratch.write("cache/store/stamps", "a file where a directory goes");
    scratch.write("cache/kernels", "a file where a directory goes");
    let out = scratch.path("out");
    let output = scratch
        .command(&[
            "build",
            "projects/vit-fp8.toml",
            "--out",
            out.to_str().expect("utf-8"),
        ])
        .env("IPUB_STORE_MAX_MB", "1.5")
        .output()
        .expect("run ipub");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 4, "{stderr}");
    assert!(!stderr.contains("corrupted"), "{stderr}");
    assert!(stderr.contains("IPUB_STORE_MAX_MB=`1.5`"), "{stderr}");
}

/// A run whose dump cannot be written fails, in its exit code and in its
/// `run-finished` message, though its numerics passed.
#[test]
fn a_dump_that_cannot_be_written_fails_the_run() {
    let scratch = Scratch::new();
    let blocker = scratch.write("dump", "a file where the dump directory goes");
    let out = scratch.path("out");
    let (code, stdout, stderr) = scratch.run(&[
        "run",
        "projects/matmul-f8.toml",
        "--out",
        out.to_str().expect("utf-8"),
        "--dump",
        &blocker,
        "--message-format",
        "json",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot write the dump"), "{stderr}");
    let finished: serde_json::Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|m| m["reason"] == "run-finished")
        .expect("a run-finished message");
    assert_eq!(finished["numerical_test"], "PASS", "{finished}");
    assert_eq!(finished["success"], false, "{finished}");
}

/// A project that does not fit on every tile of the target is not told to
/// try more tiles.
#[test]
fn a_project_on_every_tile_that_does_not_fit_is_not_told_to_add_tiles() {
    let scratch = Scratch::new();
    let project = scratch.write(
        "projects/p.toml",
        &PROJECT
            .replace("tiles = 4", "tiles = 1472")
            .replace("shape = [8, 16]", "shape = [220800000]"),
    );
    std::os::unix::fs::symlink(Path::new(MANIFEST).join("device"), scratch.path("device"))
        .expect("link the kernels");
    let out = scratch.path("out");
    let (code, _, stderr) =
        scratch.run(&["build", &project, "--out", out.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("does not fit in 1472 tiles")
            && stderr.contains("already uses every tile of the target")
            && !stderr.contains("try more tiles"),
        "{stderr}"
    );
}
