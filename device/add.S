// Element-wise addition of two dense operands of `rows * row_length`
// elements (broadcasting is materialised before the kernel runs), each sum
// correctly rounded. See `include/rows.h` for the work split.

#include "include/rows.h"

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, worker 0 with the most whole units (three issues
// each: two loads and a store) or worker 5 with the tail, plus the launch.
#define ADD_F16_COST "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 16 + 6 * tail : 3 * (units % 6 != 0)))"
#define ADD_F32_COST "n = rows * row_length; units = n / 2; 154 + 6 * (3 * (units / 6) + (units > 0) + (n % 2 != 0 ? 14 : 3 * (units % 6 != 0)))"

        .text

// State: in0, in1, out, rows, row_length.

        .globl  add_f16
        .type   add_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_cost ADD_F16_COST
add_f16:
        flat_split 12, 16, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        // The body's bundle is its second word: the first load issues
        // alone, the second with the addition that uses both.
        rpt_at  0
        rpt     $m5, 4
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; f16v4add $a4:5, $a0:1, $a2:3 }
        st64step $a4:5, $m9+=, 48
        tail_owner add_f16_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m8, 0
        f16v4add $a4:5, $a0:1, $a2:3
        mov     $m10, $a4
        mov     $m11, $a5
        store_f16_lanes $m10, $m11, $m9, add_f16_tail
add_f16_done:
        exitz   $mzero
        .size   add_f16, . - add_f16

// f32 in units of two elements (one 64-bit word).

        .globl  add_f32
        .type   add_f32, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_cost ADD_F32_COST
add_f32:
        flat_split 12, 16, 1
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        rpt_at  0
        rpt     $m5, 4
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; f32v2add $a4:5, $a0:1, $a2:3 }
        st64step $a4:5, $m9+=, 48
        tail_owner add_f32_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        ld32    $a0, $m7, 0
        ld32    $a1, $m8, 0
        f32add  $a2, $a0, $a1
        st32    $a2, $m9, 0
add_f32_done:
        exitz   $mzero
        .size   add_f32, . - add_f32
