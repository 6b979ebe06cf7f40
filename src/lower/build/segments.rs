//! Lowering of a layer or RMS normalisation or a softmax whose rows are
//! cut into segments on several tiles
//! ([`Partition::Segments`](crate::partition::Partition)):
//! the statistics and fold runs, the phase that gives every tile of a
//! group the records of its other segments, and the output runs.

use super::{Lowering, RowsAt, SecondStage};
use crate::graph::{DType, OpId, OpKind};
use crate::lower::layout::Piece;
use crate::lower::program::{Buffer, BufferRole, ExchangePhase, KernelRun, OperandRef};
use crate::lower::runs::{Gather, Gathers};
use crate::lower::LowerError;
use crate::partition::{
    norm_prologue, segment_fold, KernelId, MemoryClass, Partition, NORM_PART_RECORDS_PER_ROW,
    NORM_RECORD_BYTES,
};

impl Lowering<'_> {
    /// Each tile's statistics and fold runs over its segments of its
    /// group's rows (returned, the operation's first compute step), and
    /// the second stage: the statistics exchange and the output runs.
    pub(super) fn segments(
        &mut self,
        op: OpId,
        (rows, row_length, rows_per_tile, segment): (usize, usize, usize, usize),
        kernel: KernelId,
        transfers: &mut Gathers,
    ) -> Result<Vec<KernelRun>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        // The statistics and fold kernels before the exchange, and the
        // operation's own parameter for all three.
        let (Some(stats), Some(fold)) = (norm_prologue(kernel), segment_fold(kernel)) else {
            return Err(LowerError::NotSegmented(node.name.clone()));
        };
        // A norm's gamma and beta are taken at the segment's columns; a
        // softmax's mask is the input's shape, taken as the input is.
        let norm = matches!(node.kind, OpKind::Layernorm { .. } | OpKind::Rmsnorm { .. });
        let parameter = match &node.kind {
            OpKind::Layernorm { epsilon } | OpKind::Rmsnorm { epsilon } => {
                ("epsilon_bits", epsilon.to_bits())
            }
            OpKind::Softmax {
                scale,
                causal: false,
            } => ("scale_bits", scale.to_bits()),
            _ => return Err(LowerError::NotSegmented(node.name.clone())),
        };
        let out = graph.tensor(node.output);
        let coordinates = vec![rows, row_length];
        let segments = Partition::segments(row_length, segment);
        // A tile's six records of each of its rows, and the group's records
        // of its rows: one per segment.
        let part_coordinates = vec![rows, NORM_PART_RECORDS_PER_ROW];
        let record_values = NORM_RECORD_BYTES / 4;
        let record_coordinates = vec![rows, segments * record_values];
        let rows_per_tile = rows_per_tile.max(1);
        let mut first_runs = Vec::new();
        let mut second_runs = Vec::new();
        let mut home = Vec::new();
        let mut gathers = Vec::new();
        for (group, first_row) in (0..rows).step_by(rows_per_tile).enumerate() {
            let count = rows_per_tile.min(rows - first_row);
            let mut records = Vec::with_capacity(segments);
            for index in 0..segments {
                let tile = (group * segments + index) as u32;
                let start = index * segment;
                let length = segment.min(row_length - start);
                let piece = Piece::row_major(vec![first_row, start], vec![count, length]);
                let parameters = norm.then(|| Piece::row_major(vec![start], vec![length]));
                let mut operands = Vec::new();
                for operand in 0..node.inputs.len() {
                    let at = RowsAt {
                        tile,
                        piece: &piece,
                        coordinates: &coordinates,
                        parameters: parameters.as_ref(),
                    };
                    operands.push(self.row_operand(op, operand, at, transfers)?);
                }
                let result = self.output_buffer(
                    node.output,
                    tile,
                    piece,
                    coordinates.clone(),
                    MemoryClass::Standard,
                );
                home.push(result);
                let parts = self.add_buffer(Buffer {
                    tile,
                    dtype: DType::F32,
                    piece: Piece::row_major(
                        vec![first_row, 0],
                        vec![count, NORM_PART_RECORDS_PER_ROW],
                    ),
                    coordinates: part_coordinates.clone(),
                    class: MemoryClass::Standard,
                    role: BufferRole::Intermediate { op },
                });
                let record = self.add_buffer(Buffer {
                    tile,
                    dtype: DType::F32,
                    piece: Piece::row_major(
                        vec![first_row, 0],
                        vec![count, segments * record_values],
                    ),
                    coordinates: record_coordinates.clone(),
                    class: MemoryClass::Standard,
                    role: BufferRole::Intermediate { op },
                });
                records.push(record);
                let params = vec![
                    ("rows".to_string(), count as i64),
                    ("row_length".to_string(), length as i64),
                    ("first_row".to_string(), first_row as i64),
                    ("segment".to_string(), index as i64),
                    ("segments".to_string(), segments as i64),
                    (parameter.0.to_string(), i64::from(parameter.1)),
                    ("out_scale".to_string(), i64::from(out.scale)),
                ];
                // The statistics read the input, and a softmax's mask.
                let mut stats_operands = if norm {
                    vec![operands[0].clone()]
                } else {
                    operands.clone()
                };
                stats_operands.push(OperandRef::Buffer(parts));
                first_runs.push(KernelRun {
                    tile,
                    kernel: stats,
                    operands: stats_operands,
                    params: params.clone(),
                });
                first_runs.push(KernelRun {
                    tile,
                    kernel: fold,
                    operands: vec![OperandRef::Buffer(parts), OperandRef::Buffer(record)],
                    params: params.clone(),
                });
                // A softmax whose result is FP8 writes f16 that a cast on
                // the tile stores.
                let (written, cast) = self.cast_through(op, kernel, result);
                operands.push(OperandRef::Buffer(record));
                operands.push(OperandRef::Buffer(written));
                second_runs.push(KernelRun {
                    tile,
                    kernel,
                    operands,
                    params,
                });
                second_runs.extend(cast);
            }
            // Every tile's record of each row goes to the group's other
            // tiles, at the same place in their records.
            for (index, &source) in records.iter().enumerate() {
                for row in 0..count {
                    let offset = ((row * segments + index) * NORM_RECORD_BYTES) as u32;
                    for (other, &destination) in records.iter().enumerate() {
                        if other != index {
                            gathers.push(Gather {
                                source: source.0,
                                source_offset: offset,
                                bytes: NORM_RECORD_BYTES as u32,
                                destination,
                                offset,
                            });
                        }
                    }
                }
            }
        }
        self.set_home(node.output, home);
        self.second = Some(SecondStage {
            purpose: ExchangePhase::statistics_purpose(&node.name),
            transfers: gathers,
            runs: second_runs,
        });
        Ok(first_runs)
    }
}
