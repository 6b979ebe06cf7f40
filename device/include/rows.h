// Shared pieces of the row-wise kernels (casts, add, GELU, rearrange,
// softmax, layernorm).
//
// Element-wise kernels ignore the row structure: their operands are dense
// `rows * row_length` element arrays, so they are split into units of a few
// elements (4 for f16 and FP8, 2 for f32 add) and worker `w` takes units
// w, w + 6, w + 12, ...  Every unit then starts at a multiple of its size
// from a 16-byte aligned buffer, so the 64-bit accesses of the vector loop
// are always aligned whatever the row length, and the six workers stay
// balanced even when there are fewer than six rows. The partial unit at the
// end (the tail, fewer elements than a unit) is done by worker 5, which has
// the fewest whole units.
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

// Row kernels (softmax, layernorm) give worker `w` rows w, w + 6, ... and
// walk each row with 16-bit accesses, so rows may start at any even
// address. Their register conventions:
//   $m0  state struct
//   $m1  rows
//   $m2  row_length
//   $m3  current row
//   $m4  row bytes (2 * row_length)
//   $m5  six rows' bytes
//   $m6  scratch
//   $m7  current input row, $m9 current output row
//   $m8, $m10 cursors within them
//   $m11.. free for the kernel

// Sets $m1..$m5, $m7 and $m9 for the worker's first row.
.macro row_setup rows_off, len_off, in_off, out_off
        ld32    $m1, $m0, \rows_off
        ld32    $m2, $m0, \len_off
        get     $m3, $wid
        add     $m4, $m2, $m2
        mul     $m5, $m4, 6
        mul     $m6, $m3, $m4
        ld32    $m7, $m0, \in_off
        add     $m7, $m7, $m6
        ld32    $m9, $m0, \out_off
        add     $m9, $m9, $m6
.endm

// Branches to `done` when the current row is past the last.
.macro row_check done
        cmpult  $m6, $m3, $m1
        brz     $m6, \done
.endm

// Moves to the worker's next row.
.macro row_advance
        add     $m3, $m3, 6
        add     $m7, $m7, $m5
        add     $m9, $m9, $m5
.endm

// `a = a mod b` for b >= 1 and a < 2^31 by binary long division (there is
// no divide instruction); clobbers $m6 and `bit`.
.macro mod_in_place a, b, bit, label
        setzi   \bit, 30
\label:
        shr     $m6, \a, \bit
        cmpult  $m6, $m6, \b
        brnz    $m6, \label\()_skip
        shl     $m6, \b, \bit
        sub     \a, \a, $m6
\label\()_skip:
        brnzdec \bit, \label
.endm
