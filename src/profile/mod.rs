//! Cycle profiles: what every tile did in every step of a run, what the
//! compiler expected, and what occupied each tile's memory.
//!
//! The device measures a run step by step ([`StepProfile`]); `ipub run`
//! adds what the package says about the build ([`collect`]): estimates per
//! operation and tile step, the operation of each exchange step, every
//! tile's placement, and fingerprints of the package's tiles and exchange
//! programs. The result is written as `*.profile.json`, whose format is
//! documented and versioned in `book/src/profile.md`. `ipub profile` reads
//! one back and shows it: text summaries ([`summary`]), a self-contained
//! HTML report ([`html`]), a Chrome trace with counters ([`trace`]), and
//! the difference between two runs ([`diff`]). [`analysis`] derives the
//! figures they share.
//!
//! The placement and operation types are the package's own
//! ([`crate::package::profile_layout`]): changing them changes this format
//! too, and bumps [`FORMAT_VERSION`].

pub mod analysis;
pub(crate) mod collect;
pub(crate) mod diff;
pub(crate) mod html;
pub(crate) mod summary;
pub(crate) mod trace;

use crate::target::{Target, TargetId};
use camino::Utf8Path;
use serde::{Deserialize, Serialize};

pub use crate::package::{BufferKind, BufferPlace, OpEstimate, SupportPlace};

/// Version of the profile file format; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest version this ipub reads: version 1 lacks everything but the
/// steps, which reports then leave out.
pub(crate) const OLDEST_READABLE_VERSION: u32 = 1;

/// The largest profile file read: a run records at most
/// [`MAX_EXECUTED_TILE_RECORDS`](crate::package::limits::MAX_EXECUTED_TILE_RECORDS)
/// tile activities, about a hundred bytes each.
pub(crate) const MAX_PROFILE_FILE_BYTES: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    Compute,
    Exchange,
    Sync,
    Host,
}

impl StepKind {
    pub(crate) const ALL: [StepKind; 4] = [
        StepKind::Compute,
        StepKind::Exchange,
        StepKind::Sync,
        StepKind::Host,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            StepKind::Compute => "compute",
            StepKind::Exchange => "exchange",
            StepKind::Sync => "sync",
            StepKind::Host => "host",
        }
    }
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// One tile's part in a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileActivity {
    pub tile: u32,
    /// The kernel the tile ran (compute steps); several run one after
    /// another are joined with `+`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Cycles the tile was busy; the rest of the step it waited.
    pub busy_cycles: u64,
    /// Instructions the tile executed (all contexts).
    #[serde(default)]
    pub instructions: u64,
    /// What the kernels' cost formulas predicted (compute steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cycles: Option<u64>,
    /// Bytes the tile received from other tiles (exchange steps).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_in: u64,
    /// Bytes the tile sent to other tiles (exchange steps; a broadcast
    /// counts once).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes_out: u64,
}

impl TileActivity {
    /// A tile's part with no estimate and no exchange traffic.
    pub(crate) fn busy(
        tile: u32,
        kernel: Option<String>,
        busy_cycles: u64,
        instructions: u64,
    ) -> Self {
        TileActivity {
            tile,
            kernel,
            busy_cycles,
            instructions,
            estimated_cycles: None,
            bytes_in: 0,
            bytes_out: 0,
        }
    }
}

/// One step of the run, as all tiles saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepProfile {
    pub kind: StepKind,
    /// The operation (compute), the phase's purpose (exchange) or the call.
    pub label: String,
    /// The operation the step computes or gathers operands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    /// The step's pre-order index in the package's `run` call (a sync has
    /// its exchange's): what buffer lifetimes are stated in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    pub start_cycle: u64,
    /// Cycles from the step's start to its last tile's end.
    pub cycles: u64,
    /// What the compiler expected: the slowest tile's cost formulas
    /// (compute), the scheduled horizon (exchange), the sync's cost (sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cycles: Option<u64>,
    pub tiles: Vec<TileActivity>,
}

impl StepProfile {
    /// The tiles that set the step's length: every tile as busy as the
    /// busiest (none when no tile was busy).
    pub(crate) fn slowest_tiles(&self) -> Vec<u32> {
        let max = self.tiles.iter().map(|t| t.busy_cycles).max().unwrap_or(0);
        if max == 0 {
            return Vec::new();
        }
        self.tiles
            .iter()
            .filter(|t| t.busy_cycles == max)
            .map(|t| t.tile)
            .collect()
    }
}

