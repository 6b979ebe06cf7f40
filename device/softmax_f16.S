// Softmax over each row of an f16 `[rows][row_length]` operand, of
// `x * scale`, in f32: `m = max_j(x_j * scale)`, `e_j = exp(x_j * scale -
// m)`, `s = sum_j e_j`, output `e_j * (1 / s)` rounded to f16 (`f32rcp`;
// the result is within one f16 ulp of `e_j / s`). With CAUSAL=1, row r of
// the tile is matrix row `i = (first_row + r) % matrix_rows`: only elements
// `j <= i` take part and the others are written as 0. The exponentials are
// recomputed in the last pass rather than stored, so no scratch memory is
// needed.
//
// With EXP_ONCE=1 (`softmax_f16_once`, for a softmax whose result is cast
// to FP8 next: `partition::cast_epilogue`), a worker that owns a whole row
// computes the exponentials in f16 (`row_sum_store`: `f16v2exp` of
// `f16((x_j - ext) * f16(scale))`, ext the row's extreme), stores each in
// the output row during the sum and the last pass rescales the row in
// place in f16: `f16(e_j * f16(1 / s))`. That is within a few f16 ulps of
// `e_j / s` where it matters (the argument's rounding grows with its size,
// and so shrinks the element), which the FP8 rounding after it (an FP8
// ulp is 128 f16 ulps) does not see. The pass costs 7 issues per quad
// instead of 15 and the output 2 instead of 18. A row that is not causal
// is always whole: the parts of a split row recompute in f32, as the sum
// covers the whole row while other workers write its other parts, and
// each would compute the whole row's statistics, which costs more than
// the whole row in f16. Causal rows split as `softmax_f16`'s do: their
// parts compute over the kept elements only and share the zeros after
// them, which is what long rows that keep few elements need.
//
// Three passes per row: the maximum (one bundle per quad: the f16 maximum,
// or the minimum for a negative scale, as rounding is monotonic), the sum
// of the exponentials (15 issues per quad, summed in the vector
// accumulators) and the output (18 issues per quad, the store of a quad
// riding with the next quad's conversion). Each pass walks its range as
// single elements up to the first 8-byte boundary (the head), whole
// aligned quads with 64-bit accesses, then single elements (the tail); the
// output row has the same alignment as the input row. See
// `include/rows.h` for the work split, which gives a long row to all six
// workers.

