"""The attention matrices of a translated test set, one .npz: `translate` writes it, the Fig. 3
figures read it. numpy only, so a figure job starts without importing torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def save_attention(matrices: list[np.ndarray | None], path: Path) -> None:
    """One (target_len, src_len) matrix per sentence, None for a model without attention.

    Stored as `weights` (flat float16), `shapes` (n, 2) and `offsets` (n+1), written atomically."""
    mats = [np.zeros((0, 0), np.float32) if m is None else m for m in matrices]
    shapes = np.array([m.shape for m in mats], dtype=np.int64).reshape(-1, 2)
    offsets = np.concatenate([[0], np.cumsum(shapes[:, 0] * shapes[:, 1])])
    weights = np.concatenate([m.ravel() for m in mats]).astype(np.float16) if mats else np.zeros(0, np.float16)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, weights=weights, shapes=shapes, offsets=offsets)
    tmp.replace(path)


def load_attention(path: Path) -> list[np.ndarray]:
    with np.load(path) as f:
        weights, shapes, offsets = f["weights"], f["shapes"], f["offsets"]
    return [weights[offsets[i] : offsets[i + 1]].reshape(shapes[i]).astype(np.float32) for i in range(len(shapes))]
