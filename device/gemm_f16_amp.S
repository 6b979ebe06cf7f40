// GEMM on the AMP: C[r][n] = sum_k A[r][k] * B[k][n], f16 or FP8 inputs,
// f16 partials carried between K blocks, f16 output.
//
// Defines: FP8 (0/1), INTERLEAVED (0/1), K, C, R (the shard's largest
// inner size, columns and rows; loop counts come from the state struct
// because edge shards are smaller).
//
// Layouts (kb = 16 f16 or 32 FP8 inputs, so one row of a K block is
// always 32 bytes; K' and C' are K and cols rounded up to kb and 16):
//   in0 (A):  per batch [K'/kb][rows][kb]
//   in1 (B):  per batch [C'/16][K'/kb][16 channels][kb] (one CWEI block each)
//   out (C):  per batch [C'/16][rows][16] f16
//
// Work split: a unit is one column block of one batch (all K blocks). With
// six or more column blocks worker w takes units w, w + 6, ... in
// (batch, column block) order; with fewer, the rows are cut into
// max(1, 6 / col_blocks) groups and worker w takes column block
// w % col_blocks and row group w / col_blocks of every batch.
//
// A unit runs one pass per K block: load the 512-byte CWEI block (32
// 128-bit loads from interleaved memory, 64 64-bit ones otherwise), then
// stream the unit's rows through the AMP. The partials of the first pass
// are zero (an all-zero register pair); later passes read the previous
// pass's outputs and overwrite them in place, which is safe because every
// partial is read before its slot is stored again. An output row leaves
// the AMP during the next row's four issues, so a row's outputs lag it; the
// unit's first four issues drain an empty bank and those outputs are
// dropped rather than stored, and its last pass runs one extra (flush) row
// whose inputs re-read the last row rather than reading past the buffer.
// Nothing outside the unit's output rows is ever written and nothing
// outside the operands is read.
//
// Registers of the pass loops:
//   $m4:6   inputs, partials in, outputs (the ld2xst64pace triple)
//   $m7     weights (advances through the unit's K blocks)
//   $m8     the unit's output rows     $m9  this pass's input rows
//   $m10    K blocks left              $m11 repeat count of the row loop
//   $m14    rows * 32 (one K block of A; one column block of C)
//   $a0:1 inputs, $a2:3 partials in, $a4:5 partials out, $a6:7 zero
// Registers of the unit loop:
//   $m1 batch index, $m2 column block, $m3 column blocks, $m12 batch count,
//   $m13 column-block step; $a8 K blocks, $a9 A + first row,
//   $a10 C + first row, $a11 B, $a12 1 for the paced row loop

#if FP8
#define AMP f8v8amp
#define KB_SHIFT 5
#else
#define AMP f16v4amp
#define KB_SHIFT 4
#endif

#include "include/cwei.h"

// A filler for the aux half of a bundle: keeps a bundle 8-byte aligned
// without spending an issue on a nop ($a7 is always zero).
#define AUXNOP mov $a7, $azero

        .text
        .globl  gemm_amp
        .type   gemm_amp, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param batch, 12, u32
        .ipub_param rows, 16, u32
        .ipub_param inner, 20, u32
        .ipub_param cols, 24, u32
#if FP8
        .ipub_param lhs_scale, 28, i32
        .ipub_param rhs_scale, 32, i32
        .ipub_param lhs_f152, 36, u32
        .ipub_param rhs_f152, 40, u32
#endif
        // Six cycles per issue. Per worker: its units times, per K block,
        // 40 issues of weights and pointers plus four AMP issues per row
        // (72 and twelve without interleaved memory, whose weights load 64
        // bits at a time), plus 44 per unit for the flush row and the
        // unit's set-up (16 for the plain passes), plus the set-up. With
        // six or more column blocks a worker has every sixth of the
        // batch's units and streams all rows; with fewer it has one unit
        // per batch and streams `n` rows, one of max(1, 6 / column
        // blocks) row groups. A unit of single rows from interleaved
        // memory takes 7 issues more per pass but the last (its outputs
        // drain before the next pass reads them), and when a worker has
        // several such units, 12 fewer for each one's flush and set-up
        // (fitted with `tests/gemm_kernel.rs`, within 10 %).
        .ipub_cost "cb = (C + 15) / 16; n = cb >= 6 ? R : (R + 6 / cb - 1) / (6 / cb); units = cb >= 6 ? (batch * cb + 5) / 6 : batch; kb = (K + (FP8 ? 31 : 15)) / (FP8 ? 32 : 16); 6 * units * (kb * ((INTERLEAVED ? 40 : 72) + (INTERLEAVED ? 4 : 12) * n) + (INTERLEAVED ? 44 : 16) + (INTERLEAVED && n == 1 ? 7 * kb - 7 - 12 * (units > 1) : 0)) + 360"

        .align  8
