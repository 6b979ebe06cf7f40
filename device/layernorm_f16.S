// Layer normalisation of each row of an f16 `[rows][row_length]` operand
// with f16 gamma (in1) and beta (in2) of `[row_length]`, in f32: mean,
// biased variance, `(x - mean) * rsqrt(var + epsilon) * gamma + beta`
// rounded to f16. The mean divides by row_length; the variance
// multiplies by its `f32rcp`.
//
// Three passes per row. The mean sums the row in the vector accumulators,
// one bundle per quad (`f16v4acc`); the variance sums the squares of
// `x - mean` in f32 (`f32v4sqacc`), five issues per quad; the output pass
// takes 16 issues per quad, the loads of x, gamma and beta and the store
// of the previous quad riding in bundles. Every pass walks its range as
// single elements up to x's first 8-byte boundary (the head), aligned
// quads with 64-bit loads, then single elements (the tail). The output
// pass reads gamma and beta too, which are 8-byte aligned at the row's
// start: where the head leaves them 8-byte aligned it loads their quads
// with 64-bit loads, where it leaves them 4-byte aligned (a row of an even
// length that starts two elements past a quad) with pairs of 32-bit loads
// in the same issues, and otherwise (about half the rows of an odd length,
// where they are 2-byte aligned) with four 16-bit loads each, packed into
// pairs. See `include/rows.h` for the work split, which
// gives a long row to all six workers.

#include "include/rows.h"
#include "include/norm.h"

// OUT_F8 (0 unless defined) selects the variant that stores its result as
// FP8, 1 for F143 and 2 for F152: a cast to FP8 fused into the layernorm
// (`src/fuse.rs`). Each output quad is rounded to f16 exactly as the f16
// variant stores it, then converted with `f16v4tof8` and the result's
// scale exactly as `cast_f16_f143` converts it, so the bytes are those of
// the two kernels run one after the other: one more issue per quad (two
// per single element, whose byte is stored alone).
#ifndef OUT_F8
#define OUT_F8 0
#endif

// PARTS (0 unless defined) selects the split form's normalising kernel
// (`include/norm.h`): `layernorm_stats_f16` has written the statistics of
// each worker's share of each row to the records in in3, and each worker
// combines the records of the rows its share meets and writes its share.
// Its state is the whole-row variant's with in3 last.
#ifndef PARTS
#define PARTS 0
#endif

// Cycles (fitted with `tests/row_kernels/calibration.rs`): six per issue
// of the busiest worker, which has `whole` rows and, when the rows split,
// one part of a split row. A row costs 22 issues per quad (1 + 5 + 16 in
// the three passes), about 10 more per single element of its head and tail
// (18 for the two of a row of a length 2 mod 4, which every pass has), and
// a fixed 90 (99 when rows are not a multiple of 4 long: the output pass
// looks for its alignment). Rows of an odd length take four issues more
// per quad where gamma's quads do not meet theirs (26 in all), which every
// row of the busiest worker does (a worker's rows alternate between two
// alignments of the same parity), and about 8 per single element. A part
// costs the statistics (6 per quad) and its share of the output (20 per
// quad for a row of an odd length). All in quarter issues, so quads count
// per element. The FP8 variant's output pass takes one more issue per quad
// and per single element; its coefficients are fitted the same way (worst
// 12 % off over the calibration grid).
#define LAYERNORM_F8_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 27 * row_length + 32 * singles : 23 * row_length + (row_length % 4 == 2 ? 74 : 42) * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 20 * row_length + 48 * singles : 17 * row_length + 28 * singles; 80 + 6 * (whole * (row + (row_length % 4 == 0 ? 360 : 396)) + split * (6 * row_length + 14 * singles + 620 + part / parts)) / 4"
#define LAYERNORM_COST "split = rows % 6 >= 1 && rows % 6 <= 3; whole = split ? rows / 6 : (rows + 5) / 6; parts = rows % 6 == 1 ? 6 : rows % 6 == 2 ? 3 : 2; singles = row_length < 4 ? row_length : row_length % 4 == 0 ? 0 : row_length % 4 == 2 ? 2 : row_length % 4 + 4; misaligned = row_length % 2 != 0; row = misaligned ? 26 * row_length + 32 * singles : 22 * row_length + (row_length % 4 == 2 ? 70 : 38) * singles; part = misaligned && (rows % 6 >= 2 || rows / 6 * row_length % 2 == 1) ? 20 * row_length + 32 * singles : 16 * row_length + 24 * singles; 40 + 6 * (whole * (row + (row_length % 4 == 0 ? 360 : 396)) + split * (6 * row_length + 14 * singles + 620 + part / parts)) / 4"

