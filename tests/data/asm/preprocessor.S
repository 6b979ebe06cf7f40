// The C-like preprocessor: defines, conditionals, includes.
#include "inc/constants.inc"
#define SQUARE(x) ((x) * (x))
#define TWICE(x) (2 * (x))
        .data
        .word   BLOCK, SQUARE(BLOCK + 1), TWICE(SQUARE(2))
#if BLOCK > 8 && defined(CHANNELS)
        .word   0xb16
#elif defined CHANNELS
        .word   CHANNELS
#else
        .word   0
#endif
#ifdef NOT_DEFINED
#error not reached
#endif
#ifndef NOT_DEFINED
        .byte   1
#endif
#undef CHANNELS
#if defined(CHANNELS)
        .byte   0xbad
#endif
# this is a comment, not a directive
        .byte   2       # so is this
