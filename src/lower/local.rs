//! Block-major rearranges of what a tile already holds.
//!
//! A GEMM operand is gathered straight into its blocked layout: the
//! exchange writes each 32-byte block row where the kernel wants it. The
//! part of the operand whose home is the tile itself does not cross the
//! exchange; it is laid out by an explicit run of the `rearrange_blocks`
//! kernel in the operation's compute step, before the GEMM. Those gathers
//! form a regular pattern (K blocks by rows of 32-byte chunks), which
//! [`BlockCopy::of`] recognises; gathers that do not fit it stay on-tile
//! copies of the exchange phase.

use super::runs::Gather;
use super::{BufferId, KernelRun, OperandRef, Program, Step};
use crate::partition::KernelId;
use std::collections::BTreeMap;

/// The kernel that performs a [`BlockCopy`].
pub(crate) const KERNEL: KernelId = KernelId::RearrangeBlocks;

/// `outer * inner` chunks of `words` 64-bit words: chunk `(o, j)` goes from
/// byte `src_offset + o * src_outer + j * src_inner` of the source buffer to
/// byte `dst_offset + o * dst_outer + j * dst_inner` of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockCopy {
    pub outer: u32,
    pub inner: u32,
    pub words: u32,
    pub src_offset: u32,
    pub src_outer: u32,
    pub src_inner: u32,
    pub dst_offset: u32,
    pub dst_outer: u32,
    pub dst_inner: u32,
}

const PARAMS: [&str; 9] = [
    "outer",
    "inner",
    "words",
    "src_offset",
    "src_outer",
    "src_inner",
    "dst_offset",
    "dst_outer",
    "dst_inner",
];

impl BlockCopy {
    fn fields(&self) -> [u32; 9] {
        [
            self.outer,
            self.inner,
            self.words,
            self.src_offset,
            self.src_outer,
            self.src_inner,
            self.dst_offset,
            self.dst_outer,
            self.dst_inner,
        ]
    }

    /// The kernel run's parameters.
    pub(super) fn params(&self) -> Vec<(String, i64)> {
        PARAMS
            .iter()
            .zip(self.fields())
            .map(|(name, value)| (name.to_string(), i64::from(value)))
            .collect()
    }

    /// The copy a run of [`KERNEL`] performs, from its parameters.
    pub(crate) fn from_params(params: &[(String, i64)]) -> Option<BlockCopy> {
        let get = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| u32::try_from(*v).ok())
        };
        Some(BlockCopy {
            outer: get("outer")?,
            inner: get("inner")?,
            words: get("words")?,
            src_offset: get("src_offset")?,
            src_outer: get("src_outer")?,
            src_inner: get("src_inner")?,
            dst_offset: get("dst_offset")?,
            dst_outer: get("dst_outer")?,
            dst_inner: get("dst_inner")?,
        })
    }

    /// Bytes the copy moves.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.outer) * u64::from(self.inner) * u64::from(self.words) * 8
    }

    /// The same chunks with the roles of `outer` and `inner` exchanged.
    pub(super) fn transposed(&self) -> BlockCopy {
        BlockCopy {
            outer: self.inner,
            inner: self.outer,
            src_outer: self.src_inner,
            src_inner: self.src_outer,
            dst_outer: self.dst_inner,
            dst_inner: self.dst_outer,
            ..*self
        }
    }

    /// Every chunk as (source offset, destination offset, bytes), in the
    /// order `(o, j)`.
    pub(super) fn chunks(self) -> impl Iterator<Item = (u32, u32, u32)> {
        (0..self.outer).flat_map(move |o| {
            (0..self.inner).map(move |j| {
                (
                    self.src_offset + o * self.src_outer + j * self.src_inner,
                    self.dst_offset + o * self.dst_outer + j * self.dst_inner,
                    self.words * 8,
                )
            })
        })
    }

    /// The pattern of `gathers` (one source, one destination, in fill
    /// order) when they are equal chunks of whole 64-bit words at aligned
    /// offsets, in rows of equally spaced chunks with rows equally spaced.
    pub(super) fn of(gathers: &[Gather]) -> Option<BlockCopy> {
        let first = gathers.first()?;
        let bytes = first.bytes;
        let aligned = |g: &Gather| {
            g.bytes == bytes && g.source_offset.is_multiple_of(8) && g.offset.is_multiple_of(8)
        };
        if bytes % 8 != 0 || !gathers.iter().all(aligned) {
            return None;
        }
        let step = |a: &Gather, b: &Gather| {
            Some((
                b.source_offset.checked_sub(a.source_offset)?,
                b.offset.checked_sub(a.offset)?,
            ))
        };
        let (src_inner, dst_inner) = match gathers.get(1) {
            Some(second) => step(first, second)?,
            None => (0, 0),
        };
        let inner = gathers
            .iter()
            .enumerate()
            .take_while(|(j, g)| {
                let j = *j as u32;
                g.source_offset == first.source_offset + j * src_inner
                    && g.offset == first.offset + j * dst_inner
            })
            .count();
        if !gathers.len().is_multiple_of(inner) {
            return None;
        }
        let (src_outer, dst_outer) = match gathers.get(inner) {
            Some(next) => step(first, next)?,
            None => (0, 0),
        };
        let copy = BlockCopy {
            outer: (gathers.len() / inner) as u32,
            inner: inner as u32,
            words: bytes / 8,
            src_offset: first.source_offset,
            src_outer,
            src_inner,
            dst_offset: first.offset,
            dst_outer,
            dst_inner,
        };
        copy.chunks()
            .zip(gathers)
            .all(|((s, d, _), g)| s == g.source_offset && d == g.offset)
            .then_some(copy)
    }
}

