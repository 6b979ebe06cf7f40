//! Lowering: from the graph and one selected partition per operation to a
//! [`Program`] of per-tile buffers, kernel runs and exchange phases.
//!
//! Each operation asks for the pieces of its operands each tile needs, in
//! the layout its kernel reads. A piece of an input or a weight is written
//! there by the host or the loader; a piece of an activation is used in
//! place when a tile already holds exactly that piece, and is otherwise
//! gathered by exchange, one transfer per contiguous run, with transfers of
//! the same source bytes merged into broadcasts.

use super::layout::{Layout, Piece};
use super::program::*;
use super::runs::{fill, Gather, Gathers, OwnerTable};
use super::view::View;
use crate::graph::{DType, Graph, OpId, OpKind, Repeat, Role, TensorId};
use crate::partition::{KernelId, MemoryClass, Partition};
use crate::plan::cost;
use std::collections::HashMap;
use std::sync::Arc;

mod epilogue;
mod reduce;
mod segments;
mod sums;

/// A lowering failure is a compiler bug or a plan lowering does not support
/// yet; user errors were reported by validation.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LowerError {
    #[error("internal compiler error: tensor `{0}` is read before any operation produced it")]
    NotProduced(String),
    #[error("internal compiler error: element {element} of `{tensor}` has no home on any tile")]
    Uncovered { tensor: String, element: usize },
    #[error("internal compiler error: output `{0}` is not materialised on the device")]
    OutputNotMaterialised(String),
    #[error("internal compiler error: operation `{0}` has a gathered plan but is not a concat")]
    NotGathered(String),
    #[error(
        "internal compiler error: operation `{0}` has a segmented plan but is not a layernorm, an RMS norm or a softmax"
    )]
    NotSegmented(String),
}

/// Lowers `graph` with the partition `plan_of` selects for each operation.
pub fn lower(graph: &Graph, plan_of: &dyn Fn(OpId) -> Partition) -> Result<Program, LowerError> {
    let mut lowering = Lowering {
        graph,
        program: Program::default(),
        homes: HashMap::new(),
        owners: HashMap::new(),
        host_buffers: HashMap::new(),
        gathered: HashMap::new(),
        bindings: HashMap::new(),
        repeat: None,
        row_readers: sums::row_readers(graph, plan_of),
        local_runs: Vec::new(),
        second: None,
    };
    let mut steps = Vec::new();
    let mut index = 0;
    while index < graph.ops.len() {
        let op = OpId(index as u32);
        if let Some((number, repeat)) = graph
            .repeats
            .iter()
            .enumerate()
            .find(|(_, r)| r.body.first() == Some(&op))
        {
            steps.extend(lowering.repeat(number as u32, repeat, plan_of)?);
            index += repeat.body.len();
        } else {
            steps.extend(lowering.operation(op, &plan_of(op))?);
            index += 1;
        }
    }
    lowering.program.steps = steps;
    lowering.finish_bindings()?;
    Ok(lowering.program)
}

/// A demand for one operand piece on one tile.
struct Demand {
    op: OpId,
    operand: u32,
    view: View,
    tile: u32,
    piece: Piece,
    class: MemoryClass,
}

/// Host-written pieces of one tensor (and iteration), with their views.
type BindingPieces = HashMap<(TensorId, Option<u32>), Vec<(BufferId, View)>>;

struct Lowering<'g> {
    graph: &'g Graph,
    program: Program,
    /// Buffers holding each materialised activation.
    homes: HashMap<TensorId, Vec<BufferId>>,
    /// For each materialised activation: element → (buffer, slot).
    owners: HashMap<TensorId, Arc<OwnerTable>>,
    host_buffers: HashMap<(TensorId, Option<u32>, u32, Piece, View), BufferId>,
    /// Operand buffers gathered so far in the current step sequence (the
    /// program's top level, or a repeat's body), by tile, piece, view and
    /// memory class. Activations never change once written, so a later
    /// operation demanding the same piece reads the earlier buffer instead
    /// of gathering it again (projections of one input share it).
    gathered: HashMap<(u32, Piece, View, MemoryClass), BufferId>,
    bindings: BindingPieces,
    /// The repeat being lowered: (index, iteration count).
    repeat: Option<(u32, u32)>,
    /// The row chunks of each tensor's first norm or softmax reader: a
    /// split product reduces into them ([`sums`]).
    row_readers: HashMap<TensorId, Vec<(u32, usize, usize)>>,
    /// Block-major rearranges of held pieces for the operation being
    /// lowered ([`super::local`]), run before its kernels.
    local_runs: Vec<KernelRun>,
    /// The second stage of the operation being lowered, when it has one:
    /// the reduction of a matrix product with a split inner dimension, or
    /// the normalisation of a segmented layernorm.
    second: Option<SecondStage>,
}

/// Where a row operation's tile reads its operands
/// ([`Lowering::row_operand`]).
struct RowsAt<'a> {
    tile: u32,
    piece: &'a Piece,
    coordinates: &'a [usize],
    /// A norm's part of its scale and bias row.
    parameters: Option<&'a Piece>,
}

/// An operation's exchange phase after its first compute step, and the
/// runs of the compute step after it.
struct SecondStage {
    purpose: String,
    transfers: Vec<Gather>,
    runs: Vec<KernelRun>,
}

