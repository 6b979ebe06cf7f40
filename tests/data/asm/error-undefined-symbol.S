        .data
        .word   missing + 4
        .globl  never_defined
