// Reductions over the last axis of an f16 or f32 `[rows][row_length]`
// operand into `[rows]` values of the same type (`reduce_sum_f16`,
// `reduce_max_f32`, ...): the sum, the mean or the maximum of each row.
// One entry per reduction and type, all generated from the macros below.
//
// Sums accumulate in f32: f16 quads widen exactly into the four vector
// accumulators with `f16v4acc` (one bundle per quad, the load riding with
// it), f32 pairs add into a pair of lanes with `f32v2add`; single elements
// at the row's ends add into a scalar. The lanes and the scalar are added
// at the end of the row, a mean divides by row_length with `f32div`
// (correctly rounded), and the result is rounded once to the output type.
// The maximum is exact: `f16v4max` or `f32v2max` keep a running maximum
// per lane, started at NaN, which every number replaces (the device's
// maximum ignores a NaN operand, as IEEE maxNum does), so a NaN element is
// ignored and a row of NaNs alone gives NaN.
//
// A row is walked like `rmsnorm_f16.S`'s sum of squares: single elements
// up to the first 8-byte boundary (the head), whole vectors with 64-bit
// loads, single elements after them (the tail). Worker w reduces rows
// w, w + 6, ...: a row yields one value, and workers cannot combine
// partial results within one launch (they run in no defined order). A
// long row is split by the segmented form instead (`Partition::Segments`,
// `src/plan/reductions.rs`): a `_partial` kernel's workers take pieces of
// the rows in turn and write their f32 partials, and a `_partials_`
// kernel reduces those rows of partials in a second launch, on the same
// tile or on the one an exchange brings every tile's partials of a group
// of rows to.

#include "include/rows.h"
#include "include/norm.h"

#define F16_NAN_PAIR 0x7E007E00
#define F32_NAN 0x7FC00000

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of worker 0, which has the most rows (`busy`), plus the launch and the
// start (102 to 132 cycles). A row costs a fixed 24 to 30 issues (the
// loop, the head's count, the total, a mean's division, the store), one
// per vector (an f16 quad or an f32 pair) and one or two per single
// element of its head and tail. `singles` is their cost per row (in
// quarter issues) averaged over the row starts: f16 rows start at every
// 2-byte alignment when row_length is odd (5.25 issues a row) and at two
// of the four when it is 2 more than a multiple of 4 (3.5), measured over
// rows of 5 to 63 elements; rows shorter than a quad are all singles. In
// quarter issues for f16, half issues for f32.
#define SUM_F16_COST "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 102 + 6 * busy * (4 * 28 + row_length + singles) / 4"
#define MEAN_F16_COST "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 114 + 6 * busy * (4 * 30 + row_length + singles) / 4"
#define MAX_F16_COST "busy = (rows + 5) / 6; singles = row_length < 4 ? 8 * row_length : row_length % 4 == 0 ? 0 : row_length % 2 == 1 ? 21 : 14; 102 + 6 * busy * (4 * 29 + row_length + singles) / 4"
#define SUM_F32_COST "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2"
#define MEAN_F32_COST "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2"
#define MAX_F32_COST "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2"
// The segmented forms: the partial kernels' busiest worker has `busy` of
// the `rows * parts` pieces, each taken to be the last (`rest` elements,
// the longest), at the f16 or f32 reductions' cost per element and 34
// issues more per piece (35 for the f16 maximum) to find it and store its
// result, plus 28 issues and, for pieces fewer than six to a row, 4 per
// `parts` in six and in five (the steps from one piece to the sixth on
// and from worker 0's first piece to worker 5's); the reductions of the
// f32 partials cost what the f32 reductions do.
#define SUM_F16_PARTIAL_COST "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; singles = rest < 4 ? 8 * rest : piece % 4 == 0 && row_length % 4 == 0 ? 0 : row_length % 2 == 1 || piece % 2 == 1 ? 21 : 14; 6 * (busy * (4 * 34 + rest + singles) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4"
#define MAX_F16_PARTIAL_COST "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; singles = rest < 4 ? 8 * rest : piece % 4 == 0 && row_length % 4 == 0 ? 0 : row_length % 2 == 1 || piece % 2 == 1 ? 21 : 14; 6 * (busy * (4 * 35 + rest + singles) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4"
#define SUM_F32_PARTIAL_COST "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; 6 * (busy * (4 * 34 + 2 * rest + 4 * (rest % 2)) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4"
#define MAX_F32_PARTIAL_COST "busy = (rows * parts + 5) / 6; rest = row_length - (parts - 1) * piece; 6 * (busy * (4 * 34 + 2 * rest + 4 * (rest % 2)) + 4 * 28 + 15 * (6 / parts + 5 / parts)) / 4"
#define SUM_PARTIALS_F16_COST "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2"
#define MEAN_PARTIALS_F16_COST "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2"
#define MAX_PARTIALS_F16_COST "busy = (rows + 5) / 6; 120 + 6 * busy * (2 * 24 + row_length + 2 * (row_length % 2)) / 2"
#define MEAN_PARTIALS_F32_COST "busy = (rows + 5) / 6; 132 + 6 * busy * (2 * 26 + row_length + 2 * (row_length % 2)) / 2"