gemm_amp:
        ld32    $m1, $m0, 16            // rows
        ld32    $m2, $m0, 20            // inner
        ld32    $m3, $m0, 24            // cols
        ld32    $m12, $m0, 12           // batch
        add     $m2, $m2, (1 << KB_SHIFT) - 1
        shr     $m2, $m2, KB_SHIFT      // K blocks
        add     $m3, $m3, 15
        shr     $m3, $m3, 4             // column blocks
        // Nothing to do for an empty shard.
        brz     $m1, done
        brz     $m2, done
        brz     $m3, done
        brz     $m12, done
#if FP8
        // $fp8cfg: input (A) format and scale, weight (B) format and scale.
        ld32    $m4, $m0, 36
        and     $m4, $m4, 1
        ld32    $m5, $m0, 40
        and     $m5, $m5, 1
        shl     $m5, $m5, 1
        or      $m4, $m4, $m5
        ld32    $m5, $m0, 28
        and     $m5, $m5, 0xff
        shl     $m5, $m5, 8
        or      $m4, $m4, $m5
        ld32    $m5, $m0, 32
        and     $m5, $m5, 0xff
        shl     $m5, $m5, 16
        or      $m4, $m4, $m5
        put     $fp8cfg, $m4
#endif
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
        mov     $a8, $m2
        shl     $m14, $m1, 5            // rows * 32
        shl     $m9, $m9, 5             // first row * 32
        ld32    $m6, $m0, 0
        add     $m6, $m6, $m9
        mov     $a9, $m6                // A + first row
        ld32    $m6, $m0, 8
        add     $m6, $m6, $m9
        mov     $a10, $m6               // C + first row
        ld32    $m6, $m0, 4
        mov     $a11, $m6               // B
#if INTERLEAVED
        // The paced loop needs two rows; a single row takes the plain one.
        // Its repeat count: rows 1 .. n - 1 less the peeled first issue.
        cmpslt  $m6, $m10, 2
        brnz    $m6, plain_count
        shl     $m11, $m10, 2
        sub     $m11, $m11, 5
        setzi   $m6, 1
        mov     $a12, $m6
        br      counted
plain_count:
        mov     $a12, $azero
#endif
        shl     $m11, $m10, 2
        sub     $m11, $m11, 4           // rows 1 .. n - 1, four issues each
counted:
        setzi   $m6, 0
        mov     $a6, $m6
        mov     $a7, $m6
        mov     $m2, $m4                // first column block
        setzi   $m1, 0                  // batch 0

unit:
        // u = b * col_blocks + cb: the unit's CWEI blocks and output rows.
        mul     $m0, $m1, $m3
        add     $m0, $m0, $m2
        mov     $m5, $a8                // K blocks
        sub     $m10, $m5, 1
        mul     $m6, $m0, $m5
        shl     $m6, $m6, 9
        mov     $m7, $a11
        add     $m7, $m7, $m6           // weights
        mul     $m6, $m0, $m14
        mov     $m8, $a10
        add     $m8, $m8, $m6           // outputs
        mul     $m6, $m1, $m5
        mul     $m6, $m6, $m14
        mov     $m9, $a9
        add     $m9, $m9, $m6           // inputs of the first K block
#if INTERLEAVED
        mov     $m0, $a12
        brz     $m0, plain_unit
        br      paced_unit
#else
        br      plain_unit
#endif

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

// ---------------------------------------------------------------------
// Plain passes: three memory instructions per AMP issue, any memory. Each
// output is stored right after the issue that produced it.
        .align  8
