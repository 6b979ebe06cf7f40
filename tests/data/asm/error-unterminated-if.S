#if 1
        .data
        .if 1
        .word 1