impl Lowering<'_> {
    fn add_buffer(&mut self, buffer: Buffer) -> BufferId {
        let id = BufferId(self.program.buffers.len() as u32);
        self.program.buffers.push(buffer);
        id
    }

    fn add_phase(&mut self, purpose: String, transfers: impl Into<Gathers>) -> Option<Step> {
        let transfers: Gathers = transfers.into();
        if transfers.is_empty() {
            return None;
        }
        let id = PhaseId(self.program.phases.len() as u32);
        self.program.phases.push(ExchangePhase {
            purpose,
            transfers: transfers.merge_broadcasts(),
            merged: Vec::new(),
        });
        Some(Step::Exchange(id))
    }

    fn set_home(&mut self, tensor: TensorId, buffers: Vec<BufferId>) {
        self.owners.remove(&tensor);
        self.homes.insert(tensor, buffers);
    }

    fn owner_table(&mut self, tensor: TensorId) -> Result<Arc<OwnerTable>, LowerError> {
        if let Some(table) = self.owners.get(&tensor) {
            return Ok(table.clone());
        }
        let name = || self.graph.tensor(tensor).name.clone();
        let home = self.home_of(tensor)?;
        let buffers = &self.program.buffers;
        let table = OwnerTable::new(
            self.graph.tensor(tensor).element_count(),
            home.iter().map(|&id| (id, &buffers[id.0 as usize])),
        )
        .map_err(|element| LowerError::Uncovered {
            tensor: name(),
            element,
        })?;
        let table = Arc::new(table);
        self.owners.insert(tensor, table.clone());
        Ok(table)
    }

    /// Finds or makes the buffer holding `demand`, adding the transfers that
    /// fill it to `transfers`.
    fn demand(
        &mut self,
        demand: Demand,
        transfers: &mut Gathers,
    ) -> Result<OperandRef, LowerError> {
        let base = self.graph.tensor(demand.view.base);
        match base.role {
            Role::Input => Ok(OperandRef::Buffer(self.host_buffer(&demand, None))),
            Role::Weight => match (base.repeat, self.repeat) {
                (Some(_), Some((_, count))) => Ok(OperandRef::PerIteration(
                    (0..count)
                        .map(|i| self.host_buffer(&demand, Some(i)))
                        .collect(),
                )),
                _ => Ok(OperandRef::Buffer(self.host_buffer(&demand, None))),
            },
            Role::Activation => self
                .gathered_buffer(demand, transfers)
                .map(OperandRef::Buffer),
        }
    }

    fn host_buffer(&mut self, demand: &Demand, iteration: Option<u32>) -> BufferId {
        let tensor = demand.view.base;
        let key = (
            tensor,
            iteration,
            demand.tile,
            demand.piece.clone(),
            demand.view.clone(),
        );
        if let Some(&id) = self.host_buffers.get(&key) {
            return id;
        }
        let id = self.private_host_buffer(
            &demand.view,
            demand.tile,
            demand.piece.clone(),
            demand.class,
            iteration,
        );
        self.host_buffers.insert(key, id);
        id
    }

    /// A buffer the host fills with `demand`'s elements that no other
    /// demand shares: a repeat's carry is overwritten by every iteration, so
    /// it must not be the buffer other readers of the input use.
    fn private_host_buffer(
        &mut self,
        view: &View,
        tile: u32,
        piece: Piece,
        class: MemoryClass,
        iteration: Option<u32>,
    ) -> BufferId {
        let tensor = view.base;
        let role = match self.graph.tensor(tensor).role {
            Role::Input => BufferRole::Input { tensor },
            _ => BufferRole::Weight { tensor, iteration },
        };
        let id = self.add_buffer(Buffer {
            tile,
            dtype: self.graph.tensor(tensor).dtype,
            piece,
            coordinates: view.shape.clone(),
            class,
            role,
        });
        self.bindings
            .entry((tensor, iteration))
            .or_default()
            .push((id, view.clone()));
        id
    }

    fn gathered_buffer(
        &mut self,
        demand: Demand,
        transfers: &mut Gathers,
    ) -> Result<BufferId, LowerError> {
        let key = (
            demand.tile,
            demand.piece.clone(),
            demand.view.clone(),
            demand.class,
        );
        if let Some(&id) = self.gathered.get(&key) {
            return Ok(id);
        }
        let id = self.gather(demand, transfers)?;
        if matches!(self.program.buffer(id).role, BufferRole::Operand { .. }) {
            self.gathered.insert(key, id);
        }
        Ok(id)
    }

    /// A new buffer with `demand`'s elements, or the activation's own
    /// buffer when it already holds them in place.
    fn gather(&mut self, demand: Demand, transfers: &mut Gathers) -> Result<BufferId, LowerError> {
        let base = demand.view.base;
        let owners = self.owner_table(base)?;
        // A tile that already holds exactly the demanded elements, in the
        // same order, uses them in place.
        let wanted = demand
            .view
            .is_identity()
            .then(|| demand.piece.flat_run(&demand.view.shape))
            .flatten();
        if let Some(wanted) = wanted {
            let home = &self.homes[&base];
            if let Some(&id) = home.iter().find(|&&id| {
                let b = self.program.buffer(id);
                b.tile == demand.tile && b.piece.flat_run(&b.coordinates) == Some(wanted)
            }) {
                return Ok(id);
            }
        }
        let dtype = self.graph.tensor(base).dtype;
        let id = self.add_buffer(Buffer {
            tile: demand.tile,
            dtype,
            piece: demand.piece.clone(),
            coordinates: demand.view.shape.clone(),
            class: demand.class,
            role: BufferRole::Operand {
                op: demand.op,
                operand: demand.operand,
            },
        });
        // What the tile holds itself is laid out block-major by a kernel
        // run rather than copied in the exchange phase.
        let blocked = matches!(
            demand.piece.layout,
            Layout::KBlocks { .. } | Layout::AmpWeights { .. }
        );
        // The same piece through the same view, filled earlier in this
        // phase into another tile, gives the same gathers: mirror them. In
        // a blocked layout, those from buffers on this tile are its own to
        // rearrange; when they all make rearranges, the rest is mirrored.
        if let Some(earlier) = transfers.earlier_fill(&demand.piece, &demand.view) {
            let on_tile = |g: &&Gather| self.program.buffer(BufferId(g.source)).tile == demand.tile;
            let mut held: Vec<Gather> = match blocked {
                true => transfers.list[earlier.clone()]
                    .iter()
                    .filter(on_tile)
                    .map(|&g| Gather {
                        destination: id,
                        ..g
                    })
                    .collect(),
                false => Vec::new(),
            };
            let sources: Vec<u32> = held.iter().map(|g| g.source).collect();
            let runs = match held.is_empty() {
                true => Vec::new(),
                false => super::local::take_local(&self.program, demand.tile, id, 0, &mut held),
            };
            if held.is_empty() {
                transfers.mirror(earlier, id, sources);
                self.local_runs.extend(runs);
                return Ok(id);
            }
        }
        let start = transfers.list.len();
        fill(
            &demand.piece,
            &demand.view,
            &owners,
            dtype.size_bytes() as u32,
            id,
            &mut transfers.list,
        );
        if blocked {
            let runs = super::local::take_local(
                &self.program,
                demand.tile,
                id,
                start,
                &mut transfers.list,
            );
            if !runs.is_empty() {
                self.local_runs.extend(runs);
                return Ok(id);
            }
        }
        transfers.record_fill(&demand.piece, &demand.view, start);
        Ok(id)
    }

    fn output_buffer(
        &mut self,
        tensor: TensorId,
        tile: u32,
        piece: Piece,
        coordinates: Vec<usize>,
        class: MemoryClass,
    ) -> BufferId {
        self.add_buffer(Buffer {
            tile,
            dtype: self.graph.tensor(tensor).dtype,
            piece,
            coordinates,
            class,
            role: BufferRole::Activation { tensor },
        })
    }

    fn operation(&mut self, op: OpId, partition: &Partition) -> Result<Vec<Step>, LowerError> {
        let mut transfers = Gathers::default();
        let kernel_runs = match partition {
            Partition::View => return Ok(Vec::new()),
            Partition::Gathered {
                rows,
                row_length,
                rows_per_tile,
            } => return self.gathered(op, *rows, *row_length, *rows_per_tile),
            Partition::Matmul {
                grid,
                shard,
                weights,
                swapped,
                kernel,
            } => self.matmul(
                op,
                (grid, shard, *weights, *swapped),
                *kernel,
                &mut transfers,
            )?,
            // An elementwise kernel reads its operands as dense arrays, so
            // a range of elements is a piece of that many rows of one.
            Partition::Elements {
                elements,
                per_tile,
                kernel,
            } => self.rows(
                op,
                (*elements, 1),
                (*per_tile, false),
                *kernel,
                &mut transfers,
            )?,
            Partition::Segments {
                rows,
                row_length,
                rows_per_tile,
                segment,
                kernel,
            } => {
                let shape = (*rows, *row_length, *rows_per_tile, *segment);
                match self.graph.op(op).kind {
                    OpKind::Reduce { .. } => {
                        self.reduce_segments(op, shape, *kernel, &mut transfers)?
                    }
                    _ => self.segments(op, shape, *kernel, &mut transfers)?,
                }
            }
            Partition::Rows {
                rows,
                row_length,
                rows_per_tile,
                kernel,
                folded,
            } => self.rows(
                op,
                (*rows, *row_length),
                (*rows_per_tile, *folded),
                *kernel,
                &mut transfers,
            )?,
        };
        // The rearranges of held pieces run first on their tiles.
        let mut runs = std::mem::take(&mut self.local_runs);
        runs.extend(kernel_runs);
        let name = &self.graph.op(op).name;
        let mut steps: Vec<Step> = self
            .add_phase(ExchangePhase::gather_purpose(name), transfers)
            .into_iter()
            .collect();
        steps.push(Step::Compute { op, runs });
        if let Some(second) = self.second.take() {
            steps.extend(self.add_phase(second.purpose, second.transfers));
            steps.push(Step::Compute {
                op,
                runs: second.runs,
            });
        }
        Ok(steps)
    }

    /// Each tile's GEMM run. In the swapped orientation the kernel computes
    /// the transposed product: it streams the right operand's columns (the
    /// transposed view in K blocks), holds the left operand's rows as AMP
    /// weights, and writes its shard in [`Layout::RowBlocks`].
    fn matmul(
        &mut self,
        op: OpId,
        (grid, shard, weights, swapped): (
            &crate::partition::Grid,
            &crate::partition::Shard,
            MemoryClass,
            bool,
        ),
        kernel: KernelId,
        transfers: &mut Gathers,
    ) -> Result<Vec<KernelRun>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let transpose_rhs = matches!(
            node.kind,
            OpKind::Matmul {
                transpose_rhs: true,
                ..
            }
        );
        let (lhs, rhs, out) = (
            graph.tensor(node.inputs[0]),
            graph.tensor(node.inputs[1]),
            graph.tensor(node.output),
        );
        let rank = out.shape.len();
        let (m, n) = (out.shape[rank - 2], out.shape[rank - 1]);
        let k = *lhs.shape.last().unwrap_or(&1);
        let batch: usize = out.shape[..rank - 2].iter().product();
        let lhs_view = View::of(graph, node.inputs[0]).reshaped(&[batch, m, k]);
        let mut rhs_view = View::of(graph, node.inputs[1]);
        if transpose_rhs {
            rhs_view = rhs_view.transposed_last_two();
        }
        let rhs_view = if rhs.shape.len() == 2 {
            rhs_view.broadcast_to(&[batch, k, n])
        } else {
            rhs_view.reshaped(&[batch, k, n])
        };
        let (lhs_transposed, rhs_transposed) = (
            lhs_view.clone().transposed_last_two(),
            rhs_view.clone().transposed_last_two(),
        );
        let output_layout = match swapped {
            false => Layout::ChannelBlocks,
            true => Layout::RowBlocks,
        };
        let k_block = cost::amp_block_inputs(lhs.dtype) as usize;
        // With a fused cast to FP8 the GEMM writes f16 (f16 tensors carry
        // no scale) and the cast stores the result.
        let accumulated = match crate::partition::written_dtype(kernel, out.dtype) {
            dtype if dtype == out.dtype => out.clone(),
            dtype => crate::graph::Tensor {
                dtype,
                scale: 0,
                ..out.clone()
            },
        };
        let coordinates = vec![batch, m, n];
        let slices = grid.inner as usize;
        let mut runs = Vec::new();
        // Output homes, or with a split K each slice's partial buffers.
        let mut outputs: Vec<Vec<BufferId>> = vec![Vec::new(); slices];
        for bi in 0..grid.batch as usize {
            for mi in 0..grid.rows as usize {
                for ni in 0..grid.cols as usize {
                    let group = ((bi * grid.rows as usize + mi) * grid.cols as usize + ni) * slices;
                    let (b0, m0, n0) = (bi * shard.batch, mi * shard.rows, ni * shard.cols);
                    if b0 >= batch || m0 >= m || n0 >= n {
                        continue;
                    }
                    let (eb, em, en) = (
                        shard.batch.min(batch - b0),
                        shard.rows.min(m - m0),
                        shard.cols.min(n - n0),
                    );
                    for (ki, slice_outputs) in outputs.iter_mut().enumerate() {
                        let tile = (group + ki) as u32;
                        let k0 = ki * shard.inner;
                        let ek = shard.inner.min(k - k0);
                        // (operand, view, piece start, piece extent) of
                        // the streamed input and of the AMP weights.
                        let (streamed, held) = match swapped {
                            false => (
                                (0, &lhs_view, [b0, m0, k0], [eb, em, ek]),
                                (1, &rhs_view, [b0, k0, n0], [eb, ek, en]),
                            ),
                            true => (
                                (1, &rhs_transposed, [b0, n0, k0], [eb, en, ek]),
                                (0, &lhs_transposed, [b0, k0, m0], [eb, ek, em]),
                            ),
                        };
                        let a = self.gemm_operand(
                            (op, tile, weights),
                            &streamed,
                            Layout::KBlocks { k: k_block },
                            transfers,
                        )?;
                        let b = self.gemm_operand(
                            (op, tile, weights),
                            &held,
                            Layout::AmpWeights { k: k_block },
                            transfers,
                        )?;
                        let piece = Piece {
                            start: vec![b0, m0, n0],
                            extent: vec![eb, em, en],
                            layout: output_layout,
                        };
                        let (c, cast) = if slices == 1 {
                            let home = self.output_buffer(
                                node.output,
                                tile,
                                piece,
                                coordinates.clone(),
                                weights,
                            );
                            let (written, epilogue) =
                                self.epilogue_through(op, kernel, home, transfers)?;
                            slice_outputs.push(home);
                            (written, epilogue)
                        } else {
                            let partial = self.add_buffer(Buffer {
                                tile,
                                dtype: accumulated.dtype,
                                piece,
                                coordinates: coordinates.clone(),
                                class: weights,
                                role: BufferRole::Partial {
                                    op,
                                    slice: ki as u32,
                                },
                            });
                            slice_outputs.push(partial);
                            (partial, Vec::new())
                        };
                        runs.push(KernelRun {
                            tile,
                            kernel,
                            operands: vec![a, b, OperandRef::Buffer(c)],
                            params: gemm_params(
                                [eb, streamed.3[1], ek, held.3[2]],
                                match swapped {
                                    false => [lhs, rhs, &accumulated],
                                    true => [rhs, lhs, &accumulated],
                                },
                            ),
                        });
                        runs.extend(cast);
                    }
                }
            }
        }
        if slices > 1 {
            let home = self.reduction(op, (grid, shard, weights), &outputs, transfers)?;
            self.set_home(node.output, home);
        } else {
            self.set_home(node.output, outputs.concat());
        }
        Ok(runs)
    }

    /// A GEMM operand's piece on `tile`: `(operand, view, start, extent)`
    /// in `layout`.
    fn gemm_operand(
        &mut self,
        (op, tile, class): (OpId, u32, MemoryClass),
        &(operand, view, start, extent): &(u32, &View, [usize; 3], [usize; 3]),
        layout: Layout,
        transfers: &mut Gathers,
    ) -> Result<OperandRef, LowerError> {
        self.demand(
            Demand {
                op,
                operand,
                view: view.clone(),
                tile,
                piece: Piece {
                    start: start.to_vec(),
                    extent: extent.to_vec(),
                    layout,
                },
                class,
            },
            transfers,
        )
    }

    /// A tile-local f16 buffer of `op` holding `piece` of rows of
    /// `coordinates`: a fused operation's f16 result before its cast, or
    /// the exponentials of the split softmax stored as FP8.
    fn f16_rows(&mut self, op: OpId, tile: u32, piece: Piece, coordinates: &[usize]) -> BufferId {
        self.add_buffer(Buffer {
            tile,
            dtype: DType::F16,
            piece,
            coordinates: coordinates.to_vec(),
            class: MemoryClass::Standard,
            role: BufferRole::Intermediate { op },
        })
    }

    /// Where `kernel` writes the f16 result that belongs in home
    /// buffer `home` of `op`'s output: the home itself, or when a cast to
    /// FP8 is fused into the operation ([`crate::partition::cast_epilogue`])
    /// a tile-local f16 buffer with the same piece, with the run of the
    /// cast that converts it into the home, slot for slot (padding
    /// included), in the same step.
    fn cast_through(
        &mut self,
        op: OpId,
        kernel: KernelId,
        home: BufferId,
    ) -> (BufferId, Option<KernelRun>) {
        let out = self.graph.tensor(self.graph.op(op).output);
        let Some(cast) = crate::partition::cast_epilogue(kernel, out.dtype) else {
            return (home, None);
        };
        let buffer = self.program.buffer(home).clone();
        let intermediate = self.f16_like(op, &buffer);
        let operands = vec![OperandRef::Buffer(intermediate), OperandRef::Buffer(home)];
        let run = slot_run(cast, operands, &buffer, out.scale);
        (intermediate, Some(run))
    }

    /// A tile-local f16 buffer of `op` with `like`'s tile, piece, layout
    /// and memory class: what a kernel writes for the next one of the same
    /// step to read slot for slot.
    fn f16_like(&mut self, op: OpId, like: &Buffer) -> BufferId {
        self.add_buffer(Buffer {
            dtype: DType::F16,
            role: BufferRole::Intermediate { op },
            ..like.clone()
        })
    }

    /// The reduction stage of a matrix product with a split inner
    /// dimension: in each group of `grid.inner` tiles that computed the
    /// same output shard over different slices of K, tile `r` keeps the
    /// `r`-th band of the shard's rows, or the tiles of a norm or softmax
    /// reading the result keep the rows they read ([`sums`]). Each receives
    /// the partials of its piece into one buffer, slice after slice, and
    /// sums them with the reduce kernel into its home of the output
    /// (through a fused epilogue, whose extra operands gather in the
    /// product's own phase, `first_phase`). The transfers and runs wait in
    /// `self.second` for [`Self::operation`]; the homes are returned.
    fn reduction(
        &mut self,
        op: OpId,
        (grid, shard, class): (
            &crate::partition::Grid,
            &crate::partition::Shard,
            MemoryClass,
        ),
        partials: &[Vec<BufferId>],
        first_phase: &mut Gathers,
    ) -> Result<Vec<BufferId>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let out = graph.tensor(node.output);
        let rank = out.shape.len();
        let (m, n) = (out.shape[rank - 2], out.shape[rank - 1]);
        let batch: usize = out.shape[..rank - 2].iter().product();
        let coordinates = [batch, m, n];
        let slices = grid.inner as usize;
        let band = crate::partition::reduced_rows(shard.rows, grid.inner);
        // The partials are f16 when a cast to FP8 follows the sum.
        let accumulated =
            crate::partition::written_dtype(KernelId::reduce_add_for(out.dtype), out.dtype);
        // A sum that is only cast to FP8 takes one kernel; so do the sum
        // and the epilogue's leading adds.
        let epilogue = match &node.kind {
            OpKind::Matmul { epilogue, .. } => {
                crate::partition::epilogue_kernels(epilogue, out.dtype)
            }
            _ => Vec::new(),
        };
        let (reduce, absorbed) = KernelId::reduce_with(grid.inner, out.dtype, &epilogue);
        let (mut transfers, mut runs, mut home) = (Vec::new(), Vec::new(), Vec::new());
        // Each reducing tile's piece of the result and the buffer its
        // partials arrive in, slice after slice.
        let layout = ((band, coordinates), (accumulated, class));
        let kernel_cycles =
            |length: usize| cost::reduce_cycles(reduce, slices as u64, length as u64);
        let sums = match self.reader_sums(
            op,
            partials,
            layout.0,
            layout.1,
            &kernel_cycles,
            &mut transfers,
        )? {
            Some(sums) => sums,
            None => self.band_sums(op, partials, layout.0, layout.1, &mut transfers)?,
        };
        for (tile, kept, received) in sums {
            let length = kept.slots();
            let c = self.output_buffer(node.output, tile, kept, vec![batch, m, n], class);
            home.push(c);
            if let KernelId::ReduceCast { .. } = reduce {
                runs.push(KernelRun {
                    tile,
                    kernel: reduce,
                    operands: vec![OperandRef::Buffer(received), OperandRef::Buffer(c)],
                    params: vec![
                        ("count".into(), slices as i64),
                        ("length".into(), length as i64),
                        ("out_scale".into(), i64::from(out.scale)),
                    ],
                });
                continue;
            }
            let through = self.epilogue_after(op, reduce, c, absorbed, first_phase)?;
            let operands = std::iter::once(OperandRef::Buffer(received))
                .chain(through.extras)
                .chain([OperandRef::Buffer(through.written)])
                .collect();
            runs.push(KernelRun {
                tile,
                kernel: reduce,
                operands,
                params: vec![
                    ("count".into(), slices as i64),
                    ("length".into(), length as i64),
                ],
            });
            runs.extend(through.runs);
        }
        self.second = Some(SecondStage {
            purpose: ExchangePhase::reduction_purpose(&node.name),
            transfers,
            runs,
        });
        Ok(home)
    }

    fn rows(
        &mut self,
        op: OpId,
        (rows, row_length): (usize, usize),
        (rows_per_tile, folded): (usize, bool),
        kernel: KernelId,
        transfers: &mut Gathers,
    ) -> Result<Vec<KernelRun>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        if let OpKind::Reduce { .. } = node.kind {
            return self.reduce_rows(op, rows, rows_per_tile, kernel, transfers);
        }
        let out = graph.tensor(node.output);
        let coordinates = vec![rows, row_length];
        let matrix_rows = crate::partition::matrix_rows(&out.shape);
        let mut runs = Vec::new();
        let mut home = Vec::new();
        let chunks = crate::partition::row_chunks(rows, rows_per_tile, matrix_rows, folded);
        for (tile, first_row, count) in chunks {
            let row_piece = Piece::row_major(vec![first_row, 0], vec![count, row_length]);
            let norm = matches!(node.kind, OpKind::Layernorm { .. } | OpKind::Rmsnorm { .. });
            let parameters = norm.then(|| Piece::row_major(vec![0], vec![row_length]));
            let mut operands = Vec::new();
            for operand in 0..node.inputs.len() {
                let at = RowsAt {
                    tile,
                    piece: &row_piece,
                    coordinates: &coordinates,
                    parameters: parameters.as_ref(),
                };
                operands.push(self.row_operand(op, operand, at, transfers)?);
            }
            let c = self.output_buffer(
                node.output,
                tile,
                row_piece.clone(),
                coordinates.clone(),
                MemoryClass::Standard,
            );
            home.push(c);
            // A fused operation's kernel writes its f16 rows next to the
            // result, where the cast that follows it on the tile reads them.
            let epilogue = crate::partition::cast_epilogue(kernel, out.dtype);
            let intermediate =
                epilogue.map(|_| self.f16_rows(op, tile, row_piece.clone(), &coordinates));
            // A split norm's statistics kernel writes each row's partial
            // statistics to a buffer of the tile, which the normalising
            // kernel reads before its result.
            let prologue = crate::partition::norm_prologue(kernel);
            let records = prologue.map(|_| {
                let per_row = crate::partition::NORM_PART_RECORDS_PER_ROW;
                self.add_buffer(Buffer {
                    tile,
                    dtype: DType::F32,
                    piece: Piece::row_major(vec![first_row, 0], vec![count, per_row]),
                    coordinates: vec![rows, per_row],
                    class: MemoryClass::Standard,
                    role: BufferRole::Intermediate { op },
                })
            });
            // The split softmax stored as FP8 keeps each exponential: its
            // statistics kernel writes them to a buffer of the tile, which
            // the output kernel rescales in place of the input.
            let exponentials = matches!(kernel, KernelId::SoftmaxPartsOnce { .. })
                .then(|| self.f16_rows(op, tile, row_piece, &coordinates));
            let prologue_run = prologue.zip(records).map(|(stats, records)| {
                let mut operands = vec![operands[0].clone()];
                operands.extend(exponentials.map(OperandRef::Buffer));
                operands.push(OperandRef::Buffer(records));
                (stats, operands)
            });
            if let Some(exponentials) = exponentials {
                operands = vec![OperandRef::Buffer(exponentials)];
            }
            operands.extend(records.map(OperandRef::Buffer));
            operands.push(OperandRef::Buffer(intermediate.unwrap_or(c)));
            let mut params = vec![
                ("rows".to_string(), count as i64),
                ("row_length".to_string(), row_length as i64),
                ("first_row".to_string(), first_row as i64),
                ("matrix_rows".to_string(), matrix_rows as i64),
                (
                    "in_scale".to_string(),
                    i64::from(graph.tensor(node.inputs[0]).scale),
                ),
                ("out_scale".to_string(), i64::from(out.scale)),
            ];
            match &node.kind {
                OpKind::Softmax { scale, causal } => {
                    params.push(("scale_bits".into(), i64::from(scale.to_bits())));
                    params.push(("causal".into(), i64::from(*causal)));
                }
                OpKind::Layernorm { epsilon } | OpKind::Rmsnorm { epsilon } => {
                    params.push(("epsilon_bits".into(), i64::from(epsilon.to_bits())))
                }
                _ => {}
            }
            let epilogue_run = epilogue.zip(intermediate).map(|(cast, from)| KernelRun {
                tile,
                kernel: cast,
                operands: vec![OperandRef::Buffer(from), OperandRef::Buffer(c)],
                params: params.clone(),
            });
            runs.extend(prologue_run.map(|(stats, operands)| KernelRun {
                tile,
                kernel: stats,
                operands,
                params: params.clone(),
            }));
            runs.push(KernelRun {
                tile,
                kernel,
                operands,
                params,
            });
            runs.extend(epilogue_run);
        }
        self.set_home(node.output, home);
        Ok(runs)
    }

    /// Finds or makes operand `operand` of the row operation `op` on
    /// `at.tile`: the rows of `at.piece` (in the output's rows, `at.coordinates`),
    /// its operand broadcast to the output's shape, or for a norm's scale
    /// and bias, `at.parameters` of their row.
    fn row_operand(
        &mut self,
        op: OpId,
        operand: usize,
        at: RowsAt,
        transfers: &mut Gathers,
    ) -> Result<OperandRef, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let input = node.inputs[operand];
        let (view, piece) = match at.parameters {
            Some(parameters) if operand > 0 => (View::of(graph, input), parameters.clone()),
            _ => {
                let view = View::of(graph, input)
                    .broadcast_to(&graph.tensor(node.output).shape)
                    .reshaped(at.coordinates);
                (view, at.piece.clone())
            }
        };
        self.demand(
            Demand {
                op,
                operand: operand as u32,
                view,
                tile: at.tile,
                piece,
                class: MemoryClass::Standard,
            },
            transfers,
        )
    }

    fn repeat(
        &mut self,
        number: u32,
        repeat: &Repeat,
        plan_of: &dyn Fn(OpId) -> Partition,
    ) -> Result<Vec<Step>, LowerError> {
        let graph = self.graph;
        let carry = graph.tensor(repeat.carry_in);
        let (pieces, coordinates) = row_pieces(&carry.shape, graph.tiles);

        // The carried activation lives row-distributed; the loop's first
        // iteration reads it from `init`, later ones from the previous
        // iteration's result.
        let mut home = Vec::new();
        let mut before = Vec::new();
        let init_view = View::of(graph, repeat.init).reshaped(&coordinates);
        for (tile, piece) in pieces.into_iter().enumerate() {
            let id = if graph.tensor(init_view.base).role == Role::Input {
                let class = MemoryClass::Standard;
                self.private_host_buffer(&init_view, tile as u32, piece, class, None)
            } else {
                let id = self.output_buffer(
                    repeat.carry_in,
                    tile as u32,
                    piece.clone(),
                    coordinates.clone(),
                    MemoryClass::Standard,
                );
                let owners = self.owner_table(init_view.base)?;
                let bytes = carry.dtype.size_bytes() as u32;
                fill(&piece, &init_view, &owners, bytes, id, &mut before);
                id
            };
            home.push(id);
        }
        self.set_home(repeat.carry_in, home.clone());

        // The body's operand buffers are refilled every iteration, and
        // those gathered before it are not the body's to keep alive.
        let outside = std::mem::take(&mut self.gathered);
        self.repeat = Some((number, repeat.count));
        let mut body = Vec::new();
        for &op in &repeat.body {
            body.extend(self.operation(op, &plan_of(op))?);
        }
        self.repeat = None;
        self.gathered = outside;

        // The body's result may be a view (a reshape back to the carry's
        // shape): the carry reads it through the view.
        let mut carry_transfers = Vec::new();
        let out_view = View::of(graph, repeat.carry_out).reshaped(&coordinates);
        let owners = self.owner_table(out_view.base)?;
        for &id in &home {
            let piece = self.program.buffer(id).piece.clone();
            fill(
                &piece,
                &out_view,
                &owners,
                carry.dtype.size_bytes() as u32,
                id,
                &mut carry_transfers,
            );
        }
        body.extend(self.add_phase(ExchangePhase::carry_purpose(&repeat.name), carry_transfers));

        // After the last iteration the carry holds the repeat's result.
        self.set_home(repeat.output, home);
        let mut steps: Vec<Step> = self
            .add_phase(ExchangePhase::enter_purpose(&repeat.name), before)
            .into_iter()
            .collect();
        steps.push(Step::Repeat {
            repeat: number,
            count: repeat.count,
            body,
        });
        Ok(steps)
    }

    fn finish_bindings(&mut self) -> Result<(), LowerError> {
        // Outputs first: reading a view of an input back adds host writes.
        for &output in &self.graph.outputs {
            let pieces = self.output_pieces(output)?;
            self.program.host_reads.push(Binding {
                tensor: output,
                iteration: None,
                pieces,
            });
        }
        let mut writes: Vec<Binding> = self
            .bindings
            .drain()
            .map(|((tensor, iteration), pieces)| Binding {
                tensor,
                iteration,
                pieces,
            })
            .collect();
        writes.sort_by_key(|b| (b.tensor, b.iteration));
        self.program.host_writes = writes;
        Ok(())
    }
}

