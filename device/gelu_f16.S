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
//
// The forms stored as FP8 compute in f16 instead (see "GELU stored as FP8"
// below): an FP8 step is 128 f16 steps, so the f32 evaluation's precision
// never reaches their output, and f16 needs fewer than half the issues.

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

// The constants into $a8..$a13.
.macro gelu_constants
        set_pair $a8, $a9, RSQRT2_BITS
        set_pair $a10, $a11, ONE_BITS
        set_pair $a12, $a13, HALF_BITS
.endm

// The FP8 forms' f16 constants, in all four lanes: $a8:9 = f16(1/sqrt(2)),
// $a10:11 = 1.0, $a12:13 = 0.5.
#define RSQRT2_F16_BITS 0x39A839A8
#define ONE_F16_BITS 0x3C003C00
#define HALF_F16_BITS 0x38003800

.macro gelu_f16_constants
        set_pair $a8, $a9, RSQRT2_F16_BITS
        set_pair $a10, $a11, ONE_F16_BITS
        set_pair $a12, $a13, HALF_F16_BITS
.endm

// The f16 GELU's two halves of the f16 quad x in $a0:1, every step rounded
// to f16: u = 1 + erf(x * f16(1/sqrt(2))) in $a4:5 and h = x * 0.5 in
// $a6:7. The result is h * u (`f16v4mul $a4:5, $a6:7, $a4:5`).
.macro gelu_f16_halves
        f16v4mul $a4:5, $a0:1, $a8:9
        f16v2erf $a4, $a4
        f16v2erf $a5, $a5
        f16v4add $a4:5, $a4:5, $a10:11
        f16v4mul $a6:7, $a0:1, $a12:13
.endm

// The constants (`constants`: gelu_constants, or gelu_f16_constants for
// the FP8 forms), this worker's units of four values into $m5 and its
// input and output cursors into $m7 and $m9, the output taking `out_unit`
// bytes per unit (8 for f16, 4 for FP8).
.macro gelu_setup out_unit, constants=gelu_constants
        \constants
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

#if !ADD
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
// OUT_F8 defined so that the f16 variant carries none of its code. The
// GELU is evaluated in f16, each step rounded to f16 as the book defines
// f16 arithmetic: h = x * 0.5, t = x * f16(1/sqrt(2)), e = erf(t)
// (`f16v2erf`), u = e + 1, y = h * u; y is converted with `f16v4tof8` and
// the result's scale, exactly as `cast_f16_f143` converts an f16 value.
// Those roundings move y by a few f16 steps at most (up to |x| * 2^-11
// where 1 + erf cancels, for large negative x); an FP8 step is 128 f16
// steps (`tests/row_kernels` bounds the difference from the f64 GELU).
//
// A quad costs 9 issues, all in the aux pipeline: the two multiplications
// by constants, two error functions (two issues each), the addition, the
// product and the conversion. The load rides with the previous quad's
// conversion and the store of the previous quad with the first
// multiplication; the first quad is peeled off.
// State: in0 (f16), out (FP8), rows, row_length, out_scale.

// Cycles (fitted with `tests/row_kernels/calibration.rs`): 9 issues per
// unit of four values on the busiest worker, a few more to fill and drain
// the pipelined loop, the tail, plus the launch.
#ifdef OUT_F8
#define GELU_TO_F8_COST "n = rows * row_length; units = n / 4; tail = n % 4; a = 9 * (units / 6 + (units % 6 != 0)) + 5 * (units > 0); b = 9 * (units / 6) + 5 * (units >= 6) + (tail != 0 ? 19 + 3 * tail : 0); 228 + 6 * (a > b ? a : b)"

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
        gelu_setup 4, gelu_f16_constants
        brz     $m5, gelu_f16_f8_tail_check
        sub     $m5, $m5, 1
        ld64step $a0:1, $m7+=, 48
        gelu_f16_halves
        f16v4mul $a4:5, $a6:7, $a4:5
        rpt_at  4
        rpt     $m5, 9
        { ld64step $a0:1, $m7+=, 48 ; f16v4tof8 $a6, $a4:5 }
        { st32step $a6, $m9+=, 24 ; f16v4mul $a4:5, $a0:1, $a8:9 }
        f16v2erf $a4, $a4
        f16v2erf $a5, $a5
        f16v4add $a4:5, $a4:5, $a10:11
        f16v4mul $a6:7, $a0:1, $a12:13
        f16v4mul $a4:5, $a6:7, $a4:5
        f16v4tof8 $a6, $a4:5
        st32step $a6, $m9+=, 24
