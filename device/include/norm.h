// Shared pieces of the row-normalising kernels (layernorm, rmsnorm): the
// counts of a row's vector and tail parts, and the f32 accumulators'
// clearing (their total is rows.h's `total`). Both kernels keep $m11 = the
// row's head elements and accumulate in $a4:7.

// $m6 = whole quads after the head of the row, or its tail's elements.
.macro quads
        sub     $m6, $m2, $m11
        shr     $m6, $m6, 2
.endm
.macro tail
        sub     $m6, $m2, $m11
        and     $m6, $m6, 3
.endm

// Zeroes accumulators 1..3 before single elements go into accumulator 0.
.macro clear_upper
        mov     $a5, $azero
        mov     $a6, $azero
        mov     $a7, $azero
.endm

// The split form of the row-normalising kernels runs two kernels in one
// compute step: a statistics kernel, in which each worker takes an equal
// share of the tile's `rows * row_length` elements and writes the partial
// statistics of each row its share meets, and the normalising kernel, in
// which each worker combines the partials of the rows its share meets and
// writes its share of the output. Workers of one launch cannot share
// results, but the second launch starts after every worker of the first
// has ended. A share is a range of whole quads of the dense operand (so
// it starts 8-byte aligned), the quads split as evenly as they go and the
// last worker also the tail; it crosses row boundaries, so a share meets
// at most `rows / 6 + 2` rows. Each row has six 16-byte records, one per
// worker: the count of the row's elements in the worker's share, their
// mean and the sum of their squared deviations about that mean (f32), and
// a zero pad word; a worker whose share misses the row leaves zeros there.
#define PART_RECORD 16
#define ROW_RECORDS 96

// SEGMENTED (0 unless defined) selects the segmented form of a
// normalising kernel, for rows cut into segments held by different tiles
// (`Partition::Segments`): a row's records are `segments` records, one
// per tile in segment order. On each tile the statistics kernel writes
// its six records of each row, `fold_records.S` folds them into the
// tile's record of the row, an exchange brings every other tile's, and
// the normalising kernel combines the row's `segments` records, taking
// the row's length from their counts.
#ifndef SEGMENTED
#define SEGMENTED 0
#endif

// `reg` += the bytes of one row's records: ROW_RECORDS, or in the
// segmented form a record per segment (at `segments_off` in the state),
// which clobbers $m6.
.macro next_row_records reg, segments_off
#if SEGMENTED
        ld32    $m6, $m0, \segments_off
        mul     $m6, $m6, PART_RECORD
        add     \reg, \reg, $m6
#else
        add     \reg, \reg, ROW_RECORDS
#endif
.endm

// The head of an output pass's range: single elements (`one`, a body of
// `words` words) from x's cursor $m8 up to its first 8-byte boundary, at
// most the $m11 elements left, which it takes off $m11. Clobbers $m6.
.macro out_head one, words
        sub     $m6, $mzero, $m8
        and     $m6, $m6, 7
        shr     $m6, $m6, 1
        min     $m6, $m6, $m11
        sub     $m11, $m11, $m6
        rpt_at  4
        rpt     $m6, \words
        \one
.endm

// Chan's parallel formula over `count` (n, mean, M2) records, in two
// passes. The first, from $m8 with $a0 = 0 on entry: $a5 = n, $a14 =
// 1 / n and $a10 = the mean.
.macro chan_mean count
        mov     $a5, $azero
        rpt     \count, 4
        ld64step $a2:3, $m8+=, PART_RECORD
        f32add  $a5, $a5, $a2
        f32mul  $a2, $a2, $a3
        f32add  $a0, $a0, $a2
        f32rcp  $a14, $a5
        f32div  $a10, $a0, $a5
.endm

