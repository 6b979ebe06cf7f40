//! Runs one kernel variant from `device/` on the single-tile executor the
//! way the emitter calls it: the state struct filled by field name, a
//! supervisor that starts all six workers with `runall` and waits with
//! `sync`.

use camino::Utf8PathBuf;
use ipub::asm::{self, Placement};
use ipub::exec::Tile;
use ipub::graph::Reduction;
use ipub::isa::text::assemble_program;
use ipub::kernels::{self, EntryMetadata};
use ipub::partition::{BinaryOp, KernelId, UnaryOp};
use ipub::pipeline::kernels::variant_of;
use ipub::target::IPU21;
use ipub::vfs::OsFs;
use std::collections::BTreeMap;

const CODE: u32 = 0x4C000;
const STATE: u32 = 0x70000;
/// Operand buffers are laid out from here, each 16-byte aligned.
const DATA: u32 = 0x80000;
const WATCHDOG: u64 = 200_000_000;
/// Bytes after each buffer that must survive the run untouched.
const GUARD: u32 = 32;
const GUARD_BYTE: u8 = 0xA5;

/// A compiled and linked variant.
pub struct Kernel {
    code: Vec<u8>,
    entry: u32,
    metadata: EntryMetadata,
    defines: BTreeMap<String, String>,
}

pub fn device_dir() -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("device")
}

/// The kernel whose name is `name`, among every row kernel a plan can
/// name (tests name kernels as the profile and the package show them).
pub fn kernel_named(name: &str) -> KernelId {
    use ipub::graph::DType::{F143, F152, F16, F32};
    let mut known = vec![
        KernelId::Add { dtype: F16 },
        KernelId::Add { dtype: F32 },
        KernelId::Layernorm { dtype: F16 },
        KernelId::LayernormCast { to: F143 },
        KernelId::LayernormCast { to: F152 },
        KernelId::RearrangeBlocks,
        KernelId::ReduceAdd,
        KernelId::ReduceAddPlus { addends: 1 },
        KernelId::ReduceAddPlus { addends: 2 },
        KernelId::Rmsnorm { dtype: F16 },
        KernelId::ReduceAddF32,
    ];
    for add in [false, true] {
        known.push(KernelId::Gelu { dtype: F16, add });
        known.push(KernelId::GeluCast { to: F143, add });
        known.push(KernelId::GeluCast { to: F152, add });
    }
    for segmented in [false, true] {
        known.push(KernelId::RmsnormParts { segmented });
        for out in [F16, F143, F152] {
            known.push(KernelId::LayernormParts { out, segmented });
        }
    }
    known.extend([
        KernelId::LayernormStats,
        KernelId::RmsnormStats,
        KernelId::SoftmaxStats { exp_once: false },
        KernelId::SoftmaxStats { exp_once: true },
        KernelId::SoftmaxParts,
        KernelId::SoftmaxPartsOnce { out: F143 },
        KernelId::SoftmaxPartsOnce { out: F152 },
        KernelId::FoldRecords { softmax: false },
        KernelId::FoldRecords { softmax: true },
    ]);
    for dtype in [F16, F32] {
        for op in [BinaryOp::Mul, BinaryOp::Sub, BinaryOp::Div] {
            known.push(KernelId::Binary { op, dtype });
        }
        for op in [UnaryOp::Silu, UnaryOp::GeluTanh] {
            known.push(KernelId::Unary { op, dtype });
        }
        for reduction in [Reduction::Sum, Reduction::Mean, Reduction::Max] {
            known.push(KernelId::ReduceRows { reduction, dtype });
            known.push(KernelId::ReducePartials {
                reduction,
                out: dtype,
            });
        }
        for reduction in [Reduction::Sum, Reduction::Max] {
            known.push(KernelId::ReducePartial { reduction, dtype });
        }
    }
    for causal in [false, true] {
        for exp_once in [false, true] {
            known.push(KernelId::Softmax {
                dtype: F16,
                causal,
                exp_once,
            });
        }
    }
    for mask in [F16, F32] {
        known.push(KernelId::SoftmaxMasked { dtype: F16, mask });
        known.push(KernelId::SoftmaxMaskedStats { mask });
        known.push(KernelId::SoftmaxMaskedParts { mask });
    }
    for to in [F143, F152] {
        known.push(KernelId::ReduceCast { to });
    }
    for other in [F143, F152, F32] {
        known.push(KernelId::Cast {
            from: F16,
            to: other,
        });
        known.push(KernelId::Cast {
            from: other,
            to: F16,
        });
    }
    for (rows, cols) in [(16, 4), (4, 16), (8, 8), (16, 16), (1, 1)] {
        known.push(KernelId::RearrangeBlockMajor {
            dtype: F16,
            rows,
            cols,
        });
    }
    known
        .into_iter()
        .find(|k| k.to_string() == name)
        .unwrap_or_else(|| panic!("no kernel is named {name}"))
}

