//! The accumulating matrix product unit of one worker context (semantics
//! in `book/src/isa.md`, "The AMP").

use crate::isa::fp8::{value_table, Fp8Format};
use half::f16;

/// Bytes of weight storage: 16 channels × 16 f16 or 32 FP8 inputs.
pub(super) const CWEI_BYTES: usize = 512;

/// Which decoding the cached f32 weights hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decoded {
    Stale,
    F16,
    /// FP8 with the weight fields of `$fp8cfg` (format bit, scale byte).
    F8(u32),
}

#[derive(Clone)]
pub(super) struct Amp {
    pub cwei: [u8; CWEI_BYTES],
    pub slot: u8,
    pub current: [f32; 16],
    pub drain: [f32; 16],
    pub phase: u8,
    weights: [[f32; 16]; 32],
    decoded: Decoded,
}

impl Default for Amp {
    fn default() -> Self {
        Amp {
            cwei: [0; CWEI_BYTES],
            slot: 0,
            current: [0.0; 16],
            drain: [0.0; 16],
            phase: 0,
            weights: [[0.0; 16]; 32],
            decoded: Decoded::Stale,
        }
    }
}

/// f16 bits to f32 through a 65536-entry table: the AMP converts 8 to 12
/// halves per issue, and a table lookup beats the bit manipulation.
#[inline]
pub(super) fn f16_to_f32(bits: u16) -> f32 {
    static TABLE: std::sync::OnceLock<Box<[f32]>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect());
    table[usize::from(bits)]
}

/// `$fp8cfg` fields.
pub(super) fn input_format(cfg: u32) -> Fp8Format {
    Fp8Format::from_bit(cfg)
}

pub(crate) fn input_scale(cfg: u32) -> i8 {
    (cfg >> 8) as u8 as i8
}

fn weight_format(cfg: u32) -> Fp8Format {
    Fp8Format::from_bit(cfg >> 1)
}

fn weight_scale(cfg: u32) -> i8 {
    (cfg >> 16) as u8 as i8
}

impl Amp {
    /// `ampclr`.
    pub(super) fn clear(&mut self) {
        self.current = [0.0; 16];
        self.drain = [0.0; 16];
        self.phase = 0;
        self.slot = 0;
    }

    /// `ldcwei` (8 bytes) and `ld128cwei` (16): each 8 bytes into the
    /// write slot, which advances.
    pub(super) fn load_weights<const N: usize>(&mut self, bytes: [u8; N]) {
        for word in bytes.chunks_exact(8) {
            let at = usize::from(self.slot) * 8;
            self.cwei[at..at + 8].copy_from_slice(word);
            self.slot = (self.slot + 1) % 64;
        }
        self.decoded = Decoded::Stale;
    }

    /// Decoded weights are held input-major (`weights[k][c]` is input
    /// `k`'s weight for channel `c`), so a phase's MACs run across the 16
    /// channels at once: each channel still sums its products in input
    /// order, so the rounding is the instruction's, but the compiler can
    /// use vector lanes for the channels.
    fn weights_f16(&mut self) {
        if self.decoded != Decoded::F16 {
            for c in 0..16 {
                for k in 0..16 {
                    let i = 16 * c + k;
                    self.weights[k][c] =
                        f16_to_f32(u16::from_le_bytes([self.cwei[2 * i], self.cwei[2 * i + 1]]));
                }
            }
            self.decoded = Decoded::F16;
        }
    }

    fn weights_f8(&mut self, cfg: u32) {
        let key = cfg & 0x00FF_0002;
        if self.decoded != Decoded::F8(key) {
            let table = value_table(weight_format(cfg), weight_scale(cfg));
            for c in 0..16 {
                for k in 0..32 {
                    self.weights[k][c] = table[usize::from(self.cwei[32 * c + k])];
                }
            }
            self.decoded = Decoded::F8(key);
        }
    }

    /// Partials out for this phase, then the phase's MACs, then the bank
    /// swap after phase 3.
    fn finish(&mut self, partials_in: u64) -> u64 {
        let base = 4 * usize::from(self.phase);
        let mut out = 0u64;
        for j in 0..4 {
            let p = f16_to_f32((partials_in >> (16 * j)) as u16);
            let v = f16::from_f32(self.drain[base + j] + p);
            out |= u64::from(v.to_bits()) << (16 * j);
        }
        out
    }

    fn advance(&mut self) {
        self.phase += 1;
        if self.phase == 4 {
            self.phase = 0;
            self.drain = self.current;
            self.current = [0.0; 16];
        }
    }

    /// `f16v4amp`: returns the four f16 partials out.
    pub(super) fn step_f16(&mut self, inputs: u64, partials_in: u64) -> u64 {
        self.weights_f16();
        let out = self.finish(partials_in);
        self.accumulate_f16(inputs);
        out
    }

    /// Adds this phase's four f16 inputs times their weights into every
    /// channel's running sum, and moves to the next phase.
    fn accumulate_f16(&mut self, inputs: u64) {
        let x: [f32; 4] = std::array::from_fn(|j| f16_to_f32((inputs >> (16 * j)) as u16));
        let k0 = 4 * usize::from(self.phase);
        let sums = channel_sums::<4>(&x, &self.weights[k0..k0 + 4]);
        for (acc, s) in self.current.iter_mut().zip(sums) {
            *acc += s;
        }
        self.advance();
    }

    /// `f16v4sisoamp`: like `f16v4amp`, but the partials in and out are
    /// four f32 values each: `d[j] = drain[4p + j] + partials_in[j]`, added
    /// and rounded in f32, so a sum carried from one K block to the next
    /// through memory is never rounded to f16.
    pub(super) fn step_f16_f32_partials(&mut self, inputs: u64, partials_in: [f32; 4]) -> [f32; 4] {
        self.weights_f16();
        let base = 4 * usize::from(self.phase);
        let out = std::array::from_fn(|j| self.drain[base + j] + partials_in[j]);
        self.accumulate_f16(inputs);
        out
    }

    /// `f8v8amp`: returns the four f16 partials out.
    pub(super) fn step_f8(&mut self, inputs: u64, partials_in: u64, cfg: u32) -> u64 {
        self.weights_f8(cfg);
        let values = value_table(input_format(cfg), input_scale(cfg));
        let out = self.finish(partials_in);
        let x: [f32; 8] = std::array::from_fn(|j| values[((inputs >> (8 * j)) & 0xFF) as usize]);
        let k0 = 8 * usize::from(self.phase);
        let sums = channel_sums::<8>(&x, &self.weights[k0..k0 + 8]);
        for (acc, s) in self.current.iter_mut().zip(sums) {
            *acc += s;
        }
        self.advance();
        out
    }
}

/// Each channel's sum over `K` inputs of input times weight, in input
/// order: `((x0 w0 + x1 w1) + x2 w2) + ...`, exactly as one channel of the
/// AMP adds them. `rows` holds `K` rows of 16 channels.
#[inline(always)]
fn channel_sums<const K: usize>(x: &[f32; K], rows: &[[f32; 16]]) -> [f32; 16] {
    let mut sums = [0.0f32; 16];
    for (s, w) in sums.iter_mut().zip(&rows[0]) {
        *s = x[0] * w;
    }
    for (&xk, row) in x.iter().zip(rows).skip(1) {
        for (s, w) in sums.iter_mut().zip(row) {
            *s += xk * w;
        }
    }
    sums
}