/// Takes the gathers of `transfers[start..]` (all into `destination` on
/// `tile`) whose source is on `tile` and that form a [`BlockCopy`] per
/// source buffer out of the exchange, and returns the kernel runs that do
/// their work instead.
pub(super) fn take_local(
    program: &Program,
    tile: u32,
    destination: BufferId,
    start: usize,
    transfers: &mut Vec<Gather>,
) -> Vec<KernelRun> {
    // One pass groups the local gathers by source (in transfer order) and
    // one pass removes those taken, so the work is linear in the gathers
    // however many local sources a destination has.
    let mut by_source: BTreeMap<u32, Vec<Gather>> = BTreeMap::new();
    for g in &transfers[start..] {
        if program.buffer(BufferId(g.source)).tile == tile {
            by_source.entry(g.source).or_default().push(*g);
        }
    }
    let mut runs = Vec::new();
    let mut taken = Vec::new();
    for (source, local) in by_source {
        let Some(copy) = BlockCopy::of(&local) else {
            continue;
        };
        // The kernel shares `outer` among the workers: make it the larger.
        let copy = if copy.outer < copy.inner {
            copy.transposed()
        } else {
            copy
        };
        taken.push(source);
        runs.push(KernelRun {
            tile,
            kernel: KERNEL,
            operands: vec![
                OperandRef::Buffer(BufferId(source)),
                OperandRef::Buffer(destination),
            ],
            params: copy.params(),
        });
    }
    // Only the tail is this destination's: walking the whole list would
    // make lowering quadratic in the gathers of all destinations before.
    if !taken.is_empty() {
        let mut tail = transfers.split_off(start);
        tail.retain(|g| taken.binary_search(&g.source).is_err());
        transfers.append(&mut tail);
    }
    runs
}