/// Which package the run executed, and fingerprints of what it was built
/// into, so two profiles can say what the build changed between them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildInfo {
    /// The package file, relative to the profile's directory when it can
    /// be.
    pub package: String,
    /// blake3 of the package file (hex).
    pub package_hash: String,
    pub compiler_version: String,
    /// Every kernel variant the package runs.
    pub kernels: Vec<String>,
    /// A short hash of each exchange program: `label` and `hash`.
    pub exchanges: Vec<ExchangeFingerprint>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangeFingerprint {
    pub label: String,
    pub hash: String,
    /// Bytes delivered to destination tiles (a broadcast counts per copy).
    pub bytes: u64,
}

/// One used tile: what its image holds and where its data lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileProfile {
    pub tile: u32,
    /// Short hashes of the tile's code segments and of its data segments.
    pub code_hash: String,
    pub data_hash: String,
    /// Support blocks (supervisor code, kernel code, kernel states).
    #[serde(default)]
    pub support: Vec<SupportPlace>,
    /// Buffers in ascending address order, with their lifetimes.
    #[serde(default)]
    pub buffers: Vec<BufferPlace>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub format_version: u32,
    pub project: String,
    /// Known by construction: reading a profile rejects a target this
    /// ipub does not know.
    #[serde(deserialize_with = "known_target")]
    pub target: TargetId,
    pub clock_hz: u64,
    /// Cycles the model measured for the whole run.
    pub total_cycles: u64,
    /// Cycles the compiler's cost model predicted.
    pub estimated_cycles: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildInfo>,
    pub steps: Vec<StepProfile>,
    /// The planner's estimate of every operation, in program order.
    #[serde(default)]
    pub ops: Vec<OpEstimate>,
    /// Every tile the package uses, ascending.
    #[serde(default)]
    pub tiles: Vec<TileProfile>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {problem}")]
    Io {
        path: String,
        problem: crate::fsutil::ReadError,
    },
    #[error("{path} is not a valid ipub profile: {message}")]
    Invalid { path: String, message: String },
}

impl Profile {
    /// Reads and validates a profile file.
    pub fn read(path: &Utf8Path) -> Result<Profile, ProfileError> {
        let text = crate::fsutil::read_text(path, MAX_PROFILE_FILE_BYTES).map_err(|problem| {
            ProfileError::Io {
                path: path.to_string(),
                problem,
            }
        })?;
        Profile::parse(&text).map_err(|message| ProfileError::Invalid {
            path: path.to_string(),
            message,
        })
    }

    /// Parses and validates profile JSON.
    pub(crate) fn parse(text: &str) -> Result<Profile, String> {
        let profile: Profile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        profile.validate()?;
        Ok(profile)
    }

    fn validate(&self) -> Result<(), String> {
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&self.format_version) {
            return Err(format!(
                "format version {} is not supported (this ipub reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION})",
                self.format_version
            ));
        }
        let target = self.target.spec();
        if self.clock_hz == 0 {
            return Err("clock_hz is zero".into());
        }
        let mut end = 0;
        for (i, step) in self.steps.iter().enumerate() {
            if step.start_cycle < end {
                return Err(format!(
                    "step {i} starts at cycle {} before step {} ends at {end}",
                    step.start_cycle,
                    i.saturating_sub(1)
                ));
            }
            if let Some(tile) = step.tiles.iter().find(|t| t.busy_cycles > step.cycles) {
                return Err(format!(
                    "step {i}: tile {} is busy for longer than the step",
                    tile.tile
                ));
            }
            if let Some(tile) = step.tiles.iter().find(|t| t.tile >= target.tiles) {
                return Err(format!(
                    "step {i}: tile {} does not exist ({} has {} tiles)",
                    tile.tile, target.name, target.tiles
                ));
            }
            end = step
                .start_cycle
                .checked_add(step.cycles)
                .ok_or_else(|| format!("step {i} ends past the largest cycle count"))?;
        }
        if end > self.total_cycles {
            return Err(format!(
                "steps end at cycle {end}, after the run's total of {}",
                self.total_cycles
            ));
        }
        let memory = &target.memory.tile;
        for tile in &self.tiles {
            if tile.tile >= target.tiles {
                return Err(format!("tile {} does not exist", tile.tile));
            }
            let spans = tile
                .support
                .iter()
                .map(|s| (s.address, s.bytes, s.kind.as_str()))
                .chain(
                    tile.buffers
                        .iter()
                        .map(|b| (b.address, b.bytes, b.name.as_str())),
                );
            for (address, bytes, what) in spans {
                if !memory.contains_span(address, bytes) {
                    return Err(format!(
                        "tile {}: {what} at {address:#x} ({bytes} bytes) lies outside tile memory",
                        tile.tile
                    ));
                }
            }
            if let Some(b) = tile.buffers.iter().find(|b| b.first_step > b.last_step) {
                return Err(format!(
                    "tile {}: {} ends its life before it starts",
                    tile.tile, b.name
                ));
            }
        }
        Ok(())
    }

    /// The profile as JSON, compact: a 1472-tile run has tens of thousands
    /// of tile entries.
    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("profiles serialise")
    }

    /// Cycles converted to microseconds at the profile's clock.
    pub(crate) fn micros(&self, cycles: u64) -> f64 {
        cycles as f64 * 1e6 / self.clock_hz as f64
    }

    /// The target the run was on (validated, so known).
    pub fn target(&self) -> &'static Target {
        self.target.spec()
    }
}

