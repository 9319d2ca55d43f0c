"""The interface every model implements, so one training loop and one beam search serve all.

A model turns a padded source batch into a `memory` (whatever its decoder reads: encoder
states, a fixed context vector, projected keys), starts a decoder `state` from it, and
advances that state one target token at a time. Both are dicts of tensors whose first
dimension is the batch, so the default `reorder` serves every model whose tensors all
follow that rule.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

Memory = dict[str, Tensor]
State = dict[str, Tensor]


class Seq2SeqModel(nn.Module):
    """Encoder-decoder behind the interface of docs/design.md ("The model interface")."""

    pad_id = 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        """src, src_mask: (batch, src_len); src_mask is True on real tokens."""
        raise NotImplementedError

    def init_state(self, memory: Memory) -> State:
        """The decoder state before the first target token."""
        raise NotImplementedError

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor | None]:
        """prev_tokens (batch,) -> log_probs (batch, vocab), new state, attention (batch, src_len) or None."""
        raise NotImplementedError

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: tgt_in (batch, tgt_len) -> logits (batch, tgt_len, vocab)."""
        raise NotImplementedError

    def alignment(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_lens: Tensor) -> Tensor | None:
        """The alignment figures' weights of each output word over the source, from whole outputs: tgt_in =
        (<s>, y_1..y_U) padded, tgt_lens = U -> (batch, U, src_len). None (the default): the attention
        decode_step returned while searching is the alignment."""
        return None

    def reorder(self, memory: Memory | None, state: State, index: Tensor) -> tuple[Memory | None, State]:
        """Select rows `index` of the batch: beam expansion, then beam reordering.

        `memory` is None when only the state moves (the beams of one sentence share it).
        """
        return (None if memory is None else _select(memory, index)), _select(state, index)


def _select(tensors: dict[str, Tensor], index: Tensor) -> dict[str, Tensor]:
    return {name: t.index_select(0, index) for name, t in tensors.items()}


def dot_rows(rows: Tensor, vector: Tensor) -> Tensor:
    """rows (batch, n, dim) · vector (batch, dim) -> (batch, n), the scores of a query against each memory row.

    Training takes a product and a sum: its backward is elementwise, where a batched matrix product's
    is an outer product per step, about twice as slow on the CPU at training batch sizes. Without
    gradients, the vector times the rows' transpose: no temporary the size of `rows` (the beam-search
    row block of a long batch is tens of MB).
    """
    if torch.is_grad_enabled():
        return (rows * vector[:, None]).sum(-1)
    return torch.bmm(vector[:, None], rows.transpose(1, 2)).squeeze(1)


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last dim where mask is True; exactly 0 on padding."""
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
