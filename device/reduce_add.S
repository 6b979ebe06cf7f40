// Reduce-add of partials: out[i] = f16(sum over k of in0[k][i]), summed in
// f32 in partial order and rounded once. `in0` holds `count` partial
// vectors of `length` f16 values each, back to back; `length` is a multiple
// of 4 (partials come from 16-channel GEMM blocks).
//
// Worker w takes 4-value blocks w, w + 6, ... Each block is one repeated
// bundle per partial: a step load whose increment (the distance between
// partials) is a register, paired with `f16v4acc`, which adds the four
// values to the vector accumulators in f32. The sums are read back with
// `f32v2gina` (clearing the accumulators for the next block), rounded to
// f16 and stored while the next block is summed.
//
// Up to eight partials (the K splits the planner makes), the partials'
// bundles are unrolled and a repeat walks the blocks: count + 4 issues per
// block, with no loop control. More partials repeat the bundle within a
// counted loop over the blocks: count + 6.
//
// Two partials, the commonest split, take three issues per block in f16:
// the f32 sum of two f16 values rounded once to f16 is their correctly
// rounded f16 sum, which `f16v4add` computes. (With exponents at most 13
// apart the f32 sum is exact; further apart, the smaller value is below an
// eighth of the larger's f16 ulp, and both roundings give the larger.)
// Adding +0 afterwards turns the one sum the accumulators cannot produce,
// -0 + -0, into +0 as they do, so the bytes are those of the f32 path.

// ADDENDS (0 unless defined; 1 or 2) selects `reduce_add_f16_plus1` and
// `_plus2`: the sums then go through one or two additions of f16 operands
// of `length` values (in1, then in2), each rounded to f16 with
// `f16v4add`, before they are stored. That is a product's fused epilogue
// of adds (a bias, a residual: `lower::build`) run by the reduction, so
// the bytes are those of `reduce_add_f16` and `add_f16` run one after the
// other, without the adds' passes over the result. Each addend takes one
// more issue per block, its load riding with a conversion or a sum.
#ifndef ADDENDS
#define ADDENDS 0
#endif

// OUT_F8 (0 unless defined; 1 for either FP8 format) selects
// `reduce_add_f16_f143` and `_f152`: a cast to FP8 fused into the
// reduction of a split product whose only epilogue is its cast
// (`lower::build`). Each block's sums, rounded to f16 as above (the +0 of
// the two-partial path included), are converted with `f16v4tof8` and the
// result's scale as `cast_f16_f143` converts them, so the bytes are those
// of `reduce_add_f16` and the cast run one after the other, without the
// cast's pass. The conversion is one more issue per block (none for two
// partials: it takes the aux slot that path leaves empty), and the store
// writes 4 bytes instead of 8. Not with ADDENDS.
#ifndef OUT_F8
#define OUT_F8 0
#endif
// Bytes of a block's result, and between a worker's blocks.
#if OUT_F8
#define OUT_BLOCK 4
#else
#define OUT_BLOCK 8
#endif
#define OUT_STEP 6 * OUT_BLOCK

#include "include/rows.h"

// The addends of the block whose f16 sums are in $a2:3, from $m1 and $m2,
// in plain issues (the first block, and the counted loop).
.macro plus
        .if ADDENDS >= 1
        ld64step $a8:9, $m1+=, 48
        f16v4add $a2:3, $a2:3, $a8:9
        .endif
        .if ADDENDS >= 2
        ld64step $a8:9, $m2+=, 48
        f16v4add $a2:3, $a2:3, $a8:9
        .endif
.endm