/// A profile's target by name, for serde: a name this ipub does not know
/// is the profile's error (said as validation said it before targets were
/// read as [`TargetId`]).
fn known_target<'de, D: serde::Deserializer<'de>>(names: D) -> Result<TargetId, D::Error> {
    let name = String::deserialize(names)?;
    TargetId::from_name(&name).ok_or_else(|| {
        serde::de::Error::custom(format!("target `{name}` is not one this ipub knows"))
    })
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed count with thousands separators (`+1,200`, `-35`).
pub(crate) fn signed_thousands(value: i64) -> String {
    let sign = if value < 0 { "-" } else { "+" };
    format!("{sign}{}", thousands(value.unsigned_abs()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn numbers_read_with_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(981441), "981,441");
        assert_eq!(signed_thousands(-1200), "-1,200");
    }

    /// A small profile with every field: two tiles, a gemm, its exchange
    /// and a softmax, estimates and placements.
    pub(crate) fn sample() -> Profile {
        let tile = |tile, kernel: Option<&str>, busy, estimate: Option<u64>| TileActivity {
            estimated_cycles: estimate,
            ..TileActivity::busy(tile, kernel.map(str::to_string), busy, busy / 6)
        };
        let exchange = |tile, busy, bytes_in, bytes_out| TileActivity {
            bytes_in,
            bytes_out,
            ..TileActivity::busy(tile, None, busy, 0)
        };
        let buffer =
            |address, bytes, kind, name: &str, op: Option<&str>, life: (u32, u32)| BufferPlace {
                address,
                bytes,
                kind,
                name: name.into(),
                op: op.map(str::to_string),
                first_step: life.0,
                last_step: life.1,
            };
        let memory = |tile| TileProfile {
            tile,
            code_hash: format!("c{tile}"),
            data_hash: format!("d{tile}"),
            support: vec![SupportPlace {
                kind: "code".into(),
                address: 0x4C000,
                bytes: 4096,
            }],
            buffers: vec![
                buffer(0x4D000, 8192, BufferKind::Input, "input `x`", None, (0, 1)),
                buffer(
                    0x4D000,
                    2048,
                    BufferKind::Operand,
                    "operand 0 of `softmax`",
                    Some("softmax"),
                    (2, 3),
                ),
                buffer(
                    0x80000,
                    16384,
                    BufferKind::Weight,
                    "weight `w`",
                    None,
                    (0, 3),
                ),
                buffer(
                    0x84000,
                    2048,
                    BufferKind::Activation,
                    "activation `qkv`",
                    Some("qkv"),
                    (1, 2),
                ),
            ],
        };
        let op = |name: &str, kind: &str, compute, exchange, sync, macs, roofline| OpEstimate {
            name: name.into(),
            kind: kind.into(),
            executions: 1,
            tiles: 2,
            compute_cycles: compute,
            exchange_cycles: exchange,
            sync_cycles: sync,
            macs,
            roofline_cycles: roofline,
            k_slice: None,
            gelu_in_f16: false,
        };
        Profile {
            format_version: FORMAT_VERSION,
            project: "sample".into(),
            target: TargetId::Ipu21,
            clock_hz: 1_500_000_000,
            total_cycles: 3000,
            estimated_cycles: 2800,
            build: Some(BuildInfo {
                package: "sample.ipuexe".into(),
                package_hash: "ab12".into(),
                compiler_version: "0.1.0".into(),
                kernels: vec!["gemm_f8_k64_c16_r4".into(), "softmax_f16".into()],
                exchanges: vec![ExchangeFingerprint {
                    label: "op softmax".into(),
                    hash: "e1".into(),
                    bytes: 1000,
                }],
            }),
            steps: vec![
                StepProfile {
                    kind: StepKind::Compute,
                    label: "qkv".into(),
                    op: Some("qkv".into()),
                    iteration: Some(0),
                    index: Some(1),
                    start_cycle: 0,
                    cycles: 1200,
                    estimated_cycles: Some(1000),
                    tiles: vec![
                        tile(0, Some("gemm_f8_k64_c16_r4"), 1200, Some(1000)),
                        tile(1, Some("gemm_f8_k64_c16_r4"), 1100, Some(1000)),
                    ],
                },
                StepProfile {
                    kind: StepKind::Sync,
                    label: "sync".into(),
                    op: None,
                    iteration: None,
                    index: Some(2),
                    start_cycle: 1200,
                    cycles: 600,
                    estimated_cycles: Some(600),
                    tiles: vec![],
                },
                StepProfile {
                    kind: StepKind::Exchange,
                    label: "op softmax".into(),
                    op: Some("softmax".into()),
                    iteration: Some(0),
                    index: Some(2),
                    start_cycle: 1800,
                    cycles: 200,
                    estimated_cycles: Some(200),
                    tiles: vec![exchange(0, 200, 800, 0), exchange(1, 50, 0, 200)],
                },
                StepProfile {
                    kind: StepKind::Compute,
                    label: "softmax".into(),
                    op: Some("softmax".into()),
                    iteration: Some(0),
                    index: Some(3),
                    start_cycle: 2000,
                    cycles: 1000,
                    estimated_cycles: Some(900),
                    tiles: vec![
                        tile(0, Some("softmax_f16"), 900, Some(800)),
                        tile(1, Some("softmax_f16"), 1000, Some(900)),
                    ],
                },
            ],
            ops: vec![
                op("qkv", "matmul", 1000, 0, 0, 1 << 20, 400),
                op("softmax", "softmax", 900, 200, 600, 0, 0),
            ],
            tiles: vec![memory(0), memory(1)],
        }
    }

    #[test]
    fn profiles_round_trip_through_json() {
        let profile = sample();
        assert_eq!(Profile::parse(&profile.to_json()), Ok(profile));
    }

    #[test]
    fn version_1_profiles_still_read() {
        let text = r#"{"format_version": 1, "project": "p", "target": "ipu21",
            "clock_hz": 1500000000, "total_cycles": 10, "estimated_cycles": 9,
            "steps": [{"kind": "compute", "label": "a", "start_cycle": 0, "cycles": 10,
                       "tiles": [{"tile": 3, "busy_cycles": 10}]}]}"#;
        let profile = Profile::parse(text).expect("a version 1 profile");
        assert_eq!(profile.steps[0].tiles[0].tile, 3);
        assert!(profile.ops.is_empty() && profile.tiles.is_empty() && profile.build.is_none());
    }

    #[test]
    fn invalid_profiles_are_rejected_with_a_reason() {
        let check = |edit: &dyn Fn(&mut Profile), expected: &str| {
            let mut profile = sample();
            edit(&mut profile);
            let error = Profile::parse(&profile.to_json()).unwrap_err();
            assert!(error.contains(expected), "{error}");
        };
        check(&|p| p.format_version = 9, "format version 9");
        check(&|p| p.steps[3].start_cycle = 10, "step 3 starts");
        check(
            &|p| p.steps[0].tiles[0].busy_cycles = 5000,
            "busy for longer",
        );
        check(
            &|p| p.steps[0].tiles[0].tile = 1472,
            "tile 1472 does not exist",
        );
        let unknown = sample().to_json().replace("\"ipu21\"", "\"ipu99\"");
        let error = Profile::parse(&unknown).unwrap_err();
        assert!(error.contains("target `ipu99` is not one"), "{error}");
        check(
            &|p| p.tiles[0].buffers[0].address = 0xE7FF0,
            "outside tile memory",
        );
        check(
            &|p| p.tiles[0].buffers[0].first_step = 9,
            "ends its life before it starts",
        );
        assert!(Profile::parse("{\"format_version\": 1").is_err());
        assert!(Profile::parse("").is_err());
    }
}