gelu_f16_f8_tail_check:
        tail_owner gelu_f16_f8_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 4
        // As in `gelu_f16`: the lanes past the end are computed, converted
        // and never stored.
        ld64    $a0:1, $m7, 0
        gelu_f16_halves
        f16v4mul $a4:5, $a6:7, $a4:5
        f16v4tof8 $a6, $a4:5
        mov     $m10, $a6
        store_bytes $m10, $m9, gelu_f16_f8_tail
gelu_f16_f8_done:
        exitz   $mzero
#endif
#endif

// ---- GELU of a sum -------------------------------------------------------
// An add fused into the GELU (`src/fuse.rs`: a bias add before the
// activation), assembled only with ADD set, so that the other variants
// carry none of its code. Each quad of the two operands is added with
// `f16v4add`, so rounded to f16 exactly as `add_f16` stores it, and then
// goes through the GELU exactly as in `gelu_f16` (and, stored as FP8, in
// f16 and through the cast as in `gelu_f16_f143`): the bytes are those of
// the kernels one after the other, in one pass over the data.
//
// The first operand's load rides with the previous quad's last conversion,
// the second's with the addition, and the store with the first conversion:
// one issue per quad more than the GELU alone (21 for f16, 10 stored as
// FP8). The first quad is peeled off and the last one's result drained
// after the loop, so no load reads past the worker's last unit.
// State: in0, in1, out, rows, row_length (and out_scale for FP8).
#if ADD

// This worker's units, cursors $m7 and $m8 on the operands and $m9 on the
// output (`out_unit` bytes per unit), and the constants (as in
// `gelu_setup`).
.macro add_gelu_setup out_unit, constants=gelu_constants
        \constants
        flat_split 12, 16, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m8, 4, 8
        worker_ptr $m9, 8, \out_unit
.endm

// The first quad's sum through the GELU, its result in $a6 and the pair
// still to round in $a4:5.
.macro add_gelu_first
        ld64step $a0:1, $m7+=, 48
        ld64step $a2:3, $m8+=, 48
        f16v4add $a0:1, $a0:1, $a2:3
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        add_gelu_pairs
.endm

// Both pairs through the GELU, the first rounded into $a6.
.macro add_gelu_pairs
        gelu_pair $a2:3, $a6:7, $a6, $a7
        gelu_pair $a4:5, $a6:7, $a6, $a7
        f32v2tof16 $a6, $a2:3
.endm

// The tail's sum (worker 5's last 1..3 values) in $a0:1 and the output
// cursor in $m9 (`out_unit` bytes per unit): the aligned 8 bytes holding
// the tail in each operand lie inside tile memory, and the lanes past the
// end are computed but never stored.
.macro add_gelu_tail_sum out_unit
        tail_ptr $m7, 0, 8
        tail_ptr $m8, 4, 8
        tail_ptr $m9, 8, \out_unit
        ld64    $a0:1, $m7, 0
        ld64    $a2:3, $m8, 0
        f16v4add $a0:1, $a0:1, $a2:3
.endm

        .globl  add_gelu_f16
        .type   add_gelu_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        // 21 issues per unit of four values on the busiest worker, plus
        // the peeled first unit, the tail and the launch (fitted with
        // `tests/row_kernels/calibration.rs`).
        .ipub_cost "n = rows * row_length; units = n / 4; tail = n % 4; 230 + 6 * (21 * (units / 6) + 3 * (units > 0) + (tail != 0 ? 33 + 6 * tail : 21 * (units % 6 != 0)))"
