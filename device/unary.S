// SiLU and tanh-approximate GELU, element-wise over `rows * row_length`
// f16 or f32 values (`silu_f16`, `gelu_tanh_f32`, ...). Each value is
// widened to f32, the function is evaluated in f32 and the result rounded
// to the output type. See `include/rows.h` for the work split.
//
// Both are `x * sigmoid(a)`, evaluated as `x / (1 + e^-a)` with `f32exp`
// and `f32div`: SiLU has `a = x`; the tanh GELU
// `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)` equals
// `x * sigmoid(2u)`, since `1 + tanh(u) = 2 sigmoid(2u)`, so its
// `-a = x (C1 + C2 x^2)` with `C1 = -2 sqrt(2/pi)` and `C2 = 0.044715 C1`.
// The sigmoid form never cancels: for large negative inputs `e^-a`
// overflows to infinity and the quotient is a signed zero, where the tanh
// form would compute `1 + tanh(u)` as a difference of nearly equal values.
//
// Per pair of lanes SiLU takes 10 issues (a negation, two exponentials
// and two divisions of two issues each, an addition) and the GELU 13 (three
// more multiplications and an addition for the argument); an f16 quad adds
// four conversions and its store (25 and 31 issues, the load riding with
// the first conversion), an f32 pair its load and store (11 and 15).

#include "include/rows.h"

// Constant pairs: $a8:9 = -1.0 (SiLU) or C2 (GELU), $a10:11 = 1.0,
// $a12:13 = C1 (GELU).
#define MINUS_ONE_BITS 0xBF800000
#define ONE_BITS 0x3F800000
#define C1_BITS 0xBFCC422A
#define C2_BITS 0xBD922279

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker (worker 0 with the most units, or worker 5 with
// the tail), plus the launch.
#define SILU_F16_COST "n = rows * row_length; units = n / 4; tail = n % 4; 190 + 6 * (25 * (units / 6) + (units > 0) + (tail != 0 ? 34 + 6 * tail : 25 * (units % 6 != 0)))"
#define SILU_F32_COST "n = rows * row_length; units = n / 2; 190 + 6 * (11 * (units / 6) + (units > 0) + (n % 2 != 0 ? 18 : 11 * (units % 6 != 0)))"
#define GELU_TANH_F16_COST "n = rows * row_length; units = n / 4; tail = n % 4; 190 + 6 * (31 * (units / 6) + (units > 0) + (tail != 0 ? 40 + 6 * tail : 31 * (units % 6 != 0)))"
#define GELU_TANH_F32_COST "n = rows * row_length; units = n / 2; 190 + 6 * (15 * (units / 6) + (units > 0) + (n % 2 != 0 ? 21 : 15 * (units % 6 != 0)))"

// SiLU of the f32 pair `x` (lanes `xlo`, `xhi`) in place; `t` (lanes
// `tlo`, `thi`) is scratch.
.macro silu_pair x, xlo, xhi, t, tlo, thi
        f32v2mul \t, \x, $a8:9
        f32exp  \tlo, \tlo
        f32exp  \thi, \thi
        f32v2add \t, \t, $a10:11
        f32div  \xlo, \xlo, \tlo
        f32div  \xhi, \xhi, \thi
.endm

// The tanh GELU of the f32 pair `x` in place, as `silu_pair`.
.macro gelu_tanh_pair x, xlo, xhi, t, tlo, thi
        f32v2mul \t, \x, \x
        f32v2mul \t, \t, $a8:9
        f32v2add \t, \t, $a12:13
        f32v2mul \t, \t, \x
        f32exp  \tlo, \tlo
        f32exp  \thi, \thi
        f32v2add \t, \t, $a10:11
        f32div  \xlo, \xlo, \tlo
        f32div  \xhi, \xhi, \thi
.endm

.macro set_pair lo, hi, bits
        setzi   \lo, (\bits) & 0xffff
        sethi   \lo, (\bits) >> 16
        mov     \hi, \lo
.endm

// The state every entry reads: in0, out, rows, row_length.
.macro unary_params cost
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_cost \cost
.endm

// `name`: f16 values through `pair` (a macro above), a quad per unit.
.macro unary_f16 name, pair, cost, constants, words
        .globl  \name
        .type   \name, @function
        unary_params \cost
\name:
        \constants
        flat_split 8, 12, 2
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, 8
        // The first widening rides with the load.
        rpt_at  4
        rpt     $m5, \words
        { ld64step $a0:1, $m7+=, 48 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        \pair   $a2:3, $a2, $a3, $a6:7, $a6, $a7
        \pair   $a4:5, $a4, $a5, $a6:7, $a6, $a7
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
        st64step $a6:7, $m9+=, 48
        tail_owner \name\()_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 8
        // The aligned 8 bytes holding the tail lie inside tile memory; the
        // lanes past the end are computed but never stored.
        ld64    $a0:1, $m7, 0
        f16v2tof32 $a2:3, $a0
        f16v2tof32 $a4:5, $a1
        \pair   $a2:3, $a2, $a3, $a6:7, $a6, $a7
        \pair   $a4:5, $a4, $a5, $a6:7, $a6, $a7
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
        mov     $m10, $a6
        mov     $m11, $a7
        store_f16_lanes $m10, $m11, $m9, \name\()_tail
\name\()_done:
        exitz   $mzero
        .size   \name, . - \name
.endm

// `name`: f32 values through `pair`, a pair per unit.
.macro unary_f32 name, pair, cost, constants, words
        .globl  \name
        .type   \name, @function
        unary_params \cost
\name:
        \constants
        flat_split 8, 12, 1
        worker_ptr $m7, 0, 8
        worker_ptr $m9, 4, 8
        rpt     $m5, \words
        ld64step $a2:3, $m7+=, 48
        \pair   $a2:3, $a2, $a3, $a6:7, $a6, $a7
        st64step $a2:3, $m9+=, 48
        tail_owner \name\()_done
        tail_ptr $m7, 0, 8
        tail_ptr $m9, 4, 8
        // A single element: the other lane computes whatever is there.
        ld32    $a2, $m7, 0
        \pair   $a2:3, $a2, $a3, $a6:7, $a6, $a7
        st32    $a2, $m9, 0
\name\()_done:
        exitz   $mzero
        .size   \name, . - \name
.endm

.macro silu_constants
        set_pair $a8, $a9, MINUS_ONE_BITS
        set_pair $a10, $a11, ONE_BITS
.endm

.macro gelu_tanh_constants
        set_pair $a8, $a9, C2_BITS
        set_pair $a10, $a11, ONE_BITS
        set_pair $a12, $a13, C1_BITS
.endm

        .text

// Body words: a bundle, a widening, two pairs, two narrowings and the
// store for f16; the load, a pair and the store for f32.
        unary_f16 silu_f16, silu_pair, SILU_F16_COST, silu_constants, 18
        unary_f16 gelu_tanh_f16, gelu_tanh_pair, GELU_TANH_F16_COST, gelu_tanh_constants, 24
        unary_f32 silu_f32, silu_pair, SILU_F32_COST, silu_constants, 8
        unary_f32 gelu_tanh_f32, gelu_tanh_pair, GELU_TANH_F32_COST, gelu_tanh_constants, 11
