//! Lowering of a matrix product's fused epilogue (`crate::fuse`): the
//! elementwise steps merged after the product run on each tile that keeps
//! a piece of the result, over that piece's slots, in the compute step
//! that writes it, so the result never crosses the exchange between them.

use super::{Demand, Lowering};
use crate::graph::{OpId, OpKind};
use crate::lower::program::{Buffer, BufferId, KernelRun, OperandRef};
use crate::lower::runs::Gathers;
use crate::lower::view::View;
use crate::lower::LowerError;
use crate::partition::{epilogue_kernels, KernelId, MemoryClass};

/// Where a kernel writes its result and what it and the runs after it
/// read ([`Lowering::epilogue_after`]).
pub(super) struct Through {
    /// The buffer the kernel writes.
    pub written: BufferId,
    /// The extra operands of the epilogue runs the kernel carries out.
    pub extras: Vec<OperandRef>,
    /// The runs after it in the same step.
    pub runs: Vec<KernelRun>,
}

impl Lowering<'_> {
    /// Where `kernel` writes the f16 result that belongs in home
    /// buffer `home` of `op`'s output, and the runs that follow it in the
    /// same step: the fused cast ([`Self::cast_through`]), or a matrix
    /// product's epilogue ([`epilogue_kernels`]). Each epilogue run reads
    /// the previous one's f16 result from a tile-local buffer with the
    /// home's piece and layout, the last writes the home; an extra operand
    /// is gathered into that piece too, in this phase's `transfers` (a
    /// weight is written there with the package).
    pub(super) fn epilogue_through(
        &mut self,
        op: OpId,
        kernel: KernelId,
        home: BufferId,
        transfers: &mut Gathers,
    ) -> Result<(BufferId, Vec<KernelRun>), LowerError> {
        let through = self.epilogue_after(op, kernel, home, 0, transfers)?;
        Ok((through.written, through.runs))
    }

    /// [`Self::epilogue_through`] for a `kernel` that carries out the
    /// first `absorbed` runs of the epilogue itself (adds run by a
    /// reduction, [`KernelId::reduce_with`]): it also reads their extra
    /// operands, gathered into the home's piece as the runs would read
    /// them, and writes the home itself when no run is left.
    pub(super) fn epilogue_after(
        &mut self,
        op: OpId,
        kernel: KernelId,
        home: BufferId,
        absorbed: usize,
        transfers: &mut Gathers,
    ) -> Result<Through, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let out = graph.tensor(node.output);
        let kernels = match &node.kind {
            OpKind::Matmul { epilogue, .. } => epilogue_kernels(epilogue, out.dtype),
            _ => Vec::new(),
        };
        if kernels.is_empty() {
            let (written, cast) = self.cast_through(op, kernel, home);
            return Ok(Through {
                written,
                extras: Vec::new(),
                runs: cast.into_iter().collect(),
            });
        }
        // The product's kernel writes its result in its own memory class;
        // the epilogue's kernels take any, so the rest stays in standard
        // memory, sparing the interleaved region the GEMMs need.
        let written = self.program.buffer(home).clone();
        let (absorbed, rest) = kernels.split_at(absorbed.min(kernels.len()));
        let first = match rest.is_empty() {
            true => home,
            false => self.f16_like(op, &written),
        };
        self.program.buffers[home.0 as usize].class = MemoryClass::Standard;
        let buffer = self.program.buffer(home).clone();
        let mut extras = Vec::new();
        for step in absorbed {
            if let Some(extra) = step.operand {
                extras.push(self.epilogue_operand(op, 2 + extra, &buffer, transfers)?);
            }
        }
        let mut current = first;
        let mut runs = Vec::new();
        for (i, step) in rest.iter().enumerate() {
            let destination = match i + 1 == rest.len() {
                true => home,
                false => self.f16_like(op, &buffer),
            };
            let mut operands = vec![OperandRef::Buffer(current)];
            if let Some(extra) = step.operand {
                operands.push(self.epilogue_operand(op, 2 + extra, &buffer, transfers)?);
            }
            operands.push(OperandRef::Buffer(destination));
            runs.push(super::slot_run(step.kernel, operands, &buffer, out.scale));
            current = destination;
        }
        Ok(Through {
            written: first,
            extras,
            runs,
        })
    }

    /// Input `operand` of the product `op` (an epilogue's extra operand)
    /// broadcast to the result and laid out as `like`, a piece of it.
    fn epilogue_operand(
        &mut self,
        op: OpId,
        operand: usize,
        like: &Buffer,
        transfers: &mut Gathers,
    ) -> Result<OperandRef, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let view = View::of(graph, node.inputs[operand])
            .broadcast_to(&graph.tensor(node.output).shape)
            .reshaped(&like.coordinates);
        self.demand(
            Demand {
                op,
                operand: operand as u32,
                view,
                tile: like.tile,
                piece: like.piece.clone(),
                class: like.class,
            },
            transfers,
        )
    }
}
