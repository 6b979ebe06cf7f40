//! Weights and inputs from tensor files, end to end: the example project
//! `projects/from-safetensors/residual-f16.toml` with a checkpoint and an
//! input this test writes, run on the model, its dump compared with values
//! computed here; inputs overridden at run time; an edited checkpoint
//! rebuilt; bad files refused with located errors.

use half::f16;

#[path = "common/npy.rs"]
mod npy;
use npy::npy;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROJECT: &str = "projects/from-safetensors/residual-f16.toml";
const ROWS: usize = 64;
const WIDTH: usize = 96;
const OUT: usize = 32;

fn ipub(args: &[&str], dir: &Path) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", dir.join("cache"))
        .env("IPUB_DEVICE_LOCK", dir.join("device.lock"))
        .env("IPUB_LOG", "warn")
        .output()
        .expect("run ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Deterministic values in [-scale, scale).
fn values(seed: u64, count: usize, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The checkpoint: `(key, shape, values)`.
struct Checkpoint(Vec<(String, Vec<usize>, Vec<f32>)>);

impl Checkpoint {
    fn new(seed: u64) -> Checkpoint {
        let mut tensors = Vec::new();
        for i in 0..2u64 {
            tensors.push((
                format!("layers.{i}.fc.weight"),
                vec![WIDTH, WIDTH],
                values(seed + 10 * i, WIDTH * WIDTH, 0.15),
            ));
            tensors.push((
                format!("layers.{i}.fc.bias"),
                vec![WIDTH],
                values(seed + 10 * i + 1, WIDTH, 0.1),
            ));
        }
        tensors.push((
            "head.weight".into(),
            vec![OUT, WIDTH],
            values(seed + 99, OUT * WIDTH, 0.15),
        ));
        Checkpoint(tensors)
    }

    fn get(&self, key: &str) -> &[f32] {
        &self.0.iter().find(|(k, _, _)| k == key).expect("key").2
    }

    /// Written with the `safetensors` crate, the weights as f32 and the
    /// biases as bf16, as checkpoints mix them.
    fn bytes(&self) -> Vec<u8> {
        let data: Vec<(safetensors::Dtype, Vec<u8>)> = self
            .0
            .iter()
            .map(|(key, _, v)| {
                if key.ends_with("bias") {
                    let b = v
                        .iter()
                        .flat_map(|x| half::bf16::from_f32(*x).to_le_bytes());
                    (safetensors::Dtype::BF16, b.collect())
                } else {
                    (
                        safetensors::Dtype::F32,
                        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                    )
                }
            })
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = self
            .0
            .iter()
            .zip(&data)
            .map(|((key, shape, _), (dtype, bytes))| {
                let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes)
                    .expect("view");
                (key.clone(), view)
            })
            .collect();
        safetensors::serialize(views, None).expect("serialize")
    }

    /// The value the file holds for `key`, as the file's dtype stores it.
    fn stored(&self, key: &str) -> Vec<f32> {
        let v = self.get(key);
        if key.ends_with("bias") {
            v.iter()
                .map(|x| half::bf16::from_f32(*x).to_f32())
                .collect()
        } else {
            v.to_vec()
        }
    }
}

/// The f32 values of an `.npy` file of f32, read by hand.
fn read_npy(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let start = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    bytes[start..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn round16(v: f64) -> f64 {
    f16::from_f64(v).to_f64()
}

/// `y` computed here, in f64 with every tensor rounded to f16 as the
/// project stores it.
fn expected_y(checkpoint: &Checkpoint, x: &[f32]) -> Vec<f64> {
    expected(checkpoint, x).0
}

/// `y` and the last iteration's `h_next` (the result of the repeat's
/// body), computed here.
fn expected(checkpoint: &Checkpoint, x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let mut h: Vec<f64> = x.iter().map(|&v| round16(f64::from(v))).collect();
    let linear = |h: &[f64], w: &[f32], outputs: usize| -> Vec<f64> {
        let w: Vec<f64> = w.iter().map(|&v| round16(f64::from(v))).collect();
        let mut out = vec![0.0; ROWS * outputs];
        for r in 0..ROWS {
            for o in 0..outputs {
                let dot: f64 = (0..WIDTH)
                    .map(|k| h[r * WIDTH + k] * w[o * WIDTH + k])
                    .sum();
                out[r * outputs + o] = round16(dot);
            }
        }
        out
    };
    for i in 0..2 {
        let fc = linear(&h, checkpoint.get(&format!("layers.{i}.fc.weight")), WIDTH);
        let bias = checkpoint.stored(&format!("layers.{i}.fc.bias"));
        let fc_bias: Vec<f64> = (0..fc.len())
            .map(|index| round16(fc[index] + round16(f64::from(bias[index % WIDTH]))))
            .collect();
        for (value, with_bias) in h.iter_mut().zip(&fc_bias) {
            *value = round16(*value + with_bias);
        }
    }
    (linear(&h, checkpoint.get("head.weight"), OUT), h)
}

/// Cosine similarity and maximum absolute error of `a` against `b`.
fn agreement(a: &[f32], b: &[f64]) -> (f64, f64) {
    assert_eq!(a.len(), b.len());
    let (mut dot, mut na, mut nb, mut max) = (0.0, 0.0, 0.0, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let x = f64::from(x);
        dot += x * y;
        na += x * x;
        nb += y * y;
        max = max.max((x - y).abs());
    }
    (dot / (na * nb).sqrt(), max)
}

fn assert_close(what: &str, a: &[f32], b: &[f64]) {
    let (cosine, max) = agreement(a, b);
    assert!(
        cosine > 0.9999 && max < 0.02,
        "{what}: cosine {cosine}, max error {max}"
    );
}

/// A directory with the example project and its files.
fn setup(checkpoint: &Checkpoint, x: &[f32]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project = dir.path().join("residual-f16.toml");
    let text = std::fs::read_to_string(root.join(PROJECT)).expect("the example project");
    let kernels = format!("kernels = {:?}", root.join("device").display().to_string());
    std::fs::write(
        &project,
        text.replace("kernels = \"../../device\"", &kernels),
    )
    .expect("copy the project");
    std::fs::write(dir.path().join("weights.safetensors"), checkpoint.bytes()).expect("write");
    std::fs::write(dir.path().join("x.npy"), npy(&[ROWS, WIDTH], x)).expect("write");
    (dir, project)
}

#[test]
fn weights_from_a_checkpoint_run_and_dump_what_the_device_computed() {
    let checkpoint = Checkpoint::new(1);
    let x = values(7, ROWS * WIDTH, 1.0);
    let (dir, _) = setup(&checkpoint, &x);
    let path = dir.path();
    let (code, stdout, stderr) = ipub(
        &["run", "residual-f16.toml", "--out", "out", "--dump", "dump"],
        path,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    let expected = expected_y(&checkpoint, &x);
    let device = read_npy(&path.join("dump/device/y.npy"));
    let reference = read_npy(&path.join("dump/reference/y.npy"));
    assert_close("device", &device, &expected);
    assert_close("reference", &reference, &expected);
    // One safetensors file per side holds the same values.
    let both = std::fs::read(path.join("dump/device.safetensors")).expect("device.safetensors");
    let file = safetensors::SafeTensors::deserialize(&both).expect("a safetensors file");
    let y = file.tensor("y").expect("y");
    assert_eq!(y.shape(), [ROWS, OUT]);
    let stored: Vec<f32> = y
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(stored, device);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path.join("dump/index.json")).expect("index.json"))
            .expect("json");
    let entry = &index["tensors"][0];
    assert_eq!(entry["name"], "y");
    assert_eq!(entry["shape"], serde_json::json!([ROWS, OUT]));
    assert_eq!(entry["checked"], true);
    assert!(entry["cosine_similarity"].as_f64().expect("cosine") > 0.999);

    // The package runs on other inputs without the project or a rebuild.
    let x2 = values(8, ROWS * WIDTH, 0.5);
    let inputs: Vec<u8> = {
        let bytes: Vec<u8> = x2.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = safetensors::tensor::TensorView::new(
            safetensors::Dtype::F32,
            vec![ROWS, WIDTH],
            &bytes,
        )
        .expect("view");
        safetensors::serialize(vec![("x".to_string(), view)], None).expect("serialize")
    };
    std::fs::write(path.join("inputs.safetensors"), inputs).expect("write");
    std::fs::remove_file(path.join("weights.safetensors")).expect("remove");
    let (code, stdout, stderr) = ipub(
        &[
            "run",
            "out/residual-f16.ipuexe",
            "--inputs",
            "inputs.safetensors",
            "--dump",
            "dump2",
        ],
        path,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    assert_close(
        "device on other inputs",
        &read_npy(&path.join("dump2/device/y.npy")),
        &expected_y(&checkpoint, &x2),
    );

    // Inputs that do not fit the package are refused.
    let (code, _, stderr) = ipub(
        &["run", "out/residual-f16.ipuexe", "--inputs", "x.npy"],
        path,
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("`--inputs` takes a `.safetensors` file"),
        "{stderr}"
    );
}

#[test]
fn an_edited_checkpoint_rebuilds_and_dump_all_reads_intermediates() {
    let checkpoint = Checkpoint::new(2);
    let x = values(3, ROWS * WIDTH, 1.0);
    let (dir, _) = setup(&checkpoint, &x);
    let path = dir.path();
    let (code, stdout, stderr) = ipub(&["build", "residual-f16.toml", "--out", "out"], path);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (_, stdout, _) = ipub(&["build", "residual-f16.toml", "--out", "out"], path);
    assert!(stdout.contains("up to date"), "{stdout}");
    // New values under the same keys: the stamp sees the file change.
    let edited = Checkpoint::new(5);
    std::fs::write(path.join("weights.safetensors"), edited.bytes()).expect("write");
    let (code, stdout, stderr) = ipub(
        &["build", "residual-f16.toml", "--out", "out", "--explain"],
        path,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!stdout.contains("up to date"), "{stdout}");
    assert!(stdout.contains("weights.safetensors"), "{stdout}");
    let (code, stdout, stderr) = ipub(
        &[
            "run",
            "residual-f16.toml",
            "--out",
            "out",
            "--dump",
            "dump",
            "--dump-all",
        ],
        path,
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=PASS"), "{stdout}");
    assert_close(
        "device after the edit",
        &read_npy(&path.join("dump/device/y.npy")),
        &expected_y(&edited, &x),
    );
    // The repeat's result is an intermediate the dump now holds.
    let layers = read_npy(&path.join("dump/device/layers.npy"));
    assert_eq!(layers.len(), ROWS * WIDTH);
    let reference = read_npy(&path.join("dump/reference/layers.npy"));
    let (cosine, _) = agreement(
        &layers,
        &reference.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
    );
    assert!(cosine > 0.999, "{cosine}");
    // Inside the body, `fc`, `fc_bias` and `h_next` run as one operation
    // (the adds in the product's epilogue), so the body's intermediate is
    // its result, as the last iteration left it.
    assert_close(
        "the last iteration's h_next",
        &read_npy(&path.join("dump/device/h_next.npy")),
        &expected(&edited, &x).1,
    );
    let index = std::fs::read_to_string(path.join("dump/index.json")).expect("index");
    assert!(
        index.contains("\"last_iteration_of\": \"layers\""),
        "{index}"
    );
    assert!(stdout.contains("dump: 3 tensors"), "{stdout}");
}

#[test]
fn bad_tensor_files_are_located_errors() {
    let checkpoint = Checkpoint::new(1);
    let x = values(7, ROWS * WIDTH, 1.0);
    let (dir, _) = setup(&checkpoint, &x);
    let path = dir.path();
    let check = |expected: &[&str]| {
        let (code, stdout, stderr) = ipub(&["check", "residual-f16.toml"], path);
        assert_eq!(code, 1, "{stdout}\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        for text in expected {
            assert!(stderr.contains(text), "{text}\n{stderr}");
        }
    };
    let good = checkpoint.bytes();
    std::fs::write(path.join("weights.safetensors"), &good[..good.len() / 2]).expect("write");
    check(&["it is not a valid safetensors file", "residual-f16.toml:"]);
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(path.join("weights.safetensors"), &huge).expect("write");
    check(&["it is not a valid safetensors file"]);
    std::fs::write(path.join("weights.safetensors"), b"not a checkpoint").expect("write");
    check(&["it is not a valid safetensors file"]);
    std::fs::remove_file(path.join("weights.safetensors")).expect("remove");
    check(&[
        "cannot read tensor file",
        "weights.safetensors",
        "does not exist",
    ]);
    // NaN-filled values are data: the project builds, with a warning at
    // the tensor, and the check fails on them rather than passing. So do
    // values too large for the dtype, saturated to infinity in f16.
    let mut nan = Checkpoint::new(1);
    for v in &mut nan.0[0].2 {
        *v = f32::NAN;
    }
    nan.0[4].2[0] = 1e6;
    nan.0[4].2[1] = -7e4;
    std::fs::write(path.join("weights.safetensors"), nan.bytes()).expect("write");
    let (code, stdout, stderr) = ipub(&["run", "residual-f16.toml", "--out", "out"], path);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("numericalTest=FAIL"), "{stdout}");
    // In file order: the repeat's weight, then the head's.
    let expected = [
        "warning: `w` reads 9216 NaNs from `weights.safetensors`",
        "--> residual-f16.toml:37:8",
        "warning: `head_w` reads 2 values too large for f16 from `weights.safetensors`",
        "--> residual-f16.toml:70:8",
    ];
    let mut rest = stderr.as_str();
    for text in expected {
        let at = rest
            .find(text)
            .unwrap_or_else(|| panic!("{text}\n{stderr}"));
        rest = &rest[at + text.len()..];
    }
}
