// Shared pieces of the row-wise kernels (casts, add, GELU, rearrange,
// softmax, layernorm).
//
// Element-wise kernels ignore the row structure: their operands are dense
// `rows * row_length` element arrays, so they are split into units of a few
// elements (8 for the FP8 casts, 4 for f16, 2 for f32 add) and worker `w`
// takes units w, w + 6, w + 12, ...  Every unit then starts at a multiple
// of its size from a 16-byte aligned buffer, so the 64-bit accesses of the
// vector loop are always aligned whatever the row length, and the six
// workers stay balanced even when there are fewer than six rows. The
// partial unit at the end (the tail, fewer elements than a unit) is done by
// worker 5, which has the fewest whole units.
//
// Register conventions of the element-wise kernels:
//   $m0  state struct
//   $m1  element count n = rows * row_length
//   $m2  whole units q = n >> shift
//   $m3  tail elements n & (unit - 1)
//   $m4  worker id
//   $m5  this worker's whole units
//   $m6  scratch
//   $m7  in0 pointer, $m8 in1 pointer, $m9 out pointer
//   $m10.. free for the kernel

// Multiplying by DIV6_MUL and shifting right by DIV6_SHIFT divides by 6
// exactly for every value below 98304 (where the 32-bit product would
// overflow). Unit counts stay far below: a unit and its result take at
// least 12 bytes and a tile has 624 KiB.
#define DIV6_MUL 43691
#define DIV6_SHIFT 18

// For the reductions, which deal blocks of four values w, w + 6, ... to
// worker w: $m8 = this worker's blocks less one, for $m4 values and the
// worker id in $m5 ($m9 clobbered), or a branch to `done` when it has none.
.macro worker_blocks done
        shr     $m8, $m4, 2
        sub     $m8, $m8, $m5
        add     $m8, $m8, 5
        setzi   $m9, DIV6_MUL
        mul     $m8, $m8, $m9
        shr     $m8, $m8, DIV6_SHIFT
        brz     $m8, \done
        sub     $m8, $m8, 1
.endm

// Reads rows and row_length from the state struct and computes $m1..$m5 as
// above for units of (1 << shift) elements.
.macro flat_split rows_off, len_off, shift
        ld32    $m1, $m0, \rows_off
        ld32    $m2, $m0, \len_off
        mul     $m1, $m1, $m2
        shr     $m2, $m1, \shift
        and     $m3, $m1, (1 << \shift) - 1
        get     $m4, $wid
        sub     $m5, $m2, $m4
        add     $m5, $m5, 5
        setzi   $m6, DIV6_MUL
        mul     $m5, $m5, $m6
        shr     $m5, $m5, DIV6_SHIFT
.endm

// Sets `reg` to the state field at `off` plus the worker's first unit
// (`$m4 * unit_bytes`).
.macro worker_ptr reg, off, unit_bytes
        ld32    \reg, $m0, \off
        mul     $m6, $m4, \unit_bytes
        add     \reg, \reg, $m6
.endm

// $m10 = where element $m4 of the f16 row at $m7 (in the f16 operand at
// state offset 0) goes in the FP8 output at state offset `out_off`: one
// byte per element, so the row starts at half its byte offset in the
// input. Clobbers $m11.
.macro fp8_cursor out_off
        ld32    $m10, $m0, 0
        sub     $m10, $m7, $m10
        shr     $m10, $m10, 1
        add     $m10, $m10, $m4
        ld32    $m11, $m0, \out_off
        add     $m10, $m10, $m11
.endm

// Sets the FP8 configuration from the format bit in `$m10` (0 F143, 1
// F152) and the scale in the low byte of the state field at `off`, which
// goes to bits 15..8 of `$fp8cfg`. Clobbers `$m6` and `$m10`.
.macro fp8_config off
        ld32    $m6, $m0, \off
        and     $m6, $m6, 0xff
        shl     $m6, $m6, 8
        or      $m10, $m10, $m6
        put     $fp8cfg, $m10