// The split form's normalising kernel: six per issue of the busiest
// worker, the one whose share meets the most rows (`pieces`, as in
// `layernorm_stats_f16.S`): 16 issues per quad of its share (17 for FP8),
// about 19 when rows are of an odd length (the quads of about half of them
// do not meet gamma's and take four issues more, and their heads and tails
// single elements: 16 more per piece), 112 (116) per piece for the
// combination of the row's records and the output pass's set-up, 5 more
// when rows are not a multiple of 4 long (the head's set-up) and 32 (34)
// more again for a row of a length 2 mod 4 (its head or tail), and 20 (25)
// per launch; all in quarter issues. Fitted the same way, worst 15 % off.
// The segmented form's combination walks a record per segment, 11 issues
// each, after a set-up of 71 (75).
#define LAYERNORM_PARTS_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 16) * share + 4 * (112 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 32 * (row_length % 4 == 2)) * pieces + 4 * 20) / 4"
#define LAYERNORM_PARTS_SEG_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 16) * share + 4 * (71 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 32 * (row_length % 4 == 2) + 11 * segments) * pieces + 4 * 20) / 4"
#define LAYERNORM_PARTS_F8_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 17) * share + 4 * (116 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 34 * (row_length % 4 == 2)) * pieces + 4 * 25) / 4"
#define LAYERNORM_PARTS_F8_SEG_COST "n = rows * row_length; q = n / 4; q6 = q / 6; rest = q % 6; share = (n + 23) / 24 * 4; s0 = 0; e0 = s0 + 4 * (q6 + (0 < rest)); p0 = e0 > s0 ? (e0 - 1) / row_length - s0 / row_length + 1 : 0; s1 = 4 * (1 * q6 + (1 < rest ? 1 : rest)); e1 = s1 + 4 * (q6 + (1 < rest)); p1 = e1 > s1 ? (e1 - 1) / row_length - s1 / row_length + 1 : 0; s2 = 4 * (2 * q6 + (2 < rest ? 2 : rest)); e2 = s2 + 4 * (q6 + (2 < rest)); p2 = e2 > s2 ? (e2 - 1) / row_length - s2 / row_length + 1 : 0; s3 = 4 * (3 * q6 + (3 < rest ? 3 : rest)); e3 = s3 + 4 * (q6 + (3 < rest)); p3 = e3 > s3 ? (e3 - 1) / row_length - s3 / row_length + 1 : 0; s4 = 4 * (4 * q6 + (4 < rest ? 4 : rest)); e4 = s4 + 4 * (q6 + (4 < rest)); p4 = e4 > s4 ? (e4 - 1) / row_length - s4 / row_length + 1 : 0; s5 = 4 * (5 * q6 + (5 < rest ? 5 : rest)); e5 = n; p5 = e5 > s5 ? (e5 - 1) / row_length - s5 / row_length + 1 : 0; m01 = p0 > p1 ? p0 : p1; m23 = p2 > p3 ? p2 : p3; m45 = p4 > p5 ? p4 : p5; m03 = m01 > m23 ? m01 : m23; pieces = m03 > m45 ? m03 : m45; misaligned = row_length % 2 != 0 && rows > 1; 6 * ((misaligned ? 19 : 17) * share + 4 * (75 + 16 * misaligned + 5 * (row_length % 4 != 0 && rows > 1) + 34 * (row_length % 4 == 2) + 11 * segments) * pieces + 4 * 25) / 4"