impl Lowering<'_> {
    /// Where the host reads `output` from: the buffers of the tensor that
    /// holds its data, through the inverse of the view when the output is a
    /// transpose or reshape (a view is read in place, never copied).
    fn output_pieces(&mut self, output: TensorId) -> Result<Vec<(BufferId, View)>, LowerError> {
        let graph = self.graph;
        let view = View::of(graph, output);
        let not_materialised =
            || LowerError::OutputNotMaterialised(graph.tensor(output).name.clone());
        let inverse = view.inverse(output).ok_or_else(not_materialised)?;
        let home = self.home_of(view.base)?;
        Ok(home
            .into_iter()
            .map(|id| {
                let coordinates = &self.program.buffer(id).coordinates;
                (id, inverse.clone().reshaped(coordinates))
            })
            .collect())
    }

    /// The buffers holding `tensor`. An input or a weight has none until
    /// something needs it whole (an output viewing it, a repeat starting
    /// from it): then the host writes it into row pieces spread over the
    /// tiles, which become its home.
    fn home_of(&mut self, tensor: TensorId) -> Result<Vec<BufferId>, LowerError> {
        if let Some(home) = self.homes.get(&tensor) {
            return Ok(home.clone());
        }
        let graph = self.graph;
        let t = graph.tensor(tensor);
        if t.role == Role::Activation || t.repeat.is_some() {
            return Err(LowerError::NotProduced(t.name.clone()));
        }
        let (pieces, coordinates) = row_pieces(&t.shape, graph.tiles);
        let view = View::identity(tensor, &t.shape, &coordinates);
        let home: Vec<BufferId> = pieces
            .into_iter()
            .enumerate()
            .map(|(tile, piece)| {
                let class = MemoryClass::Standard;
                self.private_host_buffer(&view, tile as u32, piece, class, None)
            })
            .collect();
        self.set_home(tensor, home.clone());
        Ok(home)
    }
}

