// Reduce-add of partials: out[i] = f16(sum over k of in0[k][i]), summed in
// f32 in partial order. `in0` holds `count` partial vectors of `length`
// f16 values each, back to back; `length` is a multiple of 4 (partials come
// from 16-channel GEMM blocks). Worker w takes 4-element blocks w, w+6, ...
        .text
        .globl  reduce_add_f16
        .type   reduce_add_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param count, 8, u32
        .ipub_param length, 12, u32
        .ipub_cost "length / 4 * (count * 4 + 12) + 150"
reduce_add_f16:
        ld32    $m1, $m0, 0
        ld32    $m2, $m0, 4
        ld32    $m3, $m0, 8
        ld32    $m4, $m0, 12
        get     $m5, $wid
        shr     $m6, $m4, 2
        shl     $m7, $m4, 1
        brz     $m3, done
        sub     $m11, $m3, 1
        // Per block of four values: the first partial is loaded and
        // converted while the sums are cleared; each repeat then adds the
        // partial converted before while it loads and converts the next,
        // main and aux halves of a bundle working in parallel.
blocks:
        cmpult  $m8, $m5, $m6
        brz     $m8, done
        shl     $m9, $m5, 3
        // Bundles and the repeated body start 8-byte aligned here.
        { add   $m10, $m1, $m9 ; setzi $a6, 0 }
        { ld64  $a0:1, $m10, 0 ; setzi $a7, 0 }
        { add   $m10, $m10, $m7 ; setzi $a8, 0 }
        { add   $m12, $m2, $m9 ; setzi $a9, 0 }
        { add   $m5, $m5, 6 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        rpt     $m11, 8
        { ld64  $a0:1, $m10, 0 ; f32v2add $a6:7, $a6:7, $a2:3 }
        { add   $m10, $m10, $m7 ; f32v2add $a8:9, $a8:9, $a4:5 }
        { nop ; f16v2tof32 $a2:3, $a0 }
        { nop ; f16v2tof32 $a4:5, $a1 }
        { nop ; f32v2add $a6:7, $a6:7, $a2:3 }
        { nop ; f32v2add $a8:9, $a8:9, $a4:5 }
        { nop ; f32v2tof16 $a0, $a6:7 }
        { nop ; f32v2tof16 $a1, $a8:9 }
        st64    $a0:1, $m12, 0
        br      blocks
done:
        exitz   $mzero
        .size   reduce_add_f16, . - reduce_add_f16