// The second, from `cursor`: $a1 += M2_i + n_i (mean_i - mean)^2, with
// the mean in $a10.
.macro chan_m2 count, cursor
        rpt     \count, 7
        ld64step $a2:3, \cursor+=, 8
        ld32step $a4, \cursor+=, 8
        f32sub  $a3, $a3, $a10
        f32mul  $a3, $a3, $a3
        f32mul  $a3, $a3, $a2
        f32add  $a1, $a1, $a4
        f32add  $a1, $a1, $a3
.endm

// A softmax's `count` (m, s) records from `base` combined: $a10 = M, the
// largest m, and $a12 = S, the sum of s * exp(m - M). Clobbers $m8, $a0
// and $a1.
.macro softmax_records base, count
        mov     $m8, \base
        setzi   $a10, 0xffff
        sethi   $a10, 0xff7f
        rpt     \count, 2
        ld64step $a0:1, $m8+=, PART_RECORD
        f32max  $a10, $a10, $a0
        mov     $m8, \base
        mov     $a12, $azero
        rpt     \count, 5
        ld64step $a0:1, $m8+=, PART_RECORD
        f32sub  $a0, $a0, $a10
        f32exp  $a0, $a0
        f32mul  $a0, $a0, $a1
        f32add  $a12, $a12, $a0
.endm

// A softmax statistics kernel's records of this worker for each of the
// $m1 rows, from $m9 a row's records apart: m = -FLT_MAX and s = 0, the
// empty record a piece that is not this worker's (or keeps nothing)
// leaves, with $a14:15 zero. `p` prefixes the label. Clobbers $m5, $m6
// and $a0:1.
.macro clear_softmax_records p
        setzi   $a0, 0xffff
        sethi   $a0, 0xff7f
        mov     $a1, $azero
        mov     $m6, $m9
        mov     $m5, $m1
\p\()_clear:
        st64    $a0:1, $m6, 0
        st64    $a14:15, $m6, 8
        add     $m6, $m6, ROW_RECORDS
        sub     $m5, $m5, 1
        brnz    $m5, \p\()_clear
.endm

// $m4 = the first element and $m5 = the end of worker `w`'s share of
// $m1 rows of $m2 elements. Clobbers $m6, $m10 and $m11. The quads are
// fewer than 98304 (a tile's f16 operand), as the division by 6 needs.
.macro worker_share w, label
        mul     $m11, $m1, $m2
        shr     $m6, $m11, 2
        setzi   $m10, DIV6_MUL
        mul     $m10, $m6, $m10
        shr     $m10, $m10, DIV6_SHIFT
        mul     $m4, $m10, 6
        sub     $m6, $m6, $m4
        // $m10 = quads / 6 and $m6 = the rest: the first `rest` workers
        // take one quad more.
        mul     $m4, \w, $m10
        min     $m5, \w, $m6
        add     $m4, $m4, $m5
        add     $m5, $m4, $m10
        cmpult  $m6, \w, $m6
        add     $m5, $m5, $m6
        shl     $m4, $m4, 2
        shl     $m5, $m5, 2
        cmpeq   $m6, \w, 5
        brz     $m6, \label
        mov     $m5, $m11
\label:
.endm

// A statistics kernel's walk over this worker's share of the tile's $m1
// rows of $m2 elements, with $m3 = the worker, the first row's input at
// $m7 and its record at $m9: for each piece, the share's elements in a
// row, [lo, hi) in $m4 and $m5 within the row, `body` (a macro) runs;
// `next` (a macro) moves $m7 and $m9 to the next row. $m0 holds the
// row's first element, so the state must have been read; $m1 and $m3
// hold the share's cursor and end. `p` prefixes the labels, and the walk
// ends at `p`_done.
.macro share_pieces p, body, next
        worker_share $m3, \p\()_share
        mov     $m1, $m4
        mov     $m3, $m5
        cmpult  $m6, $m1, $m3
        brz     $m6, \p\()_done
        // The row holding the share's first element.
        mov     $m0, $mzero
