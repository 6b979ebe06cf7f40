// The statistics half of the split layernorm (`include/norm.h`): each
// worker takes an equal share of the elements of an f16
// `[rows][row_length]` operand and writes, for each row its share meets,
// the count n of those elements, their mean and the sum of their squared
// deviations about that mean (M2), in f32, to its record of the row in
// `out` (`[rows][6]` records of 16 bytes); it zeroes its record of every
// other row. `layernorm_f16.S`'s split variant combines a row's six
// records with Chan's parallel formula, which keeps the accuracy of two
// passes over the whole row.
//
// Two passes per piece of a row, shaped like the layernorm's statistics
// passes: the sum in the vector accumulators (one bundle per quad), then
// the squares of `x - mean` in f32 (`f32v4sqacc`, five issues per quad).
// Each pass walks the piece as single elements up to the first 8-byte
// boundary, then aligned quads with 64-bit loads, then single elements.

#include "include/rows.h"
#include "include/norm.h"

// RMS (0 unless defined) selects `rmsnorm_stats_f16`, the statistics half
// of the split RMS norm: one pass, the sum of squares of the elements
// (`f32v4sqacc`, three issues per quad), written where M2 goes with a
// zero mean, which is what the combination expects of it.
#ifndef RMS
#define RMS 0
#endif

// Cycles (fitted with `tests/row_kernels/calibration.rs`, worst 14 % off
// over the grid): six per issue of the busiest worker, the one whose
// share meets the most rows (`pieces`, computed for each worker as the
// kernel cuts the shares): 6 issues per quad of its share, 2 per row for
// the zeroing, 74 per piece and 8 per single element of a piece (rows
// not a multiple of 4 long have up to 3 at their ends), and 25 per
// launch; all in quarter issues.
// The RMS variant's, fitted the same way (worst 14 % off): 3 issues per
// quad, 4 per row for the zeroing and the search for the share's first
// row, 52 per piece, 8 per single element of a piece and 32 per launch.
#define RMSNORM_STATS_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 == 2 ? 6 : row_length % 4 != 0 ? 3 : 0; 6 * (3 * share + 16 * rows + 4 * 52 * pieces + 4 * 32 + 8 * pieces * singles) / 4"
#define LAYERNORM_STATS_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 == 2 ? 6 : row_length % 4 != 0 ? 3 : 0; 6 * (6 * share + 8 * rows + 4 * 74 * pieces + 4 * 25 + 8 * pieces * singles) / 4"

// Registers beyond rows.h's: $m0 the first element of the current row
// (once the state is read), $m1 the next element of the share, $m3 its
// end, $m13 the row's bytes, $m14 the link register of `call`;
// `stats_part` takes $m10 head elements, $m11 the piece's elements, $m12
// its quads.

// A piece of the walk (`share_pieces`), and the next row: $m13 holds the
// row's bytes.
.macro stats_call
        call    $m14, stats_part
.endm
.macro stats_next_row
        add     $m7, $m7, $m13
        add     $m9, $m9, ROW_RECORDS
.endm

        .text

// State: in0, out (the records), rows, row_length.
#if RMS
        .globl  rmsnorm_stats_f16
        .type   rmsnorm_stats_f16, @function
#else
        .globl  layernorm_stats_f16
        .type   layernorm_stats_f16, @function
#endif
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
#if RMS
        .ipub_cost RMSNORM_STATS_COST
rmsnorm_stats_f16:
#else
        .ipub_cost LAYERNORM_STATS_COST
layernorm_stats_f16:
#endif
        ld32    $m1, $m0, 8
        ld32    $m2, $m0, 12
        add     $m13, $m2, $m2
        ld32    $m7, $m0, 0
        ld32    $m9, $m0, 4
        get     $m3, $wid
        mul     $m6, $m3, PART_RECORD
        add     $m9, $m9, $m6
        // Zeroes this worker's record of every row first.
        mov     $a0, $azero
        mov     $a1, $azero
        mov     $m6, $m9
        rpt     $m1, 2
        st64    $a0:1, $m6, 8
        st64step $a0:1, $m6+=, ROW_RECORDS
        share_pieces stats, stats_call, stats_next_row
        exitz   $mzero

// Elements [lo, hi) (lo < hi) of the row at $m7 into the record at $m9.
// Keeps $m0..$m3, $m7, $m9, $m13 and $m14.
stats_part:
        sub     $m11, $m5, $m4
        add     $m8, $m4, $m4
        add     $m8, $m8, $m7
        // $m10 = head elements, $m12 = quads, $m4 = tail elements.
        sub     $m10, $mzero, $m8
        and     $m10, $m10, 7
        shr     $m10, $m10, 1
        min     $m10, $m10, $m11
        sub     $m12, $m11, $m10
        and     $m4, $m12, 3
        shr     $m12, $m12, 2
        mov     $m5, $m8
        // $a14 = n.
        mov     $a14, $m11
        f32fromi32 $a14, $a14

#if RMS
        mov     $a10, $azero
        mov     $a11, $azero
        clear_upper
        rpt_at  4
        rpt     $m10, 4
        deviation_square_one
        rpt_at  4
        rpt     $m12, 4
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a4:5, $a0 }
        f16v2tof32 $a6:7, $a1
        f32v4sqacc $a4:7
        clear_upper
        rpt_at  4
        rpt     $m4, 4
        deviation_square_one
        total
#else
        // Pass 1: the part's mean.
        clear_upper
        rpt_at  4
        rpt     $m10, 3
        mean_sum_one
        rpt_at  4
        rpt     $m12, 2
        { ld64step $a0:1, $m8+=, 8 ; f16v4acc $a0:1 }
        rpt_at  4
        rpt     $m4, 3
        mean_sum_one
        total
        // Divided, so that the part of a row of one value has that value
        // as its mean (see `layernorm_f16.S`).
        f32div  $a10, $a4, $a14
        mov     $a11, $a10

        // Pass 2: the squared deviations about it.
        mov     $m8, $m5
        clear_upper
        rpt_at  4
        rpt     $m10, 4
        deviation_square_one
        rpt_at  4
        rpt     $m12, 6
        deviation_square_quad
        clear_upper
        rpt_at  4
        rpt     $m4, 4
        deviation_square_one
        total
#endif
        st32    $a14, $m9, 0
        st32    $a10, $m9, 4
        st32    $a4, $m9, 8
        st32    $mzero, $m9, 12
        br      $m14
#if RMS
        .size   rmsnorm_stats_f16, . - rmsnorm_stats_f16
#else
        .size   layernorm_stats_f16, . - layernorm_stats_f16
#endif
