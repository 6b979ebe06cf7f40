// Softmax over each row of an f16 `[rows][row_length]` operand, of
// `x * scale`, in f32: `m = max_j(x_j * scale)`, `e_j = exp(x_j * scale -
// m)`, `s = sum_j e_j`, output `e_j * (1 / s)` rounded to f16 (`f32rcp`;
// the result is within one f16 ulp of `e_j / s`). With CAUSAL=1, row r of
// the tile is matrix row `i = (first_row + r) % matrix_rows`: only elements
// `j <= i` take part and the others are written as 0. The exponentials are
// recomputed in the last pass rather than stored, so no scratch memory is
// needed.
//
// Rows start wherever `r * row_length * 2` puts them, so each pass walks a
// row in three parts: single elements up to the first 8-byte boundary (the
// head), whole aligned quads with 64-bit accesses, then the remaining
// elements (the tail). The output row has the same alignment as the input
// row. See `include/rows.h` for the work split and registers.

#include "include/rows.h"

#ifndef CAUSAL
#define CAUSAL 0
#endif

// Registers beyond rows.h's: $m11 head elements, $m12 matrix row i,
// $m13 matrix_rows, $m14 kept elements; $a8:9 scale, $a10:11 the row
// maximum m, $a12:13 1 / s, $a6:7 partial sums (all as pairs of lanes).

// $m6 = whole quads after the head, or the tail's elements.
.macro quads
        sub     $m6, $m14, $m11
        shr     $m6, $m6, 2
.endm
.macro tail
        sub     $m6, $m14, $m11
        and     $m6, $m6, 3
.endm

// Pass 1 keeps the f16 maximum and minimum (the maximum of x * scale is
// one of them times scale, as rounding is monotonic).
.macro max_one
        { ldb16step $a0, $m8+=, 2 ; f16v2max $a2, $a2, $a0 }
        f16v2min $a4, $a4, $a0
.endm

.macro sum_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a8
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32add  $a6, $a6, $a0
.endm

// e = exp(x * scale - m) for the four lanes loaded into $a0:1, as f32 in
// $a2:3 and $a4:5.
.macro exp_quad
        f16v2tof32 $a4:5, $a1
        f32v2mul $a2:3, $a2:3, $a8:9
        f32v2mul $a4:5, $a4:5, $a8:9
        f32v2sub $a2:3, $a2:3, $a10:11
        f32v2sub $a4:5, $a4:5, $a10:11
        f32exp  $a2, $a2
        f32exp  $a3, $a3
        f32exp  $a4, $a4
        f32exp  $a5, $a5
.endm

.macro out_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a8
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32mul  $a0, $a0, $a12
        f32tof16 $a0, $a0
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

        .text

// State: in0, out, rows, row_length, scale_bits (and first_row,
// matrix_rows when CAUSAL).

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
        // On average half of each row is kept (19 / 4 cycles per element)
        // and half is zero-filled (about one cycle per element).
        .ipub_cost "rows * row_length * 23 / 4 + rows * 100 + 400"
#else
        .ipub_cost "rows * row_length * 19 / 2 + rows * 100 + 150"
#endif
softmax_f16:
        row_setup 8, 12, 0, 4
        ld32    $a8, $m0, 16
        mov     $a9, $a8
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
        // The head: elements before the first 8-byte boundary.
        sub     $m11, $mzero, $m7
        and     $m11, $m11, 7
        shr     $m11, $m11, 1
        min     $m11, $m11, $m14

        // Pass 1: m = the maximum of x * scale over the kept elements.
        mov     $m8, $m7
        setzi   $a2, 0xfc00
        sethi   $a2, 0xfc00
        mov     $a3, $a2
        setzi   $a4, 0x7c00
        sethi   $a4, 0x7c00
        mov     $a5, $a4
        rpt_at  4
        rpt     $m11, 3
        max_one
        quads
        rpt_at  4
        rpt     $m6, 3
        { ld64step $a0:1, $m8+=, 8 ; f16v4max $a2:3, $a2:3, $a0:1 }
        f16v4min $a4:5, $a4:5, $a0:1
        tail
        rpt_at  4
        rpt     $m6, 3
        max_one
        f16v4hmax $a2, $a2:3
        mov     $a0, $azero
        mov     $a1, $azero
        f16v4sub $a4:5, $a0:1, $a4:5
        f16v4hmax $a4, $a4:5
        f32sub  $a4, $azero, $a4
        f32mul  $a2, $a2, $a8
        f32mul  $a4, $a4, $a8
        f32max  $a10, $a2, $a4
        mov     $a11, $a10

        // Pass 2: s = the sum of the exponentials.
        mov     $m8, $m7
        mov     $a6, $azero
        mov     $a7, $azero
        rpt_at  4
        rpt     $m11, 6
        sum_one
        quads
        rpt_at  4
        rpt     $m6, 13
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        exp_quad
        f32v2add $a6:7, $a6:7, $a2:3
        f32v2add $a6:7, $a6:7, $a4:5
        tail
        rpt_at  4
        rpt     $m6, 6
        sum_one
        f32v2hadd $a6, $a6:7
        f32rcp  $a12, $a6
        mov     $a13, $a12

        // Pass 3: the normalised exponentials, then zeros for the masked
        // elements. The quad loop is a counted branch: its 16-word body is
        // longer than the executor runs correctly under `rpt` (see
        // gelu_f16.S).
        mov     $m8, $m7
        mov     $m10, $m9
        rpt_at  4
        rpt     $m11, 9
        out_one
        quads
        brz     $m6, softmax_tail
        sub     $m6, $m6, 1
        .align  8
softmax_quad:
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        exp_quad
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        f32v2tof16 $a0, $a2:3
        f32v2tof16 $a1, $a4:5
        st64step $a0:1, $m10+=, 8
        brnzdec $m6, softmax_quad
softmax_tail:
        tail
        rpt_at  4
        rpt     $m6, 9
        out_one
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