#include "include/rows.h"
// The segmented form's records and worker shares; the macros defined below
// (`quads`, `tail`) take the place of norm.h's.
#include "include/norm.h"

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, which has `whole` rows and, when the rows split,
// one part of a split row. A row costs 34 issues per quad (1 + 15 + 18 in
// the three passes) and about 15 more per single element of its head and
// tail (`singles`, an estimate for rows that start misaligned: rows of a
// length 2 mod 4 alternate between two alignments and have two each; the
// odd lengths' figure also carries what their rows cost beyond), plus a
// fixed 90; a part costs the statistics (16 per quad) and its share of the
// output (18 per quad). All in quarter issues, so quads count per element.
#define SOFTMAX_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; 50 + 6 * (whole * (34 * row_length + 30 * singles + 360) + split * (16 * row_length + 12 * singles + 600 + 18 * (row_length + singles) / parts)) / 4"
// Causal rows compute over their kept elements only and write zeros after
// them (one issue per quad). `kept` sums `min(i + 1, row_length)` over the
// tile's matrix rows i (rows past the row length keep all of it); the
// busiest worker is taken to have the average row. A row costs 100 issues
// and 50 more when its kept elements end in single ones (`tails`: three
// in four of the triangle's `T` rows, and every row past it when the row
// length is not a multiple of 4), which rows of a few quads in tall score
// matrices mostly do not. Of a split row the first part, the busiest,
// holds the kept elements up to its length (`kp`; a row that keeps fewer
// than a part has them all in it), 15 issues each on top of the rest's
// share.
#define SOFTMAX_CAUSAL_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; M = matrix_rows; f = first_row % M; end = f + rows; e = end % M; kept = end / M * (M <= row_length ? M * (M + 1) / 2 : row_length * (row_length + 1) / 2 + (M - row_length) * row_length) + (e <= row_length ? e * (e + 1) / 2 : row_length * (row_length + 1) / 2 + (e - row_length) * row_length) - (f <= row_length ? f * (f + 1) / 2 : row_length * (row_length + 1) / 2 + (f - row_length) * row_length); T = end / M * (M <= row_length ? M : row_length) + (e <= row_length ? e : row_length) - (f <= row_length ? f : row_length); tails = 3 * T / 4 + (row_length % 4 != 0) * (rows - T); P = row_length / parts; kp = kept / rows < P ? kept / rows : P; 240 + 6 * (whole * (400 + row_length) + (35 * kept + 200 * tails) * whole / rows + split * (640 + 18 * kept / rows + 15 * kp + (8 * kept / rows + row_length) / parts)) / 4"
// With EXP_ONCE, a row that is not causal is whole and the busiest
// worker has a sixth of them, rounded up; a row costs 10 issues per quad
// (1 + 7 + 2, the last two passes in f16), 85 a row and 6 per single
// element. The causal form's whole row costs about 7 per kept element in
// quarter issues (refitted with rows of tall and wide score matrices),
// 112 issues a row and 50 more for one that ends in single elements;
// split rows as above.
#define SOFTMAX_ONCE_COST "whole = (rows + 5) / 6; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : 5; 25 + 6 * (whole * (10 * row_length + 24 * singles + 340)) / 4"
#define SOFTMAX_ONCE_CAUSAL_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; M = matrix_rows; f = first_row % M; end = f + rows; e = end % M; kept = end / M * (M <= row_length ? M * (M + 1) / 2 : row_length * (row_length + 1) / 2 + (M - row_length) * row_length) + (e <= row_length ? e * (e + 1) / 2 : row_length * (row_length + 1) / 2 + (e - row_length) * row_length) - (f <= row_length ? f * (f + 1) / 2 : row_length * (row_length + 1) / 2 + (f - row_length) * row_length); T = end / M * (M <= row_length ? M : row_length) + (e <= row_length ? e : row_length) - (f <= row_length ? f : row_length); tails = 3 * T / 4 + (row_length % 4 != 0) * (rows - T); P = row_length / parts; kp = kept / rows < P ? kept / rows : P; 200 + 6 * (whole * (450 + row_length) + (7 * kept + 200 * tails) * whole / rows + split * (680 + 18 * kept / rows + 15 * kp + row_length / parts)) / 4"

// The segmented form's kernels' (fitted with
// `tests/row_kernels/calibration.rs`):
// six per issue of the busiest worker, the one whose share meets the most
// rows (`pieces`, as in `layernorm_stats_f16.S`). The statistics take 16
// issues per quad of the share (the two passes), 11 per row (the clearing
// and the search for the share's first row), 59 per piece, 2 per single
// element at a piece's ends and about 38 per launch; the output 18 per
// quad, 10 per row, 32 per piece plus 7 per segment's record of the row
// for the combination, and 45 per launch. The split form stored as FP8,
// in f16 (`row_sum_store`): its statistics 8 per quad (the sum pass
// stores each exponential) and 62 per piece; its output 3 per quad, 10 per
// row, 82 per piece (the six records' combination and the factor) less 49
// for a piece that is its whole row (its own record alone), taken over
// the worker with the most of that work, and 3 per single element (none
// in rows shorter than a quad, whose pieces are all set-up). All in
// quarter issues, so quads count per element.
#define SOFTMAX_STATS_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (16 * share + 44 * rows + 4 * 59 * pieces + 150 + 8 * pieces * singles) / 4"
#define SOFTMAX_STATS_ONCE_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; singles = row_length < 4 ? row_length : row_length % 4 != 0 ? 3 : 0; 6 * (8 * share + 44 * rows + 4 * 62 * pieces + 150 + 12 * pieces * singles) / 4"
#define SOFTMAX_PARTS_ONCE_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; h0 = e0 / row_length > (s0 + row_length - 1) / row_length ? e0 / row_length - (s0 + row_length - 1) / row_length : 0; c0 = 82 * p0 - 49 * h0; h1 = e1 / row_length > (s1 + row_length - 1) / row_length ? e1 / row_length - (s1 + row_length - 1) / row_length : 0; c1 = 82 * p1 - 49 * h1; h2 = e2 / row_length > (s2 + row_length - 1) / row_length ? e2 / row_length - (s2 + row_length - 1) / row_length : 0; c2 = 82 * p2 - 49 * h2; h3 = e3 / row_length > (s3 + row_length - 1) / row_length ? e3 / row_length - (s3 + row_length - 1) / row_length : 0; c3 = 82 * p3 - 49 * h3; h4 = e4 / row_length > (s4 + row_length - 1) / row_length ? e4 / row_length - (s4 + row_length - 1) / row_length : 0; c4 = 82 * p4 - 49 * h4; h5 = e5 / row_length > (s5 + row_length - 1) / row_length ? e5 / row_length - (s5 + row_length - 1) / row_length : 0; c5 = 82 * p5 - 49 * h5; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; k01 = c0 > c1 ? c0 : c1; k23 = c2 > c3 ? c2 : c3; k45 = c4 > c5 ? c4 : c5; k03 = k01 > k23 ? k01 : k23; work = k03 > k45 ? k03 : k45; singles = row_length < 4 ? 0 : row_length % 4 != 0 ? 3 : 0; 6 * (3 * share + 40 * rows + 4 * work + 180 + 12 * pieces * singles) / 4"
#define SOFTMAX_PARTS_SEG_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; 6 * (18 * share + 40 * rows + 4 * (32 + 7 * segments) * pieces + 180) / 4"

