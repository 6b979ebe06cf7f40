        .data
here:   .word   1
here:   .word   2