.endm

// Sets `reg` to the state field at `off` plus the tail unit (`$m2 *
// unit_bytes`).
.macro tail_ptr reg, off, unit_bytes
        ld32    \reg, $m0, \off
        mul     $m6, $m2, \unit_bytes
        add     \reg, \reg, $m6
.endm

// Branches to `done` unless this worker owns the tail (worker 5 and a
// non-empty tail).
.macro tail_owner done
        brz     $m3, \done
        cmpeq   $m6, $m4, 5
        brz     $m6, \done
.endm

// The code section starts here (sections are 8-byte aligned), so offsets
// from this label tell where bundles may issue.
        .text
rows_text_start:

// Pads with a `nop` when needed so that the next instruction (a `rpt`)
// lands at `at` (0 or 4) modulo 8. Bundles issue only from 8-byte aligned
// addresses, so a body that starts with a bundle wants its `rpt` at 4, and
// one whose first bundle is its second word wants it at 0.
.macro rpt_at at
        .if ((. - rows_text_start) & 7) != \at
        nop
        .endif
.endm

// $a4 = the sum of the four f32 vector accumulators, which are cleared
// (the sum kept lane-wise by `f32v4acc`). Clobbers $a5..$a7.
.macro total
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        f32v2add $a4:5, $a4:5, $a6:7
        f32v2hadd $a4, $a4:5
.endm

// Stores the low `$m3` (1..3) f16 lanes of the 64-bit value `$lo:$hi` (two
// `$m` registers, clobbered) at `ptr` (post-incremented).
.macro store_f16_lanes lo, hi, ptr, label
        sub     $m3, $m3, 1
\label:
        st16step \lo, \ptr+=, 2
        shr     \lo, \lo, 16
        shl     $m6, \hi, 16
        or      \lo, \lo, $m6
        shr     \hi, \hi, 16
        brnzdec $m3, \label
.endm

// Stores the low `$m3` (1..3) bytes of `reg` (clobbered) at `ptr`
// (post-incremented).
.macro store_bytes reg, ptr, label
        sub     $m3, $m3, 1
\label:
        st8step \reg, \ptr+=, 1
        shr     \reg, \reg, 8
        brnzdec $m3, \label
.endm

// Row kernels (softmax, layernorm) compute statistics over a whole row
// before they can write any of it, and workers cannot share results within
// one launch (they run in no defined order). So rows are split like this:
// with rows = 6q + r, worker w takes whole rows w, w + 6, ... below a bound
// B, and when r is 1, 2 or 3 the last r rows are each split into g = 6 / r
// parts: worker w writes part p = w % g of row 6q + w / g, after computing
// that row's statistics itself. B is 6q then, and `rows` otherwise: with
// four or five rows left, splitting them would have some worker compute
// two rows' statistics to write less than a row, which costs more than the
// idle workers save. A part is a range of the row's aligned
// quads: the row is a head of single elements up to the first 8-byte
// boundary, Q whole quads and a tail; part p has quads [p Q', (p + 1) Q')
// with Q' = Q / g, the first part also the head and the last part the rest.
// A single long row is thus written by all six workers.
//
// Register conventions of the row kernels:
//   $m0  state struct
//   $m1  B, the bound of the whole-row loop
//   $m2  row_length
//   $m3  current row
//   $m4  first element of the row to write (lo), $m5 the end (hi)
//   $m6  scratch
//   $m7  current input row, $m9 current output row
//   $m8, $m10 cursors within them
//   $m11.. free for the kernel

// Sets $m1 = B from the state's row count at `rows_off`.
.macro row_bound rows_off, label
        ld32    $m1, $m0, \rows_off
        setzi   $m6, DIV6_MUL
        mul     $m6, $m1, $m6
        shr     $m6, $m6, DIV6_SHIFT
        mul     $m6, $m6, 6
        sub     $m3, $m1, $m6
        sub     $m3, $m3, 1
        cmpult  $m3, $m3, 3
        brz     $m3, \label
        mov     $m1, $m6
