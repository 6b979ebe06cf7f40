// Assembler macros, repetition and conditionals.
        .data
        .macro  pair a, b=7
        .word   \a, \b
        .endm
        .macro  twice x
        pair    \x
        pair    \x, \x + 1
        .endm
        pair    1, 2
        pair    3
        twice   10
        .rept   3
        .byte   0xee
        .endr
        .rept   2
        .rept   2
        .byte   1
        .endr
        .byte   2
        .endr
        .align  4
        .set    MODE, 2
        .if     MODE == 1
        .word   0x111
        .elseif MODE == 2
        .word   0x222
        .else
        .word   0x333
        .endif
        .ifdef  MODE
        .byte   0xd
        .endif
        .ifndef MODE
        .byte   0xbad
        .endif
        .if     0
        .rept   2
        .unknown_but_skipped
        .endr
        .endif
