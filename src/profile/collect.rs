//! A run's profile from what the device measured and what the package says
//! about the build: estimates set beside measurements, exchange steps
//! named by the operation they serve, placements and fingerprints copied.

use super::{
    BuildInfo, ExchangeFingerprint, Profile, StepKind, StepProfile, TileProfile, FORMAT_VERSION,
};
use crate::package::{Call, Package, SegmentKind, Step, TileImage};

/// Where the package came from: its path as the profile should name it
/// and the blake3 hash of its file.
pub(crate) struct PackageFile<'a> {
    pub path: &'a str,
    pub hash: &'a str,
}

/// The profile of one `run` call of `package`, whose measured steps are
/// `steps` and whose total is `total_cycles`.
pub fn profile(
    package: &Package,
    steps: &[StepProfile],
    total_cycles: u64,
    clock_hz: u64,
    file: &PackageFile<'_>,
) -> Profile {
    let layout = &package.profile;
    let preorder = package.run.preorder();
    // A package's validation checks that its header names its graph's
    // target.
    let sync_cycles = Some(u64::from(
        package.graph.target.spec().exchange.global_sync_cycles,
    ));
    let steps = steps
        .iter()
        .map(|measured| {
            let mut step = measured.clone();
            let Some(index) = step.index else {
                return step;
            };
            match step.kind {
                StepKind::Compute => {
                    let estimates = layout.estimates(Call::Run, index).unwrap_or(&[]);
                    for tile in &mut step.tiles {
                        tile.estimated_cycles = estimates
                            .binary_search_by_key(&tile.tile, |&(t, _)| t)
                            .ok()
                            .map(|i| estimates[i].1);
                    }
                    step.estimated_cycles =
                        step.tiles.iter().filter_map(|t| t.estimated_cycles).max();
                }
                StepKind::Exchange => {
                    if step.op.is_none() {
                        step.op = layout.exchange_op(Call::Run, index).map(str::to_string);
                    }
                    if let Some(Step::Exchange { program }) = preorder.get(index as usize) {
                        step.estimated_cycles = package
                            .exchanges
                            .get(*program as usize)
                            .map(|p| p.horizon_cycles);
                    }
                }
                StepKind::Sync => step.estimated_cycles = sync_cycles,
                StepKind::Host => {}
            }
            step
        })
        .collect();
    let memories = &layout.memory;
    let tiles = package
        .tiles
        .iter()
        .map(|image| {
            let placed = memories
                .binary_search_by_key(&image.tile, |m| m.tile)
                .ok()
                .map(|i| &memories[i]);
            TileProfile {
                tile: image.tile,
                code_hash: segments_hash(image, |k| k == SegmentKind::Code),
                data_hash: segments_hash(image, |k| k != SegmentKind::Code),
                support: placed.map(|m| m.support.clone()).unwrap_or_default(),
                buffers: placed.map(|m| m.buffers.clone()).unwrap_or_default(),
            }
        })
        .collect();
    Profile {
        format_version: FORMAT_VERSION,
        project: package.graph.name.clone(),
        target: package.graph.target,
        clock_hz,
        total_cycles,
        estimated_cycles: layout.estimated_cycles,
        build: Some(BuildInfo {
            package: file.path.to_string(),
            package_hash: file.hash.to_string(),
            compiler_version: package.header.compiler_version.clone(),
            kernels: layout.kernels.clone(),
            exchanges: package
                .exchanges
                .iter()
                .map(|program| ExchangeFingerprint {
                    label: program.label.clone(),
                    hash: short_hash(&crate::package::exchange_part::encode(
                        std::slice::from_ref(program),
                    )),
                    bytes: program.bytes_delivered(),
                })
                .collect(),
        }),
        steps,
        ops: layout.ops.clone(),
        tiles,
    }
}

/// The first 16 hex digits of a blake3 hash: enough to tell builds apart.
fn short_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex()[..16].to_string()
}

/// A short hash of the segments of `image` whose kind `keep` accepts:
/// their addresses, sizes, kinds and contents.
fn segments_hash(image: &TileImage, keep: impl Fn(SegmentKind) -> bool) -> String {
    let mut hasher = blake3::Hasher::new();
    for segment in image.segments.iter().filter(|s| keep(s.kind)) {
        hasher.update(&segment.address.to_le_bytes());
        hasher.update(&segment.memory_size.to_le_bytes());
        hasher.update(segment.kind.name().as_bytes());
        hasher.update(&(segment.data.len() as u64).to_le_bytes());
        hasher.update(&segment.data);
    }
    hasher.finalize().to_hex()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::TileActivity;

    #[test]
    fn estimates_operations_and_placements_come_from_the_package() {
        let package = crate::package::tests::sample();
        let measured = |kind, index, start_cycle, cycles, tiles: Vec<TileActivity>| StepProfile {
            kind,
            label: "step".into(),
            op: None,
            iteration: None,
            index: Some(index),
            start_cycle,
            cycles,
            estimated_cycles: None,
            tiles,
        };
        let steps = [
            measured(
                StepKind::Compute,
                1,
                0,
                700,
                vec![
                    TileActivity::busy(0, None, 700, 10),
                    TileActivity::busy(1, None, 600, 10),
                ],
            ),
            measured(StepKind::Sync, 3, 700, 600, vec![]),
            measured(
                StepKind::Exchange,
                3,
                1300,
                20,
                vec![TileActivity::busy(2, None, 20, 0)],
            ),
        ];
        let file = PackageFile {
            path: "sample.ipuexe",
            hash: "00",
        };
        let profile = profile(&package, &steps, 2000, 1_500_000_000, &file);
        assert_eq!(profile.steps[0].estimated_cycles, Some(650));
        assert_eq!(profile.steps[0].tiles[1].estimated_cycles, Some(650));
        assert_eq!(profile.steps[1].estimated_cycles, Some(600));
        assert_eq!(profile.steps[2].op.as_deref(), Some("y"));
        assert_eq!(profile.steps[2].estimated_cycles, Some(17));
        assert_eq!(profile.ops[0].name, "y");
        let tiles: Vec<u32> = profile.tiles.iter().map(|t| t.tile).collect();
        assert_eq!(tiles, [0, 1, 2, 5]);
        assert_eq!(profile.tiles[2].buffers.len(), 1);
        assert!(profile.tiles[0].buffers.is_empty());
        // Tiles 0 and 1 have different code, the same data.
        assert_ne!(profile.tiles[0].code_hash, profile.tiles[1].code_hash);
        assert_eq!(profile.tiles[0].data_hash, profile.tiles[1].data_hash);
        let build = profile.build.as_ref().expect("build");
        assert_eq!(build.exchanges.len(), 1);
        assert_eq!(build.exchanges[0].bytes, 96);
        Profile::parse(&profile.to_json()).expect("a valid profile");
    }
}
