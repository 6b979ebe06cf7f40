        .data
        .macro  open
        .word   1
