        .data
        .word   missing + 4
        .globl  never_defined
        .text
loop_start:
        .word   loop_strat
