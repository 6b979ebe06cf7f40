        .text
        frobnicate $m0, 1
