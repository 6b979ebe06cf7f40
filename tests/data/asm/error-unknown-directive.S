        .data
        .wrod   1