\p\()_find:
        add     $m6, $m0, $m2
        cmpult  $m6, $m1, $m6
        brnz    $m6, \p\()_piece
        add     $m0, $m0, $m2
        \next
        br      \p\()_find
\p\()_piece:
        sub     $m4, $m1, $m0
        sub     $m5, $m3, $m0
        min     $m5, $m5, $m2
        add     $m1, $m0, $m5
        \body
        cmpult  $m6, $m1, $m3
        brz     $m6, \p\()_done
        add     $m0, $m0, $m2
        \next
        br      \p\()_piece
\p\()_done:
.endm

// The start of a normalising kernel (the PARTS variants): $a14 = 1 /
// row_length, $m1 and $m3 the first element and the end of this worker's
// share of the tile's elements (to `done` when it is empty), $m7 and $m9
// the input and output rows holding the share's first element, $m2 that
// row's records. The state holds rows at `rows_off`, row_length at
// `len_off`, the input at 0, the output at `out_off` and the records at
// `records_off`.
.macro parts_begin rows_off, len_off, out_off, records_off, done
        ld32    $m2, $m0, \len_off
        mov     $a14, $m2
        f32fromi32 $a14, $a14
        f32rcp  $a14, $a14
        ld32    $m1, $m0, \rows_off
        get     $m3, $wid
        worker_share $m3, parts_share
        mov     $m1, $m4
        mov     $m3, $m5
        cmpult  $m6, $m1, $m3
        brz     $m6, \done
        ld32    $m7, $m0, 0
        ld32    $m9, $m0, \out_off
        add     $m13, $m2, $m2
        mov     $m10, $mzero
        ld32    $m12, $m0, \records_off
parts_find:
        add     $m6, $m10, $m2
        cmpult  $m6, $m1, $m6
        brnz    $m6, parts_found
        add     $m10, $m10, $m2
        add     $m7, $m7, $m13
        add     $m9, $m9, $m13
        next_row_records $m12, \records_off + 4
        br      parts_find
parts_found:
        mov     $m2, $m12
.endm

// One piece of the share, in the row at $m7: $m4 and $m5 its [lo, hi)
// within the row, and $m1 moved to the piece's end.
.macro parts_piece_range len_off
        ld32    $m6, $m0, 0
        sub     $m10, $m7, $m6
        shr     $m10, $m10, 1
        sub     $m4, $m1, $m10
        sub     $m5, $m3, $m10
        ld32    $m6, $m0, \len_off
        min     $m5, $m5, $m6
        add     $m1, $m10, $m5
.endm

// After a piece: to `done` at the share's end, otherwise on to the next
// row and its records, and back to `piece`.
.macro parts_next len_off, records_off, piece, done
        cmpult  $m6, $m1, $m3
        brz     $m6, \done
        ld32    $m6, $m0, \len_off
        add     $m6, $m6, $m6
        add     $m7, $m7, $m6
        add     $m9, $m9, $m6
        next_row_records $m2, \records_off + 4
        br      \piece
.endm

// Single elements of the layernorm statistics passes at $m8, into
// accumulator 0 alone ($a5..$a7 stay zero): the element, and its squared
// deviation from the mean in $a10.
.macro mean_sum_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a4, $a0 }
        f32v4acc $a4:7
.endm
.macro deviation_square_one
        { ldb16step $a0, $m8+=, 2 ; f16tof32 $a4, $a0 }
        f32sub  $a4, $a4, $a10
        f32v4sqacc $a4:7
.endm

// One aligned quad of the variance pass at $m8: its squared deviations
// from the mean in $a10:11, summed into the four accumulators.
.macro deviation_square_quad
        { ld64step $a0:1, $m8+=, 8 ; f16v2tof32 $a4:5, $a0 }
        f16v2tof32 $a6:7, $a1
        f32v2sub $a4:5, $a4:5, $a10:11
        f32v2sub $a6:7, $a6:7, $a10:11
        f32v4sqacc $a4:7
.endm
