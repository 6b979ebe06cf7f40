// RMS normalisation of each row of an f16 `[rows][row_length]` operand
// with f16 gamma (in1) of `[row_length]`, in f32: the mean square
// `m = sum(x^2) / row_length`, then `x * rsqrt(m + epsilon) * gamma`
// rounded to f16. The division by row_length is a multiplication by its
// `f32rcp`; each square and its addition to the accumulators round once
// (`f32v4sqacc`).
//
// Two passes per row, shaped like `layernorm_f16.S`'s: the sum of squares
// walks the row as single elements up to the first 8-byte boundary (the
// head), aligned quads with 64-bit loads, then single elements (the tail);
// the output pass walks its range the same way and reads gamma too, which
// is 8-byte aligned at the row's start: with 64-bit loads where the head
// leaves it 8-byte aligned, pairs of 32-bit loads in the same issues where
// it leaves it 4-byte aligned (a row of an even length that starts two
// elements past a quad), and otherwise (about half the rows of an odd
// length, where it is 2-byte aligned) four 16-bit loads packed into
// pairs. See `include/rows.h` for the work split, which gives a long
// row to all six workers.

#include "include/rows.h"
#include "include/norm.h"

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, which has `whole` rows and, when the rows split,
// one part of a split row. A row costs 3 issues per quad for its squares
// and 11 for its output, 5 more per single element of the head and tail of
// a row of a length 2 mod 4, and a fixed 57 (66 when rows are not a
// multiple of 4 long: the output pass looks for its alignment). Rows of an
// odd length take two issues more per quad where gamma's quads do not meet
// theirs (15 a quad for the busiest worker, whose rows all do), and about
// 6 per single element; a part of one, 11 a quad and 10 per single
// element. A part costs the squares of its whole row, about 3 issues per
// single element of the head and tail, a fixed 100 and its share of the
// output; the launch takes 25 more. All in quarter issues, so quads count
// per element.
#define RMSNORM_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 15 * row_length + 24 * singles : 14 * row_length + 20 * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 11 * row_length + 40 * singles : 11 * row_length + 24 * singles; 40 + 6 * (100 + whole * (row + (row_length % 4 == 0 ? 228 : 264)) + split * (3 * row_length + 12 * singles + 400 + part / parts)) / 4"

// PARTS (0 unless defined) selects the split form's normalising kernel
// (`include/norm.h`): `rmsnorm_stats_f16` has written the sum of squares
// of each worker's share of each row to the records in in2, and each
// worker adds up the records of the rows its share meets and writes its
// share. Its state is the whole-row kernel's with in2 last; with
// SEGMENTED, then `segments`: each worker adds up the row's record of
// each segment (`include/norm.h`), and their counts for the row's length.
#ifndef PARTS
#define PARTS 0
#endif
// Its cycles (fitted with `tests/row_kernels/calibration.rs`, worst 15 %
// off): six per issue of the busiest worker, the one whose share meets the
// most rows (`pieces`, as in `layernorm_stats_f16.S`): 12 issues per quad
// of its share, about 13 when rows are of an odd length (the quads of
// about half of them do not meet gamma's and take two issues more, and
// their heads and tails single elements: 12 more per piece), 5 per row for
// the search of the share's first row, 40 per piece, 9 more when rows are
// not a multiple of 4 long (the head's set-up) and 8 more again for a row
// of a length 2 mod 4 (its head or tail), 8 per single element of a piece
// in rows shorter than a quad (12 for the segmented form), and 32 per
// launch; all in quarter issues. The segmented form's combination walks a
// record per segment, 4 issues each, after a set-up of 39.
#define RMSNORM_PARTS_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; singles = row_length < 4 ? row_length : 0; 6 * ((misaligned ? 13 : 12) * share + 20 * rows + 4 * (40 + 12 * misaligned + 9 * (row_length % 4 != 0 && rows > 1) + 8 * (row_length % 4 == 2)) * pieces + 4 * 32 + 8 * pieces * singles) / 4"
#define RMSNORM_PARTS_SEG_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; singles = row_length < 4 ? row_length : 0; 6 * ((misaligned ? 13 : 12) * share + 20 * rows + 4 * (39 + 12 * misaligned + 9 * (row_length % 4 != 0 && rows > 1) + 8 * (row_length % 4 == 2) + 4 * segments) * pieces + 4 * 32 + 12 * pieces * singles) / 4"

