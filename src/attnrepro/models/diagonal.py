"""Diagonal attention: the "two cursors moving at the same time synchronously (effectively hard-coded diagonal
attention)" of the e-mail behind Bahdanau et al. 2014 (Bahdanau to Karpathy, published by Karpathy on X on
3 December 2024; docs/papers.md).

Before the learned alignment model, the design that "sort of worked" was a hard-coded one: a
cursor over the source advancing in step with the cursor over the target, so that target
position i reads source position ≈ i·T_x/T_y. The model is RNNsearch in every other respect
(BiGRU annotations, GRU decoder, maxout deep output); only the alignment model of eq. (6)
is replaced by this fixed window. It is the ablation between RNNencdec (no alignment) and
RNNsearch (learned alignment).

T_y is unknown while decoding, so training and search both use the expected target length
T_y = length_ratio · T_x: the cursor moves 1/length_ratio source words per target word.
The window is a Gaussian of `width` source words around the cursor, normalised over the
real source positions (width → 0 is a one-hot cursor).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.models.base import Memory, masked_softmax
from attnrepro.models.rnnsearch import RNNSearch


class DiagonalWindow(nn.Module):
    """Fixed weights (batch, src_len) peaking at round(i·T_x/T_y) for target position i; nothing to learn."""

    def __init__(self, length_ratio: float, width: float):
        super().__init__()
        self.length_ratio = length_ratio
        self.width = width

    def precompute(self, annotations: Tensor) -> Memory:
        return {}

    def forward(self, memory: Memory, s_prev: Tensor, step: Tensor) -> Tensor:
        src_mask, dtype = memory["src_mask"], memory["annotations"].dtype
        lengths = src_mask.sum(1).to(dtype)  # (batch,) T_x
        target_lengths = (self.length_ratio * lengths).clamp(min=1)  # expected T_y
        cursor = torch.minimum(step * lengths / target_lengths, lengths - 1)  # i·T_x/T_y, inside the sentence
        positions = torch.arange(src_mask.size(1), device=src_mask.device, dtype=dtype)[None]  # (1, src_len)
        scores = -((positions - cursor[:, None]) ** 2) / (2 * self.width**2)  # log of a Gaussian window
        return masked_softmax(scores, src_mask)


class DiagonalSearch(RNNSearch):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        maxout: int,
        dropout: float,
        init: str,
        length_ratio: float,
        width: float,
    ):
        window = DiagonalWindow(length_ratio, width)  # in place of the alignment model: no `align` size
        super().__init__(src_vocab, tgt_vocab, emb, hidden, 0, maxout, dropout, init, attention=window)
