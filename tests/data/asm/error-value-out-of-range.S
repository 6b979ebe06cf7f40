        .data
        .half   -40000
        .word   0x100000000
        .align  3
        .space  -1
        .rept   -2
        .endr
        .byte   256
