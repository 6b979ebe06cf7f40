// GEMM on the AMP with an f32 result: C[r][n] = sum_k A[r][k] * B[k][n],
// f16 inputs, f32 partials carried between K blocks, f32 output.
//
// The f16-output kernel (`gemm_f16_amp.S`) hands its partials from one K
// block to the next as f16, which would round the result to f16 before it
// is ever stored as f32. This one uses `f16v4sisoamp`, whose partials in
// and out are f32: every sum of a K block is added to the running f32
// partial in f32, so the stored value has been rounded only by f32
// additions (the AMP sums a row's products in f32 within each phase, the
// phase sums into its accumulators, and each block's sums into the
// partial). FP8 operands reach this kernel as f16: the AMP has no FP8 path
// with f32 partials, so the compiler casts them first.
//
// Defines: INTERLEAVED (0/1; the loops are the same, but weights in
// interleaved memory load 128 bits at a time), K, C, R (the shard's largest
// inner size, columns and rows; loop counts come from the state struct
// because edge shards are smaller).
//
// Layouts (kb = 16 f16 inputs, so one row of a K block is 32 bytes; K' and
// C' are K and cols rounded up to 16):
//   in0 (A):  per batch [K'/16][rows][16] f16
//   in1 (B):  per batch [C'/16][K'/16][16 channels][16] f16 (CWEI blocks)
//   out (C):  per batch [C'/16][rows][16] f32 (64 bytes per row)
//
// Work split: as `gemm_f16_amp.S` (a unit is one column block of one batch;
// six or more column blocks go round-robin over the workers, fewer cut the
// rows into max(1, 6 / col_blocks) groups).
//
// A unit runs one pass per K block: load the 512-byte CWEI block, then
// stream the unit's rows through the AMP. An output row leaves the AMP
// during the next row's four issues, so each pass starts with four issues
// that only load inputs (they drain a bank whose outputs are dropped) and
// ends with a flush row that re-reads its last input row rather than
// reading past the buffer. The first pass's partials are zero (the partials
// quad cleared once per unit); later passes read the previous pass's f32
// outputs and overwrite them in place, each partial read before its slot
// is stored again. Memory moves 8 input bytes, 16 partial bytes in and 16
// out per AMP issue, so a later pass's issue takes five 64-bit memory
// instructions (three in the first pass, which loads no partials).
//
// Registers of the pass loops:
//   $m4 input rows   $m5 partials in   $m6 outputs   $m7 weights
//   $m8 the unit's output rows         $m9 this pass's input rows
//   $m10 K blocks left                 $m11 repeat count 4 * (rows - 1)
//   $m14 rows * 32 (one K block of A)
//   $a0:1 inputs, $a4:7 partials in, $a8:11 partials out
// Registers of the unit loop:
//   $m1 batch index, $m2 column block, $m3 column blocks, $m12 batch count,
//   $m13 column-block step; $a2 K blocks, $a3 A + first row,
//   $a12 C + first row, $a13 B

#include "include/cwei.h"

        .text
gemm_text_start:

// Pads with a `nop` when needed so that the next instruction (a `rpt`)
// lands at `at` (0 or 4) modulo 8: bundles issue only from 8-byte aligned
// addresses, and every body below starts with one (`rpt` at 4) or has it
// as its third word (`rpt` at 4, the bundle at body offset 8).
.macro rpt_at at
        .if ((. - gemm_text_start) & 7) != \at
        nop
        .endif
.endm

// One AMP issue of a later pass: the input quarter, the previous row's
// four f32 partials, the step, and its four f32 outputs (six words).
.macro issue_with_partials
        ld64step $a0:1, $m4+=, 8
        ld64step $a4:5, $m5+=, 8
        { ld64step $a6:7, $m5+=, 8 ; f16v4sisoamp $a8:11, $a0:1, $a4:7 }
        st64step $a8:9, $m6+=, 8
        st64step $a10:11, $m6+=, 8
.endm

// One AMP issue of the first pass: the partials quad holds zeros (four
// words).
.macro issue_zero_partials
        { ld64step $a0:1, $m4+=, 8 ; f16v4sisoamp $a8:11, $a0:1, $a4:7 }
        st64step $a8:9, $m6+=, 8
        st64step $a10:11, $m6+=, 8
.endm

        .globl  gemm_amp_f32out
        .type   gemm_amp_f32out, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param batch, 12, u32
        .ipub_param rows, 16, u32
        .ipub_param inner, 20, u32
        .ipub_param cols, 24, u32
        // Six cycles per issue. Per worker: its units (column blocks) times,
        // per K block, the weights and pointers (44 issues from interleaved
        // memory, 76 otherwise) plus five issues per AMP
        // issue of the rows and the flush row (three in the first block),
        // plus the set-up. The units and `n`, the rows a worker streams,
        // are as in `gemm_f16_amp.S`: every sixth of the batch's units
        // over all rows, or one unit per batch over one of max(1, 6 /
        // column blocks) row groups (fitted with `tests/gemm_kernel.rs`).
        .ipub_cost "cb = (C + 15) / 16; n = cb >= 6 ? R : (R + 6 / cb - 1) / (6 / cb); units = cb >= 6 ? (batch * cb + 5) / 6 : batch; 6 * units * (((K + 15) / 16) * ((INTERLEAVED ? 44 : 76) + 20 * n) - 8 * n + 20) + 360"

        .align  8