#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef EXP_ONCE
#define EXP_ONCE 0
#endif
// STATS (0 unless defined) selects the segmented form's statistics kernel,
// SEGMENTED (`include/norm.h`) its output kernel.
#ifndef STATS
#define STATS 0
#endif
// PARTS (0 unless defined) with EXP_ONCE selects the split form's output
// kernel for a softmax stored as FP8, in the format OUT_F8 names.
#ifndef PARTS
#define PARTS 0
#endif
#ifndef OUT_F8
#define OUT_F8 1
#endif

// Registers beyond rows.h's: $m11 head elements of the current range,
// $m12 matrix row i (causal), $m13 the link register of `call`, $m14 kept
// elements (the row length unless causal); $a8:9 scale, $a10:11 the row
// maximum m, $a12:13 1 / s (as pairs of lanes), $a14:15 zero.

// $m6 = whole quads after the head of a range of $m14 elements, or its
// tail's elements.
.macro quads
        sub     $m6, $m14, $m11
        shr     $m6, $m6, 2
.endm
.macro tail
        sub     $m6, $m14, $m11
        and     $m6, $m6, 3
.endm

// $m11 = single elements before the first 8-byte boundary at `ptr`, at
// most $m14.
.macro head ptr
        sub     $m11, $mzero, \ptr
        and     $m11, $m11, 7
        shr     $m11, $m11, 1
        min     $m11, $m11, $m14
.endm

// e = exp(x * scale - m) of one element into $a4 ($a5..$a7 stay zero, so
// `f32v4acc` adds it alone).
.macro exp_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a4, $a0 }
        f32mul  $a4, $a4, $a8
        f32sub  $a4, $a4, $a10
        f32exp  $a4, $a4
.endm

// e = exp(x * scale - m) for the four lanes of $a0:1, the first pair
// already converted into $a2:3 or $a4:5 (`lo`), into `lo` and `hi`.
.macro exp_rest lo, hi, lo0, lo1, hi0, hi1
        f32v2mul \lo, \lo, $a8:9
        f32v2mul \hi, \hi, $a8:9
        f32v2sub \lo, \lo, $a10:11
        f32v2sub \hi, \hi, $a10:11
        f32exp  \lo0, \lo0
        f32exp  \lo1, \lo1
        f32exp  \hi0, \hi0
        f32exp  \hi1, \hi1
.endm

// The output quad from $a2:3 and $a4:5 (converted inputs) into $a6:7.
.macro out_rest
        exp_rest $a2:3, $a4:5, $a2, $a3, $a4, $a5
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
.endm

.macro out_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        f32mul  $a0, $a0, $a8
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32mul  $a0, $a0, $a12
        f32tof16 $a0, $a0
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