// Registers beyond rows.h's: $m11 head elements, then elements to write,
// $m12 gamma cursor, $m14 the link register of `call`; $a14
// 1 / row_length, $a12:13 1 / sqrt(m + epsilon) (as a pair of lanes).

// A single element's square, into accumulator 0 alone ($a5..$a7 stay
// zero).
.macro square_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a4, $a0 }
        f32v4sqacc $a4:7
.endm

.macro out_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        { ldb16step $a1, $m12+=, 2 ; f32mul $a0, $a0, $a12 }
        f16tof32 $a1, $a1
        f32mul  $a0, $a0, $a1
        f32tof16 $a0, $a0
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

// The rest of an output quad, x widened into $a2:3 and $a4:5 and scaled,
// gamma's quad in $a6:7: the products rounded to f16 and stored.
.macro out_quad_end
        f16v2tof32 $a8:9, $a6
        f32v2mul $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a7
        f32v2mul $a4:5, $a4:5, $a8:9
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
        st64step $a6:7, $m10+=, 8
.endm

        .text

// State: in0, in1 (gamma), out, rows, row_length, epsilon_bits.

#if PARTS
        .globl  rmsnorm_parts_f16
        .type   rmsnorm_parts_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param epsilon_bits, 20, f32
        .ipub_param in2, 24, ptr
#if SEGMENTED
        .ipub_param segments, 28, u32
        .ipub_cost RMSNORM_PARTS_SEG_COST
#else
        .ipub_cost RMSNORM_PARTS_COST
#endif
rmsnorm_parts_f16:
        parts_begin 12, 16, 8, 24, parts_done
        // Each piece: the share's elements in the row, [lo, hi) within
        // it, with the mean square of the row's six sums of squares.
parts_piece:
        parts_piece_range 16
        add     $m8, $m2, 8
        mov     $a0, $azero
#if SEGMENTED
        // All the row's records, whose counts sum to its length: $a14 =
        // 1 / that.
        mov     $m10, $m2
        mov     $a5, $azero
        ld32    $m6, $m0, 28
        rpt     $m6, 4
        ld32step $a2, $m8+=, PART_RECORD
        ld32step $a3, $m10+=, PART_RECORD
        f32add  $a0, $a0, $a2
        f32add  $a5, $a5, $a3
        f32rcp  $a14, $a5
#else
        rpt     6, 2
        ld32step $a2, $m8+=, PART_RECORD
        f32add  $a0, $a0, $a2
#endif
        f32mul  $a4, $a0, $a14
        ld32    $a8, $m0, 20
        f32add  $a4, $a4, $a8
        f32rsqrt $a12, $a4
        mov     $a13, $a12
        call    $m14, rmsnorm_write
        parts_next 16, 24, parts_piece, parts_done
parts_done:
        exitz   $mzero
#else
        .globl  rmsnorm_f16
        .type   rmsnorm_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param epsilon_bits, 20, f32
        .ipub_cost RMSNORM_COST
rmsnorm_f16:
        ld32    $m2, $m0, 16
        mov     $a14, $m2
        f32fromi32 $a14, $a14
        f32rcp  $a14, $a14
        row_bound 12, rmsnorm_bound
        get     $m3, $wid
rmsnorm_whole:
        cmpult  $m6, $m3, $m1
        brz     $m6, rmsnorm_split
        whole_row 0, 8
        call    $m14, rmsnorm_row
        add     $m3, $m3, 6
        br      rmsnorm_whole
rmsnorm_split:
        split_row 12, 0, 8, rmsnorm_done
        call    $m14, rmsnorm_row
rmsnorm_done:
        exitz   $mzero

#endif