// The conversions of a block's sums in $a4:5 and $a6:7 to f16 in $a2:3,
// then its addends, the loads riding with the conversions: 2 + ADDENDS
// issues, 2 * (2 + ADDENDS) words for `rpt`.
.macro to_f16_plus
        .if ADDENDS == 0
        f32v2tof16 $a2, $a4:5
        f32v2tof16 $a3, $a6:7
        .elseif ADDENDS == 1
        { ld64step $a8:9, $m1+=, 48 ; f32v2tof16 $a2, $a4:5 }
        f32v2tof16 $a3, $a6:7
        f16v4add $a2:3, $a2:3, $a8:9
        .else
        { ld64step $a8:9, $m1+=, 48 ; f32v2tof16 $a2, $a4:5 }
        { ld64step $a10:11, $m2+=, 48 ; f32v2tof16 $a3, $a6:7 }
        f16v4add $a2:3, $a2:3, $a8:9
        f16v4add $a2:3, $a2:3, $a10:11
        .endif
.endm

// The f16 sums in $a2:3 as the stored result: converted to FP8 into $a2
// with OUT_F8 (one issue, one word for `rpt`), unchanged otherwise.
.macro to_out
        .if OUT_F8
        f16v4tof8 $a2, $a2:3
        .endif
.endm

// Stores the result `to_out` made; in a bundle with the second read-back.
.macro store_out
        .if OUT_F8
        st32step $a2, $m12+=, OUT_STEP
        .else
        st64step $a2:3, $m12+=, OUT_STEP
        .endif
.endm
.macro store_out_gina
        .if OUT_F8
        { st32step $a2, $m12+=, OUT_STEP ; f32v2gina $a6:7, 1 }
        .else
        { st64step $a2:3, $m12+=, OUT_STEP ; f32v2gina $a6:7, 1 }
        .endif
.endm

// The blocks of `count` partials, unrolled (see above); $m8 holds the
// worker's blocks less one.
.macro unrolled count
reduce_add_c\count:
        .align  8
        .rept   \count
        { ld64step $a0:1, $m10+=, $m7 ; f16v4acc $a0:1 }
        .endr
        { add   $m10, $m10, $m13 ; f32v2gina $a4:5, 0 }
        f32v2gina $a6:7, 1
        f32v2tof16 $a2, $a4:5
        f32v2tof16 $a3, $a6:7
        plus
        to_out
        rpt_at  4
        rpt     $m8, 2 * \count + 6 + 2 * ADDENDS + OUT_F8
        .rept   \count
        { ld64step $a0:1, $m10+=, $m7 ; f16v4acc $a0:1 }
        .endr
        { add   $m10, $m10, $m13 ; f32v2gina $a4:5, 0 }
        store_out_gina
        to_f16_plus
        to_out
        store_out
        exitz   $mzero
.endm

// The blocks of two partials in f16 (see above), from $m10 ($m7 the
// distance between the partials, $m11 the step from a block's second
// partial to the worker's next block, $m8 the worker's blocks less one) to
// $m12, as f16 or, with `fp8`, converted with `f16v4tof8` ($fp8cfg set).
// $a6:7 holds +0. Each repeat loads a block and sums it into $a8:9 while
// the previous block's sum, given its +0 in the repeat before, is
// converted and stored.
.macro pair_blocks fp8
        setzi   $a6, 0
        setzi   $a7, 0
        ld64step $a0:1, $m10+=, $m7
        .align  8
        { ld64step $a2:3, $m10+=, $m11 ; f16v4add $a8:9, $a0:1, $a2:3 }
        .if ADDENDS == 0
        f16v4add $a4:5, $a8:9, $a6:7
        rpt_at  4
        rpt     $m8, 6
        .endif
        .if \fp8
        { ld64step $a0:1, $m10+=, $m7 ; f16v4tof8 $a10, $a4:5 }
        { ld64step $a2:3, $m10+=, $m11 ; f16v4add $a8:9, $a0:1, $a2:3 }
        { st32step $a10, $m12+=, 24 ; f16v4add $a4:5, $a8:9, $a6:7 }
        f16v4tof8 $a10, $a4:5
        st32step $a10, $m12+=, 24
        .elseif ADDENDS == 0
        { ld64step $a0:1, $m10+=, $m7 ; fnop }
        { ld64step $a2:3, $m10+=, $m11 ; f16v4add $a8:9, $a0:1, $a2:3 }
        { st64step $a4:5, $m12+=, 48 ; f16v4add $a4:5, $a8:9, $a6:7 }
        st64step $a4:5, $m12+=, 48
        .else
        pair_plus
        .endif
        exitz   $mzero