impl Lowering<'_> {
    /// A `concat` under a [`Partition::Gathered`] plan: the output in row
    /// pieces over the tiles, each filled by one exchange phase straight
    /// from the tiles holding the inputs, with no kernel. The output seen
    /// flat is a sequence of outer blocks, each the inputs' blocks one after
    /// another, so a tile's piece (a flat range) is cut where it crosses
    /// from one input's block to the next, and each cut is gathered from
    /// that input through its view (a slice or transpose is read in place).
    fn gathered(
        &mut self,
        op: OpId,
        rows: usize,
        row_length: usize,
        rows_per_tile: usize,
    ) -> Result<Vec<Step>, LowerError> {
        let graph = self.graph;
        let node = graph.op(op);
        let OpKind::Concat { axis } = node.kind else {
            return Err(LowerError::NotGathered(node.name.clone()));
        };
        let out = graph.tensor(node.output);
        let inner: usize = out.shape[axis + 1..].iter().product();
        let element_bytes = out.dtype.size_bytes() as u32;
        // Each input's place in an outer block (start and length, in
        // elements), its view as a flat vector and the owners under it.
        let mut parts = Vec::with_capacity(node.inputs.len());
        let mut block = 0;
        for &input in &node.inputs {
            let tensor = graph.tensor(input);
            let length = tensor.shape[axis] * inner;
            let view = View::of(graph, input).reshaped(&[tensor.element_count()]);
            let owners = self.owner_table(view.base)?;
            parts.push((block, length, view, owners));
            block += length;
        }
        let coordinates = vec![rows, row_length];
        let mut transfers = Vec::new();
        let mut home = Vec::new();
        for (tile, first_row) in (0..rows).step_by(rows_per_tile.max(1)).enumerate() {
            let count = rows_per_tile.min(rows - first_row);
            let piece = Piece::row_major(vec![first_row, 0], vec![count, row_length]);
            let id = self.output_buffer(
                node.output,
                tile as u32,
                piece,
                coordinates.clone(),
                MemoryClass::Standard,
            );
            home.push(id);
            let (first, end) = (first_row * row_length, (first_row + count) * row_length);
            let mut element = first;
            while element < end {
                let (outer, within) = (element / block, element % block);
                let Some((start, length, view, owners)) = parts
                    .iter()
                    .find(|(start, length, ..)| within < start + length)
                else {
                    return Err(LowerError::Uncovered {
                        tensor: out.name.clone(),
                        element,
                    });
                };
                let run = (start + length - within).min(end - element);
                let source = Piece::row_major(vec![outer * length + within - start], vec![run]);
                let from = transfers.len();
                fill(&source, view, owners, element_bytes, id, &mut transfers);
                // `fill` writes the run from the buffer's start; it belongs
                // where the run sits in the tile's piece.
                for gather in &mut transfers[from..] {
                    gather.offset += (element - first) as u32 * element_bytes;
                }
                element += run;
            }
        }
        self.set_home(node.output, home);
        Ok(self
            .add_phase(ExchangePhase::gather_purpose(&node.name), transfers)
            .into_iter()
            .collect())
    }
}

