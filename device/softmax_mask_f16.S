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
// Three passes per row: the maximum, the sum of the exponentials (in f32,
// in the vector accumulators) and the output. Each walks its range as
// single elements up to the first 8-byte boundary (the head), whole
// aligned quads, then single elements (the tail). The mask row has the
// input row's alignment: both operands start 16-byte aligned and the mask
// row sits at the input row's element offset, so a quad of the input
// meets a quad of an f16 mask (8 bytes) or of an f32 one (16 bytes) on its
// boundary. A quad's `y` takes 9 issues with an f16 mask (two 64-bit loads
// and four widenings), 7 with an f32 one; the passes then add 2 (the
// maximum), 11 (the exponentials and their sum) and 13 (the exponentials,
// the factor and the 64-bit store). The exponentials are recomputed in
// the last pass rather than stored, so no scratch memory is needed. See
// `include/rows.h` for the work split, which gives a long row to all six
// workers.

#include "include/rows.h"

#ifndef MASK_F32
#define MASK_F32 0
#endif

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, which has `whole` rows and, when the rows split,
// one part of a split row. In quarter issues, so quads count per element:
// a row's statistics cost `stats` (the maximum and the sum: 11 + 20
// issues per quad with an f16 mask, 9 + 18 with an f32 one) and its output
// `out` (24, or 22); a single element of a row's head or tail costs
// `single` more than its share of a quad (13 + 11 issues against 55 / 4,
// or 11 + 10 against 49 / 4); `singles` counts them for rows that start
// misaligned (consecutive rows of a length 2 mod 4 alternate between two
// alignments and have two each, odd lengths three on average); 89 issues
// per row. A part pays both statistics passes in
// full and writes its share of the row: the last part, the busiest, gets
// what the others' equal quads leave (`last` elements), plus 116 issues.
#define SOFTMAX_MASK_COST "stats = MASK_F32 ? 27 : 31; out = MASK_F32 ? 22 : 24; single = MASK_F32 ? 35 : 41; split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; last = row_length - (parts - 1) * 4 * (row_length / 4 / parts); singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : 3; 150 + 6 * (whole * ((stats + out) * row_length + single * singles + 356) + split * (stats * row_length + out * last + single * singles + 464)) / 4"

// Registers beyond rows.h's: $m11 the mask cursor, $m12 the mask row,
// $m13 the link register of `call`, $m14 the head's elements; $a8:9 the
// scale, $a10:11 the row maximum m, $a12:13 1 / s (as pairs of lanes),
// $a14 the single elements' part of the sum.

// $a0 = y = x * scale + mask of the element at the cursors $m8 and $m11,
// advancing both. Starts 8-byte aligned (inside `rpt` bodies placed by
// `rpt_at 4`) so both bundles issue as one.
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
#if MASK_F32
#define LOAD_Y_WORDS 5
#else
#define LOAD_Y_WORDS 6
#endif

// $a4:7 = y of the quad at the 8-byte aligned cursors $m8 and $m11,
// advancing both. Starts 8-byte aligned.
.macro quad_y
        { ld64step $a0:1, $m8+=, 8 ; fnop }
        { ld64step $a2:3, $m11+=, 8 ; f16v2tof32 $a4:5, $a0 }
        f16v2tof32 $a6:7, $a1
#if MASK_F32
        f32v2mul $a4:5, $a4:5, $a8:9
        { ld64step $a0:1, $m11+=, 8 ; f32v2mul $a6:7, $a6:7, $a8:9 }
        f32v2add $a4:5, $a4:5, $a2:3
        f32v2add $a6:7, $a6:7, $a0:1
#else
        f32v2mul $a4:5, $a4:5, $a8:9
        f32v2mul $a6:7, $a6:7, $a8:9
        f16v2tof32 $a0:1, $a2
        f32v2add $a4:5, $a4:5, $a0:1
        f16v2tof32 $a0:1, $a3
        f32v2add $a6:7, $a6:7, $a0:1
#endif
.endm
#if MASK_F32
#define QUAD_Y_WORDS 10
#else
#define QUAD_Y_WORDS 11
#endif

// $m14 = single elements before the first 8-byte boundary at `ptr`, at
// most `count`.
.macro head ptr, count
        sub     $m14, $mzero, \ptr
        and     $m14, $m14, 7
        shr     $m14, $m14, 1
        min     $m14, $m14, \count