.endm

// The rest of `pair_blocks` with addends, entered with the first block's
// sum in $a8:9: gives it its +0 into $a4:5 and loads its addends ($a10:11
// and $a12:13), then each repeat adds the previous block's addends while
// it loads this block's partials, stores the previous block and loads
// this block's addends, 3 + ADDENDS bundles.
.macro pair_plus
        { ld64step $a10:11, $m1+=, 48 ; f16v4add $a4:5, $a8:9, $a6:7 }
        .if ADDENDS == 2
        ld64step $a12:13, $m2+=, 48
        .endif
        rpt_at  4
        rpt     $m8, 2 * (3 + ADDENDS)
        { ld64step $a0:1, $m10+=, $m7 ; f16v4add $a4:5, $a4:5, $a10:11 }
        .if ADDENDS == 2
        { ld64step $a2:3, $m10+=, $m11 ; f16v4add $a4:5, $a4:5, $a12:13 }
        .else
        { ld64step $a2:3, $m10+=, $m11 ; fnop }
        .endif
        { st64step $a4:5, $m12+=, 48 ; f16v4add $a8:9, $a0:1, $a2:3 }
        { ld64step $a10:11, $m1+=, 48 ; f16v4add $a4:5, $a8:9, $a6:7 }
        .if ADDENDS == 2
        { ld64step $a12:13, $m2+=, 48 ; fnop }
        .endif
        f16v4add $a4:5, $a4:5, $a10:11
        .if ADDENDS == 2
        f16v4add $a4:5, $a4:5, $a12:13
        .endif
        st64step $a4:5, $m12+=, 48
.endm

// Two partials in f16.
.macro pair_sum
reduce_add_c2:
        sub     $m11, $mzero, $m7
        add     $m11, $m11, 48
        pair_blocks OUT_F8
.endm

// Branches to the unrolled loop for `count` partials.
.macro dispatch count
        cmpeq   $m6, $m3, \count
        brnz    $m6, reduce_add_c\count
.endm

        .text
#define REDUCE_COST "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 3 * blocks + 5 : blocks * (unrolled ? count + 4 : count + 6) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 2)"
#define REDUCE_PLUS1_COST "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 4 * blocks + 8 : blocks * (unrolled ? count + 5 : count + 7) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 5)"
#define REDUCE_PLUS2_COST "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 5 * blocks + 10 : blocks * (unrolled ? count + 6 : count + 8) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 7)"
#define REDUCE_TO_F8_COST "blocks = (length / 4 + 5) / 6; unrolled = count <= 8 && count > 0; 150 + 6 * (count == 2 ? 3 * blocks + 12 : blocks * (unrolled ? count + 5 : count + 7) + 2 * (unrolled ? (count < 2 ? 2 : count) : 8) + 11)"
        // Cycles: six per issue of worker 0, which has the most blocks, and
        // of the choice of loop (two issues per count tried, two first),
        // plus the launch (fitted with `tests/row_kernels/calibration.rs`);
        // two partials, three issues per block. Each addend adds an issue per
        // block and a few to the launch, and so does the conversion to FP8
        // but for two partials (fitted the same way, within 8 %).
#if OUT_F8
// State: in0, out, count, length, out_scale. Each entry sets $m10 to its
// format bit; the scale goes to bits 15..8 of $fp8cfg, as in `cast_f8.S`.
.macro to_f8_entry name, format
        .globl  \name
        .type   \name, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param count, 8, u32
        .ipub_param length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_cost REDUCE_TO_F8_COST