// The lane-wise `op` (max or min) of the kept elements from $m7 into
// $a2:3, starting from `start` (an infinity) in every lane.
.macro extreme start, op
        setzi   $a2, \start
        sethi   $a2, \start
        mov     $a3, $a2
        rpt_at  4
        rpt     $m11, 2
        { ldb16step $a0, $m8+=, 2 ; f16v2\op $a2, $a2, $a0 }
        quads
        rpt_at  4
        rpt     $m6, 2
        { ld64step $a0:1, $m8+=, 8 ; f16v4\op $a2:3, $a2:3, $a0:1 }
        tail
        rpt_at  4
        rpt     $m6, 2
        { ldb16step $a0, $m8+=, 2 ; f16v2\op $a2, $a2, $a0 }
.endm

// Pass 1 of a row: m = the maximum of x * scale over its $m14 kept
// elements from $m7 (whose first $m11 are single), into $a10:11; `p`
// prefixes the labels.
.macro row_max p
        // m = the maximum of x * scale over the kept elements: the
        // largest x for a non-negative scale, the smallest otherwise.
        mov     $m8, $m7
        mov     $m6, $a8
        shr     $m6, $m6, 31
        brnz    $m6, \p\()_min
        extreme 0xfc00, max
        f16v4hmax $a2, $a2:3
        br      \p\()_scaled
\p\()_min:
        extreme 0x7c00, min
        // The smallest lane is minus the largest of the negated lanes.
        f16v4sub $a2:3, $a14:15, $a2:3
        f16v4hmax $a2, $a2:3
        f32sub  $a2, $azero, $a2
\p\()_scaled:
        f32mul  $a10, $a2, $a8
        mov     $a11, $a10
.endm

// Pass 2 of a row: s = the sum of exp(x * scale - m) over its $m14 kept
// elements from $m7 (whose first $m11 are single), into $a4, in the
// vector accumulators (single elements add into accumulator 0 alone).
.macro row_sum
        mov     $m8, $m7
        mov     $a5, $azero
        mov     $a6, $azero
        mov     $a7, $azero
        rpt_at  4
        rpt     $m11, 6
        exp_one
        f32v4acc $a4:7
        quads
        rpt_at  4
        rpt     $m6, 12
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a4:5, $a0 }
        f16v2tof32 $a6:7, $a1
        exp_rest $a4:5, $a6:7, $a4, $a5, $a6, $a7
        f32v4acc $a4:7
        mov     $a5, $azero
        mov     $a6, $azero
        mov     $a7, $azero
        tail
        rpt_at  4
        rpt     $m6, 6
        exp_one
        f32v4acc $a4:7
        total
.endm

// Pass 2 with each f16(e) stored: s over the $m14 kept elements from $m8
// (= $m7, whose first $m11 are single) into $a4, each e stored as f16 from
// $m10, which has the input's alignment; `p` prefixes the labels. The
// exponentials are computed in f16, as the FP8 result they feed is
// rounded far more coarsely: e = exp((x - ext) * scale) with the row's
// extreme ext (of `row_max`, in $a2; m = ext * scale) and the scale
// rounded to f16, `f16v2exp` rounding each e once, and s their sum in
// f32 (`f16v4acc`): seven issues per quad.
.macro row_sum_store p
        // ext and scale as f16 in every lane of $a4:5 and $a6:7.
        f32tof16 $a4, $a2
        f16v2pack $a4, $a4, $a4
        mov     $a5, $a4
        f32tof16 $a6, $a8
        f16v2pack $a6, $a6, $a6
        mov     $a7, $a6
        mov     $a1, $azero
        rpt_at  4
        rpt     $m11, 8
        exp_store_one
        quads
        rpt_at  4
        rpt     $m6, 8
        { ld64step $a0:1, $m8+=, 8 ; f16v4sub $a0:1, $a0:1, $a4:5 }
        f16v4mul $a0:1, $a0:1, $a6:7
        f16v2exp $a2, $a0
        { nop ; f16v2exp $a3, $a1 }
        { st64step $a2:3, $m10+=, 8 ; f16v4acc $a2:3 }
        mov     $a1, $azero
        tail
        rpt_at  4
        rpt     $m6, 8
        exp_store_one
        total
.endm

