        .ipub_param early, 0, u32
        .text
        .globl  k
        .type   k, @function
        .ipub_param a, 0, u32
        .ipub_param b, 2, u32
        .ipub_param c, 4, u64
        .ipub_param a, 8, u32
        .ipub_param d, 2, u16
        .ipub_cost "K * (C"
k:
