//! The seeded generator of inputs and weights.
//!
//! The values of a tensor are a pure function of the project seed, the
//! tensor's name, the repeat iteration (for per-iteration weights) and its
//! [`Init`], so the runtime, the host reference and any other tool produce
//! the same bytes. `book/src/numerics.md` specifies it byte for byte:
//!
//! 1. key = `b"ipub.init.v1"` ‖ seed (u64 LE) ‖ name length in bytes (u32 LE)
//!    ‖ name (UTF-8) ‖ `0x00` without iteration, or `0x01` ‖ iteration (u32 LE);
//! 2. the blake3 hash of the key, read as four u64 LE words, is the state of
//!    a xoshiro256** generator (an all-zero state, which blake3 will not
//!    produce in practice, is replaced by `[1, 0, 0, 0]`);
//! 3. elements are drawn in row-major order: uniform takes one output per
//!    element, `u = (x >> 40) · 2^-24`, value `scale · (2u - 1)` in f32;
//!    normal takes two outputs per pair of elements (Box-Muller in f64,
//!    `u1 = ((a >> 11) + 1) · 2^-53`, `u2 = (b >> 11) · 2^-53`,
//!    `r = sqrt(-2 ln u1)`, elements `std · r cos(2π u2)` then
//!    `std · r sin(2π u2)`; an odd last element uses the cosine only);
//! 4. the f32 values are rounded to the tensor's dtype ([`host_round`]).

use crate::graph::{Graph, Init, Tensor, TensorId};
use crate::numerics::{encode, host_round};
use rayon::prelude::*;

/// The domain separator that starts every key; bump it if the generator's
/// definition ever changes, so old and new streams cannot be confused.
const KEY_PREFIX: &[u8; 12] = b"ipub.init.v1";

/// xoshiro256** (Blackman and Vigna, 2018): small, fast and statistically
/// strong; implemented here so its definition is fixed with the project.
#[derive(Clone, Debug)]
pub(super) struct Xoshiro256StarStar {
    state: [u64; 4],
}

impl Xoshiro256StarStar {
    pub(super) fn from_state(state: [u64; 4]) -> Xoshiro256StarStar {
        let state = if state == [0; 4] { [1, 0, 0, 0] } else { state };
        Xoshiro256StarStar { state }
    }

    /// The generator for one tensor (steps 1 and 2 of the module docs).
    pub(super) fn for_tensor(seed: u64, name: &str, iteration: Option<u32>) -> Xoshiro256StarStar {
        let mut key = Vec::with_capacity(KEY_PREFIX.len() + 8 + 4 + name.len() + 5);
        key.extend_from_slice(KEY_PREFIX);
        key.extend_from_slice(&seed.to_le_bytes());
        key.extend_from_slice(&(name.len() as u32).to_le_bytes());
        key.extend_from_slice(name.as_bytes());
        match iteration {
            None => key.push(0),
            Some(i) => {
                key.push(1);
                key.extend_from_slice(&i.to_le_bytes());
            }
        }
        let digest = blake3::hash(&key);
        let bytes = digest.as_bytes();
        let mut state = [0u64; 4];
        for (word, chunk) in state.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut le = [0u8; 8];
            le.copy_from_slice(chunk);
            *word = u64::from_le_bytes(le);
        }
        Xoshiro256StarStar::from_state(state)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

/// The f32 values of `count` elements drawn for `init` (before rounding to a
/// dtype), following the module's specification.
///
/// A file init is not generated: its values are the file's, which callers
/// read themselves (the pipeline into the package, the runtime from it).
/// Asked for one anyway, this gives NaNs, so that a caller that forgot
/// fails every check instead of passing on made-up values.
pub(super) fn generate(
    seed: u64,
    name: &str,
    iteration: Option<u32>,
    init: &Init,
    count: usize,
) -> Vec<f32> {
    match *init {
        Init::File { .. } => vec![f32::NAN; count],
        Init::Zeros => vec![0.0; count],
        Init::Ones => vec![1.0; count],
        Init::Uniform { scale } => {
            let mut rng = Xoshiro256StarStar::for_tensor(seed, name, iteration);
            (0..count)
                .map(|_| {
                    let u = (rng.next_u64() >> 40) as f32 * 2f32.powi(-24);
                    // 2u - 1 is exact in f32 (24-bit numerator); one rounding.
                    scale * (2.0 * u - 1.0)
                })
                .collect()
        }
        Init::Normal { std } => {
            // The stream is sequential by definition, but drawing is cheap;
            // the transcendental functions run in parallel afterwards.
            let mut rng = Xoshiro256StarStar::for_tensor(seed, name, iteration);
            let pairs = count.div_ceil(2);
            let draws: Vec<u64> = (0..2 * pairs).map(|_| rng.next_u64()).collect();
            let std = f64::from(std);
            let mut values = vec![0.0f32; 2 * pairs];
            values
                .par_chunks_mut(2)
                .zip(draws.par_chunks(2))
                .for_each(|(pair, draw)| {
                    let u1 = ((draw[0] >> 11) + 1) as f64 * 2f64.powi(-53);
                    let u2 = (draw[1] >> 11) as f64 * 2f64.powi(-53);
                    let r = (-2.0 * u1.ln()).sqrt();
                    let (sin, cos) = (std::f64::consts::TAU * u2).sin_cos();
                    pair[0] = (std * r * cos) as f32;
                    pair[1] = (std * r * sin) as f32;
                });
            values.truncate(count);
            values
        }
    }
}

/// The values of input or weight `tensor` after rounding to its dtype (with
/// its scale for FP8), as the device sees them. `iteration` selects the
/// instance of a per-iteration weight and must be `None` otherwise. A tensor
/// without an `Init` (an activation) reads as zeros, which the validator
/// never lets an input or weight be.
pub fn tensor_values(graph: &Graph, tensor: TensorId, iteration: Option<u32>) -> Vec<f32> {
    let t = graph.tensor(tensor);
    let mut values = unrounded(graph, tensor, iteration);
    values
        .par_iter_mut()
        .for_each(|v| *v = host_round(*v, t.dtype, t.scale));
    values
}

/// The device encoding of [`tensor_values`]: row-major, little-endian f32
/// (4 bytes) or f16 (2 bytes) per element, or one FP8 code per element.
/// The bytes are encoded from the unrounded values, so they are exactly the
/// codes whose decoding [`tensor_values`] returns.
pub fn tensor_bytes(graph: &Graph, tensor: TensorId, iteration: Option<u32>) -> Vec<u8> {
    declared_tensor_bytes(graph.seed, graph.tensor(tensor), iteration)
}

/// [`tensor_bytes`] from a tensor's declaration and the graph's seed alone,
/// so a caller can regenerate one weight without the rest of the graph.
pub(crate) fn declared_tensor_bytes(seed: u64, t: &Tensor, iteration: Option<u32>) -> Vec<u8> {
    let init = t.init.clone().unwrap_or(Init::Zeros);
    let values = generate(seed, t.written_name(), iteration, &init, t.element_count());
    encode(&values, t.dtype, t.scale)
}

fn unrounded(graph: &Graph, tensor: TensorId, iteration: Option<u32>) -> Vec<f32> {
    let t = graph.tensor(tensor);
    let init = t.init.clone().unwrap_or(Init::Zeros);
    generate(
        graph.seed,
        t.written_name(),
        iteration,
        &init,
        t.element_count(),
    )
}
