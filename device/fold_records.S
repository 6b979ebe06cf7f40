// Folds the six records a statistics kernel writes for each row of a tile
// (`[rows][6]` records of 16 bytes, one per worker share: see
// `include/norm.h`) into one, written as the tile's record of the row in
// the segmented form's `[rows][segments]` records, at `segment`. Rows cut
// into segments on several tiles (`Partition::Segments`) then exchange
// one record per row and tile, and the output kernels combine `segments`
// records of a row instead of `6 * segments`.
//
// `fold_norm_records` folds (n, mean, M2) records with Chan's parallel
// formula, as the normalising kernels combine them: n = sum n_i, mean =
// sum n_i mean_i / n, M2 = sum M2_i + n_i (mean_i - mean)^2. The RMS
// norm's records (a zero mean, M2 the sum of squares) fold to the same
// form: a zero mean and the sum of the sums of squares.
//
// With SOFTMAX, `fold_softmax_records` folds a softmax's (m, s) records
// (`softmax_f16.S` with STATS): M = max m_i, S = sum s_i exp(m_i - M).
//
// Worker w folds rows w, w + 6, ...; a row costs its six records.

#include "include/rows.h"
#include "include/norm.h"

#ifndef SOFTMAX
#define SOFTMAX 0
#endif

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, the one with the most rows: per row, 11 issues
// per record and 8 more (a softmax's, 57 in all), plus 20 per launch.
#define FOLD_NORM_COST "f = (rows + 5) / 6; 6 * (20 + f * 74)"
#define FOLD_SOFTMAX_COST "f = (rows + 5) / 6; 6 * (20 + f * 57)"

        .text

// State: in0 (the tile's [rows][6] records), out (the [rows][segments]
// records), rows, segment, segments.
#if SOFTMAX
        .globl  fold_softmax_records
        .type   fold_softmax_records, @function
#else
        .globl  fold_norm_records
        .type   fold_norm_records, @function
#endif
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param segment, 12, u32
        .ipub_param segments, 16, u32
#if SOFTMAX
        .ipub_cost FOLD_SOFTMAX_COST
fold_softmax_records:
#else
        .ipub_cost FOLD_NORM_COST
fold_norm_records:
#endif
        ld32    $m1, $m0, 8
        get     $m3, $wid
        ld32    $m7, $m0, 0
        ld32    $m9, $m0, 4
        // $m2 = the bytes of a row's records in the output; $m9 = this
        // worker's first row's record of the tile, $m7 its six records.
        ld32    $m2, $m0, 16
        mul     $m2, $m2, PART_RECORD
        ld32    $m6, $m0, 12
        mul     $m6, $m6, PART_RECORD
        add     $m9, $m9, $m6
        mul     $m6, $m3, $m2
        add     $m9, $m9, $m6
        mul     $m6, $m3, ROW_RECORDS
        add     $m7, $m7, $m6
        // $m10 = the output's bytes for six rows.
        mul     $m10, $m2, 6
fold_row:
        cmpult  $m6, $m3, $m1
        brz     $m6, fold_done
#if SOFTMAX
        softmax_records $m7, 6
        st32    $a10, $m9, 0
        st32    $a12, $m9, 4
        st32    $mzero, $m9, 8
#else
        // n and sum n_i mean_i, the mean; then M2.
        mov     $m8, $m7
        mov     $m11, $m7
        mov     $a0, $azero
        mov     $a1, $azero
        chan_mean 6
        chan_m2 6, $m11
        st32    $a5, $m9, 0
        st32    $a10, $m9, 4
        st32    $a1, $m9, 8
#endif
        st32    $mzero, $m9, 12
        add     $m3, $m3, 6
        add     $m7, $m7, 6 * ROW_RECORDS
        add     $m9, $m9, $m10
        br      fold_row
fold_done:
        exitz   $mzero
#if SOFTMAX
        .size   fold_softmax_records, . - fold_softmax_records
#else
        .size   fold_norm_records, . - fold_norm_records
#endif
