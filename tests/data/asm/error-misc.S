// Several problems in one file are all reported.
        .data
        .byte   1
        .word   2
        .endr
        .type   x, @thing
#endif
#pragma once
        .text
        { nop ; nop
        .word   "str"
