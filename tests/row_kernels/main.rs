//! Device tests of the row-wise kernels in `device/`: each variant runs on
//! the single-tile executor with six workers on seeded random data and is
//! compared with a host computation (bit-exact for casts, add and
//! rearrange; within stated f16 ulps for GELU, softmax and layernorm).
//! Shapes cover fewer rows than workers and row lengths that are not
//! multiples of 4, so rows start misaligned and units have tails.

mod elementwise;
mod harness;
mod math;
