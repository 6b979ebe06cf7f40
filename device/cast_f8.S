// Casts between f16 and the FP8 formats (F143, F152) and between f16 and
// f32, element-wise over `rows * row_length` dense elements.
//
// FP8 results are the `f16v4tof8` conversion: the f16 value divided by
// 2^out_scale, rounded to nearest even and saturated; FP8 inputs are
// multiplied by 2^in_scale (`f8v4tof16`). f16 to f32 is exact; f32 to f16
// rounds to nearest even. See `include/rows.h` for the work split.

#include "include/rows.h"

// Cycles of the FP8 casts (fitted with the calibration test in
// `tests/row_kernels/calibration.rs`): six cycles per issue of the busiest
// worker, which is worker 0 with the most whole units (three issues each,
// a few more to fill and drain the pipelined loop) or worker 5 with one
// unit fewer and the tail (a word, then single bytes or lanes); the rest
// is the launch.
#define CAST_TO_F8_COST "n = rows * row_length; units = n / 8; tail = n % 8; 172 + 6 * (3 * (units / 6) + 4 * (units > 0) + (tail != 0 ? 15 + 3 * (tail & 3) + 4 * (tail >= 4) : 3 * (units % 6 != 0)))"
#define CAST_FROM_F8_COST "n = rows * row_length; units = n / 8; tail = n % 8; 178 + 6 * (3 * (units / 6) + 2 * (units > 0) + (tail != 0 ? 13 + 7 * (tail & 3) + 4 * (tail >= 4) : 3 * (units % 6 != 0)))"
// The f16/f32 casts in units of four values, three issues each.
#define CAST_TO_F32_COST "n = rows * row_length; units = n / 4; tail = n % 4; 136 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 11 + 3 * tail : 3 * (units % 6 != 0)))"
#define CAST_FROM_F32_COST "n = rows * row_length; units = n / 4; tail = n % 4; 142 + 6 * (3 * (units / 6) + (units > 0) + (tail != 0 ? 15 + 6 * tail : 3 * (units % 6 != 0)))"

        .text

// ---- f16 -> FP8 -------------------------------------------------------
// State: in0 (f16), out (FP8), rows, row_length, out_scale.

        .globl  cast_f16_f143
        .type   cast_f16_f143, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_cost CAST_TO_F8_COST
cast_f16_f143:
        setzi   $m10, 0
        br      cast_f16_f8
        .size   cast_f16_f143, . - cast_f16_f143

        .globl  cast_f16_f152
        .type   cast_f16_f152, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_cost CAST_TO_F8_COST
cast_f16_f152:
        setzi   $m10, 1
        .size   cast_f16_f152, . - cast_f16_f152

// $m10 holds the format bit; the scale goes to bits 15..8 of $fp8cfg.
// Units are 8 values (16 bytes in, 8 out): per unit two loads, two
// conversions and one 64-bit store, software-pipelined so that every
// conversion and the store ride in bundles with the loads: three issues per
// unit.
cast_f16_f8:
        fp8_config 16
        flat_split 8, 12, 3
        worker_ptr $m7, 0, 16
        worker_ptr $m9, 4, 8
        brz     $m5, cast_f16_f8_tail_check
        sub     $m5, $m5, 1
        // The first unit's loads; its second half converts in the loop.
        ld64step $a0:1, $m7+=, 8
        .align  8
        { ld64step $a2:3, $m7+=, 88 ; f16v4tof8 $a4, $a0:1 }
        rpt_at  4
        rpt     $m5, 5
        { ld64step $a0:1, $m7+=, 8 ; f16v4tof8 $a5, $a2:3 }
        { st64step $a4:5, $m9+=, 48 ; f16v4tof8 $a4, $a0:1 }
        ld64step $a2:3, $m7+=, 88
        f16v4tof8 $a5, $a2:3
        st64step $a4:5, $m9+=, 48
cast_f16_f8_tail_check:
        tail_owner cast_f16_f8_done
        tail_ptr $m7, 0, 16
        tail_ptr $m9, 4, 8
        // The aligned 16 bytes holding the tail lie inside tile memory; the
        // lanes past the end are converted but never stored.
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m7, 8
        f16v4tof8 $a4, $a0:1
        f16v4tof8 $a5, $a2:3
        mov     $m10, $a4
        // A whole word of the tail first (at most one), then single bytes.
        cmpult  $m6, $m3, 4
        brnz    $m6, cast_f16_f8_bytes
        st32step $m10, $m9+=, 4
        mov     $m10, $a5
        sub     $m3, $m3, 4
        brz     $m3, cast_f16_f8_done
cast_f16_f8_bytes:
        store_bytes $m10, $m9, cast_f16_f8_tail