// The output pass's $m6 whole quads from $m8 to $m10: each quad widened
// into $a2:3 and $a4:5, turned into f16 in $a6:7 by `rest` and stored with
// the next quad's conversion, the first quad peeled off; `len` is the loop
// body's words. Branches to `done` when there are none.
.macro store_quads rest, len, done
        brz     $m6, \done
        sub     $m6, $m6, 1
        .align  8
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        f16v2tof32 $a4:5, $a1
        \rest
        rpt_at  4
        rpt     $m6, \len
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { st64step $a6:7, $m10+=, 8 ; f16v2tof32 $a4:5, $a1 }
        \rest
        st64step $a6:7, $m10+=, 8
.endm

// e = f16(exp(f16((x - ext) * scale))) of one element, in f16 with the
// row's extreme in both halves of $a4 and the scale of $a6 (see
// `row_sum_store`): added to the sum (lane 0 of $a0:1 alone, $a1 zero)
// and stored at $m10.
.macro exp_store_one
        { ldb16step $a0, $m8+=, 2 ; f16v2sub $a0, $a0, $a4 }
        f16v2mul $a0, $a0, $a6
        f16v2exp $a0, $a0
        f16v2pack $a0, $a0, $azero
        f16v4acc $a0:1
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

// One f16 exponential at $m8 times the f16 factor in $a12 (both halves),
// stored at $m10.
.macro scale_one
        { ldb16step $a0, $m8+=, 2 ; f16v2mul $a0, $a0, $a12 }
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
.endm

// One f16 exponential at $m8 times the f16 factor in $a12, stored as FP8
// at $m10 (the split form stored as FP8).
.macro scale_one_f8
        { ldb16step $a0, $m8+=, 2 ; f16v2mul $a0, $a0, $a12 }
        f16v4tof8 $a0, $a0:1
        mov     $m6, $a0
        st8step $m6, $m10+=, 1
.endm

// The f32 factor in $a12 as f16 in every lane of $a12:13.
.macro factor_f16
        f32tof16 $a12, $a12
        f16v2pack $a12, $a12, $a12
        mov     $a13, $a12
.endm

// Pass 3 of a row: elements [lo, min(hi, kept)) ($m4, $m5 and $m14) of
// the output row at $m9 from the input row at $m7, with m in $a10:11 and
// 1 / s in $a12:13; `p` prefixes the labels.
.macro row_write p
        min     $m6, $m5, $m14
        sub     $m14, $m6, $m4
        max     $m14, $m14, 0
        add     $m6, $m4, $m4
        add     $m8, $m7, $m6
        add     $m10, $m9, $m6
        head    $m8
        rpt_at  4
        rpt     $m11, 9
        out_one
        quads
        store_quads out_rest, 16, \p\()_out_tail
\p\()_out_tail:
        tail
        rpt_at  4
        rpt     $m6, 9
        out_one
.endm

        .text

// State: in0, out, rows, row_length, scale_bits (and first_row,
// matrix_rows when CAUSAL).

#if !SEGMENTED && !STATS && !PARTS
#if EXP_ONCE
#define ENTRY softmax_f16_once
#else
#define ENTRY softmax_f16
#endif
        .globl  ENTRY
        .type   ENTRY, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param scale_bits, 16, f32
#if CAUSAL
        .ipub_param first_row, 20, u32
        .ipub_param matrix_rows, 24, u32
#endif
#if CAUSAL && EXP_ONCE
        .ipub_cost SOFTMAX_ONCE_CAUSAL_COST
#elif CAUSAL
        .ipub_cost SOFTMAX_CAUSAL_COST
#elif EXP_ONCE
        .ipub_cost SOFTMAX_ONCE_COST
#else
        .ipub_cost SOFTMAX_COST
#endif
ENTRY:
        ld32    $a8, $m0, 16
        mov     $a9, $a8
        mov     $a14, $azero
        ld32    $m2, $m0, 12
#if EXP_ONCE && !CAUSAL
        // Every row whole: the parts of a split row would each recompute
        // the row's statistics in f32 (16 issues a quad), which costs
        // more than the whole row in f16 (10). A causal row's parts
        // compute over its kept elements only, and share the zeros after
        // them, so causal rows split as the f32 kernel's do.
        ld32    $m1, $m0, 8
