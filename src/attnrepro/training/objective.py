"""The training loss as one module: what the training loop calls, DDP wraps and `train.compile` compiles.

`Objective(model, ...)(src, src_mask, tgt_in, tgt_out)` is the mean cross-entropy per real target token
(label-smoothed as configured), the number `attnrepro.training.validation.loss_fn` computes from the
model's logits. Two options change how it is computed, never what:

- `chunk_tokens` > 0 (`train.loss_chunk_tokens`), for a model with `decoder_states` and `logits` (the
  Transformer): the logits are made `chunk_tokens` target positions at a time and each chunk's loss is
  checkpointed, so no (tokens x vocabulary) float32 copy of the logits exists: under bf16 autocast
  the 37 000-way logits of a 12 500-token batch are 0.9 GB in bf16, and their float32 log-softmax and
  its gradient another 3.7 GB. Backward recomputes one chunk's logits at a time (one more output
  projection, about 1/3 of its cost).
- `bucket` (`train.step_compile: graphed`): the batch is padded to a few shapes (rows up to a quarter
  octave, source length to a multiple of 8), so that CUDA graphs of the decoder steps, recorded per
  shape, are replayed instead of recorded anew. A padded row holds one <unk> source token and no
  target token: it adds nothing to the loss or its gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from attnrepro.data.tokenize import PAD, UNK
from attnrepro.training.validation import loss_fn

SOURCE_LENGTH_BUCKET = 8  # source lengths padded to a multiple of this
ROWS_PER_OCTAVE = 4  # row counts padded up to one of 4 sizes per power of two: at most 25 % padding rows


def bucket_rows(rows: int) -> int:
    """`rows` rounded up to a multiple of 2^(floor(log2 rows) - 2): 80 -> 80, 81 -> 96, 150 -> 160."""
    step = 2 ** max(0, int(math.log2(rows)) - int(math.log2(ROWS_PER_OCTAVE)))
    return -(-rows // step) * step


def pad_to_buckets(src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, ...]:
    """The batch padded to (bucket_rows(batch), source length rounded up to SOURCE_LENGTH_BUCKET), on its
    device (no host synchronisation). New rows: source <unk>, target all padding, so the loss ignores them."""
    rows, src_len = src.shape
    extra_rows = bucket_rows(rows) - rows
    extra_cols = -src_len % SOURCE_LENGTH_BUCKET
    if extra_rows == 0 and extra_cols == 0:
        return src, src_mask, tgt_in, tgt_out
    src = F.pad(src, (0, extra_cols, 0, extra_rows), value=PAD)
    src_mask = F.pad(src_mask, (0, extra_cols, 0, extra_rows), value=False)
    if extra_rows:
        src[rows:, 0] = UNK  # a source of one token: every row attends to something
        src_mask[rows:, 0] = True
    tgt_in, tgt_out = (F.pad(t, (0, 0, 0, extra_rows), value=PAD) for t in (tgt_in, tgt_out))
    return src, src_mask, tgt_in, tgt_out


def chunked_cross_entropy(
    states: Tensor, logits_of: Callable[[Tensor], Tensor], tgt_out: Tensor, label_smoothing: float, chunk_tokens: int
) -> Tensor:
    """Mean cross-entropy per real target token of `logits_of(states)`, computed `chunk_tokens` positions at a time.

    states (batch, tgt_len, d); each chunk's logits exist only inside its checkpoint, in the autocast dtype,
    and its loss is summed in float32. Equal to `loss_fn(logits_of(states), tgt_out, label_smoothing)`.
    """
    flat_states, flat_targets = states.flatten(0, 1), tgt_out.flatten()  # (tokens, d), (tokens,)
    total = flat_states.new_zeros((), dtype=torch.float32)
    for start in range(0, flat_targets.size(0), chunk_tokens):
        chunk = slice(start, start + chunk_tokens)
        total = total + checkpoint(
            _summed_loss, flat_states[chunk], flat_targets[chunk], logits_of, label_smoothing, use_reentrant=False
        )
    return total / (flat_targets != PAD).sum()


def _summed_loss(states: Tensor, targets: Tensor, logits_of: Callable[[Tensor], Tensor], smoothing: float) -> Tensor:
    logits = logits_of(states).float()  # one chunk's (chunk, vocab): the only float32 logits alive
    return F.cross_entropy(logits, targets, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")


class Objective(nn.Module):
    """`model`'s mean token cross-entropy on a batch; see the module docstring for `chunk_tokens` and `bucket`."""

    def __init__(self, model: nn.Module, label_smoothing: float, chunk_tokens: int = 0, bucket: bool = False):
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing
        self.chunk_tokens = chunk_tokens if hasattr(model, "decoder_states") else 0
        self.bucket = bucket

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        if self.bucket:
            src, src_mask, tgt_in, tgt_out = pad_to_buckets(src, src_mask, tgt_in, tgt_out)
        if self.chunk_tokens > 0:
            states = self.model.decoder_states(src, src_mask, tgt_in)
            return chunked_cross_entropy(states, self.model.logits, tgt_out, self.label_smoothing, self.chunk_tokens)
        return loss_fn(self.model(src, src_mask, tgt_in), tgt_out, self.label_smoothing)
