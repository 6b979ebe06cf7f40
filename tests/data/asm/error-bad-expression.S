        .data
        .word   (1 + 2
        .word   4 / 0
#if 1 +
#endif
