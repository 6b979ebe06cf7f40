// A kernel's interface: entry point, state struct and cost formula.
        .text
        .globl  gemm
        .type   gemm, @function
        .ipub_param out, 0, ptr
        .ipub_param rows, 4, u32
        .ipub_param scale, 8, f16
        .ipub_param flags, 10, u16
        .ipub_cost "K * C * R / 128 + 40"
gemm:
        .size   gemm, . - gemm
        .section .rodata
        .globl  BLOCKS
        .set    BLOCKS, 4
lut:    .word   gemm, BLOCKS