// One row: the mean square over the whole row, then elements [lo, hi) of
// the output. Keeps $m0..$m3 and $m14.
rmsnorm_row:
        sub     $m11, $mzero, $m7
        and     $m11, $m11, 7
        shr     $m11, $m11, 1
        min     $m11, $m11, $m2

        // Pass 1: the sum of squares, then 1 / sqrt(m + epsilon).
        mov     $m8, $m7
        clear_upper
        rpt_at  4
        rpt     $m11, 3
        square_one
        quads
        rpt_at  4
        rpt     $m6, 4
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a4:5, $a0 }
        f16v2tof32 $a6:7, $a1
        f32v4sqacc $a4:7
        clear_upper
        tail
        rpt_at  4
        rpt     $m6, 3
        square_one
        total
        f32mul  $a4, $a4, $a14
        ld32    $a8, $m0, 20
        f32add  $a4, $a4, $a8
        f32rsqrt $a12, $a4
        mov     $a13, $a12

        // Pass 2: normalise and scale elements [lo, hi), with
        // 1 / sqrt(m + epsilon) in $a12:13. Keeps $m0..$m3 and $m14.
rmsnorm_write:
        add     $m6, $m4, $m4
        add     $m8, $m7, $m6
        add     $m10, $m9, $m6
        ld32    $m12, $m0, 4
        add     $m12, $m12, $m6
        sub     $m11, $m5, $m4
        // All three cursors 8-byte aligned: quads from the start.
        or      $m5, $m8, $m10
        or      $m5, $m5, $m12
        and     $m5, $m5, 7
        shr     $m6, $m11, 2
        brz     $m5, rmsnorm_wide
        // Otherwise the head: single elements up to x's first 8-byte
        // boundary. Quads after it need the output's cursor 8-byte aligned
        // too, and gamma's 8-byte aligned, or 4 for the narrow loads (a
        // row of an even length that starts two elements past a quad: its
        // quads meet gamma's pairs), or 2 (rows of an odd length). Only an
        // output cursor that the head leaves misaligned takes single
        // elements.
        out_head out_one, 9
        and     $m6, $m10, 7
        brnz    $m6, rmsnorm_singles
        shr     $m6, $m11, 2
        brz     $m6, rmsnorm_out_tail
        and     $m5, $m12, 7
        brz     $m5, rmsnorm_wide
        and     $m5, $m5, 3
        brz     $m5, rmsnorm_narrow
        // Gamma 2-byte aligned (about half the rows of an odd length):
        // four 16-bit loads, riding in bundles, and two packs of their
        // halves into pairs: 13 issues a quad.
        rpt_at  4
        rpt     $m6, 18
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { ldb16step $a6, $m12+=, 2 ; f16v2tof32 $a4:5, $a1 }
        { ldb16step $a7, $m12+=, 2 ; f32v2mul $a2:3, $a2:3, $a12:13 }
        { ldb16step $a0, $m12+=, 2 ; f32v2mul $a4:5, $a4:5, $a12:13 }
        { ldb16step $a1, $m12+=, 2 ; f16v2pack $a6, $a6, $a7 }
        f16v2pack $a7, $a0, $a1
        out_quad_end
        br      rmsnorm_out_tail
rmsnorm_singles:
        rpt_at  4
        rpt     $m11, 9
        out_one
        br      $m14
rmsnorm_narrow:
        // Gamma's pair loads ride in bundles as the 64-bit load does, so
        // the quad costs the same 11 issues.
        rpt_at  4
        rpt     $m6, 14
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { ld32step $a6, $m12+=, 4 ; f16v2tof32 $a4:5, $a1 }
        { ld32step $a7, $m12+=, 4 ; f32v2mul $a2:3, $a2:3, $a12:13 }
        f32v2mul $a4:5, $a4:5, $a12:13
        out_quad_end
        br      rmsnorm_out_tail
rmsnorm_wide:
        rpt_at  4
        rpt     $m6, 13
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { ld64step $a6:7, $m12+=, 8 ; f16v2tof32 $a4:5, $a1 }
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        out_quad_end
rmsnorm_out_tail:
        and     $m6, $m11, 3
        rpt_at  4
        rpt     $m6, 9
        out_one
        br      $m14
#if PARTS
        .size   rmsnorm_parts_f16, . - rmsnorm_parts_f16
#else
        .size   rmsnorm_f16, . - rmsnorm_f16
#endif
