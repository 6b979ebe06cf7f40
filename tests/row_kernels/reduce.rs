//! Reduce-add of GEMM partials: bit-exact against f32 sums rounded once.

use crate::harness::{compile, Rng, Run};
use half::f16;

#[test]
fn reduce_add_sums_partials_in_f32_and_rounds_once() {
    let kernel = compile("reduce_add_f16");
    let mut rng = Rng::new(7);
    for (count, length) in [(1usize, 4usize), (2, 16), (3, 40), (5, 4 * 37)] {
        let partials: Vec<f16> = (0..count * length)
            .map(|_| f16::from_f64(rng.normal(1.0)))
            .collect();
        let bytes: Vec<u8> = partials.iter().flat_map(|v| v.to_le_bytes()).collect();
        let outcome = kernel.run(&Run {
            inputs: vec![&bytes],
            out_bytes: length * 2,
            params: vec![("count", count as i64), ("length", length as i64)],
        });
        for i in 0..length {
            let sum = (0..count).fold(0f32, |acc, k| acc + partials[k * length + i].to_f32());
            let device = f16::from_le_bytes([outcome.out[2 * i], outcome.out[2 * i + 1]]);
            assert_eq!(
                device.to_bits(),
                f16::from_f32(sum).to_bits(),
                "count {count} length {length} element {i}"
            );
        }
    }
}