gemm_amp_f32out:
        ld32    $m1, $m0, 16            // rows
        ld32    $m2, $m0, 20            // inner
        ld32    $m3, $m0, 24            // cols
        ld32    $m12, $m0, 12           // batch
        add     $m2, $m2, 15
        shr     $m2, $m2, 4             // K blocks
        add     $m3, $m3, 15
        shr     $m3, $m3, 4             // column blocks
        // Nothing to do for an empty shard.
        brz     $m1, done
        brz     $m2, done
        brz     $m3, done
        brz     $m12, done
        // Column block $m4 = wid % col_blocks, row group $m5 = wid / col_blocks.
        get     $m4, $wid
        setzi   $m5, 0
split:
        cmpult  $m6, $m4, $m3
        brnz    $m6, split_done
        sub     $m4, $m4, $m3
        add     $m5, $m5, 1
        br      split
split_done:
        // Row groups $m6 and M = ceil(65536 / groups) in $m7, so that
        // ceil(rows / groups) = ((rows + groups - 1) * M) >> 16 (exact for
        // rows < 32768, more than tile memory holds).
        setzi   $m6, 1
        setzi   $m7, 65536
        cmpeq   $m8, $m3, 3
        brz     $m8, not3
        setzi   $m6, 2
        setzi   $m7, 32768
not3:
        cmpeq   $m8, $m3, 2
        brz     $m8, not2
        setzi   $m6, 3
        setzi   $m7, 21846
not2:
        cmpeq   $m8, $m3, 1
        brz     $m8, not1
        setzi   $m6, 6
        setzi   $m7, 10923
not1:
        // A worker past the last row group has nothing to do.
        cmpult  $m8, $m5, $m6
        brz     $m8, done
        add     $m8, $m1, $m6
        sub     $m8, $m8, 1
        mul     $m8, $m8, $m7
        shr     $m8, $m8, 16            // rows per group
        mul     $m9, $m5, $m8           // first row
        sub     $m10, $m1, $m9          // rows left from there
        min     $m10, $m10, $m8         // this worker's rows n
        cmpslt  $m6, $m10, 1
        brnz    $m6, done
        // Column-block step: 6, or every block's own worker when fewer.
        min     $m13, $m3, 6
        mov     $a2, $m2
        shl     $m14, $m1, 5            // rows * 32
        shl     $m9, $m9, 5             // first row * 32
        ld32    $m6, $m0, 0
        add     $m6, $m6, $m9
        mov     $a3, $m6                // A + first row
        // An output row is 64 bytes, twice an input row.
        ld32    $m6, $m0, 8
        add     $m6, $m6, $m9
        add     $m6, $m6, $m9
        mov     $a12, $m6               // C + first row
        ld32    $m6, $m0, 4
        mov     $a13, $m6               // B
        shl     $m11, $m10, 2
        sub     $m11, $m11, 4           // rows 1 .. n - 1, four issues each
        mov     $m2, $m4                // first column block
        setzi   $m1, 0                  // batch 0

unit:
        // u = b * col_blocks + cb: the unit's CWEI blocks and output rows.
        mul     $m0, $m1, $m3
        add     $m0, $m0, $m2
        mov     $m5, $a2                // K blocks
        sub     $m10, $m5, 1
        mul     $m6, $m0, $m5
        shl     $m6, $m6, 9
        mov     $m7, $a13
        add     $m7, $m7, $m6           // weights
        mul     $m6, $m0, $m14
        add     $m6, $m6, $m6           // a column block of C: rows * 64
        mov     $m8, $a12
        add     $m8, $m8, $m6           // outputs
        mul     $m6, $m1, $m5
        mul     $m6, $m6, $m14
        mov     $m9, $a3
        add     $m9, $m9, $m6           // inputs of the first K block
        // The first pass adds zero partials.
        mov     $a4, $azero
        mov     $a5, $azero
        mov     $a6, $azero
        mov     $a7, $azero

        // First K block.
        load_weights
        mov     $m4, $m9
        mov     $m6, $m8
        rpt_at  4
        rpt     4, 2
        { ld64step $a0:1, $m4+=, 8 ; f16v4sisoamp $a8:11, $a0:1, $a4:7 }
        rpt_at  4
        rpt     $m11, 4
        issue_zero_partials
        add     $m4, $m4, -32
        rpt_at  4
        rpt     4, 4
        issue_zero_partials
        add     $m9, $m9, $m14
        brnzdec $m10, pass
        br      next_unit

pass:
        // Later K blocks: partials from the previous pass's outputs.
        load_weights
        mov     $m4, $m9
        mov     $m5, $m8
        mov     $m6, $m8
        rpt_at  4
        rpt     4, 2
        { ld64step $a0:1, $m4+=, 8 ; f16v4sisoamp $a8:11, $a0:1, $a4:7 }
        rpt_at  4
        rpt     $m11, 6
        issue_with_partials
        add     $m4, $m4, -32
        rpt_at  4
        rpt     4, 6
        issue_with_partials
        add     $m9, $m9, $m14
        brnzdec $m10, pass

next_unit:
        add     $m2, $m2, $m13
        cmpult  $m0, $m2, $m3
        brnz    $m0, unit
        sub     $m2, $m2, $m3
        add     $m1, $m1, 1
        cmpult  $m0, $m1, $m12
        brnz    $m0, unit
done:
        exitz   $mzero
        .size   gemm_amp_f32out, . - gemm_amp_f32out
