// Only regular files are read: a device never ends, a directory is not
// text. The search stops at the first include that exists.
#include "/dev/zero"
#include "inc"
        nop
