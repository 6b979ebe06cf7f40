// Real instructions of every family: integer, memory, control, float,
// FP8 casts, AMP and a bundle; their encodings are in the listing.
        .text
        .globl  sample
        .type   sample, @function
sample:
        setzi   $m1, table
        sethi   $m1, 0x12
        add     $m2, $m1, $m3
        add     $m2, $m2, -4
        mul     $m4, $m2, 6
        cmpult  $m5, $m4, 100
        shl     $m6, $m5, 3
        ld32    $m7, $m1, 8
        ld32step $m8, $m1+=, 4
        st32    $m7, $m1, 0
        get     $m9, $wid
        put     $fp8cfg, $m9
        ld64    $a0:1, $m1, $m15
        f16v4add $a2:3, $a0:1, $a0:1
        f32exp  $a4, $a5
        f16v4tof8 $a6, $a2:3
        f8v4tof16 $a2:3, $a6
        .align  8
        { ld64step $a0:1, $m1+=, 8 ; f16v4mul $a2:3, $a0:1, $a0:1 }
        rpt     4, 1
        add     $m2, $m2, 1
        brnzdec $m4, sample
        exitz   $mzero
        .size   sample, . - sample
        .data
table:  .word   1, 2, 3