// Registers: $m0 state, $m1 rows, $m2 row_length, $m3 current row, $m6
// scratch, $m7 the current input row, $m8 the cursor within it, $m9 the
// output cursor, $m10 six rows' bytes, $m11 the head's elements; $a0:1
// loads, $a2:3 the running pair, $a4 the row's result, $a8 the running
// scalar, $a14 row_length as f32.

// The state every entry reads: in0, out, rows, row_length.
.macro reduce_params cost
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_cost \cost
.endm

// Reads the state and points $m7 and $m9 at this worker's first row and
// result, for input elements of `1 << in_shift` bytes and results of
// `1 << out_shift`; $a14 = the state's u32 at `divisor_off` (a mean's
// divisor: row_length, or a segmented mean's whole row) as f32.
.macro reduce_start in_shift, out_shift, divisor_off
        ld32    $m1, $m0, 8
        ld32    $m2, $m0, 12
        ld32    $a14, $m0, \divisor_off
        f32fromi32 $a14, $a14
        get     $m3, $wid
        shl     $m10, $m2, \in_shift
        mul     $m6, $m10, $m3
        ld32    $m7, $m0, 0
        add     $m7, $m7, $m6
        mul     $m10, $m10, 6
        shl     $m6, $m3, \out_shift
        ld32    $m9, $m0, 4
        add     $m9, $m9, $m6
.endm

// $m11 = the row's head: its elements of `1 << shift` bytes before the
// first 8-byte boundary, at most the whole row; $m8 = the row's start.
.macro head shift
        mov     $m8, $m7
        sub     $m11, $mzero, $m7
        and     $m11, $m11, 7
        shr     $m11, $m11, \shift
        min     $m11, $m11, $m2
.endm

// `count` single f16 elements into the scalar $a8 with `op`.
.macro singles_f16 count, op
        rpt_at  4
        rpt     \count, 3
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        \op     $a8, $a8, $a0
.endm

// `count` single f32 elements into the scalar $a8 with `op`.
.macro singles_f32 count, op
        rpt_at  4
        rpt     \count, 2
        { ld32step $a0, $m8+=, 4 ; \op $a8, $a8, $a0 }
.endm

// The row loop around `body`, which reduces the row at $m7 into $a4;
// `store` writes $a4 and advances $m9 by six results.
.macro reduce_rows name, body, store
\name\()_row:
        cmpult  $m6, $m3, $m1
        brz     $m6, \name\()_done
        \body
        \store
        add     $m7, $m7, $m10
        add     $m3, $m3, 6
        br      \name\()_row
\name\()_done:
        exitz   $mzero
.endm

.macro store_f16
        f32tof16 $a4, $a4
        mov     $m6, $a4
        st16step $m6, $m9+=, 12
.endm

.macro store_f32
        st32step $a4, $m9+=, 24
.endm

// The f16 row sum into $a4: quads into the vector accumulators, single
// elements into $a8.
.macro sum_f16_row
        head    1
        mov     $a8, $azero
        singles_f16 $m11, f32add
        quads
        rpt_at  4
        rpt     $m6, 2
        { ld64step $a0:1, $m8+=, 8 ; f16v4acc $a0:1 }
        tail
        singles_f16 $m6, f32add
        total
        f32add  $a4, $a4, $a8
.endm

.macro mean_f16_row
        sum_f16_row
        f32div  $a4, $a4, $a14
