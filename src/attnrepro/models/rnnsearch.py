"""RNNsearch: Bahdanau, Cho & Bengio 2014, "Neural Machine Translation by Jointly
Learning to Align and Translate" (arXiv 1409.0473), §3 and Appendix A.

A bidirectional GRU annotates each source word, h_j = [→h_j; ←h_j] (§3.2). At each
target step an additive alignment model scores every annotation against the previous
decoder state, e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j) (eq. 6), a softmax turns the
scores into weights α_ij (eq. 6), and the context c_i = Σ_j α_ij h_j (eq. 5) feeds the
GRU decoder s_i = f(s_{i-1}, y_{i-1}, c_i) (eq. 4) and a maxout deep output (App. A.2.2).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.models.base import Memory, Seq2SeqModel, State, masked_softmax
from attnrepro.models.layers import DeepOutput, ReadGRUCell, init_bahdanau, run_packed
from attnrepro.models.step_compile import step_function


class AdditiveAttention(nn.Module):
    """The alignment model, eq. (6): e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j), α_ij = softmax_j(e_ij)."""

    def __init__(self, hidden: int, annotation: int, align: int):
        super().__init__()
        self.W_a = nn.Linear(hidden, align, bias=False)
        self.U_a = nn.Linear(annotation, align)
        self.v_a = nn.Linear(align, 1, bias=False)

    def precompute(self, annotations: Tensor) -> Memory:
        return {"keys": self.U_a(annotations)}  # U_a h_j, computed once per sentence (App. A.1.2)

    def forward(self, memory: Memory, s_prev: Tensor, step: Tensor) -> Tensor:
        hidden = torch.tanh_(self.W_a(s_prev)[:, None] + memory["keys"])  # in place on the fresh sum
        energies = self.v_a(hidden).squeeze(-1)  # eq. (6)
        return masked_softmax(energies, memory["src_mask"])  # (batch, src_len)


class RNNSearch(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb: int,
        hidden: int,
        align: int,
        maxout: int,
        dropout: float,
        init: str,
        attention: nn.Module | None = None,
    ):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, emb, padding_idx=self.pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab, emb, padding_idx=self.pad_id)
        self.encoder = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)  # §3.2
        self.init_proj = nn.Linear(hidden, hidden)  # W_s: s_0 = tanh(W_s ←h_1), App. A.2.2
        self.attention = attention or AdditiveAttention(hidden, 2 * hidden, align)
        self.decoder = ReadGRUCell(emb + 2 * hidden, hidden)  # input [E y_{i-1}; c_i]
        self.readout = DeepOutput(hidden + emb + 2 * hidden, maxout, tgt_vocab)
        self.dropout = nn.Dropout(dropout)
        if init == "paper":
            init_bahdanau(self)
            if isinstance(self.attention, AdditiveAttention):  # App. B.1
                nn.init.normal_(self.attention.W_a.weight, std=0.001)
                nn.init.normal_(self.attention.U_a.weight, std=0.001)
                nn.init.zeros_(self.attention.v_a.weight)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        embedded = self.dropout(self.src_embed(src))  # (batch, src_len, emb)
        annotations, final = run_packed(self.encoder, embedded, src_mask)  # (batch, src_len, 2*hidden)
        memory = {
            "annotations": annotations,
            "src_mask": src_mask,
            "s0": torch.tanh(self.init_proj(final[1])),  # final[1] = ←h_1, (batch, hidden)
        }
        return memory | self.attention.precompute(annotations)

    def init_state(self, memory: Memory) -> State:
        step = torch.zeros(memory["s0"].size(0), dtype=torch.long, device=memory["s0"].device)
        return {"s": memory["s0"], "step": step}  # step: target position i (0-based), per row

    def _attend(self, memory: Memory, s_prev: Tensor, step: Tensor) -> tuple[Tensor, Tensor]:
        """Context c_i and weights α_i (batch, src_len) for target position `step` (batch,)."""
        alpha = self.attention(memory, s_prev, step)  # (batch, src_len)
        context = torch.bmm(alpha[:, None], memory["annotations"]).squeeze(1)  # c_i = Σ α_ij h_j, eq. (5)
        return context, alpha

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        s_prev = state["s"]
        y_prev = self.tgt_embed(prev_tokens)  # (batch, emb)
        context, alpha = self._attend(memory, s_prev, state["step"])
        logits = self.readout(torch.cat([s_prev, y_prev, context], -1))  # App. A.2.2
        s = self.decoder(torch.cat([y_prev, context], -1), s_prev)  # s_i = f(s_{i-1}, y_{i-1}, c_i), eq. (4)
        return torch.log_softmax(logits, -1), {"s": s, "step": state["step"] + 1}, alpha

    def teacher_step(
        self, memory: Memory, h_proj: Tensor, s: Tensor, y_i: Tensor, step: Tensor
    ) -> tuple[Tensor, Tensor]:
        """One position of teacher forcing: s_i and α_i from s_{i-1} and the projected y_{i-1} (batch, 3 hidden)."""
        alpha = self.attention(memory, s, step)  # eq. (6)
        return self.decoder.step(self.decoder.read_input(y_i, h_proj, alpha), s), alpha  # eq. (4)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        y_prev = self.dropout(self.tgt_embed(tgt_in))  # (batch, tgt_len, emb)
        y_proj, h_proj = self.decoder.project(y_prev, memory["annotations"])  # once per batch, not per step
        s = memory["s0"]
        states, alphas = [], []
        steps = torch.arange(tgt_in.size(1), device=tgt_in.device)[:, None].expand(-1, tgt_in.size(0))
        teacher_step = step_function(self, self.teacher_step)  # eager, fused or graphed: train.step_compile
        for step, y_i in zip(steps, y_proj.unbind(1)):  # unbind: one backward copy, not one per step
            states.append(s)
            s, alpha = teacher_step(memory, h_proj, s, y_i, step)
            alphas.append(alpha)
        contexts = torch.bmm(torch.stack(alphas, 1), memory["annotations"])  # every c_i at once, eq. (5)
        features = torch.cat([self.dropout(torch.stack(states, 1)), y_prev, self.dropout(contexts)], -1)
        return self.readout(features)  # (batch, tgt_len, vocab); E y dropped out once, above
