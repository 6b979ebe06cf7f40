// Element-wise multiplication, subtraction and division of two dense
// operands of `rows * row_length` elements (broadcasting is materialised
// before the kernel runs, as for `add.S`), f16 or f32, each result
// correctly rounded. One entry per operation and type (`mul_f16`,
// `div_f32`, ...), all generated from the two macros below. See
// `include/rows.h` for the work split.
//
// f16 multiplication and subtraction use the four-lane f16 instructions,
// which round the exact result once. Division has no f16 instruction: each
// lane is widened to f32 (exactly), divided with `f32div` (correctly
// rounded) and narrowed to f16. The quotient of two f16 values rounded to
// f32 and then to f16 is the correctly rounded f16 quotient (f32 carries
// more than twice f16's precision plus two bits), so every lane equals
// what the host computes.

#include "include/rows.h"

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, worker 0 with the most whole units or worker 5
// with the tail, plus the launch. Multiplication and subtraction cost what
// the addition of `add.S` does (three issues per unit: two loads and a
// store, the operation riding with the second load); an f16 division
// costs 16 issues per unit of four (each `f32div` takes two), an f32
// division 6 per unit of two.
#define BINARY_F16_COST "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 16 + 6 * tail : 3 * (units % 6 != 0)))"
#define BINARY_F32_COST "n = rows * row_length; units = n / 2; 154 + 6 * (3 * (units / 6) + (units > 0) + (n % 2 != 0 ? 14 : 3 * (units % 6 != 0)))"
#define DIV_F16_COST "n = rows * row_length; units = n / 4; tail = n % 4; 154 + 6 * (16 * (units / 6) + (units > 0) + (tail != 0 ? 26 + 6 * tail : 16 * (units % 6 != 0)))"
#define DIV_F32_COST "n = rows * row_length; units = n / 2; 154 + 6 * (6 * (units / 6) + (units > 0) + (n % 2 != 0 ? 15 : 6 * (units % 6 != 0)))"

// The state every entry reads: in0, in1, out, rows, row_length.
.macro binary_params cost
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_cost \cost
.endm

// `name`: f16 `in0 op in1` with the four-lane instruction `inst`.
.macro binary_f16 name, inst
        .globl  \name
        .type   \name, @function
        binary_params BINARY_F16_COST
\name:
        flat_split 12, 16, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        // The body's bundle is its second word: the first load issues
        // alone, the second with the operation that uses both.
        rpt_at  0
        rpt     $m5, 4
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; \inst $a4:5, $a0:1, $a2:3 }
        st64step $a4:5, $m9+=, 48
        tail_owner \name\()_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        // The aligned 8 bytes holding the tail lie inside tile memory; the
        // lanes past the end are computed but never stored.
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m8, 0
        \inst   $a4:5, $a0:1, $a2:3
        mov     $m10, $a4
        mov     $m11, $a5
        store_f16_lanes $m10, $m11, $m9, \name\()_tail
\name\()_done:
        exitz   $mzero
        .size   \name, . - \name
.endm

// `name`: f32 `in0 op in1` in units of two elements with the two-lane
// instruction `inst2` (and `inst1` for a single element).
.macro binary_f32 name, inst2, inst1
        .globl  \name
        .type   \name, @function
        binary_params BINARY_F32_COST
\name:
        flat_split 12, 16, 1
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        rpt_at  0
        rpt     $m5, 4
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; \inst2 $a4:5, $a0:1, $a2:3 }
        st64step $a4:5, $m9+=, 48
        tail_owner \name\()_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        ld32    $a0, $m7, 0
        ld32    $a1, $m8, 0
        \inst1  $a2, $a0, $a1
        st32    $a2, $m9, 0
\name\()_done:
        exitz   $mzero
        .size   \name, . - \name
.endm

// The f16 quotients of the quad $a0:1 by the quad $a2:3 into $a0:1, lane
// by lane in f32; clobbers $a4..$a9.
.macro div_quad_rest
        f16v2tof32 $a6:7, $a2
        f32div  $a4, $a4, $a6
        f32div  $a5, $a5, $a7
        f16v2tof32 $a6:7, $a1
        f16v2tof32 $a8:9, $a3
        f32div  $a6, $a6, $a8
        f32div  $a7, $a7, $a9
        f32v2tof16 $a0, $a4:5
        f32v2tof16 $a1, $a6:7
.endm

        .text

        binary_f16 mul_f16, f16v4mul
        binary_f16 sub_f16, f16v4sub
        binary_f32 mul_f32, f32v2mul, f32mul
        binary_f32 sub_f32, f32v2sub, f32sub

        .globl  div_f16
        .type   div_f16, @function
        binary_params DIV_F16_COST
div_f16:
        flat_split 12, 16, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        // The first widening rides with the divisor's load.
        rpt_at  0
        rpt     $m5, 13
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; f16v2tof32 $a4:5, $a0 }
        div_quad_rest
        st64step $a0:1, $m9+=, 48
        tail_owner div_f16_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        // As in `binary_f16`, lanes past the end are computed (a quotient
        // of whatever follows, possibly NaN) and never stored.
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m8, 0
        f16v2tof32 $a4:5, $a0
        div_quad_rest
        mov     $m10, $a0
        mov     $m11, $a1
        store_f16_lanes $m10, $m11, $m9, div_f16_tail
div_f16_done:
        exitz   $mzero
        .size   div_f16, . - div_f16

        .globl  div_f32
        .type   div_f32, @function
        binary_params DIV_F32_COST
div_f32:
        flat_split 12, 16, 1
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, 8
        rpt_at  0
        rpt     $m5, 5
        ld64step $a0:1, $m7+=, 48
        { ld64step $a2:3, $m8+=, 48 ; f32div $a4, $a0, $a2 }
        f32div  $a5, $a1, $a3
        st64step $a4:5, $m9+=, 48
        tail_owner div_f32_done
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, 8
        ld32    $a0, $m7, 0
        ld32    $a1, $m8, 0
        f32div  $a2, $a0, $a1
        st32    $a2, $m9, 0
div_f32_done:
        exitz   $mzero
        .size   div_f32, . - div_f32