/// Compiles the kernel named `name` from `device/`.
pub fn compile(name: &str) -> Kernel {
    let variant = variant_of(kernel_named(name), &device_dir())
        .unwrap_or_else(|| panic!("no source provides {name}"));
    let pre = asm::preprocess(
        &OsFs,
        &variant.source,
        &variant.defines,
        &variant.include_dirs,
    );
    let compiled =
        kernels::compile_preprocessed(pre, &variant, &IPU21, "test").unwrap_or_else(|e| match e {
            kernels::KernelError::Assembly { rendered, .. } => panic!("{rendered}"),
            other => panic!("{other}"),
        });
    let objects = [compiled.object];
    let placements = Placement::pack(&objects, CODE, 0x6C000);
    let linked = asm::link(&objects, &placements, &IPU21).expect("links");
    let entry_name = variant.entry.clone().expect("row kernels name their entry");
    let entry = linked.symbols[&entry_name].value as u32;
    let mut code = Vec::new();
    for section in &linked.sections {
        assert!(section.code, "row kernels have no data sections");
        let offset = (section.address - CODE) as usize;
        if code.len() < offset + section.bytes.len() {
            code.resize(offset + section.bytes.len(), 0);
        }
        code[offset..offset + section.bytes.len()].copy_from_slice(&section.bytes);
    }
    let metadata = compiled
        .metadata
        .entries
        .into_iter()
        .find(|e| e.symbol == entry_name)
        .expect("entry metadata");
    Kernel {
        code,
        entry,
        metadata,
        defines: variant.defines,
    }
}

/// One run's operands: input buffers' bytes, the output's size in bytes and
/// the lowering parameters by name.
pub struct Run<'a> {
    pub inputs: Vec<&'a [u8]>,
    pub out_bytes: usize,
    pub params: Vec<(&'a str, i64)>,
}

pub struct Outcome {
    pub out: Vec<u8>,
    /// The input buffers after the run: a kernel that writes one of its
    /// inputs (the split softmax's exponentials) is checked through it.
    pub inputs: Vec<Vec<u8>>,
    pub cycles: u64,
}