.endm

// The f16 row maximum into $a4: quads into the f16 pair $a2:3, single
// elements (widened) into $a8.
.macro max_f16_row
        head    1
        setzi   $a8, F32_NAN & 0xffff
        sethi   $a8, F32_NAN >> 16
        setzi   $a2, F16_NAN_PAIR & 0xffff
        sethi   $a2, F16_NAN_PAIR >> 16
        mov     $a3, $a2
        singles_f16 $m11, f32max
        quads
        rpt_at  4
        rpt     $m6, 2
        { ld64step $a0:1, $m8+=, 8 ; f16v4max $a2:3, $a2:3, $a0:1 }
        tail
        singles_f16 $m6, f32max
        f16v4hmax $a4, $a2:3
        f32max  $a4, $a4, $a8
.endm

// An f32 row into $a4 with the pair operation `pair_op`, its horizontal
// form `across` and the scalar `op`; the pair and $a8 start at `$a12`.
.macro f32_row pair_op, across, op
        head    2
        mov     $a8, $a12
        mov     $a2, $a12
        mov     $a3, $a12
        singles_f32 $m11, \op
        sub     $m6, $m2, $m11
        shr     $m6, $m6, 1
        rpt_at  4
        rpt     $m6, 2
        { ld64step $a0:1, $m8+=, 8 ; \pair_op $a2:3, $a2:3, $a0:1 }
        sub     $m6, $m2, $m11
        and     $m6, $m6, 1
        singles_f32 $m6, \op
        \across $a4, $a2:3
        \op     $a4, $a4, $a8
.endm

.macro sum_f32_row
        f32_row f32v2add, f32v2hadd, f32add
.endm

.macro mean_f32_row
        sum_f32_row
        f32div  $a4, $a4, $a14
.endm

.macro max_f32_row
        f32_row f32v2max, f32v2hmax, f32max
.endm

// `name`: an f16 reduction by `body`.
.macro reduce_f16 name, body, cost
        .globl  \name
        .type   \name, @function
        reduce_params \cost
\name:
        reduce_start 1, 1, 12
        // The accumulators start the first row empty; `total` empties them
        // after every row.
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        reduce_rows \name, \body, store_f16
        .size   \name, . - \name
.endm

// `name`: an f32 reduction by `body`, whose running values start at
// `start` (the bits of 0 or NaN).
.macro reduce_f32 name, body, cost, start
        .globl  \name
        .type   \name, @function
        reduce_params \cost
\name:
        reduce_start 2, 2, 12
        setzi   $a12, (\start) & 0xffff
        sethi   $a12, (\start) >> 16
        reduce_rows \name, \body, store_f32
        .size   \name, . - \name
.endm

// Segmented reductions (`Partition::Segments`): each tile reduces pieces
// of its rows into f32 partial results, and one tile of each group of
// rows reduces the partials into the rows' results.

// `count` divided by the $m13 pieces of a row: `count` becomes the
// remainder and `bytes` grows by the quotient's rows of $m10 bytes, by
// subtraction (the counts are below six rows' pieces). Clobbers $m6.
.macro divide_pieces count, bytes, label
\label:
        cmpult  $m6, \count, $m13
        brnz    $m6, \label\()_end
        sub     \count, \count, $m13
        add     \bytes, \bytes, $m10
        br      \label
\label\()_end:
.endm

// `name`: f32 partial results of `parts` pieces of each of `rows` rows
// of `row_length` elements of `1 << shift` bytes, by `body` (the sum, also
// a mean's, or the maximum), neither rounded nor divided: piece p of row
// i starts at element p * piece and is `piece` long, the last the rest of
// the row; its result is at [i][p]. Worker w takes the pieces w, w + 6,
// ... in row-major order, so a row of six pieces keeps every worker busy.
// The running values of an f32 body start at `start`.
.macro reduce_pieces name, body, cost, shift, start
        .globl  \name
        .type   \name, @function
        reduce_params \cost
        .ipub_param parts, 16, u32
        .ipub_param piece, 20, u32
