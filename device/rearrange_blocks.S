// Block-major rearrangement of the part of a GEMM operand a tile already
// holds. It copies `outer * inner` chunks of `words` 64-bit words: chunk
// (o, j) goes from `in0 + src_offset + o * src_outer + j * src_inner` to
// `out + dst_offset + o * dst_outer + j * dst_inner`. For rows of a
// row-major home laid out K-block-major, `o` is the K block (32 bytes of
// every row) and `j` the row.
//
// Worker `w` takes o = w, w + 6, ...: the lowering makes `outer` the
// larger of the two counts, so the six workers share the work.

        .text

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
        .ipub_cost "(outer + 5) / 6 * 6 * (inner * (words * 2 + 5) + 10) + 190"
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
