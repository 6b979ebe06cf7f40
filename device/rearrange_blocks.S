// Block-major rearrangement of the part of a GEMM operand a tile already
// holds. It copies `outer * inner` chunks of `words` 64-bit words: chunk
// (o, j) goes from `in0 + src_offset + o * src_outer + j * src_inner` to
// `out + dst_offset + o * dst_outer + j * dst_inner`. For rows of a
// row-major home laid out K-block-major, `o` is the K block (32 bytes of
// every row) and `j` the row.
//
// Worker `w` takes o = w, w + 6, ...: the lowering makes `outer` the
// larger of the two counts, so the six workers share the work.
//
// Chunks of four words (a 32-byte K-block row) or two (a 16-byte row of a
// GEMM result's channel block) take a path without loop overhead per
// chunk: a `rpt` body of a load and a store per word, whose last pair
// steps by a register to the next chunk (`ld64step` / `st64step` with a
// register increment), 2 issues per word. With one chunk per o the body
// walks the worker's o's directly (6 apart); otherwise it walks one o's
// chunks, and the o's take a short loop. Other chunk sizes take the
// general loop: `rpt` over the words of each chunk.

#include "include/rows.h"

        .text

// One chunk of `words` (2 or 4) words from $m8 to $m10; the last load and
// store step by $m11 and $m12 (the distance to the next chunk, less the
// words before the last).
.macro copy_chunk words
        .rept \words - 1
        ld64step $a0:1, $m8+=, 8
        st64step $a0:1, $m10+=, 8
        .endr
        ld64step $a0:1, $m8+=, $m11
        st64step $a0:1, $m10+=, $m12
.endm

// The path for chunks of `words` (2 or 4) words: with one chunk per o,
// one `rpt` over the worker's o's, 6 apart ((outer - wid + 5) / 6 of them,
// none when wid >= outer); otherwise one `rpt` over each o's chunks.
// Expects the set-up below ($m1 outer, $m3 wid, $m7 and $m9 the first
// chunk, $m13 and $m14 the step to o + 6, $m11 and $m12 the inner strides).
.macro chunks_of words, rows_label, next_label
        ld32    $m2, $m0, 12
        cmpeq   $m6, $m2, 1
        brz     $m6, \rows_label
        sub     $m11, $m13, 8 * (\words - 1)
        sub     $m12, $m14, 8 * (\words - 1)
        sub     $m5, $m1, $m3
        add     $m5, $m5, 5
        setzi   $m6, DIV6_MUL
        mul     $m5, $m5, $m6
        shr     $m5, $m5, DIV6_SHIFT
        mov     $m8, $m7
        mov     $m10, $m9
        rpt     $m5, 2 * \words
        copy_chunk \words
        exitz   $mzero
\rows_label:
        sub     $m11, $m11, 8 * (\words - 1)
        sub     $m12, $m12, 8 * (\words - 1)
\next_label:
        cmpult  $m6, $m3, $m1
        brz     $m6, rearrange_blocks_done
        mov     $m8, $m7
        mov     $m10, $m9
        rpt     $m2, 2 * \words
        copy_chunk \words
        add     $m7, $m7, $m13
        add     $m9, $m9, $m14
        add     $m3, $m3, 6
        br      \next_label
.endm

// State: in0, out, then the geometry.

        .globl  rearrange_blocks
        .type   rearrange_blocks, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param outer, 8, u32
        .ipub_param inner, 12, u32
        .ipub_param words, 16, u32
        .ipub_param src_offset, 20, u32
        .ipub_param src_outer, 24, u32
        .ipub_param src_inner, 28, u32
        .ipub_param dst_offset, 32, u32
        .ipub_param dst_outer, 36, u32
        .ipub_param dst_inner, 40, u32
        // Six cycles per issue of worker 0, which has the most o's
        // (fitted with `tests/row_kernels/calibration.rs`).
        .ipub_cost "words == 2 || words == 4 ? (inner == 1 ? 12 * words * ((outer + 5) / 6) + 228 : (outer + 5) / 6 * 6 * (inner * 2 * words + 9) + 198) : (outer + 5) / 6 * 6 * (inner * (words * 2 + 5) + 10) + 190"
rearrange_blocks:
        ld32    $m1, $m0, 8
        get     $m3, $wid
        // $m7, $m9: chunk (o, 0) in the source and the destination, for
        // o = $wid; $m13, $m14: the step to o + 6.
        ld32    $m7, $m0, 0
        ld32    $m6, $m0, 20
        add     $m7, $m7, $m6
        ld32    $m13, $m0, 24
        mul     $m6, $m13, $m3
        add     $m7, $m7, $m6
        mul     $m13, $m13, 6
        ld32    $m9, $m0, 4
        ld32    $m6, $m0, 32
        add     $m9, $m9, $m6
        ld32    $m14, $m0, 36
        mul     $m6, $m14, $m3
        add     $m9, $m9, $m6
        mul     $m14, $m14, 6
        ld32    $m4, $m0, 16
        ld32    $m11, $m0, 28
        ld32    $m12, $m0, 40
        cmpeq   $m6, $m4, 4
        brnz    $m6, rearrange_blocks_four
        cmpeq   $m6, $m4, 2
        brz     $m6, rearrange_blocks_outer
        chunks_of 2, rearrange_blocks_rows2, rearrange_blocks_next2
rearrange_blocks_four:
        chunks_of 4, rearrange_blocks_rows4, rearrange_blocks_next4
rearrange_blocks_outer:
        cmpult  $m6, $m3, $m1
        brz     $m6, rearrange_blocks_done
        ld32    $m2, $m0, 12
        brz     $m2, rearrange_blocks_next
        sub     $m2, $m2, 1
        mov     $m5, $m7
        mov     $m6, $m9
rearrange_blocks_inner:
        mov     $m8, $m5
        mov     $m10, $m6
        rpt     $m4, 2
        ld64step $a0:1, $m8+=, 8
        st64step $a0:1, $m10+=, 8
        add     $m5, $m5, $m11
        add     $m6, $m6, $m12
        brnzdec $m2, rearrange_blocks_inner
rearrange_blocks_next:
        add     $m7, $m7, $m13
        add     $m9, $m9, $m14
        add     $m3, $m3, 6
        br      rearrange_blocks_outer
rearrange_blocks_done:
        exitz   $mzero
        .size   rearrange_blocks, . - rearrange_blocks