plain_unit:
        // First K block: zero partials, nothing loaded for them.
        load_weights
        { mov $m4, $m9 ; AUXNOP }
        .rept 4
        { ld64step $a0:1, $m4+=, 8 ; AMP $a4:5, $a0:1, $a6:7 }
        .endr
        mov     $m6, $m8
        rpt     $m11, 3
        { ld64step $a0:1, $m4+=, 8 ; AMP $a4:5, $a0:1, $a6:7 }
        st64step $a4:5, $m6+=, 8
        .rept 4
        AMP     $a4:5, $a0:1, $a6:7
        st64step $a4:5, $m6+=, 8
        .endr
        add     $m9, $m9, $m14
        brnzdec $m10, plain_pass
        br      next_unit

        .align  8
plain_pass:
        // Later K blocks: partials from the previous pass's outputs.
        load_weights
        mov     $m4, $m9
        mov     $m5, $m8
        .rept 4
        { ld64step $a0:1, $m4+=, 8 ; AMP $a4:5, $a0:1, $a2:3 }
        .endr
        { mov $m6, $m8 ; AUXNOP }
        rpt     $m11, 4
        ld64step $a2:3, $m5+=, 8
        { ld64step $a0:1, $m4+=, 8 ; AMP $a4:5, $a0:1, $a2:3 }
        st64step $a4:5, $m6+=, 8
        add     $m9, $m9, $m14
        .rept 4
        { ld64step $a2:3, $m5+=, 8 ; AMP $a4:5, $a0:1, $a2:3 }
        { st64step $a4:5, $m6+=, 8 ; AUXNOP }
        .endr
        brnzdec $m10, plain_pass
        br      next_unit

#if INTERLEAVED
// ---------------------------------------------------------------------
// Paced passes: one { ld2xst64pace ; AMP } bundle per issue, the loaded
// partials and the stored outputs lagging the inputs as the AMP does. The
// passes of a unit form one stream: a pass's first four issues drain the
// previous pass's last row (its partials and output slots continue where
// that pass left them), then the partials pointer moves to this pass's
// first row for the fifth issue and the output pointer for the sixth. Only
// the unit's first pass, with nothing before it, has four issues that load
// inputs only (draining the empty bank, whose output is dropped), and only
// its last pass runs a flush row, which re-reads its last input row rather
// than reading past the buffer.
#define PACE(partials) { ld2xst64pace $a0:1, $a2:3, $a4:5, $m4:6+= ; AMP $a4:5, $a0:1, partials }

        .align  8
paced_unit:
        // First K block: zero partials; the paced loads of "partials" read
        // this pass's inputs, which are valid interleaved memory.
        load_weights
        mov     $m4, $m9
        mov     $m5, $m9
        .rept 5
        { ld64step $a0:1, $m4+=, 8 ; AMP $a4:5, $a0:1, $a6:7 }
        .endr
        mov     $m6, $m8
        rpt     $m11, 2
        PACE($a6:7)
        add     $m9, $m9, $m14
        brnzdec $m10, paced_second
        { add $m4, $m4, -32 ; AUXNOP }
        .rept 4
        PACE($a6:7)
        .endr
        st64step $a4:5, $m6+=, 8
        br      next_unit

        .align  8
paced_second:
        // Second K block: the first four issues drain the first block's
        // last row, whose partials are zero.
        load_weights
        { mov $m4, $m9 ; AUXNOP }
        .rept 4
        PACE($a6:7)
        .endr
        { mov $m5, $m8 ; AUXNOP }
        PACE($a2:3)
        mov     $m6, $m8
        rpt     $m11, 2
        PACE($a2:3)
        add     $m9, $m9, $m14
        brnzdec $m10, paced_pass
        br      paced_flush

        .align  8
paced_pass:
        load_weights
        { mov $m4, $m9 ; AUXNOP }
        .rept 4
        PACE($a2:3)
        .endr
        { mov $m5, $m8 ; AUXNOP }
        PACE($a2:3)
        mov     $m6, $m8
        rpt     $m11, 2
        PACE($a2:3)
        add     $m9, $m9, $m14
        brnzdec $m10, paced_pass
paced_flush:
        { add $m4, $m4, -32 ; AUXNOP }
        .rept 4
        PACE($a2:3)
        .endr
        st64step $a4:5, $m6+=, 8
        br      next_unit
#endif
        .size   gemm_amp, . - gemm_amp
