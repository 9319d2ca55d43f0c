"""Sequence to Sequence: Sutskever, Vinyals & Le 2014, "Sequence to Sequence Learning with
Neural Networks" (arXiv 1409.3215), §2-§3.4.

A deep LSTM reads the source *reversed* (§3.3: "we reversed the order of the words of the
source sentence but not the target sentence"), and a second deep LSTM, started from the
encoder's final (h, c) of every layer, predicts the target with a softmax over its top
layer (§2, eq. 1). `init: paper` draws every parameter uniformly from [-0.08, 0.08] (§3.4), the
scale made for the paper's SGD at lr 0.7; `init: pytorch` keeps PyTorch's initialisation (N(0, 1)
embeddings), for Adam: with embeddings of ±0.08 the decoder's first state barely depends on the
source, and Adam's small steps leave the model near that start (docs/measurements.md). Like
RNNencdec, the source reaches the decoder only through the final state.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.models.base import Memory, Seq2SeqModel, State
from attnrepro.models.layers import run_packed


def reverse_padded(src: Tensor, src_mask: Tensor) -> Tensor:
    """Reverse each sentence's real tokens in place of the padded batch; padding stays at the end."""
    lengths = src_mask.sum(1, keepdim=True)  # (batch, 1)
    positions = torch.arange(src.size(1), device=src.device)[None]  # (1, src_len)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return src.gather(1, index)


class Seq2Seq(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        layers: int,
        dropout: float,
        init_range: float,
        reverse_source: bool,
        init: str,
    ):
        super().__init__()
        self.reverse_source = reverse_source
        self.src_embed = nn.Embedding(src_vocab, emb, padding_idx=self.pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, emb, padding_idx=self.pad_id)
        self.encoder = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=dropout)
        self.decoder = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=dropout)
        self.out = nn.Linear(hidden, tgt_vocab)  # softmax over the top layer, eq. (1)
        self.dropout = nn.Dropout(dropout)
        if init == "paper":
            for p in self.parameters():
                nn.init.uniform_(p, -init_range, init_range)  # §3.4: uniform in [-0.08, 0.08]

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        if self.reverse_source:
            src = reverse_padded(src, src_mask)  # §3.3
        _, (h, c) = run_packed(self.encoder, self.dropout(self.src_embed(src)), src_mask)
        # (layers, batch, hidden) -> batch first, so that beam search can reorder it
        return {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}

    def init_state(self, memory: Memory) -> State:
        return dict(memory)  # the decoder starts from the encoder's final state of every layer

    def _decode(self, state: State, y_prev: Tensor) -> tuple[Tensor, State]:
        hidden = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
        outputs, (h, c) = self.decoder(y_prev, hidden)  # (batch, steps, hidden)
        return self.out(self.dropout(outputs)), {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, None]:
        logits, state = self._decode(state, self.tgt_embed(prev_tokens)[:, None])
        return torch.log_softmax(logits[:, 0], -1), state, None

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        logits, _ = self._decode(self.init_state(memory), self.dropout(self.tgt_embed(tgt_in)))
        return logits
