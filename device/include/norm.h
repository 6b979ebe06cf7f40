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
