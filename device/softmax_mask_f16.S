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
// The segmented form's records, worker shares and pieces.
#include "include/norm.h"

#ifndef MASK_F32
#define MASK_F32 0
#endif
// STATS (0 unless defined) selects the segmented form's statistics kernel,
// SEGMENTED (`include/norm.h`) its output kernel.
#ifndef STATS
#define STATS 0
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

// The segmented form's kernels (fitted with
// `tests/row_kernels/calibration.rs`): six per issue of the busiest
// worker, the one whose share meets the most rows (`pieces`, as in
// `softmax_f16.S`). The statistics take the two passes' `stats` per quad
// of the share, `single` more per single element at a piece's ends, 12
// issues per row (the clearing and the search for the share's first row),
// 47 per piece and about 38 per launch; a piece whose every element is
// removed skips the sum, which the formula does not know. The output
// takes `out` per quad, 1 more per single element, 11 per row, 24 per
// piece plus 7 per segment's record of the row for the combination, and
// 52 per launch. All in quarter issues, so quads count per element.
#define SOFTMAX_MASK_STATS_COST "stats = MASK_F32 ? 27 : 31; single = MASK_F32 ? 12 : 16; n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (stats * share + 50 * rows + 4 * 47 * pieces + 152 + single * pieces * singles) / 4"
#define SOFTMAX_MASK_PARTS_SEG_COST "out = MASK_F32 ? 22 : 24; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; 6 * (out * share + 45 * rows + 4 * (24 + 7 * segments) * pieces + 207 + 4 * pieces * singles) / 4"

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

// $a10:11 = m, the maximum of y over `count` elements from the cursors
// $m8 and $m11 (-inf when every element is removed), lane-wise over the
// quads, then across the lanes.
.macro max_y count
        setzi   $a10, 0
        sethi   $a10, 0xff80
        mov     $a11, $a10
        walk    \count, max_one, LOAD_Y_WORDS + 1, max_quad, QUAD_Y_WORDS + 2
        f32max  $a10, $a10, $a11
        mov     $a11, $a10
.endm

// To `label` when m ($a10) is -inf: every element is removed. Clobbers
// $m6 and $m14.
.macro if_removed label
        mov     $m14, $a10
        setzi   $m6, 0
        sethi   $m6, 0xff80
        cmpeq   $m14, $m14, $m6
        brnz    $m14, \label
.endm

// $m11 = the mask cursor of the input cursor $m8, with $m13 = the mask
// operand's address less the input's (f16 mask), or less twice the
// input's (f32 mask, whose elements are twice as wide).
.macro mask_cursor
#if MASK_F32
        add     $m11, $m8, $m8
        add     $m11, $m11, $m13
#else
        add     $m11, $m8, $m13
#endif
.endm

// $m13 for `mask_cursor` from the state's in0 at 0 and in1 at 4.
// Clobbers $m6.
.macro mask_delta
        ld32    $m13, $m0, 4
        ld32    $m6, $m0, 0
        sub     $m13, $m13, $m6
#if MASK_F32
        sub     $m13, $m13, $m6
#endif
.endm

        .text

#if !STATS && !SEGMENTED
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

        // Pass 1: m = the maximum of y; a fully masked row gets zeros
        // for [lo, hi).
        mov     $m8, $m7
        mov     $m11, $m12
        max_y   $m2
        if_removed smask_zeros

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
#endif

#if STATS
// ---- Segmented masked softmax: statistics ------------------------------
// Rows cut into segments on several tiles (`Partition::Segments`; the
// records and shares of `include/norm.h`): each worker takes an equal
// share of the tile's elements and writes, for each row its share meets,
// m = the maximum of y over the piece and s = the sum of exp(y - m) over
// it, in f32, to its record of the row (`[rows][6]` records of 16 bytes);
// its record of every other row, and of a row whose piece is all removed
// (m = -inf), keeps m = -FLT_MAX and s = 0, which a combination weighs by
// exp(-FLT_MAX - M) = 0. `fold_records.S` folds a row's six records into
// the tile's one, as for `softmax_f16.S`'s.
// State: in0 (x), in1 (the mask), out (the records), rows, row_length,
// scale_bits.