#else
        row_bound 8, softmax_bound
#endif
        get     $m3, $wid
#if CAUSAL
        ld32    $m12, $m0, 20
        add     $m12, $m12, $m3
        ld32    $m11, $m0, 24
        max     $m11, $m11, 1
        mod_in_place $m12, $m11, $m14, softmax_first_i
#endif
softmax_whole:
        cmpult  $m6, $m3, $m1
        brz     $m6, softmax_split
        whole_row 0, 4
#if EXP_ONCE
        call    $m13, softmax_row_once
#else
        call    $m13, softmax_row
#endif
        add     $m3, $m3, 6
#if CAUSAL
        add     $m12, $m12, 6
        ld32    $m11, $m0, 24
        max     $m11, $m11, 1
softmax_wrap:
        cmpult  $m6, $m12, $m11
        brnz    $m6, softmax_whole
        sub     $m12, $m12, $m11
        br      softmax_wrap
#else
        br      softmax_whole
#endif
softmax_split:
#if !EXP_ONCE || CAUSAL
#if CAUSAL
        // The whole-row loop left i for row $m3; the split row is at most
        // five rows before it.
        mov     $m14, $m3
#endif
        split_row 8, 0, 4, softmax_done
#if CAUSAL
        sub     $m14, $m14, $m3
        sub     $m12, $m12, $m14
        ld32    $m11, $m0, 24
        max     $m11, $m11, 1
softmax_unwrap:
        cmpslt  $m6, $m12, 0
        brz     $m6, softmax_split_row
        add     $m12, $m12, $m11
        br      softmax_unwrap
softmax_split_row:
#endif
        call    $m13, softmax_row
#endif
softmax_done:
        exitz   $mzero

// One row: statistics over its kept elements, then elements [lo, hi) of
// the output. Keeps $m0..$m3, $m12 and $m13.
softmax_row:
#if CAUSAL
        add     $m14, $m12, 1
        min     $m14, $m14, $m2
#else
        mov     $m14, $m2
#endif
        head    $m7

        row_max softmax

        row_sum
        f32rcp  $a12, $a4
        mov     $a13, $a12

        row_write softmax
softmax_zeros:
#if CAUSAL
        // Zeros for the masked elements of [lo, hi): from the cursor (at
        // max(lo, kept)) to hi, with 64-bit stores between single ones.
        sub     $m14, $m10, $m9
        shr     $m14, $m14, 1
        sub     $m14, $m5, $m14
        max     $m14, $m14, 0
        head    $m10
        rpt     $m11, 1
        st16step $mzero, $m10+=, 2
        quads
        rpt     $m6, 1
        st64step $a14:15, $m10+=, 8
        tail
        rpt     $m6, 1
        st16step $mzero, $m10+=, 2
#endif
        br      $m13

#if EXP_ONCE
// One whole row with each exponential computed once: as `softmax_row`, but
// the sum pass stores f16(e) in the output row and the last pass rescales
// it in place. Keeps $m0..$m3, $m12 and $m13.
softmax_row_once:
#if CAUSAL
        add     $m14, $m12, 1
        min     $m14, $m14, $m2
#else
        mov     $m14, $m2
#endif
        head    $m7
        row_max softmax_once

        // Pass 2: s, storing each f16(e) from the start of the output row.
        mov     $m8, $m7
        mov     $m10, $m9
        row_sum_store softmax_once
        f32rcp  $a12, $a4
        factor_f16

        // Pass 3: the kept elements times f16(1 / s), in place, in f16.
        mov     $m8, $m9
        mov     $m10, $m9
        rpt_at  4
        rpt     $m11, 4
        scale_one
        quads
        rpt_at  4
        rpt     $m6, 4
        { ld64step $a0:1, $m8+=, 8 ; f16v4mul $a0:1, $a0:1, $a12:13 }
        { st64step $a0:1, $m10+=, 8 ; mov $a2, $azero }
        tail
        rpt_at  4
        rpt     $m6, 4
        scale_one
        br      softmax_zeros
#endif

        .size   ENTRY, . - ENTRY
#endif