\name:
        // $m12 = row_length, $m13 = parts, $m14 = piece, $m10 = a row's
        // bytes, $m1 = the input's end, $m5 = the input row of this
        // worker's piece, $m4 = the piece's index in it, $m9 its result.
        ld32    $m12, $m0, 12
        ld32    $m13, $m0, 16
        ld32    $m14, $m0, 20
        shl     $m10, $m12, \shift
        ld32    $m5, $m0, 0
        ld32    $m1, $m0, 8
        mul     $m1, $m1, $m10
        add     $m1, $m1, $m5
        get     $m4, $wid
        shl     $m6, $m4, 2
        ld32    $m9, $m0, 4
        add     $m9, $m9, $m6
        setzi   $a12, (\start) & 0xffff
        sethi   $a12, (\start) >> 16
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        // Six pieces on: $m3 = the bytes of 6 / parts rows, $m0 = 6 %
        // parts more pieces (the state is read).
        setzi   $m0, 6
        mov     $m3, $mzero
        divide_pieces $m0, $m3, \name\()_six
        // The first piece: $m4 = wid % parts, in row wid / parts.
        divide_pieces $m4, $m5, \name\()_first
\name\()_piece:
        cmpult  $m6, $m5, $m1
        brz     $m6, \name\()_done
        // The piece: from element p * piece, `piece` long or the rest.
        mul     $m6, $m4, $m14
        shl     $m7, $m6, \shift
        add     $m7, $m7, $m5
        mov     $m2, $m14
        sub     $m8, $m13, 1
        cmpeq   $m8, $m4, $m8
        brz     $m8, \name\()_body
        sub     $m2, $m12, $m6
\name\()_body:
        \body
        st32step $a4, $m9+=, 24
        add     $m4, $m4, $m0
        add     $m5, $m5, $m3
        cmpult  $m6, $m4, $m13
        brnz    $m6, \name\()_piece
        sub     $m4, $m4, $m13
        add     $m5, $m5, $m10
        br      \name\()_piece
\name\()_done:
        exitz   $mzero
        .size   \name, . - \name
.endm

// `name`: rows of f32 partial results reduced by `body` into results
// stored by `store` (`store_f16` or `store_f32`, of `out_shift`), the
// running values starting at `start`; a mean divides by the state's
// `divisor`, the whole row's length.
.macro reduce_partials name, body, cost, start, store, out_shift, mean
        .globl  \name
        .type   \name, @function
        reduce_params \cost
.if \mean
        .ipub_param divisor, 16, u32
\name:
        reduce_start 2, \out_shift, 16
.else
\name:
        reduce_start 2, \out_shift, 12
.endif
        setzi   $a12, (\start) & 0xffff
        sethi   $a12, (\start) >> 16
        reduce_rows \name, \body, \store
        .size   \name, . - \name
.endm

        .text

        reduce_f16 reduce_sum_f16, sum_f16_row, SUM_F16_COST
        reduce_f16 reduce_mean_f16, mean_f16_row, MEAN_F16_COST
        reduce_f16 reduce_max_f16, max_f16_row, MAX_F16_COST
        reduce_f32 reduce_sum_f32, sum_f32_row, SUM_F32_COST, 0
        reduce_f32 reduce_mean_f32, mean_f32_row, MEAN_F32_COST, 0
        reduce_f32 reduce_max_f32, max_f32_row, MAX_F32_COST, F32_NAN
        reduce_pieces reduce_sum_f16_partial, sum_f16_row, SUM_F16_PARTIAL_COST, 1, 0
        reduce_pieces reduce_max_f16_partial, max_f16_row, MAX_F16_PARTIAL_COST, 1, 0
        reduce_pieces reduce_sum_f32_partial, sum_f32_row, SUM_F32_PARTIAL_COST, 2, 0
        reduce_pieces reduce_max_f32_partial, max_f32_row, MAX_F32_PARTIAL_COST, 2, F32_NAN
        reduce_partials reduce_sum_partials_f16, sum_f32_row, SUM_PARTIALS_F16_COST, 0, store_f16, 1, 0
        reduce_partials reduce_mean_partials_f16, mean_f32_row, MEAN_PARTIALS_F16_COST, 0, store_f16, 1, 1
        reduce_partials reduce_max_partials_f16, max_f32_row, MAX_PARTIALS_F16_COST, F32_NAN, store_f16, 1, 0
        reduce_partials reduce_mean_partials_f32, mean_f32_row, MEAN_PARTIALS_F32_COST, 0, store_f32, 2, 1