impl Kernel {
    /// The declared state fields, as `name@offset:kind`.
    pub fn fields(&self) -> String {
        self.metadata
            .params
            .iter()
            .map(|p| format!("{}@{}:{}", p.name, p.offset, p.kind))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The entry's cost formula evaluated for one run, with the variant's
    /// defines and the run's parameters bound.
    pub fn estimate(&self, params: &[(&str, i64)]) -> i64 {
        let cost = self.metadata.cost.as_ref().expect("a cost formula");
        let mut values: BTreeMap<String, i64> = self
            .defines
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
            .collect();
        values.extend(params.iter().map(|(k, v)| (k.to_string(), *v)));
        kernels::eval_cost(&cost.formula, &values)
            .unwrap_or_else(|e| panic!("cost formula `{}`: {e}", cost.formula))
    }

    pub fn run(&self, run: &Run) -> Outcome {
        let mut tile = Tile::new(&IPU21, 0);
        let supervisor_at = (CODE + self.code.len() as u32).next_multiple_of(8);
        let supervisor = assemble_program(
            &format!(
                "setzi $m1, {:#x}\nsetzi $m2, {STATE:#x}\nrunall $m1, $m2\nsync 0\n",
                self.entry
            ),
            supervisor_at,
        )
        .expect("supervisor assembles");
        let mut image = self.code.clone();
        image.resize((supervisor_at - CODE) as usize, 0);
        image.extend(supervisor.iter().flat_map(|w| w.to_le_bytes()));
        let words: Vec<u32> = image
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("whole words")))
            .collect();
        tile.load_code(CODE, &words).expect("code fits");

        // Buffers: inputs, then the output, each followed by a guard.
        let mut at = DATA;
        let mut addresses = BTreeMap::new();
        let mut guards = Vec::new();
        let mut inputs = Vec::new();
        let names = ["in0", "in1", "in2", "in3"];
        for (name, bytes) in names.iter().zip(&run.inputs) {
            tile.write_bytes(at, bytes).expect("input fits");
            addresses.insert(name.to_string(), at);
            inputs.push((at, bytes.len() as u32));
            at = (at + bytes.len() as u32).next_multiple_of(16);
            tile.write_bytes(at, &[GUARD_BYTE; GUARD as usize])
                .expect("guard fits");
            guards.push(at);
            at += GUARD;
        }
        let out = at;
        tile.write_bytes(out, &vec![0x5A; run.out_bytes])
            .expect("output fits");
        addresses.insert("out".to_string(), out);
        // The bytes right after the output, up to its 16-byte boundary and
        // beyond, must not be written.
        tile.write_bytes(out + run.out_bytes as u32, &[GUARD_BYTE; GUARD as usize])
            .expect("guard fits");

        let mut state = vec![0u8; 64];
        for field in &self.metadata.params {
            let value = match addresses.get(&field.name) {
                Some(&address) => i64::from(address),
                None => {
                    run.params
                        .iter()
                        .find(|(n, _)| *n == field.name)
                        .unwrap_or_else(|| panic!("no value for state field `{}`", field.name))
                        .1
                }
            };
            let offset = field.offset as usize;
            state[offset..offset + 4].copy_from_slice(&(value as u32).to_le_bytes());
        }
        tile.write_bytes(STATE, &state).expect("state fits");

        let stats = tile
            .run_supervisor(supervisor_at, WATCHDOG)
            .unwrap_or_else(|fault| panic!("kernel faulted: {fault}"));
        assert!(stats.workers_ok, "a worker exited with a failure flag");
        for guard in guards {
            let bytes = tile.read_bytes(guard, GUARD).expect("guard readable");
            assert!(
                bytes.iter().all(|&b| b == GUARD_BYTE),
                "input guard overwritten"
            );
        }
        let after = tile
            .read_bytes(out + run.out_bytes as u32, GUARD)
            .expect("guard readable");
        assert!(
            after.iter().all(|&b| b == GUARD_BYTE),
            "the kernel wrote past its output: {after:02x?}"
        );
        Outcome {
            out: tile
                .read_bytes(out, run.out_bytes as u32)
                .expect("output readable")
                .to_vec(),
            inputs: inputs
                .into_iter()
                .map(|(at, len)| tile.read_bytes(at, len).expect("input readable").to_vec())
                .collect(),
            cycles: stats.cycles,
        }
    }
}

/// A small seeded generator (splitmix64) so runs are reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly normal (sum of uniforms), mean 0 and deviation `std`.
    pub fn normal(&mut self, std: f64) -> f64 {
        let s: f64 = (0..12).map(|_| self.unit()).sum();
        (s - 6.0) * std
    }
}