#if STATS
// A piece of the statistics walk (`share_pieces`), taken as a row of its
// own from $m7 (the row kept in $m12): its maximum and sum into its
// record, and with EXP_ONCE its exponentials stored $m13 bytes on.
.macro softmax_stats_piece_body
        mov     $m12, $m7
        sub     $m14, $m5, $m4
        add     $m6, $m4, $m4
        add     $m7, $m7, $m6
        head    $m7
        row_max softmax_stats
#if EXP_ONCE
        mov     $m8, $m7
        add     $m10, $m7, $m13
        row_sum_store softmax_stats
#else
        row_sum
#endif
        st32    $a10, $m9, 0
        st32    $a4, $m9, 4
        mov     $m7, $m12
.endm
// The next row: $m13 is taken, so the row's bytes are added twice.
.macro softmax_stats_next_row
        add     $m7, $m7, $m2
        add     $m7, $m7, $m2
        add     $m9, $m9, ROW_RECORDS
.endm

// ---- Segmented softmax: statistics -------------------------------------
// Rows cut into segments on several tiles (`Partition::Segments`; the
// records and shares of `include/norm.h`): each worker takes an equal
// share of the tile's elements and writes, for each row its share meets,
// m = the maximum of x * scale over the piece and s = the sum of
// exp(x * scale - m) over it, in f32, to its record of the row
// (`[rows][6]` records of 16 bytes); its record of every other row gets
// m = -FLT_MAX and s = 0, which a combination weighs by exp(-FLT_MAX - M)
// = 0. `fold_records.S` folds a row's six records into the tile's one.
// With EXP_ONCE (`softmax_stats_f16_once`, before `softmax_parts_f16_once`
// on the same tile), each f16(exp(x * scale - m)) is also stored, in in1,
// at its element's place.
// State: in0, out (the records), rows, row_length, scale_bits (and in1,
// the exponentials, with EXP_ONCE).
#if EXP_ONCE
#define STATS_ENTRY softmax_stats_f16_once
#else
#define STATS_ENTRY softmax_stats_f16
#endif
        .globl  STATS_ENTRY
        .type   STATS_ENTRY, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param scale_bits, 16, f32
#if EXP_ONCE
        .ipub_param in1, 20, ptr
        .ipub_cost SOFTMAX_STATS_ONCE_COST
#else
        .ipub_cost SOFTMAX_STATS_COST
#endif
STATS_ENTRY:
        ld32    $a8, $m0, 16
        mov     $a9, $a8
        mov     $a14, $azero
        ld32    $m1, $m0, 8
        ld32    $m2, $m0, 12
#if EXP_ONCE
        // $m13 = the exponentials' address less the input's: each element's
        // exponential is at its input's address plus $m13.
        ld32    $m13, $m0, 20
        ld32    $m6, $m0, 0
        sub     $m13, $m13, $m6
#endif
        ld32    $m7, $m0, 0
        ld32    $m9, $m0, 4
        get     $m3, $wid
        mul     $m6, $m3, PART_RECORD
        add     $m9, $m9, $m6
        clear_softmax_records softmax_stats
        share_pieces softmax_stats, softmax_stats_piece_body, softmax_stats_next_row
        exitz   $mzero
        .size   STATS_ENTRY, . - STATS_ENTRY
#elif SEGMENTED
// ---- Segmented softmax: the output -------------------------------------
// After the exchange has brought every tile's record of each row (the
// fold of its six), each worker takes an equal share of the tile's
// elements and, for each row its share meets, combines the row's
// `segments` records into M = the largest m and S = the sum of
// s * exp(m - M), then writes exp(x * scale - M) * (1 / S) rounded to f16
// for its piece of the row.
// State: in0, out, rows, row_length, scale_bits, in1 (the records),
// segments.
        .globl  softmax_parts_f16
        .type   softmax_parts_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param scale_bits, 16, f32
        .ipub_param in1, 20, ptr
        .ipub_param segments, 24, u32
        .ipub_cost SOFTMAX_PARTS_SEG_COST
softmax_parts_f16:
        parts_begin 8, 12, 4, 20, softmax_parts_done
        ld32    $a8, $m0, 16
        mov     $a9, $a8
        mov     $a14, $azero