\label:
.endm

// Sets $m7 and $m9 for row $m3 and the whole row as the range to write.
.macro whole_row in_off, out_off
        add     $m6, $m2, $m2
        mul     $m6, $m6, $m3
        ld32    $m7, $m0, \in_off
        add     $m7, $m7, $m6
        ld32    $m9, $m0, \out_off
        add     $m9, $m9, $m6
        mov     $m4, $mzero
        mov     $m5, $m2
.endm

// Sets $m3, $m4, $m5, $m7 and $m9 for this worker's part of a split row,
// or branches to `none` when the rows leave nothing to split. Clobbers
// $m6, $m8, $m10, $m11 and $m13.
.macro split_row rows_off, in_off, out_off, none
        ld32    $m4, $m0, \rows_off
        setzi   $m6, DIV6_MUL
        mul     $m5, $m4, $m6
        shr     $m5, $m5, DIV6_SHIFT
        mul     $m5, $m5, 6
        sub     $m4, $m4, $m5
        sub     $m6, $m4, 1
        cmpult  $m6, $m6, 3
        brz     $m6, \none
        // $m4 = r, $m5 = 6q. For w <= 5, w / g = (w (5 r + 1)) >> 5.
        get     $m8, $wid
        mul     $m6, $m4, 5
        add     $m6, $m6, 1
        mul     $m6, $m8, $m6
        shr     $m6, $m6, 5
        add     $m3, $m5, $m6
        // g = 5 - r, or 6 when r = 1; p = w - g (w / g) into $m8.
        cmpeq   $m10, $m4, 1
        shl     $m10, $m10, 1
        sub     $m11, $mzero, $m4
        add     $m11, $m11, 5
        add     $m11, $m11, $m10
        mul     $m10, $m6, $m11
        sub     $m8, $m8, $m10
        add     $m6, $m2, $m2
        mul     $m6, $m6, $m3
        ld32    $m7, $m0, \in_off
        add     $m7, $m7, $m6
        ld32    $m9, $m0, \out_off
        add     $m9, $m9, $m6
        // $m10 = the head; $m13 = 4 Q' = 4 ((Q r) / 6), exact division
        // as Q r < 98304 whenever the rows fit a tile.
        sub     $m10, $mzero, $m7
        and     $m10, $m10, 7
        shr     $m10, $m10, 1
        min     $m10, $m10, $m2
        sub     $m13, $m2, $m10
        shr     $m13, $m13, 2
        mul     $m13, $m13, $m4
        setzi   $m6, DIV6_MUL
        mul     $m13, $m13, $m6
        shr     $m13, $m13, DIV6_SHIFT
        shl     $m13, $m13, 2
        // lo = head + p 4Q' (0 for the first part), hi = lo + 4Q' (the
        // row's end for the last part).
        mul     $m4, $m8, $m13
        add     $m4, $m4, $m10
        add     $m5, $m4, $m13
        cmpult  $m6, $mzero, $m8
        mul     $m4, $m4, $m6
        sub     $m11, $m11, 1
        cmpeq   $m6, $m8, $m11
        brz     $m6, \none\()_part
        mov     $m5, $m2
\none\()_part:
.endm

// `a = a mod b` for b >= 1 and a < 2^31 by binary long division (there is
// no divide instruction), starting from the highest bit the quotient can
// have, so a small quotient costs a few steps; clobbers $m6 and `bit`.
.macro mod_in_place a, b, bit, label
        setzi   \bit, 0
\label\()_up:
        add     $m6, \bit, 1
        shr     $m6, \a, $m6
        cmpult  $m6, $m6, \b
        brnz    $m6, \label
        add     \bit, \bit, 1
        br      \label\()_up
\label:
        shr     $m6, \a, \bit
        cmpult  $m6, $m6, \b
        brnz    $m6, \label\()_skip
        shl     $m6, \b, \bit
        sub     \a, \a, $m6
\label\()_skip:
        brnzdec \bit, \label
.endm
