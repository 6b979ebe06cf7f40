//! Drives `ipub watch` on a temporary copy of a project: an editor-style
//! save by rename, a broken save (diagnostics, the watcher keeps going), and
//! the fix; directories of includes and kernel headers deleted or renamed
//! and restored.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

struct Watch {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(dir: &Path, project: &str, rebuilds: u32, extra: &[&str]) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(["watch", project, "--debounce", "50"])
            .arg(format!("--max-rebuilds={rebuilds}"))
            .args(extra)
            .current_dir(dir)
            .env("IPUB_CACHE_DIR", dir.join(".cache"))
            .env_remove("RUST_LOG")
            .env_remove("IPUB_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ipub watch");
        let (sender, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            });
        }
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `needle`; returns the lines since the
    /// previous wait.
    fn wait_for(&mut self, needle: &str) -> Vec<String> {
        self.wait_for_all(&[needle])
    }

    /// Waits until every needle has been seen in some line (stdout and
    /// stderr are read separately, so their relative order is not fixed).
    fn wait_for_all(&mut self, needles: &[&str]) -> Vec<String> {
        let mut batch: Vec<String> = Vec::new();
        while !needles.iter().all(|n| batch.iter().any(|l| l.contains(n))) {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    batch.push(line);
                }
                Err(_) => panic!(
                    "no {needles:?} from ipub watch; saw:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
        batch
    }
}

/// A test that fails does not leave its watcher running.
impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `contents` the way many editors save: to a temporary file in the
/// same directory, then renamed over the original.
fn save_by_rename(path: &Path, contents: &str) {
    let temporary = path.with_extension("toml.swp");
    std::fs::write(&temporary, contents).expect("write temporary");
    std::fs::rename(&temporary, path).expect("rename over");
}

#[test]
fn watch_rebuilds_on_saves_and_survives_a_broken_one() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/matmul-f8.toml");
    // The copy finds its kernel sources in the crate's `device/`.
    let original = std::fs::read_to_string(source)
        .expect("read project")
        .replace(
            "seed = 4",
            concat!(
                "seed = 4\nkernels = \"",
                env!("CARGO_MANIFEST_DIR"),
                "/device\""
            ),
        );
    let project = dir.path().join("matmul-f8.toml");
    std::fs::write(&project, &original).expect("copy project");

    let mut watch = Watch::start(dir.path(), "matmul-f8.toml", 3, &[]);
    let startup = watch.wait_for("watching");
    assert!(
        startup
            .iter()
            .any(|l| l.starts_with("built matmul-f8.toml")),
        "{startup:?}"
    );
    let package = dir.path().join("target/ipub/matmul-f8/matmul-f8.ipuexe");
    let first = std::fs::read(&package).expect("the first build writes the package");

    // A comment edit: validation re-runs and nothing after it.
    save_by_rename(&project, &format!("# edited\n{original}"));
    let lines = watch.wait_for("rebuilt after change to matmul-f8.toml");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rebuilt") && l.contains("(1 queries recomputed)")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("wrote")), "{lines:?}");

    // A broken save: diagnostics, the watcher keeps going.
    save_by_rename(
        &project,
        &original.replace("inputs = [\"x8\", \"w\"]", "inputs = [\"x8\", \"wx\"]"),
    );
    let lines = watch.wait_for_all(&["rebuilt after change", "unknown tensor `wx`"]);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rebuilt") && l.contains("errors above")),
        "{lines:?}"
    );
    assert_eq!(
        std::fs::read(&package).expect("package"),
        first,
        "a broken save keeps the last good package"
    );

    // The fix with a real change: the shape edit replans.
    save_by_rename(
        &project,
        &original.replace("shape = [128, 64]", "shape = [256, 64]"),
    );
    let lines = watch.wait_for("rebuilt after change");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rebuilt") && !l.contains("errors")),
        "{lines:?}"
    );
    let status = watch.child.wait().expect("watch exits after its rebuilds");
    let rebuilt =
        ipub::package::file::read(camino::Utf8Path::from_path(&package).expect("utf-8 path"))
            .expect("the fix writes a valid package");
    let x = rebuilt
        .graph
        .tensors
        .iter()
        .find(|t| t.shape == [256, 64])
        .map(|t| t.name.clone());
    assert!(x.is_some(), "the new package has the edited shape");
    assert!(status.success());

    // Watch saved the stamp of what it wrote: a build in another process
    // finds the package up to date, and after a comment edit (no new
    // package) it still does, having read the package back once.
    let fresh_build = || {
        let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .args(["build", "matmul-f8.toml"])
            .current_dir(dir.path())
            .env("IPUB_CACHE_DIR", dir.path().join(".cache"))
            .output()
            .expect("run ipub build");
        assert!(output.status.success());
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let stdout = fresh_build();
    assert!(stdout.contains("is up to date"), "{stdout}");
    let edited = original.replace("shape = [128, 64]", "shape = [256, 64]");
    let mut watch = Watch::start(dir.path(), "matmul-f8.toml", 1, &[]);
    watch.wait_for("watching");
    save_by_rename(&project, &format!("# a comment\n{edited}"));
    let lines = watch.wait_for("rebuilt after change to matmul-f8.toml");
    assert!(!lines.iter().any(|l| l.starts_with("wrote")), "{lines:?}");
    assert!(watch.child.wait().expect("watch exits").success());
    let stdout = fresh_build();
    assert!(stdout.contains("is up to date"), "{stdout}");
}