softmax_parts_piece:
        parts_piece_range 12
        // M and S over the row's records, then 1 / S.
        ld32    $m6, $m0, 24
        softmax_records $m2, $m6
        f32rcp  $a12, $a12
        mov     $a13, $a12
        mov     $a11, $a10
        mov     $m14, $m5
        row_write softmax_parts
        parts_next 12, 20, softmax_parts_piece, softmax_parts_done
softmax_parts_done:
        exitz   $mzero
        .size   softmax_parts_f16, . - softmax_parts_f16
#elif PARTS
// ---- Split softmax stored as FP8: the output ----------------------------
// After `softmax_stats_f16_once` on the same tile (the split form, for a
// tile whose rows do not divide among the workers), each worker takes
// the same share of the tile's elements and, for each row its share
// meets, combines the row's six records into M = the largest m and S =
// the sum of s * exp(m - M), then rescales the exponentials stored for
// its piece, which are relative to its own record's m, by
// exp(m - M) / S: f16(f16(e) * factor), converted to FP8 with the
// output's scale (OUT_F8: 1 for F143, 2 for F152) as `cast_f8.S` does.
// State: in0 (the exponentials), out (FP8), rows, row_length, out_scale,
// in1 (the records).
        .globl  softmax_parts_f16_once
        .type   softmax_parts_f16_once, @function
        .ipub_param in0, 0, ptr
        .ipub_param out, 4, ptr
        .ipub_param rows, 8, u32
        .ipub_param row_length, 12, u32
        .ipub_param out_scale, 16, i32
        .ipub_param in1, 20, ptr
        .ipub_cost SOFTMAX_PARTS_ONCE_COST
softmax_parts_f16_once:
#if OUT_F8 == 2
        setzi   $m10, 1
#else
        setzi   $m10, 0
#endif
        fp8_config 16
        parts_begin 8, 12, 4, 20, softmax_once_parts_done
softmax_once_parts_piece:
        parts_piece_range 12
        // A piece that is its whole row ($m6 holds the row's length) made
        // the row's only live record: the other five hold m = -FLT_MAX and
        // s = 0. For a finite m the combination below gives M = m and S =
        // s exactly (every other term is 0 * exp(-FLT_MAX - m) = +0), and
        // the factor exp(m - M) / S is 1 / s, so the piece reads its own
        // record and skips the combination. A row whose m is not finite
        // has a NaN exponential ((x - ext) * scale is inf - inf, NaN - ext
        // or 0 * inf at the extreme), so s is NaN and both ways give a NaN
        // factor, which every output of the piece takes (FP8 has one NaN).
        brnz    $m4, softmax_once_combine
        cmpeq   $m6, $m5, $m6
        brz     $m6, softmax_once_combine
        get     $m6, $wid
        mul     $m6, $m6, PART_RECORD
        add     $m6, $m6, $m2
        ld32    $a12, $m6, 4
        f32rcp  $a12, $a12
        br      softmax_once_factor
softmax_once_combine:
        // M, then S, then this worker's factor from its own record.
        softmax_records $m2, 6
        f32rcp  $a12, $a12
        get     $m6, $wid
        mul     $m6, $m6, PART_RECORD
        add     $m6, $m6, $m2
        ld32    $a0, $m6, 0
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32mul  $a12, $a12, $a0
softmax_once_factor:
        factor_f16
        // Elements [lo, hi) of the row: the exponentials from $m8, the
        // FP8 result from $m10, at half the exponentials' byte offset.
        add     $m6, $m4, $m4
        add     $m8, $m7, $m6
        fp8_cursor 4
        sub     $m14, $m5, $m4
        head    $m8
        rpt_at  4
        rpt     $m11, 5
        scale_one_f8
        quads
        rpt_at  4
        rpt     $m6, 4
        { ld64step $a0:1, $m8+=, 8 ; f16v4mul $a0:1, $a0:1, $a12:13 }
        f16v4tof8 $a6, $a0:1
        st32step $a6, $m10+=, 4
        tail
        rpt_at  4
        rpt     $m6, 5
        scale_one_f8
        parts_next 12, 20, softmax_once_parts_piece, softmax_once_parts_done
softmax_once_parts_done:
        exitz   $mzero
        .size   softmax_parts_f16_once, . - softmax_parts_f16_once
#endif
