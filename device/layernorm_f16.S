// Layer normalisation of each row of an f16 `[rows][row_length]` operand
// with f16 gamma (in1) and beta (in2) of `[row_length]`, in f32: mean,
// biased variance, `(x - mean) * rsqrt(var + epsilon) * gamma + beta`
// rounded to f16. Divisions by row_length are multiplications by its
// `f32rcp`. See `include/rows.h` for the work split.

#include "include/rows.h"

        .text

// State: in0, in1 (gamma), in2 (beta), out, rows, row_length,
// epsilon_bits.
// Registers beyond rows.h's: $m12 gamma cursor, $m13 beta cursor;
// $a9 1 / row_length, $a8 epsilon, $a6 mean, $a5 sums then rsqrt.

        .globl  layernorm_f16
        .type   layernorm_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param in2, 8, ptr
        .ipub_param out, 12, ptr
        .ipub_param rows, 16, u32
        .ipub_param row_length, 20, u32
        .ipub_param epsilon_bits, 24, f32
        .ipub_cost "rows * row_length * 17 + rows * 80 + 150"
layernorm_f16:
        row_setup 16, 20, 0, 12
        ld32    $a8, $m0, 24
        mov     $a9, $m2
        f32fromi32 $a9, $a9
        f32rcp  $a9, $a9
layernorm_row:
        row_check layernorm_done
        // Pass 1: the mean.
        mov     $m8, $m7
        mov     $a5, $azero
        rpt_at  4
        rpt     $m2, 3
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32add  $a5, $a5, $a0
        f32mul  $a6, $a5, $a9
        // Pass 2: the biased variance, then 1 / sqrt(var + epsilon).
        mov     $m8, $m7
        mov     $a5, $azero
        rpt_at  4
        rpt     $m2, 5
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32sub  $a0, $a0, $a6
        f32mul  $a0, $a0, $a0
        f32add  $a5, $a5, $a0
        f32mul  $a5, $a5, $a9
        f32add  $a5, $a5, $a8
        f32rsqrt $a5, $a5
        // Pass 3: normalise, scale and shift.
        mov     $m8, $m7
        mov     $m10, $m9
        ld32    $m12, $m0, 4
        ld32    $m13, $m0, 8
        rpt_at  4
        rpt     $m2, 13
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        { ldb16step $a1, $m12+=, 2 ; f32sub $a0, $a0, $a6 }
        { ldb16step $a2, $m13+=, 2 ; f16tof32 $a1, $a1 }
        f16tof32 $a2, $a2
        f32mul  $a0, $a0, $a5
        f32mul  $a0, $a0, $a1
        f32add  $a0, $a0, $a2
        f32tof16 $a0, $a0
        mov     $m11, $a0
        st16step $m11, $m10+=, 2
        row_advance
        br      layernorm_row
layernorm_done:
        exitz   $mzero
        .size   layernorm_f16, . - layernorm_f16