// Registers beyond rows.h's: $m11 head elements, $m12 gamma cursor,
// $m13 beta cursor, $m14 the link register of `call`; $a14 1 / row_length,
// $a10:11 the mean, $a12:13 1 / sqrt(var + epsilon) (as pairs of lanes).

.macro out_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a0, $a0 }
        { ldb16step $a1, $m12+=, 2 ; f32sub $a0, $a0, $a10 }
        { ldb16step $a2, $m13+=, 2 ; f16tof32 $a1, $a1 }
        f16tof32 $a2, $a2
        f32mul  $a0, $a0, $a12
        f32mul  $a0, $a0, $a1
        f32add  $a0, $a0, $a2
        f32tof16 $a0, $a0
#if OUT_F8
        f16v4tof8 $a0, $a0:1
        mov     $m6, $a0
        st8step $m6, $m10+=, 1
#else
        mov     $m6, $a0
        st16step $m6, $m10+=, 2
#endif
.endm

// Words of `out_one` and of the quad loop's body (with 64-bit loads of
// gamma and beta; the narrow loads take two words more), for `rpt`.
#if OUT_F8
#define OUT_ONE_WORDS 14
#define OUT_QUAD_WORDS 21
#else
#define OUT_ONE_WORDS 13
#define OUT_QUAD_WORDS 20
#endif

// The output pass's $m6 quads (at least one) from $m8 to $m10, gamma and
// beta at $m12 and $m13 (`narrow`: see `out_rest`): each quad widened
// into $a2:3 and $a4:5 and stored with the next one's conversion, the
// first peeled off.
.macro out_quads narrow
        sub     $m6, $m6, 1
        .align  8
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { nop ; f16v2tof32 $a4:5, $a1 }
        out_rest \narrow
#if OUT_F8
        f16v4tof8 $a6, $a6:7
        rpt_at  4
        rpt     $m6, OUT_QUAD_WORDS + (\narrow == 1 ? 2 : \narrow == 2 ? 10 : 0)
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { st32step $a6, $m10+=, 4 ; f16v2tof32 $a4:5, $a1 }
        out_rest \narrow
        f16v4tof8 $a6, $a6:7
        st32step $a6, $m10+=, 4
#else
        rpt_at  4
        rpt     $m6, OUT_QUAD_WORDS + (\narrow == 1 ? 2 : \narrow == 2 ? 10 : 0)
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a2:3, $a0 }
        { st64step $a6:7, $m10+=, 8 ; f16v2tof32 $a4:5, $a1 }
        out_rest \narrow
        st64step $a6:7, $m10+=, 8
#endif
.endm

// The output quad from x converted into $a2:3 and $a4:5: loads gamma and
// beta, leaves the f16 results in $a6:7. `narrow` is gamma's and beta's
// alignment: 0 for 8 bytes; 1 for 4 (a row of an even length that starts
// two elements past a quad: its quads meet gamma's pairs), where each
// takes two 32-bit loads, which ride in bundles as the 64-bit one does,
// so the quad costs the same 14 issues; 2 for 2 (about half the rows of
// an odd length), where each takes four 16-bit loads, riding in bundles
// too, and two packs of their halves into pairs: 18 issues.
.macro out_rest narrow=0
.if \narrow == 2
        { ldb16step $a0, $m12+=, 2 ; f32v2sub $a2:3, $a2:3, $a10:11 }
        { ldb16step $a1, $m12+=, 2 ; f32v2sub $a4:5, $a4:5, $a10:11 }
        { ldb16step $a6, $m12+=, 2 ; f32v2mul $a2:3, $a2:3, $a12:13 }
        { ldb16step $a7, $m12+=, 2 ; f16v2pack $a0, $a0, $a1 }
        { ldb16step $a1, $m13+=, 2 ; f16v2pack $a6, $a6, $a7 }
        { ldb16step $a7, $m13+=, 2 ; f32v2mul $a4:5, $a4:5, $a12:13 }
        f16v2tof32 $a8:9, $a0
        f32v2mul $a2:3, $a2:3, $a8:9
        { ldb16step $a0, $m13+=, 2 ; f16v2tof32 $a8:9, $a6 }
        { ldb16step $a6, $m13+=, 2 ; f32v2mul $a4:5, $a4:5, $a8:9 }
        f16v2pack $a1, $a1, $a7
        f16v2pack $a0, $a0, $a6
        f16v2tof32 $a8:9, $a1
        f32v2add $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a0
        f32v2add $a4:5, $a4:5, $a8:9
