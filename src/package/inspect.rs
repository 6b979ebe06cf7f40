//! The stable text dump of a package that `ipub inspect` prints: tiles and
//! their memory by category, kernels, the host calls' steps, exchange
//! programs and bindings. Tests snapshot it, so its shape changes only on
//! purpose.

use super::{Call, Package, SegmentKind, Step};
use crate::target::target_by_name;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Renders `package` as text.
pub(crate) fn render(package: &Package) -> String {
    let mut out = String::new();
    let header = &package.header;
    let _ = writeln!(
        out,
        "package {} for {}: format {}, written by ipub {}",
        package.graph.name, header.target, header.format_version, header.compiler_version
    );
    tiles(package, &mut out);
    kernels(package, &mut out);
    for call in Call::ALL {
        let steps = package.call(call);
        let _ = writeln!(
            out,
            "call {}: {} steps, {} exchange phases ({} executed)",
            call.name(),
            steps.preorder().len(),
            steps.phase_count(),
            steps.executed_phase_count()
        );
        self::steps(package, &steps.steps, 1, &mut out);
    }
    exchanges(package, &mut out);
    bindings(package, &mut out);
    out
}

fn tiles(package: &Package, out: &mut String) {
    let total_tiles = target_by_name(&package.header.target).map_or(0, |t| t.tiles);
    let loadable = target_by_name(&package.header.target).map_or(0, |t| t.memory.loadable.len());
    let _ = writeln!(out, "tiles: {} used of {total_tiles}", package.tiles.len());
    let mut totals = [0u64; 3];
    for image in &package.tiles {
        let code = image.bytes_of(SegmentKind::Code);
        let data = image.bytes_of(SegmentKind::Data);
        let zero = image.bytes_of(SegmentKind::Zero);
        totals[0] += code;
        totals[1] += data;
        totals[2] += zero;
        let used = code + data + zero;
        let _ = writeln!(
            out,
            "  tile {:>4}: code {code:>7}  data {data:>7}  zero {zero:>7}  free {:>7} of {loadable} bytes",
            image.tile,
            u64::from(loadable).saturating_sub(used),
        );
    }
    let _ = writeln!(
        out,
        "  all tiles: code {}  data {}  zero {} bytes",
        totals[0], totals[1], totals[2]
    );
}

/// The tiles a kernel runs on and the compute steps it runs in.
type KernelUses = (BTreeSet<u32>, BTreeSet<(Call, u32)>);

fn kernels(package: &Package, out: &mut String) {
    let layout = &package.profile;
    let mut uses: BTreeMap<u32, KernelUses> = BTreeMap::new();
    for entry in &layout.steps {
        for &(tile, kernel) in &entry.tiles {
            let (tiles, steps) = uses.entry(kernel).or_default();
            tiles.insert(tile);
            steps.insert((entry.call, entry.step));
        }
    }
    let _ = writeln!(
        out,
        "kernels: {} (estimated run: {} cycles)",
        layout.kernels.len(),
        layout.estimated_cycles
    );
    for (index, name) in layout.kernels.iter().enumerate() {
        let (tiles, steps) = uses.remove(&(index as u32)).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {name}: {} tiles, {} compute steps",
            tiles.len(),
            steps.len()
        );
    }
}

fn tensor_name(package: &Package, binding: u32) -> String {
    package
        .bindings
        .get(binding as usize)
        .and_then(|b| {
            let name = &package.graph.tensors.get(b.tensor.0 as usize)?.name;
            Some(match b.iteration {
                Some(i) => format!("{name}[iteration {i}]"),
                None => name.clone(),
            })
        })
        .unwrap_or_else(|| "?".into())
}

fn steps(package: &Package, steps: &[Step], depth: usize, out: &mut String) {
    let indent = "  ".repeat(depth);
    for step in steps {
        match step {
            Step::Compute { label, op, tiles } => {
                let op = op
                    .as_deref()
                    .map_or(String::new(), |op| format!(" (op {op})"));
                let _ = writeln!(out, "{indent}compute {label}{op} on {} tiles", tiles.len());
            }
            Step::Exchange { program } => {
                let label = package
                    .exchanges
                    .get(*program as usize)
                    .map_or("?", |p| p.label.as_str());
                let _ = writeln!(out, "{indent}sync; exchange {program} ({label})");
            }
            Step::Repeat { count, body } => {
                let _ = writeln!(out, "{indent}repeat x{count}");
                self::steps(package, body, depth + 1, out);
            }
            Step::HostWrite { binding } => {
                let name = tensor_name(package, *binding);
                let _ = writeln!(out, "{indent}host write {name} (binding {binding})");
            }
            Step::HostRead { binding } => {
                let name = tensor_name(package, *binding);
                let _ = writeln!(out, "{indent}host read {name} (binding {binding})");
            }
        }
    }
}

fn exchanges(package: &Package, out: &mut String) {
    let _ = writeln!(out, "exchange programs: {}", package.exchanges.len());
    for (index, program) in package.exchanges.iter().enumerate() {
        let broadcasts = program
            .transfers
            .iter()
            .filter(|t| t.destinations.len() > 1)
            .count();
        let senders: BTreeSet<u32> = program.transfers.iter().map(|t| t.source_tile).collect();
        let _ = writeln!(
            out,
            "  {index} {}: {} transfers ({broadcasts} broadcasts) from {} tiles, {} bytes sent, {} delivered, horizon {} cycles, {}",
            program.label,
            program.transfers.len(),
            senders.len(),
            program.bytes_sent(),
            program.bytes_delivered(),
            program.horizon_cycles,
            if program.paired { "paired" } else { "ordinary" }
        );
    }
}

fn bindings(package: &Package, out: &mut String) {
    let _ = writeln!(out, "bindings: {}", package.bindings.len());
    for (index, binding) in package.bindings.iter().enumerate() {
        let tiles: BTreeSet<u32> = binding.pieces.iter().map(|p| p.tile).collect();
        let _ = writeln!(
            out,
            "  {index} {}: {} x {} ({} bytes) in {} runs of {} blocks on {} tiles",
            tensor_name(package, index as u32),
            binding.dtype,
            binding.element_count,
            binding.byte_len(),
            binding.pieces.len(),
            binding
                .pieces
                .iter()
                .map(|p| u64::from(p.count))
                .sum::<u64>(),
            tiles.len()
        );
    }
}