/// Moves the rearranges of held pieces out of their operation's compute
/// step into a compute step of their own just before it (in `steps` and
/// every repeat body), and says whether there were any. In one step, what
/// a rearrange reads is live while the operation's results are written;
/// in a step before it, it may die first. A program that overfills a tile
/// only through that overlap fits this way, at the price of one more
/// compute step per such operation (`crate::pipeline::fit`).
pub(crate) fn separate(steps: &mut Vec<Step>) -> bool {
    let mut separated = false;
    let mut out = Vec::with_capacity(steps.len());
    for step in std::mem::take(steps) {
        match step {
            Step::Compute { op, runs } if runs.iter().any(|r| r.kernel == KERNEL) => {
                let (rearranges, rest): (Vec<_>, Vec<_>) =
                    runs.into_iter().partition(|r| r.kernel == KERNEL);
                separated = true;
                out.push(Step::Compute {
                    op,
                    runs: rearranges,
                });
                if !rest.is_empty() {
                    out.push(Step::Compute { op, runs: rest });
                }
            }
            Step::Repeat {
                repeat,
                count,
                mut body,
            } => {
                separated |= separate(&mut body);
                out.push(Step::Repeat {
                    repeat,
                    count,
                    body,
                });
            }
            other => out.push(other),
        }
    }
    *steps = out;
    separated
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gather(source_offset: u32, offset: u32) -> Gather {
        Gather {
            source: 0,
            source_offset,
            bytes: 32,
            destination: BufferId(1),
            offset,
        }
    }

    #[test]
    fn separated_rearranges_run_in_a_step_before_their_operation() {
        let run = |kernel| KernelRun {
            tile: 0,
            kernel,
            operands: Vec::new(),
            params: Vec::new(),
        };
        let gemm = KernelId::Cast {
            from: crate::graph::DType::F16,
            to: crate::graph::DType::F143,
        };
        let compute = |runs| Step::Compute {
            op: crate::graph::OpId(0),
            runs,
        };
        let mut steps = vec![
            compute(vec![run(KERNEL), run(gemm)]),
            Step::Repeat {
                repeat: 0,
                count: 2,
                body: vec![compute(vec![run(KERNEL), run(gemm), run(KERNEL)])],
            },
            compute(vec![run(gemm)]),
        ];
        assert!(separate(&mut steps));
        let kernels = |step: &Step| match step {
            Step::Compute { runs, .. } => runs.iter().map(|r| r.kernel).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        assert_eq!(steps.len(), 4);
        assert_eq!(kernels(&steps[0]), vec![KERNEL]);
        assert_eq!(kernels(&steps[1]), vec![gemm]);
        let Step::Repeat { body, .. } = &steps[2] else {
            panic!("the repeat stays");
        };
        assert_eq!(body.len(), 2);
        assert_eq!(kernels(&body[0]), vec![KERNEL, KERNEL]);
        assert_eq!(kernels(&body[1]), vec![gemm]);
        assert_eq!(kernels(&steps[3]), vec![gemm]);
        assert!(!separate(&mut steps[3..].to_vec()));
    }

    #[test]
    fn k_blocks_of_held_rows_are_one_block_copy() {
        // Rows 2..5 of a row-major home with 3 blocks of 32 bytes per row,
        // into a K-block-major buffer of 8 rows: block-major fill order.
        let gathers: Vec<Gather> = (0..3)
            .flat_map(|b| (0..3).map(move |r| gather(r * 96 + b * 32, (b * 8 + 2 + r) * 32)))
            .collect();
        let copy = BlockCopy::of(&gathers).expect("a pattern");
        assert_eq!(
            copy,
            BlockCopy {
                outer: 3,
                inner: 3,
                words: 4,
                src_offset: 0,
                src_outer: 32,
                src_inner: 96,
                dst_offset: 64,
                dst_outer: 256,
                dst_inner: 32,
            }
        );
        assert_eq!(BlockCopy::from_params(&copy.params()), Some(copy));
    }

    #[test]
    fn irregular_or_unaligned_gathers_are_not_a_block_copy() {
        let mut gathers = vec![gather(0, 0), gather(32, 64), gather(64, 128)];
        assert!(BlockCopy::of(&gathers).is_some());
        gathers[2].offset = 160;
        assert_eq!(BlockCopy::of(&gathers), None);
        assert_eq!(BlockCopy::of(&[gather(4, 0)]), None);
        let mut short = gather(0, 0);
        short.bytes = 6;
        assert_eq!(BlockCopy::of(&[short]), None);
        assert_eq!(BlockCopy::of(&[]), None);
    }
}