\name:
        setzi   $m10, \format
.endm
        to_f8_entry reduce_add_f16_f143, 0
        br      reduce_to_f8
        .size   reduce_add_f16_f143, . - reduce_add_f16_f143
        to_f8_entry reduce_add_f16_f152, 1
reduce_to_f8:
        fp8_config 16
#define REDUCE_ENTRY reduce_add_f16_f152
#else
#if ADDENDS == 0
#define REDUCE_ENTRY reduce_add_f16
#elif ADDENDS == 1
#define REDUCE_ENTRY reduce_add_f16_plus1
#else
#define REDUCE_ENTRY reduce_add_f16_plus2
#endif
        .globl  REDUCE_ENTRY
        .type   REDUCE_ENTRY, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param count, 8, u32
        .ipub_param length, 12, u32
#if ADDENDS >= 1
        .ipub_param in1, 16, ptr
#endif
#if ADDENDS >= 2
        .ipub_param in2, 20, ptr
#endif
#if ADDENDS == 0
        .ipub_cost REDUCE_COST
#elif ADDENDS == 1
        .ipub_cost REDUCE_PLUS1_COST
#else
        .ipub_cost REDUCE_PLUS2_COST
#endif
REDUCE_ENTRY:
#endif
        ld32    $m3, $m0, 8
        ld32    $m4, $m0, 12
        get     $m5, $wid
        worker_blocks reduce_add_done
        // $m7: bytes between partials.
        add     $m7, $m4, $m4
        shl     $m9, $m5, 3
        ld32    $m10, $m0, 0
        add     $m10, $m10, $m9
        .if ADDENDS >= 1
        ld32    $m1, $m0, 16
        add     $m1, $m1, $m9
        .endif
        .if ADDENDS >= 2
        ld32    $m2, $m0, 20
        add     $m2, $m2, $m9
        .endif
        // The output's blocks: 8 bytes (f16, as the input's) or 4 (FP8).
        .if OUT_F8
        shl     $m9, $m5, 2
        .endif
        ld32    $m12, $m0, 4
        add     $m12, $m12, $m9
        // Two partials first, the commonest split.
        dispatch 2
        // $m13: from past the last partial of a block back to the first
        // partial of the worker's next block.
        mul     $m13, $m3, $m7
        sub     $m13, $mzero, $m13
        add     $m13, $m13, 48
        dispatch 1
        dispatch 3
        dispatch 4
        dispatch 5
        dispatch 6
        dispatch 7
        dispatch 8

        // The first block: nothing to store yet.
        rpt_at  4
        rpt     $m3, 2
        { ld64step $a0:1, $m10+=, $m7 ; f16v4acc $a0:1 }
        { add   $m10, $m10, $m13 ; f32v2gina $a4:5, 0 }
        f32v2gina $a6:7, 1
        f32v2tof16 $a2, $a4:5
        f32v2tof16 $a3, $a6:7
        plus
        to_out
        brz     $m8, reduce_add_last
        sub     $m8, $m8, 1
        rpt_at  4
reduce_add_block:
        rpt     $m3, 2
        { ld64step $a0:1, $m10+=, $m7 ; f16v4acc $a0:1 }
        { add   $m10, $m10, $m13 ; f32v2gina $a4:5, 0 }
        // The previous block's sums go out with this block's reads.
        store_out_gina
        f32v2tof16 $a2, $a4:5
        f32v2tof16 $a3, $a6:7
        plus
        to_out
        brnzdec $m8, reduce_add_block
reduce_add_last:
        store_out
reduce_add_done:
        exitz   $mzero
        unrolled 1
        pair_sum
        unrolled 3
        unrolled 4
        unrolled 5
        unrolled 6
        unrolled 7
        unrolled 8
        .size   REDUCE_ENTRY, . - REDUCE_ENTRY
