// Layout rearrangement of an f16 operand into BLOCK_ROWS x BLOCK_COLS
// blocks. The lowering currently treats the rearrangement as a row-major
// copy (the blocks are formed by the exchange), so the kernel copies
// `rows * row_length` elements; the defines name the variant. See
// `include/rows.h` for the work split.

#include "include/rows.h"

#if !defined(BLOCK_ROWS) || !defined(BLOCK_COLS)
#error "rearrange_block_major_f16 needs BLOCK_ROWS and BLOCK_COLS"
#endif

        .text

// State: in0, out, rows, row_length.

        .globl  rearrange_block_major_f16
        .type   rearrange_block_major_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        // Two issues (a load and a store) per unit of four values on the
        // busiest worker, or the tail on worker 5, plus the launch
        // (fitted with `tests/row_kernels/calibration.rs`).
        .ipub_cost "n = rows * row_length; units = n / 4; tail = n % 4; 136 + 6 * (2 * (units / 6) + (units > 0) + (tail != 0 ? 12 + 6 * tail : 2 * (units % 6 != 0)))"
rearrange_block_major_f16:
        flat_split 8, 12, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, 8
        rpt     $m5, 2
        ld64step $a0:1, $m7+=, 48
        st64step $a0:1, $m9+=, 48
        tail_owner rearrange_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 8
        ld64    $a0:1, $m7, 0
        mov     $m10, $a0
        mov     $m11, $a1
        store_f16_lanes $m10, $m11, $m9, rearrange_tail
rearrange_done:
        exitz   $mzero
        .size   rearrange_block_major_f16, . - rearrange_block_major_f16
