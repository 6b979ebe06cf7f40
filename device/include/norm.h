// Shared pieces of the row-normalising kernels (layernorm, rmsnorm): the
// counts of a row's vector and tail parts, and the f32 accumulators'
// clearing and total. Both kernels keep $m11 = the row's head elements and
// accumulate in $a4:7.

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

// The sum of the four accumulators into $a4 (clearing them).
.macro total
        f32v2gina $a4:5, 0
        f32v2gina $a6:7, 1
        f32v2add $a4:5, $a4:5, $a6:7
        f32v2hadd $a4, $a4:5
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
