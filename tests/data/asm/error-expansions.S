// Errors inside a #define expansion, a .macro body and an include point at
// the place written, with notes for how it was reached.
#define BAD_VALUE (1 +)
        .data
        .word   BAD_VALUE
        .macro  store v
        .word   \v
        .half   \v, 70000
        .endm
        store   2 *
#include "inc/broken.inc"
#error stop here
