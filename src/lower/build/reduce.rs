//! Lowering of the reductions over the last axis: a rows plan whose
//! input rows are the input's last axis and whose output rows are one
//! value long, and a segments plan whose tiles reduce pieces of the rows
//! into f32 partial results that one tile of each group of rows reduces.

use super::{Demand, Lowering, SecondStage};
use crate::graph::{DType, OpId, OpKind};
use crate::lower::layout::Piece;
use crate::lower::program::{Buffer, BufferRole, ExchangePhase, KernelRun, OperandRef};
use crate::lower::runs::{Gather, Gathers};
use crate::lower::view::View;
use crate::lower::LowerError;
use crate::partition::{
    reduce_part_count, reduce_partial, reduce_piece, KernelId, MemoryClass, Partition,
};

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
            let piece = Piece::row_major(vec![first_row, 0], vec![count, row_length]);
            let x = self.reduced_piece(op, &input_coordinates, tile, piece, transfers)?;
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

    /// Each tile's run over its segments of its group's rows (returned,
    /// the operation's first compute step): each segment's `parts`
    /// ([`reduce_part_count`]) pieces ([`reduce_piece`]) reduced into f32
    /// partial results, one worker's each. With one segment the group's tile
    /// reduces its partials in the same step; otherwise the second stage
    /// brings every tile's partials of the group's rows to its first tile,
    /// which reduces them with `kernel` into the rows' results.
    pub(super) fn reduce_segments(
        &mut self,
        op: OpId,
        (rows, row_length, rows_per_tile, segment): (usize, usize, usize, usize),
        kernel: KernelId,
        transfers: &mut Gathers,
    ) -> Result<Vec<KernelRun>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let OpKind::Reduce { reduction } = node.kind else {
            return Err(LowerError::NotSegmented(node.name.clone()));
        };
        let input = node.inputs[0];
        let partial = reduce_partial(reduction, graph.tensor(input).dtype);
        let segments = Partition::segments(row_length, segment);
        let parts: Vec<usize> = (0..segments)
            .map(|index| reduce_part_count(segment.min(row_length - index * segment)))
            .collect();
        let total: usize = parts.iter().sum();
        let input_coordinates = vec![rows, row_length];
        let partial_coordinates = vec![rows, total];
        let rows_per_tile = rows_per_tile.max(1);
        let mut first_runs = Vec::new();
        let mut second_runs = Vec::new();
        let mut gathers = Vec::new();
        let mut home = Vec::new();
        for (group, first_row) in (0..rows).step_by(rows_per_tile).enumerate() {
            let count = rows_per_tile.min(rows - first_row);
            let first_tile = (group * segments) as u32;
            // The group's partials on its first tile: a row of `total` per
            // row, each segment's at its column.
            let gathered = self.add_buffer(Buffer {
                tile: first_tile,
                dtype: DType::F32,
                piece: Piece::row_major(vec![first_row, 0], vec![count, total]),
                coordinates: partial_coordinates.clone(),
                class: MemoryClass::Standard,
                role: BufferRole::Intermediate { op },
            });
            let mut column = 0;
            for (index, &k) in parts.iter().enumerate() {
                let tile = first_tile + index as u32;
                let start = index * segment;
                let length = segment.min(row_length - start);
                let piece = Piece::row_major(vec![first_row, start], vec![count, length]);
                let x = self.reduced_piece(op, &input_coordinates, tile, piece, transfers)?;
                // One segment writes its partials where they are reduced.
                let partials = match segments {
                    1 => gathered,
                    _ => self.add_buffer(Buffer {
                        tile,
                        dtype: DType::F32,
                        piece: Piece::row_major(vec![first_row, column], vec![count, k]),
                        coordinates: partial_coordinates.clone(),
                        class: MemoryClass::Standard,
                        role: BufferRole::Intermediate { op },
                    }),
                };
                first_runs.push(KernelRun {
                    tile,
                    kernel: partial,
                    operands: vec![x, OperandRef::Buffer(partials)],
                    params: vec![
                        ("rows".to_string(), count as i64),
                        ("row_length".to_string(), length as i64),
                        ("parts".to_string(), k as i64),
                        ("piece".to_string(), reduce_piece(length, k) as i64),
                    ],
                });
                if segments > 1 {
                    for row in 0..count {
                        gathers.push(Gather {
                            source: partials.0,
                            source_offset: (row * k * 4) as u32,
                            bytes: (k * 4) as u32,
                            destination: gathered,
                            offset: ((row * total + column) * 4) as u32,
                        });
                    }
                }
                column += k;
            }
            let out = self.output_buffer(
                node.output,
                first_tile,
                Piece::row_major(vec![first_row, 0], vec![count, 1]),
                vec![rows, 1],
                MemoryClass::Standard,
            );
            home.push(out);
            let run = KernelRun {
                tile: first_tile,
                kernel,
                operands: vec![OperandRef::Buffer(gathered), OperandRef::Buffer(out)],
                params: vec![
                    ("rows".to_string(), count as i64),
                    ("row_length".to_string(), total as i64),
                    ("divisor".to_string(), row_length as i64),
                ],
            };
            match segments {
                1 => first_runs.push(run),
                _ => second_runs.push(run),
            }
        }
        self.set_home(node.output, home);
        if segments > 1 {
            self.second = Some(SecondStage {
                purpose: ExchangePhase::reduction_purpose(&node.name),
                transfers: gathers,
                runs: second_runs,
            });
        }
        Ok(first_runs)
    }

    /// `piece` of a reduction's input, as `coordinates` (its rows and
    /// their length), on `tile`.
    fn reduced_piece(
        &mut self,
        op: OpId,
        coordinates: &[usize],
        tile: u32,
        piece: Piece,
        transfers: &mut Gathers,
    ) -> Result<OperandRef, LowerError> {
        let graph = self.graph;
        let input = graph.op(op).inputs[0];
        self.demand(
            Demand {
                op,
                operand: 0,
                view: View::of(graph, input).reshaped(coordinates),
                tile,
                piece,
                class: MemoryClass::Standard,
            },
            transfers,
        )
    }
}