.elseif \narrow
        { ld32step $a6, $m12+=, 4 ; f32v2sub $a2:3, $a2:3, $a10:11 }
        { ld32step $a7, $m12+=, 4 ; f32v2sub $a4:5, $a4:5, $a10:11 }
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        f16v2tof32 $a8:9, $a6
        f32v2mul $a2:3, $a2:3, $a8:9
        { ld32step $a6, $m13+=, 4 ; f16v2tof32 $a8:9, $a7 }
        { ld32step $a7, $m13+=, 4 ; f32v2mul $a4:5, $a4:5, $a8:9 }
.else
        { ld64step $a6:7, $m12+=, 8 ; f32v2sub $a2:3, $a2:3, $a10:11 }
        f32v2sub $a4:5, $a4:5, $a10:11
        f32v2mul $a2:3, $a2:3, $a12:13
        f32v2mul $a4:5, $a4:5, $a12:13
        f16v2tof32 $a8:9, $a6
        f32v2mul $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a7
        { ld64step $a6:7, $m13+=, 8 ; f32v2mul $a4:5, $a4:5, $a8:9 }
.endif
.if \narrow < 2
        f16v2tof32 $a8:9, $a6
        f32v2add $a2:3, $a2:3, $a8:9
        f16v2tof32 $a8:9, $a7
        f32v2add $a4:5, $a4:5, $a8:9
.endif
        f32v2tof16 $a6, $a2:3
        f32v2tof16 $a7, $a4:5
.endm

        .text

// State: in0, in1 (gamma), in2 (beta), out, rows, row_length,
// epsilon_bits.

#if PARTS
// State: as the whole-row variant's, then in3 (the records).
#if OUT_F8
#define PARTIALS_OFF 32
#else
#define PARTIALS_OFF 28
#endif
#if OUT_F8
        .globl  layernorm_parts_f16_f8
        .type   layernorm_parts_f16_f8, @function
#else
        .globl  layernorm_parts_f16
        .type   layernorm_parts_f16, @function
#endif
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param in2, 8, ptr
        .ipub_param out, 12, ptr
        .ipub_param rows, 16, u32
        .ipub_param row_length, 20, u32
        .ipub_param epsilon_bits, 24, f32
#if OUT_F8
        .ipub_param out_scale, 28, i32
#endif
        .ipub_param in3, PARTIALS_OFF, ptr
#if SEGMENTED
        .ipub_param segments, PARTIALS_OFF + 4, u32
#endif
#if OUT_F8 && SEGMENTED
        .ipub_cost LAYERNORM_PARTS_F8_SEG_COST
#elif OUT_F8
        .ipub_cost LAYERNORM_PARTS_F8_COST
#elif SEGMENTED
        .ipub_cost LAYERNORM_PARTS_SEG_COST
#else
        .ipub_cost LAYERNORM_PARTS_COST
#endif
#if OUT_F8
layernorm_parts_f16_f8:
        ld32    $m6, $m0, 28
        and     $m6, $m6, 0xff
        shl     $m6, $m6, 8
#if OUT_F8 == 2
        or      $m6, $m6, 1
#endif
        put     $fp8cfg, $m6
