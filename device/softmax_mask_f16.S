// Softmax over each row of an f16 `[rows][row_length]` operand with an
// additive mask: `y_j = x_j * scale + mask_j` in f32, `m = max_j y_j`,
// `e_j = exp(y_j - m)`, `s = sum_j e_j`, output `e_j * (1 / s)` rounded to
// f16 (`f32rcp`). The mask is a second operand of the same `[rows]
// [row_length]` layout, f16 (MASK_F32=0) or f32 (MASK_F32=1): lowering
// materialises the project's broadcast mask (`[S, S]` shared by heads, a
// `[B, 1, 1, S]` padding mask) at the input's shape, so the kernel reads
// both operands element by element in step. A mask entry of -inf removes
// the element (its exponential is 0); a row whose every `y_j` is -inf has
// no defined softmax and is written as zeros, as the reference defines it.
//
// Three passes per row, each one element at a time (the mask's type and
// the two operands' independent alignments rule out the plain kernel's
// quads): the maximum, the sum of the exponentials (in f32) and the
// output. The exponentials are recomputed in the last pass rather than
// stored, so no scratch memory is needed. See `include/rows.h` for the
// work split, which gives a long row to all six workers.

#include "include/rows.h"

#ifndef MASK_F32
#define MASK_F32 0
#endif

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, which has `whole` rows and, when the rows split,
// one part of a split row. An element costs `stats` issues in the maximum
// and sum passes (6 + 9 with an f16 mask; an f32 mask's load shares a
// bundle with the multiply, 5 + 8) and `out` in the output pass (12, or
// 11), plus 44 per row. A part pays both statistics passes in full and
// writes its share of the row: the last part, the busiest, gets what the
// others' equal quads leave (`last` elements), plus 72.
#define SOFTMAX_MASK_COST "stats = MASK_F32 ? 13 : 15; out = MASK_F32 ? 11 : 12; split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; last = row_length - (parts - 1) * 4 * (row_length / 4 / parts); 150 + 6 * (whole * ((stats + out) * row_length + 44) + split * (stats * row_length + out * last + 72))"

// Registers beyond rows.h's: $m11 the mask cursor, $m12 the mask row,
// $m13 the link register of `call`, $m14 scratch; $a8 scale, $a10 the row
// maximum m, $a12 1 / s.

// $a0 = y = x * scale + mask of the element at the cursors $m8 and $m11,
// advancing both. Starts 8-byte aligned (its loops are `.align 8`) so both
// bundles issue as one.
.macro load_y
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
#if MASK_F32
        { ld32step $a1, $m11+=, 4 ; f32mul $a0, $a0, $a8 }
#else
        { ldb16step $a1, $m11+=, 2 ; f16tof32 $a1, $a1 }
        f32mul  $a0, $a0, $a8
#endif
        f32add  $a0, $a0, $a1
.endm

        .text

// State: in0 (x), in1 (the mask), out, rows, row_length, scale_bits.

        .globl  softmax_mask_f16
        .type   softmax_mask_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param scale_bits, 20, f32
        .ipub_cost SOFTMAX_MASK_COST
softmax_mask_f16:
        ld32    $a8, $m0, 20
        ld32    $m2, $m0, 16
        row_bound 12, smask_bound
        get     $m3, $wid
smask_whole:
        cmpult  $m6, $m3, $m1
        brz     $m6, smask_split
        whole_row 0, 8
        call    $m13, smask_row
        add     $m3, $m3, 6
        br      smask_whole
smask_split:
        split_row 12, 0, 8, smask_done
        call    $m13, smask_row
smask_done:
        exitz   $mzero

// One row: statistics over all of it, then elements [lo, hi) of the
// output. Keeps $m0..$m3 and $m13.
smask_row:
        // The mask row sits at the same element offset from the mask
        // operand as the input row from the input operand.
        ld32    $m6, $m0, 0
        sub     $m12, $m7, $m6
#if MASK_F32
        shl     $m12, $m12, 1
#endif
        ld32    $m6, $m0, 4
        add     $m12, $m12, $m6

        // Pass 1: m = the maximum of y (-inf when every element is
        // removed).
        mov     $m8, $m7
        mov     $m11, $m12
        setzi   $a10, 0
        sethi   $a10, 0xff80
        sub     $m6, $m2, 1
        .align  8
smask_max:
        load_y
        f32max  $a10, $a10, $a0
        brnzdec $m6, smask_max

        // A fully masked row: zeros for [lo, hi).
        mov     $m14, $a10
        setzi   $m6, 0
        sethi   $m6, 0xff80
        cmpeq   $m14, $m14, $m6
        brnz    $m14, smask_zeros

        // Pass 2: s = the sum of the exponentials.
        mov     $m8, $m7
        mov     $m11, $m12
        mov     $a4, $azero
        sub     $m6, $m2, 1
        .align  8
smask_sum:
        load_y
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32add  $a4, $a4, $a0
        brnzdec $m6, smask_sum
        f32rcp  $a12, $a4

        // Pass 3: elements [lo, hi) of the output.
        sub     $m6, $m5, $m4
        brz     $m6, smask_row_done
        sub     $m6, $m6, 1
        add     $m14, $m4, $m4
        add     $m8, $m7, $m14
        add     $m10, $m9, $m14
#if MASK_F32
        add     $m14, $m14, $m14
#endif
        add     $m11, $m12, $m14
        .align  8
smask_out:
        load_y
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32mul  $a0, $a0, $a12
        f32tof16 $a0, $a0
        mov     $m14, $a0
        st16step $m14, $m10+=, 2
        brnzdec $m6, smask_out
smask_row_done:
        br      $m13

smask_zeros:
        sub     $m6, $m5, $m4
        brz     $m6, smask_row_done
        sub     $m6, $m6, 1
        add     $m14, $m4, $m4
        add     $m10, $m9, $m14
smask_zero:
        st16step $mzero, $m10+=, 2
        brnzdec $m6, smask_zero
        br      $m13
        .size   softmax_mask_f16, . - softmax_mask_f16
