#!/usr/bin/env python3
"""Writes the additive masks of ../attention-masks.toml as .npy files
(0 keeps an element, -inf removes it), without NumPy.

- padding.npy, f16 [2, 1, 1, 24]: key padding; batch 0 has 20 valid keys,
  batch 1 has 13.
- window.npy, f32 [24, 24]: a causal sliding window of 8 keys, shared by
  every batch and head (query i sees keys i-7..i).
- query_padding.npy, f16 [2, 1, 24, 1]: query padding; batch 1's last 5
  queries see nothing, so their rows are fully masked and read as zeros.

And those of ../masked-segments.toml, whose rows are long enough to be cut
into segments on several tiles:

- long_rows.npy, f16 [4, 4096]: row 0 keeps its first 2500 keys but every
  seventh, row 1 keeps none (zeros), row 2 keeps all and row 3 one.
- long_padding.npy, f32 [2, 1, 1, 2000]: key padding; batch 0 has 1900
  valid keys, batch 1 has 300, so most of its segments keep nothing.
"""
import struct

S = 24
INF = float("-inf")


def write(path, dtype, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype,
        "".join("%d, " % d for d in shape) if len(shape) == 1 else ", ".join(map(str, shape)),
    )
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    code = {"<f2": "e", "<f4": "f"}[dtype]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), code), *values))


valid = [20, 13]
write("padding.npy", "<f2", [2, 1, 1, S], [0.0 if j < valid[b] else INF for b in range(2) for j in range(S)])
write("window.npy", "<f4", [S, S], [0.0 if i - 8 < j <= i else INF for i in range(S) for j in range(S)])
queries = [S, S - 5]
write("query_padding.npy", "<f2", [2, 1, S, 1], [0.0 if i < queries[b] else INF for b in range(2) for i in range(S)])

L = 4096
long_rows = [
    [INF if j >= 2500 or j % 7 == 3 else 0.0 for j in range(L)],
    [INF] * L,
    [0.0] * L,
    [0.0 if j == 3001 else INF for j in range(L)],
]
write("long_rows.npy", "<f2", [4, L], [v for row in long_rows for v in row])
K = 2000
keys = [1900, 300]
write("long_padding.npy", "<f4", [2, 1, 1, K], [0.0 if j < keys[b] else INF for b in range(2) for j in range(K)])