/// A scratch directory holding `projects/matmul-f8.toml` and a copy of the
/// kernel sources (`device/`, `device/include/`), to edit under watch.
fn matmul_f8_with_its_kernels() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.path().join("projects")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("device/include")).expect("mkdir");
    for sub in ["device", "device/include"] {
        for entry in std::fs::read_dir(crate_dir.join(sub)).expect("device dir") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                std::fs::copy(&path, dir.path().join(sub).join(path.file_name().unwrap()))
                    .expect("copy kernel");
            }
        }
    }
    std::fs::copy(
        crate_dir.join("projects/matmul-f8.toml"),
        dir.path().join("projects/matmul-f8.toml"),
    )
    .expect("copy project");
    dir
}

#[test]
fn watch_recompiles_an_edited_kernel_source() {
    let dir = matmul_f8_with_its_kernels();
    let mut watch = Watch::start(dir.path(), "projects/matmul-f8.toml", 1, &["--run"]);
    // `--run` runs each newly written package on the model.
    let startup = watch.wait_for_all(&["watching", "numericalTest=PASS"]);
    assert!(
        startup.iter().any(|l| l.starts_with("wrote")),
        "{startup:?}"
    );
    let kernel = dir.path().join("device/cast_f8.S");
    let source = std::fs::read_to_string(&kernel).expect("kernel");
    std::fs::write(&kernel, format!("// edited\n{source}")).expect("edit kernel");
    let lines = watch.wait_for("rebuilt after change to device/cast_f8.S");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("rebuilt") && !l.contains("errors")),
        "{lines:?}"
    );
    let status = watch.child.wait().expect("watch exits after its rebuild");
    assert!(status.success());
}

/// The example project's checkpoint and input, with weights scaled by
/// `scale`, written through ipub's own writers.
fn write_tensor_files(dir: &Path, scale: f32) {
    use ipub::data::{npy, safetensors, Array};
    let values = |count: usize| -> Vec<f32> {
        (0..count)
            .map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.5) * scale)
            .collect()
    };
    let (w, b, head) = (values(96 * 96), values(96), values(32 * 96));
    let arrays = [
        Array {
            name: "layers.0.fc.weight",
            shape: &[96, 96],
            values: &w,
        },
        Array {
            name: "layers.1.fc.weight",
            shape: &[96, 96],
            values: &w,
        },
        Array {
            name: "layers.0.fc.bias",
            shape: &[96],
            values: &b,
        },
        Array {
            name: "layers.1.fc.bias",
            shape: &[96],
            values: &b,
        },
        Array {
            name: "head.weight",
            shape: &[32, 96],
            values: &head,
        },
    ];
    let temporary = dir.join("weights.safetensors.tmp");
    std::fs::write(
        &temporary,
        safetensors::write_f32(&arrays).expect("a checkpoint"),
    )
    .expect("write");
    std::fs::rename(&temporary, dir.join("weights.safetensors")).expect("rename");
    let x = values(64 * 96);
    let input = Array {
        name: "x",
        shape: &[64, 96],
        values: &x,
    };
    std::fs::write(dir.join("x.npy"), npy::write_f32(&input)).expect("write");
}

#[test]
fn watch_rebuilds_when_a_weight_file_changes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("projects/from-safetensors/residual-f16.toml");
    let project = std::fs::read_to_string(source)
        .expect("read project")
        .replace(
            "kernels = \"../../device\"",
            concat!("kernels = \"", env!("CARGO_MANIFEST_DIR"), "/device\""),
        );
    std::fs::write(dir.path().join("residual-f16.toml"), project).expect("copy project");
    write_tensor_files(dir.path(), 0.25);
    let mut watch = Watch::start(dir.path(), "residual-f16.toml", 1, &[]);
    watch.wait_for("watching");
    let package = dir
        .path()
        .join("target/ipub/residual-f16/residual-f16.ipuexe");
    let read = || {
        ipub::package::file::read(camino::Utf8Path::from_path(&package).expect("utf-8 path"))
            .expect("a valid package")
    };
    let first = read();
    write_tensor_files(dir.path(), 0.5);
    watch.wait_for("rebuilt after change to weights.safetensors");
    assert!(watch.child.wait().expect("watch exits").success());
    let second = read();
    assert_eq!(first.file_values.len(), second.file_values.len());
    assert_ne!(
        first.file_values, second.file_values,
        "the new weights are in the package"
    );
}

