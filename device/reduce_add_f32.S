// Reduce-add of f32 partials: out[i] = sum over k of in0[k][i], summed in
// f32 in partial order (each addition rounded to f32, as the f32 GEMM's
// passes add their blocks). `in0` holds `count` partial vectors of
// `length` f32 values each, back to back; `length` is a multiple of 4
// (partials come from 16-channel GEMM blocks).
//
// Worker w takes 4-value blocks w, w + 6, ... A block is one repeated pair
// of bundles per partial: two 64-bit loads (the second with a register
// increment, the distance to the next partial) and `f32v4acc`, which adds
// the four values to the vector accumulators. The sums are read back with
// `f32v2gina`, which also clears the accumulators for the next block.

#include "include/rows.h"

        .text
        .globl  reduce_add_f32
        .type   reduce_add_f32, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param count, 8, u32
        .ipub_param length, 12, u32
        // Six cycles per issue of worker 0, which has the most blocks: two
        // issues per partial and eight per block, plus the set-up and launch
        // (fitted with `tests/row_kernels/calibration.rs`).
        .ipub_cost "blocks = (length / 4 + 5) / 6; 6 * blocks * (2 * count + 8) + 156"
reduce_add_f32:
        ld32    $m3, $m0, 8
        ld32    $m4, $m0, 12
        get     $m5, $wid
        brz     $m3, reduce_done
        worker_blocks reduce_done
        // $m7: from the second half of a partial's block to the next
        // partial's; $m13: from past the last partial of a block back to the
        // first partial of the worker's next block (six blocks on).
        shl     $m7, $m4, 2
        mul     $m13, $m3, $m7
        sub     $m13, $mzero, $m13
        add     $m13, $m13, 96
        sub     $m7, $m7, 8
        shl     $m9, $m5, 4
        ld32    $m10, $m0, 0
        add     $m10, $m10, $m9
        ld32    $m12, $m0, 4
        add     $m12, $m12, $m9
reduce_block:
        rpt_at  4
        rpt     $m3, 4
        { ld64step $a0:1, $m10+=, 8 ; mov $a14, $azero }
        { ld64step $a2:3, $m10+=, $m7 ; f32v4acc $a0:3 }
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        add     $m10, $m10, $m13
        st64step $a4:5, $m12+=, 8
        st64step $a6:7, $m12+=, 88
        brnzdec $m8, reduce_block
reduce_done:
        exitz   $mzero
        .size   reduce_add_f32, . - reduce_add_f32