.endm

// One element's exponential e = exp(y - m) into $a4.
.macro exp_one
        load_y
        f32sub  $a4, $a0, $a10
        f32exp  $a4, $a4
.endm

// A quad's exponentials into $a4:7.
.macro exp_quad
        quad_y
        f32v2sub $a4:5, $a4:5, $a10:11
        f32v2sub $a6:7, $a6:7, $a10:11
        f32exp  $a4, $a4
        f32exp  $a5, $a5
        f32exp  $a6, $a6
        f32exp  $a7, $a7
.endm

// One output element: e * (1 / s) as f16 at $m10.
.macro out_one
        exp_one
        f32mul  $a4, $a4, $a12
        f32tof16 $a4, $a4
        mov     $m6, $a4
        st16step $m6, $m10+=, 2
.endm

// A quad of the output, stored with one 64-bit store.
.macro out_quad
        exp_quad
        f32v2mul $a4:5, $a4:5, $a12:13
        f32v2mul $a6:7, $a6:7, $a12:13
        f32v2tof16 $a0, $a4:5
        f32v2tof16 $a1, $a6:7
        st64step $a0:1, $m10+=, 8
.endm

// The maximum's bodies: lane-wise in $a10:11 (single elements in $a10).
.macro max_one
        load_y
        f32max  $a10, $a10, $a0
.endm
.macro max_quad
        quad_y
        f32v2max $a10:11, $a10:11, $a4:5
        f32v2max $a10:11, $a10:11, $a6:7
.endm

// The sum's bodies: a quad's exponentials into the vector accumulators,
// a single element's into $a14.
.macro sum_one
        exp_one
        f32add  $a14, $a14, $a4
.endm
.macro sum_quad
        exp_quad
        f32v4acc $a4:7
.endm

// Walks `count` elements (a register other than $m6 and $m14) from the
// cursors, the input's ($m8) setting the alignment: `one` (a body of
// `one_words` words) for each single element of the head and of the
// tail, `quad` (`quad_words`) for each aligned quad between them.
// Clobbers $m6 and $m14.
.macro walk count, one, one_words, quad, quad_words
        head    $m8, \count
        rpt_at  4
        rpt     $m14, \one_words
        \one
        sub     $m6, \count, $m14
        shr     $m6, $m6, 2
        rpt_at  4
        rpt     $m6, \quad_words
        \quad
        sub     $m6, \count, $m14
        and     $m6, $m6, 3
        rpt_at  4
        rpt     $m6, \one_words
        \one
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
        mov     $a9, $a8
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
        // removed), lane-wise over the quads, then across the lanes.
        mov     $m8, $m7
        mov     $m11, $m12
        setzi   $a10, 0
        sethi   $a10, 0xff80
        mov     $a11, $a10
        walk    $m2, max_one, LOAD_Y_WORDS + 1, max_quad, QUAD_Y_WORDS + 2
        f32max  $a10, $a10, $a11
        mov     $a11, $a10

        // A fully masked row: zeros for [lo, hi).
        mov     $m14, $a10
        setzi   $m6, 0
        sethi   $m6, 0xff80
        cmpeq   $m14, $m14, $m6
        brnz    $m14, smask_zeros

        // Pass 2: s = the sum of the exponentials, then 1 / s.
        mov     $m8, $m7
        mov     $m11, $m12
        mov     $a14, $azero
        walk    $m2, sum_one, LOAD_Y_WORDS + 3, sum_quad, QUAD_Y_WORDS + 7
        total
        f32add  $a4, $a4, $a14
        f32rcp  $a12, $a4
        mov     $a13, $a12

        // Pass 3: elements [lo, hi) of the output, which has the input's
        // alignment; $m4 becomes their count (the callers set lo and hi
        // for each row).
        sub     $m6, $m5, $m4
        brz     $m6, smask_row_done
        add     $m14, $m4, $m4
        add     $m8, $m7, $m14
        add     $m10, $m9, $m14
#if MASK_F32
        add     $m14, $m14, $m14
#endif
        add     $m11, $m12, $m14
        sub     $m4, $m5, $m4
        walk    $m4, out_one, LOAD_Y_WORDS + 6, out_quad, QUAD_Y_WORDS + 11
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