/// Two projects watched together: an edit to one is explained as the
/// cause of that project's rebuild only; the other finds no input changed.
#[test]
fn watch_explains_each_project_by_its_own_changes() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.path().join("projects")).expect("mkdir");
    let source = std::fs::read_to_string(crate_dir.join("projects/matmul-f8.toml"))
        .expect("project")
        .replace(
            "[project]\n",
            &format!(
                "[project]\nkernels = {:?}\n",
                crate_dir.join("device").to_str().expect("utf-8")
            ),
        );
    for name in ["a", "b"] {
        std::fs::write(
            dir.path().join(format!("projects/{name}.toml")),
            source.replace("name = \"matmul-f8\"", &format!("name = \"{name}\"")),
        )
        .expect("write project");
    }
    let mut watch = Watch::start(
        dir.path(),
        "projects/a.toml",
        1,
        &["projects/b.toml", "--explain"],
    );
    watch.wait_for("watching");
    let b = dir.path().join("projects/b.toml");
    let edited = std::fs::read_to_string(&b)
        .expect("b")
        .replacen("std = 1.0", "std = 0.5", 1);
    save_by_rename(&b, &edited);
    watch.wait_for("rebuilt after change to projects/b.toml");
    let status = watch.child.wait().expect("watch exits after its rebuild");
    assert!(status.success());
    while let Ok(line) = watch.lines.recv_timeout(Duration::from_secs(5)) {
        watch.seen.push(line);
    }
    let explains: Vec<usize> = watch
        .seen
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("explain:"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(explains.len(), 2, "{:#?}", watch.seen);
    let (first, second) = (
        &watch.seen[explains[0]..explains[1]],
        &watch.seen[explains[1]..],
    );
    assert_eq!(
        first[0], "explain: no input changed since the last build",
        "{first:#?}"
    );
    assert!(first.iter().all(|l| !l.contains("b.toml")), "{first:#?}");
    assert!(
        second
            .iter()
            .any(|l| l.contains("projects/b.toml: tensor.x.init.std")),
        "{second:#?}"
    );
}

/// A project whose weight is declared in an include, `layers/w.toml`.
const LAYERED: &str = r#"include = ["layers/w.toml"]

[project]
name = "layered"
target = "ipu21"
tiles = 16
kernels = "KERNELS"

[[tensor]]
name = "x"
shape = [128, 64]
dtype = "f16"
role = "input"

[[op]]
name = "y"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.05
outputs = ["y"]
"#;

const WEIGHT: &str = r#"[[tensor]]
name = "w"
shape = [64, 64]
dtype = "f16"
role = "weight"
"#;

/// Writes [`LAYERED`] and its include into `dir`.
fn write_layered_project(dir: &Path) {
    let project = LAYERED.replace("KERNELS", concat!(env!("CARGO_MANIFEST_DIR"), "/device"));
    std::fs::write(dir.join("p.toml"), project).expect("write project");
    std::fs::create_dir(dir.join("layers")).expect("mkdir");
    std::fs::write(dir.join("layers/w.toml"), WEIGHT).expect("write include");
}

/// The line of a rebuild after `change`, from a batch of lines.
fn rebuilt_line<'a>(lines: &'a [String], change: &str) -> &'a str {
    let needle = format!("rebuilt after change to {change}");
    lines
        .iter()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no {needle:?} in {lines:#?}"))
}

