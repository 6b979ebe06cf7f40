//! Cycle profiles: what every tile did in every step of a run.
//!
//! The device writes a [`Profile`] after each run (`*.profile.json`,
//! documented in the book); `ipub profile` reads one back, summarises it by
//! kernel, operation, step kind and tile, and exports an HTML report and a
//! Chrome trace-event file that Perfetto opens.

pub mod report;

use camino::Utf8Path;
use serde::{Deserialize, Serialize};

/// Version of the profile file format; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// The largest profile file read: a run records at most
/// [`MAX_EXECUTED_TILE_RECORDS`](crate::package::limits::MAX_EXECUTED_TILE_RECORDS)
/// tile activities, about a hundred bytes each.
pub const MAX_PROFILE_FILE_BYTES: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    Compute,
    Exchange,
    Sync,
    Host,
}

/// One tile's part in a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileActivity {
    pub tile: u32,
    /// The kernel the tile ran (compute steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// Cycles the tile was busy; the rest of the step it waited.
    pub busy_cycles: u64,
    /// Instructions the tile executed (all contexts).
    #[serde(default)]
    pub instructions: u64,
}

/// One step of the run, as all tiles saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepProfile {
    pub kind: StepKind,
    /// The operation (compute), the phase's purpose (exchange) or the call.
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    pub start_cycle: u64,
    /// Cycles from the step's start to its last tile's end.
    pub cycles: u64,
    pub tiles: Vec<TileActivity>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub format_version: u32,
    pub project: String,
    pub target: String,
    pub clock_hz: u64,
    /// Cycles the model measured for the whole run.
    pub total_cycles: u64,
    /// Cycles the compiler's cost model predicted.
    pub estimated_cycles: u64,
    pub steps: Vec<StepProfile>,
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
    pub fn parse(text: &str) -> Result<Profile, String> {
        let profile: Profile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        profile.validate()?;
        Ok(profile)
    }

    fn validate(&self) -> Result<(), String> {
        if self.format_version != FORMAT_VERSION {
            return Err(format!(
                "format version {} is not supported (this ipub reads version {FORMAT_VERSION})",
                self.format_version
            ));
        }
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
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("profiles serialise")
    }

    /// Cycles converted to microseconds at the profile's clock.
    pub fn micros(&self, cycles: u64) -> f64 {
        cycles as f64 * 1e6 / self.clock_hz as f64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> Profile {
        let tile = |tile, kernel: Option<&str>, busy| TileActivity {
            tile,
            kernel: kernel.map(str::to_string),
            busy_cycles: busy,
            instructions: busy / 6,
        };
        Profile {
            format_version: FORMAT_VERSION,
            project: "sample".into(),
            target: "ipu21".into(),
            clock_hz: 1_500_000_000,
            total_cycles: 3000,
            estimated_cycles: 2800,
            steps: vec![
                StepProfile {
                    kind: StepKind::Compute,
                    label: "qkv".into(),
                    op: Some("qkv".into()),
                    iteration: Some(0),
                    start_cycle: 0,
                    cycles: 1200,
                    tiles: vec![
                        tile(0, Some("gemm_f8_k64_c16_r4"), 1200),
                        tile(1, Some("gemm_f8_k64_c16_r4"), 1100),
                    ],
                },
                StepProfile {
                    kind: StepKind::Sync,
                    label: "sync".into(),
                    op: None,
                    iteration: None,
                    start_cycle: 1200,
                    cycles: 600,
                    tiles: vec![],
                },
                StepProfile {
                    kind: StepKind::Exchange,
                    label: "op softmax".into(),
                    op: Some("softmax".into()),
                    iteration: Some(0),
                    start_cycle: 1800,
                    cycles: 200,
                    tiles: vec![tile(0, None, 200), tile(1, None, 50)],
                },
                StepProfile {
                    kind: StepKind::Compute,
                    label: "softmax".into(),
                    op: Some("softmax".into()),
                    iteration: Some(0),
                    start_cycle: 2000,
                    cycles: 1000,
                    tiles: vec![
                        tile(0, Some("softmax_f16"), 900),
                        tile(1, Some("softmax_f16"), 1000),
                    ],
                },
            ],
        }
    }

    #[test]
    fn profiles_round_trip_through_json() {
        let profile = sample();
        assert_eq!(Profile::parse(&profile.to_json()), Ok(profile));
    }

    #[test]
    fn invalid_profiles_are_rejected_with_a_reason() {
        let mut profile = sample();
        profile.format_version = 9;
        assert!(Profile::parse(&profile.to_json())
            .unwrap_err()
            .contains("format version 9"));
        let mut profile = sample();
        profile.steps[3].start_cycle = 10;
        assert!(Profile::parse(&profile.to_json())
            .unwrap_err()
            .contains("step 3 starts"));
        assert!(Profile::parse("{\"format_version\": 1").is_err());
        assert!(Profile::parse("").is_err());
    }
}