/// A run of the elementwise `kernel` on `like`'s tile over every slot of
/// `like` (padding included), its buffers laid out alike, storing FP8 with
/// `out_scale`.
fn slot_run(
    kernel: KernelId,
    operands: Vec<OperandRef>,
    like: &Buffer,
    out_scale: i8,
) -> KernelRun {
    KernelRun {
        tile: like.tile,
        kernel,
        operands,
        params: vec![
            ("rows".into(), like.piece.slots() as i64),
            ("row_length".into(), 1),
            ("out_scale".into(), i64::from(out_scale)),
        ],
    }
}

/// A tensor seen as `[rows, row_length]` (its last dimension as rows),
/// split into consecutive row pieces, one per tile on the first tiles:
/// the pieces and the `[rows, row_length]` coordinates they are given in.
fn row_pieces(shape: &[usize], tiles: u32) -> (Vec<Piece>, Vec<usize>) {
    let row_length = *shape.last().unwrap_or(&1);
    let rows = shape.iter().product::<usize>() / row_length.max(1);
    let rows_per_tile = rows.div_ceil(tiles.min(rows as u32).max(1) as usize).max(1);
    let pieces = (0..rows)
        .step_by(rows_per_tile)
        .map(|first_row| {
            Piece::row_major(
                vec![first_row, 0],
                vec![rows_per_tile.min(rows - first_row), row_length],
            )
        })
        .collect();
    (pieces, vec![rows, row_length])
}

/// A GEMM run's parameters: the kernel's `[batch, rows, inner, cols]` and
/// its `[left, right, output]` tensors (the operands as the kernel sees
/// them: exchanged in the swapped orientation).
fn gemm_params(
    [batch, rows, inner, cols]: [usize; 4],
    [lhs, rhs, out]: [&crate::graph::Tensor; 3],
) -> Vec<(String, i64)> {
    use crate::graph::DType;
    vec![
        ("batch".into(), batch as i64),
        ("rows".into(), rows as i64),
        ("inner".into(), inner as i64),
        ("cols".into(), cols as i64),
        ("lhs_scale".into(), i64::from(lhs.scale)),
        ("rhs_scale".into(), i64::from(rhs.scale)),
        ("out_scale".into(), i64::from(out.scale)),
        // FP8 kernels serve both formats; the state says which.
        ("lhs_f152".into(), i64::from(lhs.dtype == DType::F152)),
        ("rhs_f152".into(), i64::from(rhs.dtype == DType::F152)),
    ]
}