/// A directory holding an include deleted and made again, or renamed
/// away and back (as a branch switch does), loses its watch: watch must
/// watch it again and read the include anew, as a fresh build would.
#[test]
fn watch_follows_an_include_directory_deleted_or_renamed_and_restored() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    write_layered_project(dir);
    let layers = dir.join("layers");
    let mut watch = Watch::start(dir, "p.toml", 5, &[]);
    let startup = watch.wait_for("watching");
    assert!(
        startup
            .iter()
            .any(|l| l.starts_with("built p.toml in") && !l.contains("errors")),
        "{startup:?}"
    );

    std::fs::remove_dir_all(&layers).expect("remove the directory");
    let lines = watch.wait_for("rebuilt after change to layers/w.toml (deleted)");
    assert!(
        rebuilt_line(&lines, "layers/w.toml (deleted)").contains("errors above"),
        "{lines:?}"
    );
    // Made again: the file appears whole, by a rename inside it.
    std::fs::create_dir(&layers).expect("mkdir");
    std::fs::write(layers.join("w.toml.tmp"), WEIGHT).expect("write");
    std::fs::rename(layers.join("w.toml.tmp"), layers.join("w.toml")).expect("rename");
    let lines = watch.wait_for("rebuilt after change to layers/w.toml (created)");
    assert!(
        !rebuilt_line(&lines, "layers/w.toml (created)").contains("errors"),
        "{lines:?}"
    );

    std::fs::rename(&layers, dir.join("layers.old")).expect("rename away");
    watch.wait_for("rebuilt after change to layers/w.toml (deleted)");
    std::fs::rename(dir.join("layers.old"), &layers).expect("rename back");
    let lines = watch.wait_for("rebuilt after change to layers/w.toml (created)");
    assert!(
        !rebuilt_line(&lines, "layers/w.toml (created)").contains("errors"),
        "{lines:?}"
    );

    // Later edits in the directory are still seen.
    save_by_rename(&layers.join("w.toml"), &format!("# edited\n{WEIGHT}"));
    let lines = watch.wait_for("rebuilt after change to layers/w.toml");
    assert!(
        !rebuilt_line(&lines, "layers/w.toml").contains("errors"),
        "{lines:?}"
    );
    assert!(watch.child.wait().expect("watch exits").success());
}

/// The same for the kernels' headers: `device/include` renamed away and
/// back brings back the package the first build wrote.
#[test]
fn watch_follows_a_kernel_include_directory_renamed_and_restored() {
    let dir = matmul_f8_with_its_kernels();
    let mut watch = Watch::start(dir.path(), "projects/matmul-f8.toml", 2, &[]);
    watch.wait_for("watching");
    let package = dir.path().join("target/ipub/matmul-f8/matmul-f8.ipuexe");
    let first = std::fs::read(&package).expect("the first build writes the package");

    let include = dir.path().join("device/include");
    let away = dir.path().join("device/include.old");
    std::fs::rename(&include, &away).expect("rename away");
    let lines = watch.wait_for_all(&["rebuilt after change to device/include/", "(deleted)"]);
    assert!(
        rebuilt_line(&lines, "device/include/").contains("errors above"),
        "{lines:?}"
    );
    std::fs::rename(&away, &include).expect("rename back");
    let lines = watch.wait_for_all(&["rebuilt after change to device/include/", "(created)"]);
    assert!(
        !rebuilt_line(&lines, "device/include/").contains("errors"),
        "{lines:?}"
    );
    assert!(watch.child.wait().expect("watch exits").success());
    assert_eq!(
        std::fs::read(&package).expect("package"),
        first,
        "the restored headers give the first package"
    );
}

/// The save that fixes an include that did not parse is not described as
/// "not valid TOML", and `build-finished` counts every error it printed.
#[test]
fn watch_describes_the_fix_of_a_broken_include_and_counts_its_errors() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let dir = dir.path();
    write_layered_project(dir);
    let mut watch = Watch::start(dir, "p.toml", 2, &["--message-format", "json"]);
    // The human lines go to stderr: "watching" says the watches are set.
    watch.wait_for_all(&[r#""reason":"build-finished""#, "watching"]);
    let include = dir.join("layers/w.toml");

    save_by_rename(&include, &format!("{WEIGHT}bad = = 1\n"));
    let lines = watch.wait_for(r#""reason":"rebuild-finished""#);
    let json: Vec<serde_json::Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let printed = json
        .iter()
        .filter(|m| m["reason"] == "compiler-message" && m["message"]["level"] == "error")
        .count();
    let finished = json
        .iter()
        .find(|m| m["reason"] == "build-finished")
        .expect("a build-finished message");
    assert!(printed >= 1, "{lines:#?}");
    assert_eq!(finished["errors"], printed, "{lines:#?}");
    let rebuilt = json.last().expect("rebuild-finished");
    assert_eq!(rebuilt["changes"][0], "layers/w.toml: (not valid TOML)");

    save_by_rename(&include, WEIGHT);
    let lines = watch.wait_for(r#""reason":"rebuild-finished""#);
    let rebuilt: serde_json::Value =
        serde_json::from_str(lines.last().expect("a line")).expect("JSON");
    assert_eq!(rebuilt["success"], true, "{lines:#?}");
    assert_eq!(rebuilt["changes"], serde_json::json!(["layers/w.toml"]));
    assert!(watch.child.wait().expect("watch exits").success());
}
