//! Host bindings as strided runs: where each byte range of a logical
//! tensor lives in tile memory.
//!
//! The host writes inputs (and the loader writes weights) by copying blocks
//! from the tensor's row-major bytes to tile addresses, and reads outputs
//! back the same way. Layouts other than row-major (AMP weight blocks,
//! padded rows) and views (transposes, broadcasts) become more, shorter
//! blocks; padding slots belong to no block. Blocks that repeat at fixed
//! strides on both sides are stored as one run, so a binding's size follows
//! the layout's structure and not the tensor's element count.

use crate::graph::MAX_RANK;
use crate::lower::layout::Piece;
use crate::lower::view::View;
use crate::lower::{Binding, Program};
use crate::package::Piece as BindingRun;
use crate::place::Placement;

/// The runs of one binding: contiguous stretches merged where both sides
/// are contiguous, then equal stretches at fixed strides folded into one
/// run, in the order a host read gathers them. Returns `None` when a
/// buffer of the binding has no address (a bug the placement verifier
/// reports first).
pub(super) fn binding_runs(
    program: &Program,
    placement: &Placement,
    binding: &Binding,
) -> Option<Vec<BindingRun>> {
    let mut runs = Coalesce::default();
    for (buffer_id, view) in &binding.pieces {
        let buffer = program.buffer(*buffer_id);
        let base = placement.address(buffer.tile, *buffer_id)?;
        let element = buffer.dtype.size_bytes() as u32;
        for_each_element_run(&buffer.piece, view, |logical, slot, count| {
            runs.add(BindingRun::contiguous(
                logical as u64 * u64::from(element),
                count as u32 * element,
                buffer.tile,
                base + slot as u32 * element,
            ));
        });
    }
    Some(runs.finish())
}

/// Builds runs from contiguous stretches given in order, without keeping
/// the stretches: the open stretch grows while both sides stay contiguous,
/// and each finished one extends the last run when it continues its
/// strides.
#[derive(Default)]
struct Coalesce {
    runs: Vec<BindingRun>,
    open: Option<BindingRun>,
}

impl Coalesce {
    fn add(&mut self, stretch: BindingRun) {
        if let Some(open) = &mut self.open {
            if open.tile == stretch.tile
                && open.logical_offset + u64::from(open.bytes) == stretch.logical_offset
                && open.address + open.bytes == stretch.address
            {
                open.bytes += stretch.bytes;
                return;
            }
        }
        if let Some(done) = self.open.replace(stretch) {
            self.fold(done);
        }
    }

    fn fold(&mut self, stretch: BindingRun) {
        if let Some(last) = self.runs.last_mut() {
            if last.tile == stretch.tile && last.bytes == stretch.bytes {
                if last.count == 1 {
                    // Strides are not negative and blocks do not overlap
                    // in tile memory (what validation requires).
                    if stretch.logical_offset >= last.logical_offset
                        && stretch.address >= last.address + last.bytes
                    {
                        last.logical_stride = stretch.logical_offset - last.logical_offset;
                        last.address_stride = stretch.address - last.address;
                        last.count = 2;
                        return;
                    }
                } else if stretch.logical_offset
                    == last.logical_offset + u64::from(last.count) * last.logical_stride
                    && u64::from(stretch.address)
                        == u64::from(last.address)
                            + u64::from(last.count) * u64::from(last.address_stride)
                    && last.count < u32::MAX
                {
                    last.count += 1;
                    return;
                }
            }
        }
        self.runs.push(stretch);
    }

    fn finish(mut self) -> Vec<BindingRun> {
        if let Some(done) = self.open.take() {
            self.fold(done);
        }
        self.runs
    }
}

/// Calls `visit(first, slot, count)` for stretches of `count` slots from
/// `slot` that hold the consecutive logical elements `first..first+count`
/// of the view's base tensor, in slot order. Padding slots are skipped.
///
/// Run by run: the view maps a run of slots to base indices that are affine
/// in pieces, so the index arithmetic is paid per piece, not per element.
pub(super) fn for_each_element_run(
    piece: &Piece,
    view: &View,
    mut visit: impl FnMut(usize, usize, usize),
) {
    piece.for_each_run(|run| {
        let mut index = [0usize; MAX_RANK];
        let index = &mut index[..run.index.len()];
        index.copy_from_slice(run.index);
        let mut done = 0;
        while done < run.len {
            index[run.dim] = run.index[run.dim] + done;
            let (first, stride, count) = view.base_run(index, run.dim, run.len - done);
            let count = count.max(1);
            if stride == 1 {
                visit(first, run.slot + done, count);
            } else {
                for t in 0..count {
                    visit(first + t * stride, run.slot + done + t, 1);
                }
            }
            done += count;
        }
    });
}

/// A buffer's initial bytes from its tensor's row-major bytes: what the
/// loader writes for a preloaded weight. Padding slots stay zero.
pub(crate) fn fill_buffer(
    piece: &Piece,
    view: &View,
    element_bytes: u32,
    tensor: &[u8],
) -> Vec<u8> {
    let element = element_bytes as usize;
    let mut data = vec![0u8; piece.slots() * element];
    for_each_element_run(piece, view, |first, slot, count| {
        let (from, to, len) = (first * element, slot * element, count * element);
        if let (Some(source), Some(target)) =
            (tensor.get(from..from + len), data.get_mut(to..to + len))
        {
            target.copy_from_slice(source);
        }
    });
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, OpKind, Role};
    use crate::lower::tests::{lowered, Builder};
    use crate::target::IPU21;

    #[test]
    fn weights_in_amp_blocks_and_row_major_outputs_cover_their_tensors() {
        let mut b = Builder::new(2);
        let x = b.tensor("x", &[4, 16], DType::F16, Role::Input);
        let w = b.tensor("w", &[16, 32], DType::F16, Role::Weight);
        let y = b.op(
            OpKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            &[x, w],
            &[4, 32],
            DType::F16,
        );
        b.graph.outputs = vec![y];
        let program = lowered(&b.graph);
        let support = |_| Vec::new();
        let placement =
            crate::place::placement(&IPU21, &b.graph, &program, &support).expect("fits");
        for binding in program.host_writes.iter().chain(&program.host_reads) {
            let tensor = b.graph.tensor(binding.tensor);
            let runs = binding_runs(&program, &placement, binding).expect("placed");
            // Every logical byte is covered, and by as many runs as there
            // are copies of it on tiles.
            let mut covered = vec![0u32; tensor.size_bytes()];
            for run in &runs {
                for (logical, _) in run.blocks() {
                    for byte in logical..logical + u64::from(run.bytes) {
                        covered[byte as usize] += 1;
                    }
                }
            }
            let copies = covered[0];
            assert!(copies >= 1, "{}", tensor.name);
            assert!(covered.iter().all(|&c| c == copies), "{}", tensor.name);
            if binding.tensor == w {
                // AMP blocks of 16 channels by 4 inputs: rows of 16 halves
                // are split into 4-element runs... or merged when adjacent.
                assert!(runs.iter().all(|r| r.bytes % 2 == 0));
            }
        }
    }
}
