//! Lowering of the reductions over the last axis: a rows plan whose
//! input rows are the input's last axis and whose output rows are one
//! value long.

use super::{Demand, Lowering};
use crate::graph::OpId;
use crate::lower::layout::Piece;
use crate::lower::program::{KernelRun, OperandRef};
use crate::lower::runs::Gathers;
use crate::lower::view::View;
use crate::lower::LowerError;
use crate::partition::{KernelId, MemoryClass};

impl Lowering<'_> {
    /// Each tile's run over its `rows_per_tile` rows: it reads them whole
    /// (`row_length` input values each) and writes one value per row.
    pub(super) fn reduce_rows(
        &mut self,
        op: OpId,
        rows: usize,
        rows_per_tile: usize,
        kernel: KernelId,
        transfers: &mut Gathers,
    ) -> Result<Vec<KernelRun>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let input = node.inputs[0];
        let row_length = graph.tensor(input).shape.last().copied().unwrap_or(1);
        let input_coordinates = vec![rows, row_length];
        let output_coordinates = vec![rows, 1];
        let mut runs = Vec::new();
        let mut home = Vec::new();
        for (tile, first_row) in (0..rows).step_by(rows_per_tile.max(1)).enumerate() {
            let tile = tile as u32;
            let count = rows_per_tile.min(rows - first_row);
            let x = self.demand(
                Demand {
                    op,
                    operand: 0,
                    view: View::of(graph, input).reshaped(&input_coordinates),
                    tile,
                    piece: Piece::row_major(vec![first_row, 0], vec![count, row_length]),
                    class: MemoryClass::Standard,
                },
                transfers,
            )?;
            let out = self.output_buffer(
                node.output,
                tile,
                Piece::row_major(vec![first_row, 0], vec![count, 1]),
                output_coordinates.clone(),
                MemoryClass::Standard,
            );
            home.push(out);
            runs.push(KernelRun {
                tile,
                kernel,
                operands: vec![x, OperandRef::Buffer(out)],
                params: vec![
                    ("rows".to_string(), count as i64),
                    ("row_length".to_string(), row_length as i64),
                ],
            });
        }
        self.set_home(node.output, home);
        Ok(runs)
    }
}
