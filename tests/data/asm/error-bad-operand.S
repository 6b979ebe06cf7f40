// A register of the wrong file, and an immediate that is too wide.
        .text
bad:
        add     $m1, $a2, 3
        setzi   $m1, 0x400000
