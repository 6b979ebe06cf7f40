"""Writes the files `residual-f16.toml` reads: `weights.safetensors` and
`x.npy`, with small random values (NumPy and the `safetensors` package)."""

import numpy as np
from safetensors.numpy import save_file

rng = np.random.default_rng(0)
weights = {}
for i in range(2):
    weights[f"layers.{i}.fc.weight"] = (rng.standard_normal((96, 96)) * 0.1).astype(np.float32)
    weights[f"layers.{i}.fc.bias"] = (rng.standard_normal(96) * 0.1).astype(np.float32)
weights["head.weight"] = (rng.standard_normal((32, 96)) * 0.1).astype(np.float32)
save_file(weights, "weights.safetensors")
np.save("x.npy", rng.uniform(-1, 1, (64, 96)).astype(np.float32))