#else
layernorm_parts_f16:
#endif
        parts_begin 16, 20, 12, PARTIALS_OFF, parts_done
        // Each piece: the share's elements in the row, [lo, hi) within
        // it. The mean is sum(n_i mean_i) / n, and M2 is sum(M2_i +
        // n_i (mean_i - mean)^2) over the row's six records.
parts_piece:
        parts_piece_range 20
        mov     $m8, $m2
        mov     $m10, $m2
        mov     $a0, $azero
        mov     $a1, $azero
#if SEGMENTED
        // The row's record of each segment, whose counts sum to its
        // length: $a14 = 1 / that.
        ld32    $m6, $m0, PARTIALS_OFF + 4
        chan_mean $m6
        mov     $a11, $a10
        chan_m2 $m6, $m10
#else
        rpt     6, 3
        ld64step $a2:3, $m8+=, PART_RECORD
        f32mul  $a2, $a2, $a3
        f32add  $a0, $a0, $a2
        // Divided, as in the whole row's mean.
        ld32    $a8, $m0, 20
        f32fromi32 $a8, $a8
        f32div  $a10, $a0, $a8
        mov     $a11, $a10
        chan_m2 6, $m10
#endif
        f32mul  $a4, $a1, $a14
        ld32    $a8, $m0, 24
        f32add  $a4, $a4, $a8
        f32rsqrt $a12, $a4
        mov     $a13, $a12
        call    $m14, layernorm_write
        parts_next 20, PARTIALS_OFF, parts_piece, parts_done
parts_done:
        exitz   $mzero
#else
#if OUT_F8
// State: as the f16 variant's, then out_scale.
        .globl  layernorm_f16_f8
        .type   layernorm_f16_f8, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param in2, 8, ptr
        .ipub_param out, 12, ptr
        .ipub_param rows, 16, u32
        .ipub_param row_length, 20, u32
        .ipub_param epsilon_bits, 24, f32
        .ipub_param out_scale, 28, i32
        .ipub_cost LAYERNORM_F8_COST
layernorm_f16_f8:
        // The format bit and the scale (bits 15..8) into $fp8cfg, as in
        // `cast_f8.S`.
        ld32    $m6, $m0, 28
        and     $m6, $m6, 0xff
        shl     $m6, $m6, 8
#if OUT_F8 == 2
        or      $m6, $m6, 1
#endif
        put     $fp8cfg, $m6
#else
        .globl  layernorm_f16
        .type   layernorm_f16, @function
        .ipub_param in0, 0, ptr
        .ipub_param in1, 4, ptr
        .ipub_param in2, 8, ptr
        .ipub_param out, 12, ptr
        .ipub_param rows, 16, u32
        .ipub_param row_length, 20, u32
        .ipub_param epsilon_bits, 24, f32
        .ipub_cost LAYERNORM_COST
layernorm_f16:
#endif
        ld32    $m2, $m0, 20
        mov     $a14, $m2
        f32fromi32 $a14, $a14
        f32rcp  $a14, $a14
        row_bound 16, layernorm_bound
        get     $m3, $wid
layernorm_whole:
        cmpult  $m6, $m3, $m1
        brz     $m6, layernorm_split
        whole_row 0, 12
        call    $m14, layernorm_row
        add     $m3, $m3, 6
        br      layernorm_whole
layernorm_split:
        split_row 16, 0, 12, layernorm_done
        call    $m14, layernorm_row
layernorm_done:
        exitz   $mzero

#endif

