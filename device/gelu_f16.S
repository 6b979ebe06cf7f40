// GELU, `x * 0.5 * (1 + erf(x / sqrt(2)))`, element-wise over `rows *
// row_length` f16 values: each value is widened to f32, the formula is
// evaluated in f32 (`f32erf` for the error function, `x * (1 / sqrt(2))`
// for the division) and the result rounded to f16. See `include/rows.h`
// for the work split.
//
// A quad of values costs 20 issues, all in the aux pipeline: two
// conversions in, per pair of lanes a multiplication, two error functions
// (two issues each) and three more arithmetic instructions, and two
// conversions out. The load and the store ride in bundles with the first
// two conversions; the store writes the previous quad's result, so the
// loop is software-pipelined with the first quad peeled off.

#include "include/rows.h"

// Constant pairs: $a8:9 = 1/sqrt(2), $a10:11 = 1.0, $a12:13 = 0.5.
#define RSQRT2_BITS 0x3F3504F3
#define ONE_BITS 0x3F800000
#define HALF_BITS 0x3F000000

// GELU of the f32 pair `x` in place; `t` (lanes `tlo`, `thi`) is scratch.
.macro gelu_pair x, t, tlo, thi
        f32v2mul \t, \x, $a8:9
        f32erf  \tlo, \tlo
        f32erf  \thi, \thi
        f32v2add \t, \t, $a10:11
        f32v2mul \x, \x, $a12:13
        f32v2mul \x, \x, \t
.endm

// The constants into $a8..$a13, this worker's units of four values into
// $m5 and its input and output cursors into $m7 and $m9, the output taking
// `out_unit` bytes per unit (8 for f16, 4 for FP8).
.macro gelu_setup out_unit
        set_pair $a8, $a9, RSQRT2_BITS
        set_pair $a10, $a11, ONE_BITS
        set_pair $a12, $a13, HALF_BITS
        flat_split 8, 12, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, \out_unit
.endm

// From the widened quad in $a2:3 and $a4:5, the f16 results in $a6:7.
.macro gelu_rest
        gelu_pair $a2:3, $a6:7, $a6, $a7
        gelu_pair $a4:5, $a6:7, $a6, $a7
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
.endm

.macro set_pair lo, hi, bits
        setzi   \lo, (\bits) & 0xffff
        sethi   \lo, (\bits) >> 16
        mov     \hi, \lo
.endm

        .text

// State: in0, out, rows, row_length.

        .globl  gelu_f16
        .type   gelu_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        // 20 issues per unit of four values on the busiest worker (worker
        // 0 with the most units, or worker 5 with the tail), plus the
        // launch (fitted with `tests/row_kernels/calibration.rs`).
        .ipub_cost "n = rows * row_length; units = n / 4; tail = n % 4; 196 + 6 * (20 * (units / 6) + 2 * (units > 0) + (tail != 0 ? 29 + 6 * tail : 20 * (units % 6 != 0)))"
gelu_f16:
        gelu_setup 8
        brz     $m5, gelu_f16_tail_check
        sub     $m5, $m5, 1
        .align  8
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        gelu_rest
        rpt_at  4
        rpt     $m5, 18
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        { st64step $a6:7, $m9+=, 48 ; f16v2tof32 $a4:5, $a1 }
        gelu_rest
        st64step $a6:7, $m9+=, 48
gelu_f16_tail_check:
        tail_owner gelu_f16_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 8
        // The aligned 8 bytes holding the tail lie inside tile memory; the
        // lanes past the end are computed but never stored.
        ld64    $a0:1, $m7, 0
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        gelu_rest
        mov     $m10, $a6
        mov     $m11, $a7
        store_f16_lanes $m10, $m11, $m9, gelu_f16_tail
gelu_f16_done:
        exitz   $mzero
        .size   gelu_f16, . - gelu_f16

// ---- GELU stored as FP8 ------------------------------------------------
// A cast to FP8 fused into the GELU (`src/fuse.rs`), assembled only with
// OUT_F8 defined so that the f16 variant carries none of its code. Each
// quad is rounded to f16 exactly as `gelu_f16` stores it, then converted
// with `f16v4tof8` and the result's scale, exactly as `cast_f16_f143`
// converts it, so the bytes are those of the two kernels run one after the
// other, in one pass over the data: one more issue per quad, and a 4-byte
// store instead of an 8-byte one.
// State: in0 (f16), out (FP8), rows, row_length, out_scale.

// Cycles (fitted with `tests/row_kernels/calibration.rs`): 21 issues per
// unit of four values on the busiest worker, a few more to fill and drain
// the pipelined loop, about 30 for the tail, plus the launch.
#ifdef OUT_F8
#define GELU_TO_F8_COST "n = rows * row_length; units = n / 4; tail = n % 4; 228 + 6 * (21 * (units / 6) + 4 * (units > 0) + (tail != 0 ? 30 + 3 * tail : 21 * (units % 6 != 0)))"

        .globl  gelu_f16_f143
        .type   gelu_f16_f143, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_cost GELU_TO_F8_COST
gelu_f16_f143:
        setzi   $m10, 0
        br      gelu_f16_f8
        .size   gelu_f16_f143, . - gelu_f16_f143

        .globl  gelu_f16_f152
        .type   gelu_f16_f152, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_cost GELU_TO_F8_COST
gelu_f16_f152:
        setzi   $m10, 1
        .size   gelu_f16_f152, . - gelu_f16_f152

// $m10 holds the format bit; the scale goes to bits 15..8 of $fp8cfg, as
// in `cast_f8.S`.
gelu_f16_f8:
        fp8_config 16
        gelu_setup 4
        brz     $m5, gelu_f16_f8_tail_check
        sub     $m5, $m5, 1
        .align  8
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        gelu_rest
        f16v4tof8 $a6, $a6:7
        rpt_at  4
        rpt     $m5, 19
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        { st32step $a6, $m9+=, 24 ; f16v2tof32 $a4:5, $a1 }
        gelu_rest
        f16v4tof8 $a6, $a6:7
        st32step $a6, $m9+=, 24
gelu_f16_f8_tail_check:
        tail_owner gelu_f16_f8_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 4
        // As in `gelu_f16`: the lanes past the end are computed, converted
        // and never stored.
        ld64    $a0:1, $m7, 0
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        gelu_rest
        f16v4tof8 $a6, $a6:7
        mov     $m10, $a6
        store_bytes $m10, $m9, gelu_f16_f8_tail
gelu_f16_f8_done:
        exitz   $mzero
#endif
