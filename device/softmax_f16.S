// Softmax over each row of an f16 `[rows][row_length]` operand, of
// `x * scale`, in f32: `m = max_j(x_j * scale)`, `e_j = exp(x_j * scale -
// m)`, `s = sum_j e_j`, output `e_j * (1 / s)` rounded to f16 (`f32rcp`;
// the result is within one f16 ulp of `e_j / s`). With CAUSAL=1, row r of
// the tile is matrix row `i = (first_row + r) % matrix_rows`: only elements
// `j <= i` take part and the others are written as 0. The exponentials are
// recomputed in the last pass rather than stored, so no scratch memory is
// needed. See `include/rows.h` for the work split.

#include "include/rows.h"

#ifndef CAUSAL
#define CAUSAL 0
#endif

        .text

// State: in0, out, rows, row_length, scale_bits (and first_row,
// matrix_rows when CAUSAL).
// Registers beyond rows.h's: $m12 matrix row i, $m13 matrix_rows,
// $m14 kept elements; $a7 scale, $a6 row maximum, $a5 sum then 1 / sum.

        .globl  softmax_f16
        .type   softmax_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param scale_bits, 16, f32
#if CAUSAL
        .ipub_param first_row, 20, u32
        .ipub_param matrix_rows, 24, u32
        .ipub_cost "rows * row_length * 19 / (CAUSAL + 1) + rows * 60 + 400"
#else
        .ipub_cost "rows * row_length * 19 + rows * 60 + 150"
#endif
softmax_f16:
        row_setup 8, 12, 0, 4
        ld32    $a7, $m0, 16
#if CAUSAL
        ld32    $m12, $m0, 20
        add     $m12, $m12, $m3
        ld32    $m13, $m0, 24
        max     $m13, $m13, 1
        mod_in_place $m12, $m13, $m14, softmax_first_i
#endif
softmax_row:
        row_check softmax_done
#if CAUSAL
        add     $m14, $m12, 1
        min     $m14, $m14, $m2
#else
        mov     $m14, $m2
#endif
        // Pass 1: the maximum of x * scale over the kept elements.
        mov     $m8, $m7
        setzi   $a6, 0
        sethi   $a6, 0xff80
        rpt_at  4
        rpt     $m14, 4
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a7
        f32max  $a6, $a6, $a0
        // Pass 2: the sum of the exponentials.
        mov     $m8, $m7
        mov     $a5, $azero
        rpt_at  4
        rpt     $m14, 6
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a7
        f32sub  $a0, $a0, $a6
        f32exp  $a0, $a0
        f32add  $a5, $a5, $a0
        f32rcp  $a5, $a5
        // Pass 3: the normalised exponentials, then zeros for the masked
        // elements.
        mov     $m8, $m7
        mov     $m10, $m9
        rpt_at  4
        rpt     $m14, 9
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a7
        f32sub  $a0, $a0, $a6
        f32exp  $a0, $a0
        f32mul  $a0, $a0, $a5
        f32tof16 $a0, $a0
        mov     $m11, $a0
        st16step $m11, $m10+=, 2
        sub     $m6, $m2, $m14
        rpt     $m6, 1
        st16step $mzero, $m10+=, 2
        row_advance
#if CAUSAL
        add     $m12, $m12, 6
softmax_wrap:
        cmpult  $m6, $m12, $m13
        brnz    $m6, softmax_row
        sub     $m12, $m12, $m13
        br      softmax_wrap
#else
        br      softmax_row
#endif
softmax_done:
        exitz   $mzero
        .size   softmax_f16, . - softmax_f16
