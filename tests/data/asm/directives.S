// Every data and layout directive, with all three comment styles.
/* A block comment
   over two lines. */
        .data                   # the default data section
        .globl  table
        .type   table, @object
table:  .word   1, -1, 0xffffffff, end - table
        .half   0x1234, -2
        .byte   'A', 255, -128
        .align  8               // pad with zeros
        .set    COUNT, 3
        .equ    WIDTH, COUNT * 4
SHIFT = 1 << 3
        .word   WIDTH, SHIFT | 1, (7 % 4) ^ ~0, 100 / 7, 5 >> 1, 6 & 3
        .word   table + 8       // a relocation against a label
        .extern elsewhere
        .word   elsewhere - 4   // and against an external symbol
        .size   table, . - table
        .section .rodata.names, "a"
names:  .ascii  "ab"
        .asciz  "c\n"
        .space  3, 0x7f
        .space  2
end_names:
        .section .bss
        .zero   16
        .data
end:    .byte   COUNT