// One row: statistics over the whole row, then elements [lo, hi) of the
// output. Keeps $m0..$m3 and $m14.
layernorm_row:
        sub     $m11, $mzero, $m7
        and     $m11, $m11, 7
        shr     $m11, $m11, 1
        min     $m11, $m11, $m2

        // Pass 1: the mean.
        mov     $m8, $m7
        clear_upper
        rpt_at  4
        rpt     $m11, 3
        mean_sum_one
        quads
        rpt_at  4
        rpt     $m6, 2
        { ld64step $a0:1, $m8+=, 8 ; f16v4acc $a0:1 }
        tail
        rpt_at  4
        rpt     $m6, 3
        mean_sum_one
        total
        // The mean divides (correctly rounded): a row of one value has
        // that value as its mean, and no deviation for 1 / sqrt(epsilon)
        // to magnify, as a multiplication by 1 / n would leave.
        mov     $a8, $m2
        f32fromi32 $a8, $a8
        f32div  $a10, $a4, $a8
        mov     $a11, $a10

        // Pass 2: the biased variance, then 1 / sqrt(var + epsilon).
        mov     $m8, $m7
        clear_upper
        rpt_at  4
        rpt     $m11, 4
        deviation_square_one
        quads
        rpt_at  4
        rpt     $m6, 6
        deviation_square_quad
        clear_upper
        tail
        rpt_at  4
        rpt     $m6, 4
        deviation_square_one
        total
        f32mul  $a4, $a4, $a14
        ld32    $a8, $m0, 24
        f32add  $a4, $a4, $a8
        f32rsqrt $a12, $a4
        mov     $a13, $a12

        // Pass 3: normalise, scale and shift elements [lo, hi), with the
        // mean in $a10:11 and 1 / sqrt(var + epsilon) in $a12:13. Keeps
        // $m0..$m3 and $m14.
layernorm_write:
        add     $m6, $m4, $m4
        add     $m8, $m7, $m6
#if OUT_F8
        fp8_cursor 12
#else
        add     $m10, $m9, $m6
#endif
        ld32    $m12, $m0, 4
        add     $m12, $m12, $m6
        ld32    $m13, $m0, 8
        add     $m13, $m13, $m6
        sub     $m11, $m5, $m4
        // Every cursor aligned (the output's to 4 bytes for FP8, 8 for
        // f16, the others' to 8): quads from the start.
#if OUT_F8
        and     $m6, $m10, 3
        brnz    $m6, layernorm_head
        or      $m6, $m8, $m12
#else
        or      $m6, $m8, $m10
        or      $m6, $m6, $m12
#endif
        or      $m6, $m6, $m13
        and     $m6, $m6, 7
        brz     $m6, layernorm_aligned
layernorm_head:
        // Otherwise the head: single elements up to x's first 8-byte
        // boundary. Quads after it need the output's cursor aligned too,
        // and gamma and beta 8-byte aligned, or 4 for the narrow loads;
        // otherwise (rows of an odd length) the rest is single elements.
        out_head out_one, OUT_ONE_WORDS
#if OUT_F8
        and     $m6, $m10, 3
#else
        and     $m6, $m10, 7
#endif
        brnz    $m6, layernorm_singles
        shr     $m6, $m11, 2
        brz     $m6, layernorm_out_tail
        or      $m5, $m12, $m13
        and     $m5, $m5, 7
        brz     $m5, layernorm_wide
        and     $m5, $m5, 3
        brz     $m5, layernorm_narrow
        out_quads 2
        br      layernorm_out_tail
layernorm_singles:
        rpt_at  4
        rpt     $m11, OUT_ONE_WORDS
        out_one
        br      $m14
layernorm_narrow:
        out_quads 1
        br      layernorm_out_tail
layernorm_aligned:
        shr     $m6, $m11, 2
        brz     $m6, layernorm_out_tail
layernorm_wide:
        out_quads 0
layernorm_out_tail:
        and     $m6, $m11, 3
        rpt_at  4
        rpt     $m6, OUT_ONE_WORDS
        out_one
        br      $m14
#if PARTS && OUT_F8
        .size   layernorm_parts_f16_f8, . - layernorm_parts_f16_f8
#elif PARTS
        .size   layernorm_parts_f16, . - layernorm_parts_f16
#elif OUT_F8
        .size   layernorm_f16_f8, . - layernorm_f16_f8
#else
        .size   layernorm_f16, . - layernorm_f16
#endif