cast_f16_f8_done:
        exitz   $mzero

// ---- FP8 -> f16 -------------------------------------------------------
// State: in0 (FP8), out (f16), rows, row_length, in_scale.

        .globl  cast_f143_f16
        .type   cast_f143_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param in_scale, 16, i32
        .ipub_cost CAST_FROM_F8_COST
cast_f143_f16:
        setzi   $m10, 0
        br      cast_f8_f16
        .size   cast_f143_f16, . - cast_f143_f16

        .globl  cast_f152_f16
        .type   cast_f152_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param in_scale, 16, i32
        .ipub_cost CAST_FROM_F8_COST
cast_f152_f16:
        setzi   $m10, 1
        .size   cast_f152_f16, . - cast_f152_f16

// Units are 8 values (8 bytes in, 16 out): one load, two conversions and
// two stores, pipelined like the cast to FP8: three issues per unit.
cast_f8_f16:
        fp8_config 16
        flat_split 8, 12, 3
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, 16
        brz     $m5, cast_f8_f16_tail_check
        .align  8
        { ld64step $a0:1, $m7+=, 48 ; f8v4tof16 $a2:3, $a0 }
        sub     $m5, $m5, 1
        rpt_at  4
        rpt     $m5, 5
        { st64step $a2:3, $m9+=, 8 ; f8v4tof16 $a4:5, $a1 }
        { ld64step $a0:1, $m7+=, 48 ; f8v4tof16 $a2:3, $a0 }
        st64step $a4:5, $m9+=, 88
        .align  8
        { st64step $a2:3, $m9+=, 8 ; f8v4tof16 $a4:5, $a1 }
        st64step $a4:5, $m9+=, 88
cast_f8_f16_tail_check:
        tail_owner cast_f8_f16_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 16
        ld64    $a0:1, $m7, 0
        f8v4tof16 $a2:3, $a0
        f8v4tof16 $a4:5, $a1
        // A whole quad of the tail first (at most one), then single lanes.
        cmpult  $m6, $m3, 4
        brnz    $m6, cast_f8_f16_lanes
        st64step $a2:3, $m9+=, 8
        mov     $a2, $a4
        mov     $a3, $a5
        sub     $m3, $m3, 4
        brz     $m3, cast_f8_f16_done
cast_f8_f16_lanes:
        mov     $m10, $a2
        mov     $m11, $a3
        store_f16_lanes $m10, $m11, $m9, cast_f8_f16_tail
cast_f8_f16_done:
        exitz   $mzero

// ---- f16 -> f32 -------------------------------------------------------
// State: in0 (f16), out (f32), rows, row_length.

        .globl  cast_f16_f32
        .type   cast_f16_f32, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_cost CAST_TO_F32_COST
cast_f16_f32:
        flat_split 8, 12, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, 16
        rpt_at  4
        rpt     $m5, 5
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        { st64step $a2:3, $m9+=, 8 ; f16v2tof32 $a4:5, $a1 }
        st64step $a4:5, $m9+=, 88
        tail_owner cast_f16_f32_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 16
        ld64    $a0:1, $m7, 0
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        sub     $m3, $m3, 1
cast_f16_f32_tail:
        st32step $a2, $m9+=, 4
        mov     $a2, $a3
        mov     $a3, $a4
        brnzdec $m3, cast_f16_f32_tail
cast_f16_f32_done:
        exitz   $mzero
        .size   cast_f16_f32, . - cast_f16_f32

// ---- f32 -> f16 -------------------------------------------------------
// State: in0 (f32), out (f16), rows, row_length.

        .globl  cast_f32_f16
        .type   cast_f32_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_cost CAST_FROM_F32_COST
cast_f32_f16:
        flat_split 8, 12, 2
        worker_ptr $m7, 0, 16
        worker_ptr $m9, 4, 8
        rpt_at  4
        rpt     $m5, 5
        { ld64step $a0:1, $m7+=, 8 ; f32v2tof16 $a4, $a0:1 }
        { ld64step $a2:3, $m7+=, 88 ; f32v2tof16 $a5, $a2:3 }
        st64step $a4:5, $m9+=, 48
        tail_owner cast_f32_f16_done
        tail_ptr $m7, 0, 16
        tail_ptr $m9, 4, 8
        // The 16-byte unit holding the tail lies inside tile memory.
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m7, 8
        f32v2tof16 $a4, $a0:1
        f32v2tof16 $a5, $a2:3
        mov     $m10, $a4
        mov     $m11, $a5
        store_f16_lanes $m10, $m11, $m9, cast_f32_f16_tail
cast_f32_f16_done:
        exitz   $mzero
        .size   cast_f32_f16, . - cast_f32_f16
