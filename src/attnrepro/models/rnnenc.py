"""RNN Encoder-Decoder: Cho et al. 2014, "Learning Phrase Representations using RNN
Encoder-Decoder for Statistical Machine Translation" (arXiv 1406.1078), §2.2 and App. A;
"RNNencdec" in Bahdanau et al. 2014.

A GRU reads the source; its last hidden state is summarised into one fixed vector
c = tanh(V h_T) (App. A.1.1). The GRU decoder starts from h'_0 = tanh(V' c) and sees c at
every step, h'_t = f(h'_{t-1}, y_{t-1}, c) (eq. 2), in all three gates and, in the candidate
state, inside the reset gate (App. A.1.2):

    h~'_t = tanh(W' e(y_{t-1}) + r' ⊙ (U' h'_{t-1} + C c)),
    z' = σ(W'_z e(y_{t-1}) + U'_z h'_{t-1} + C_z c),  r' = σ(W'_r e(y_{t-1}) + U'_r h'_{t-1} + C_r c),

so the reset gate can shut out the source as well as the past. The output is a maxout layer
over [h'_t; E y_{t-1}; c] (App. A.1.2). Nothing but c carries the source to the decoder: that
bottleneck is what Bahdanau's Fig. 2 measures.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnrepro.models.base import Memory, Seq2SeqModel, State
from attnrepro.models.layers import DeepOutput, gru_update, init_bahdanau, run_packed
from attnrepro.models.step_compile import step_function


class RNNEncDec(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        maxout: int,
        dropout: float,
        init: str,
    ):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, emb, padding_idx=self.pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, emb, padding_idx=self.pad_id)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.context_proj = nn.Linear(hidden, hidden)  # V: c = tanh(V h_T)
        self.init_proj = nn.Linear(hidden, hidden)  # V': h'_0 = tanh(V' c)
        self.decoder = nn.GRUCell(emb, hidden)  # W' e(y) and U' h' of all three gates
        self.context_gates = nn.Linear(hidden, 3 * hidden, bias=False)  # C_r c, C_z c, C c
        self.readout = DeepOutput(hidden + emb + hidden, maxout, tgt_vocab)
        self.dropout = nn.Dropout(dropout)
        if init == "paper":
            init_bahdanau(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        embedded = self.dropout(self.src_embed(src))  # (batch, src_len, emb)
        _, final = run_packed(self.encoder, embedded, src_mask)  # final: (1, batch, hidden) at h_T
        context = torch.tanh(self.context_proj(final[0]))  # c = tanh(V h_T), (batch, hidden)
        return {"context": context}

    def init_state(self, memory: Memory) -> State:
        return {"h": torch.tanh(self.init_proj(memory["context"]))}  # h'_0 = tanh(V' c)

    def teacher_step(self, gi_t: Tensor, gc: Tensor, h: Tensor) -> Tensor:
        """h'_t from h'_{t-1}, the input gates W' e(y_{t-1}) and the context's C c (batch, 3 hidden)."""
        return gru_update(gi_t, torch.addmm(gc, h, self.decoder.weight_hh.T), h)  # App. A.1.2: r' ⊙ (U' h' + C c)

    def _decode(self, context: Tensor, h: Tensor, y_prev: Tensor) -> tuple[Tensor, Tensor]:
        """y_prev (batch, steps, emb), dropped out once -> logits (batch, steps, vocab), last state (batch, hidden)."""
        gi = F.linear(y_prev, self.decoder.weight_ih, self.decoder.bias_ih)  # W' e(y_{t-1}), every step at once
        gc = self.context_gates(context) + self.decoder.bias_hh  # C c: the same at every step, (batch, 3 hidden)
        states = []
        teacher_step = step_function(self, self.teacher_step)  # eager, fused or graphed: train.step_compile
        for gi_t in gi.unbind(1):  # unbind: one backward copy, not one per step
            h = teacher_step(gi_t, gc, h)
            states.append(h)
        c = context[:, None].expand(-1, y_prev.size(1), -1)  # (batch, steps, hidden)
        features = torch.cat([self.dropout(torch.stack(states, 1)), y_prev, self.dropout(c)], -1)
        return self.readout(features), h  # maxout over [h'_t; E y_{t-1}; c]

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, None]:
        logits, h = self._decode(memory["context"], state["h"], self.tgt_embed(prev_tokens)[:, None])
        return torch.log_softmax(logits[:, 0], -1), {"h": h}, None

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        y_prev = self.dropout(self.tgt_embed(tgt_in))  # (batch, tgt_len, emb)
        logits, _ = self._decode(memory["context"], self.init_state(memory)["h"], y_prev)
        return logits
