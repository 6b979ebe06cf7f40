// Layer normalisation of each row of an f16 `[rows][row_length]` operand
// with f16 gamma (in1) and beta (in2) of `[row_length]`, in f32: mean,
// biased variance, `(x - mean) * rsqrt(var + epsilon) * gamma + beta`
// rounded to f16. Divisions by row_length are multiplications by its
// `f32rcp`.
//
// The mean and variance passes walk each row as single elements up to the
// first 8-byte boundary (the head), aligned quads with 64-bit loads, then
// single elements (the tail). The output pass reads gamma and beta too,
// which are 8-byte aligned at the row's start, so it uses quads only for
// rows that start 8-byte aligned (every row when row_length is a multiple
// of 4) and single elements otherwise. See `include/rows.h` for the work
// split and registers.

#include "include/rows.h"

// Registers beyond rows.h's: $m11 head elements, $m12 gamma cursor,
// $m13 beta cursor, $m14 row_length; $a14 1 / row_length, $a10:11 the
// mean, $a12:13 1 / sqrt(var + epsilon) (as pairs of lanes), $a6:7 partial
// sums.

.macro quads
        sub     $m6, $m14, $m11
        shr     $m6, $m6, 2
.endm
.macro tail
        sub     $m6, $m14, $m11
        and     $m6, $m6, 3
.endm

.macro sum_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32add  $a6, $a6, $a0
.endm

.macro square_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32sub  $a0, $a0, $a10
        f32mul  $a0, $a0, $a0
        f32add  $a6, $a6, $a0
.endm

.macro out_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        { ldb16step $a1, $m12+=, 2 ; f32sub $a0, $a0, $a10 }
        { ldb16step $a2, $m13+=, 2 ; f16tof32 $a1, $a1 }
        f16tof32 $a2, $a2
        f32mul  $a0, $a0, $a12
        f32mul  $a0, $a0, $a1
        f32add  $a0, $a0, $a2
        f32tof16 $a0, $a0
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

        .text

// State: in0, in1 (gamma), in2 (beta), out, rows, row_length,
// epsilon_bits.

        .globl  layernorm_f16
        .type   layernorm_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param in2, 8, ptr
        .ipub_param out, 12, ptr
        .ipub_param rows, 16, u32
        .ipub_param row_length, 20, u32
        .ipub_param epsilon_bits, 24, f32
        .ipub_cost "rows * row_length * 7 + rows * 100 + 150"
layernorm_f16:
        row_setup 16, 20, 0, 12
        mov     $m14, $m2
        mov     $a14, $m2
        f32fromi32 $a14, $a14
        f32rcp  $a14, $a14
layernorm_row:
        row_check layernorm_done
        sub     $m11, $mzero, $m7
        and     $m11, $m11, 7
        shr     $m11, $m11, 1
        min     $m11, $m11, $m14

        // Pass 1: the mean.
        mov     $m8, $m7
        mov     $a6, $azero
        mov     $a7, $azero
        rpt_at  4
        rpt     $m11, 3
        sum_one
        quads
        rpt_at  4
        rpt     $m6, 3
        { ld64step $a0:1, $m8+=, 8 ; f16v4sum $a2:3, $a0:1 }
        f32v2add $a6:7, $a6:7, $a2:3
        tail
        rpt_at  4
        rpt     $m6, 3
        sum_one
        f32v2hadd $a6, $a6:7
        f32mul  $a10, $a6, $a14
        mov     $a11, $a10

        // Pass 2: the biased variance, then 1 / sqrt(var + epsilon).
        mov     $m8, $m7
        mov     $a6, $azero
        mov     $a7, $azero
        rpt_at  4
        rpt     $m11, 5
        square_one
        quads
        rpt_at  4
        rpt     $m6, 9
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        f32v2sub $a2:3, $a2:3, $a10:11
        f32v2sub $a4:5, $a4:5, $a10:11
        f32v2mul $a2:3, $a2:3, $a2:3
        f32v2mul $a4:5, $a4:5, $a4:5
        f32v2add $a6:7, $a6:7, $a2:3
        f32v2add $a6:7, $a6:7, $a4:5
        tail
        rpt_at  4
        rpt     $m6, 5
        square_one
        f32v2hadd $a6, $a6:7
        f32mul  $a6, $a6, $a14
        ld32    $a8, $m0, 24
        f32add  $a6, $a6, $a8
        f32rsqrt $a12, $a6
        mov     $a13, $a12

        // Pass 3: normalise, scale and shift.
        mov     $m8, $m7
        mov     $m10, $m9
        ld32    $m12, $m0, 4
        ld32    $m13, $m0, 8
        brz     $m11, layernorm_aligned
        rpt_at  4
        rpt     $m14, 13
        out_one
        br      layernorm_next
layernorm_aligned:
        // A counted branch: the 20-word body is longer than the executor
        // runs correctly under `rpt` (see gelu_f16.S).
        shr     $m6, $m14, 2
        brz     $m6, layernorm_aligned_tail
        sub     $m6, $m6, 1
        .align  8
layernorm_quad:
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { ld64step $a6:7, $m12+=, 8 ; f16v2tof32 $a4:5, $a1 }
        f32v2sub $a2:3, $a2:3, $a10:11
        f32v2sub $a4:5, $a4:5, $a10:11
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        f16v2tof32 $a8:9, $a6
        f32v2mul $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a7
        f32v2mul $a4:5, $a4:5, $a8:9
        { ld64step $a6:7, $m13+=, 8 ; f16v2tof32 $a8:9, $a6 }
        f32v2add $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a7
        f32v2add $a4:5, $a4:5, $a8:9
        f32v2tof16 $a0, $a2:3
        f32v2tof16 $a1, $a4:5
        st64step $a0:1, $m10+=, 8
        brnzdec $m6, layernorm_quad
layernorm_aligned_tail:
        and     $m6, $m14, 3
        rpt_at  4
        rpt     $m6, 13
        out_one
layernorm_next:
        row_advance
        br      layernorm_row
layernorm_done:
        exitz   $mzero
        .size   layernorm_f16, . - layernorm_f16