add_gelu_f16:
        add_gelu_setup 8
        brz     $m5, add_gelu_f16_tail_check
        sub     $m5, $m5, 1
        add_gelu_first
        rpt_at  4
        rpt     $m5, 20
        { ld64step $a0:1, $m7+=, 48 ; f32v2tof16 $a7, $a4:5 }
        { ld64step $a2:3, $m8+=, 48 ; f16v4add $a0:1, $a0:1, $a2:3 }
        { st64step $a6:7, $m9+=, 48 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        add_gelu_pairs
        f32v2tof16 $a7, $a4:5
        st64step $a6:7, $m9+=, 48
add_gelu_f16_tail_check:
        tail_owner add_gelu_f16_done
        add_gelu_tail_sum 8
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        gelu_rest
        mov     $m10, $a6
        mov     $m11, $a7
        store_f16_lanes $m10, $m11, $m9, add_gelu_f16_tail
add_gelu_f16_done:
        exitz   $mzero
        .size   add_gelu_f16, . - add_gelu_f16

#ifdef OUT_F8
#define ADD_GELU_TO_F8_COST "n = rows * row_length; units = n / 4; tail = n % 4; a = 10 * (units / 6 + (units % 6 != 0)) + 6 * (units > 0); b = 10 * (units / 6) + 6 * (units >= 6) + (tail != 0 ? 25 + 3 * tail : 0); 246 + 6 * (a > b ? a : b)"

        .globl  add_gelu_f16_f143
        .type   add_gelu_f16_f143, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param out_scale, 20, i32
        .ipub_cost ADD_GELU_TO_F8_COST
add_gelu_f16_f143:
        setzi   $m10, 0
        br      add_gelu_f16_f8
        .size   add_gelu_f16_f143, . - add_gelu_f16_f143

        .globl  add_gelu_f16_f152
        .type   add_gelu_f16_f152, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param out, 8, ptr
        .ipub_param rows, 12, u32
        .ipub_param row_length, 16, u32
        .ipub_param out_scale, 20, i32
        .ipub_cost ADD_GELU_TO_F8_COST
add_gelu_f16_f152:
        setzi   $m10, 1
        .size   add_gelu_f16_f152, . - add_gelu_f16_f152

// $m10 holds the format bit, as in `gelu_f16_f8`. The sum goes through the
// f16 GELU of `gelu_f16_f8`: 10 issues a quad.
add_gelu_f16_f8:
        fp8_config 20
        add_gelu_setup 4, gelu_f16_constants
        brz     $m5, add_gelu_f16_f8_tail_check
        sub     $m5, $m5, 1
        ld64step $a0:1, $m7+=, 48
        ld64step $a2:3, $m8+=, 48
        f16v4add $a0:1, $a0:1, $a2:3
        gelu_f16_halves
        rpt_at  4
        rpt     $m5, 11
        { ld64step $a0:1, $m7+=, 48 ; f16v4mul $a4:5, $a6:7, $a4:5 }
        { ld64step $a2:3, $m8+=, 48 ; f16v4tof8 $a6, $a4:5 }
        { st32step $a6, $m9+=, 24 ; f16v4add $a0:1, $a0:1, $a2:3 }
        gelu_f16_halves
        f16v4mul $a4:5, $a6:7, $a4:5
        f16v4tof8 $a6, $a4:5
        st32step $a6, $m9+=, 24
add_gelu_f16_f8_tail_check:
        tail_owner add_gelu_f16_f8_done
        add_gelu_tail_sum 4
        gelu_f16_halves
        f16v4mul $a4:5, $a6:7, $a4:5
        f16v4tof8 $a6, $a4:5
        mov     $m10, $a6
        store_bytes $m10, $m9, add_gelu_f16_f8_tail
add_gelu_f16_f8_done:
        exitz   $mzero
#endif
#endif