// A piece of the statistics walk (`share_pieces`): [lo, hi) = [$m4, $m5)
// of the row at $m7, its record at $m9. Keeps $m7, $m9 and $m13.
.macro smask_stats_piece_body
        sub     $m10, $m5, $m4
        add     $m6, $m4, $m4
        add     $m12, $m7, $m6
        mov     $m8, $m12
        mask_cursor
        max_y   $m10
        if_removed smask_stats_removed
        mov     $m8, $m12
        mask_cursor
        mov     $a14, $azero
        walk    $m10, sum_one, LOAD_Y_WORDS + 3, sum_quad, QUAD_Y_WORDS + 7
        total
        f32add  $a4, $a4, $a14
        st32    $a10, $m9, 0
        st32    $a4, $m9, 4
smask_stats_removed:
.endm
// The next row: two bytes an element, and the next six records.
.macro smask_stats_next_row
        add     $m7, $m7, $m2
        add     $m7, $m7, $m2
        add     $m9, $m9, ROW_RECORDS
.endm

        .globl  softmax_mask_stats_f16
        .type   softmax_mask_stats_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param scale_bits, 20, f32
        .ipub_cost SOFTMAX_MASK_STATS_COST
softmax_mask_stats_f16:
        ld32    $a8, $m0, 20
        mov     $a9, $a8
        mask_delta
        ld32    $m1, $m0, 12
        ld32    $m2, $m0, 16
        ld32    $m7, $m0, 0
        ld32    $m9, $m0, 8
        get     $m3, $wid
        mul     $m6, $m3, PART_RECORD
        add     $m9, $m9, $m6
        mov     $a14, $azero
        mov     $a15, $azero
        clear_softmax_records smask_stats
        share_pieces smask_stats, smask_stats_piece_body, smask_stats_next_row
        exitz   $mzero
        .size   softmax_mask_stats_f16, . - softmax_mask_stats_f16
#elif SEGMENTED
// ---- Segmented masked softmax: the output ------------------------------
// After the exchange has brought every tile's record of each row (the
// fold of its six), each worker takes an equal share of the tile's
// elements and, for each row its share meets, combines the row's
// `segments` records into M = the largest m and S = the sum of
// s * exp(m - M), then writes exp(y - M) * (1 / S) rounded to f16 for its
// piece of the row. S is 0 only when every element of the row is removed
// (the piece holding the row's maximum adds at least 1): such a row is
// written as zeros, as the whole-row kernel writes it.
// State: in0 (x), in1 (the mask), out, rows, row_length, scale_bits, in2
// (the records), segments.
        .globl  softmax_mask_parts_f16
        .type   softmax_mask_parts_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param scale_bits, 20, f32
        .ipub_param in2, 24, ptr
        .ipub_param segments, 28, u32
        .ipub_cost SOFTMAX_MASK_PARTS_SEG_COST
softmax_mask_parts_f16:
        parts_begin 12, 16, 8, 24, smask_parts_done
        mask_delta
        ld32    $a8, $m0, 20
        mov     $a9, $a8
smask_parts_piece:
        parts_piece_range 16
        // M and S over the row's records.
        ld32    $m6, $m0, 28
        softmax_records $m2, $m6
        // Elements [lo, hi) of the row: $m12 of them from the cursors.
        sub     $m12, $m5, $m4
        add     $m6, $m4, $m4
        add     $m8, $m7, $m6
        add     $m10, $m9, $m6
        mov     $m6, $a12
        brz     $m6, smask_parts_zeros
        f32rcp  $a12, $a12
        mov     $a13, $a12
        mov     $a11, $a10
        mask_cursor
        walk    $m12, out_one, LOAD_Y_WORDS + 6, out_quad, QUAD_Y_WORDS + 11
smask_parts_next:
        parts_next 16, 24, smask_parts_piece, smask_parts_done
smask_parts_zeros:
        sub     $m12, $m12, 1
smask_parts_zero:
        st16step $mzero, $m10+=, 2
        brnzdec $m12, smask_parts_zero
        br      smask_parts_next
smask_parts_done:
        exitz   $mzero
        .size   softmax_mask_parts_f16, . - softmax_mask_parts_f16
#endif
