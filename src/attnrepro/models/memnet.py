"""Memory network decoder: Weston, Chopra & Bordes 2014, "Memory Networks" (arXiv 1410.3916),
in the differentiable multi-hop form of Sukhbaatar et al. 2015, "End-To-End Memory
Networks" (MemN2N, arXiv 1503.08895), §2-§4.

This is the project's adaptation: neither paper translates. The memories are the source
positions: memory i holds source word x_i, embedded twice (input memory m_i = l_i ∘ A x_i,
output memory c_i = l_i ∘ C x_i) with the position encoding of §4.1,
l_kj = (1 - j/J) - (k/d)(1 - 2j/J), taken over the J source positions so that a memory
knows where in the sentence it stands. The question is the target prefix: a GRU reads
y_1..y_{t-1} and its state, mapped to u^1, queries the memory for K hops,
p^k = softmax(u^k·m^k_i), o^k = Σ_i p^k_i c^k_i, u^{k+1} = u^k + o^k (§2.1-2.2), and the
next word is predicted from u^{K+1}, â = softmax(W u^{K+1}) (eq. 3 with the hops of §2.2).
Adjacent weight tying (§2.2): A^{k+1} = C^k, so K hops use K + 1 embedding matrices. The
question embedding B and the answer matrix W are not tied to them: the question and the
answer are in the target language, the memories in the source language.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.models.base import Memory, Seq2SeqModel, State, masked_softmax


def position_encoding(lengths: Tensor, max_len: int, dim: int) -> Tensor:
    """l_kj = (1 - j/J) - (k/d)(1 - 2j/J), j = 1..J, k = 1..d (MemN2N §4.1); (batch, max_len, dim), 0 on padding."""
    j = torch.arange(1, max_len + 1, device=lengths.device, dtype=torch.float)[None, :, None]  # (1, max_len, 1)
    k = torch.arange(1, dim + 1, device=lengths.device, dtype=torch.float)[None, None, :]  # (1, 1, dim)
    J = lengths.float()[:, None, None].clamp(min=1)  # (batch, 1, 1)
    encoding = (1 - j / J) - (k / dim) * (1 - 2 * j / J)
    return encoding * (j <= J)


class MemNet(Seq2SeqModel):
    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        dim: int = 500,
        hidden: int = 1000,
        hops: int = 3,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.hops = hops
        # Adjacent tying: memory_embed[k] is C^k and A^{k+1}; memory_embed[0] is A^1.
        self.memory_embed = nn.ModuleList(
            nn.Embedding(src_vocab, dim, padding_idx=self.pad_id) for _ in range(hops + 1)
        )
        self.tgt_embed = nn.Embedding(tgt_vocab, dim, padding_idx=self.pad_id)  # B, the question's words
        self.question = nn.GRU(dim, hidden, batch_first=True)
        self.query = nn.Linear(hidden, dim)  # u^1
        self.out = nn.Linear(dim, tgt_vocab)  # W
        self.dropout = nn.Dropout(dropout)

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        encoding = position_encoding(src_mask.sum(1), src.size(1), self.out.in_features)  # (batch, src_len, dim)
        memory: Memory = {"src_mask": src_mask}
        for k, embed in enumerate(self.memory_embed):
            memory[f"m{k}"] = self.dropout(encoding * embed(src))  # l_i ∘ A^{k+1} x_i = l_i ∘ C^k x_i
        return memory

    def init_state(self, memory: Memory) -> State:
        batch = memory["src_mask"].size(0)
        return {"s": memory["m0"].new_zeros(batch, self.question.hidden_size)}

    def read(self, memory: Memory, u: Tensor) -> list[tuple[Tensor, Tensor, Tensor]]:
        """The K hops from queries u^1 (batch, steps, dim): [(u^k, o^k, p^k)] for k = 1..K."""
        hops = []
        src_mask = memory["src_mask"][:, None]  # (batch, 1, src_len)
        for k in range(self.hops):
            scores = torch.bmm(u, memory[f"m{k}"].transpose(1, 2))  # u^k · m_i, (batch, steps, src_len)
            p = masked_softmax(scores, src_mask)  # eq. (1)
            o = torch.bmm(p, memory[f"m{k + 1}"])  # o = Σ_i p_i c_i, eq. (2)
            hops.append((u, o, p))
            u = u + o  # u^{k+1} = u^k + o^k, §2.2
        return hops

    def _predict(self, memory: Memory, states: Tensor) -> tuple[Tensor, Tensor]:
        """Decoder states (batch, steps, hidden) -> logits (batch, steps, vocab), last hop's p."""
        u, o, p = self.read(memory, self.query(states))[-1]
        return self.out(self.dropout(u + o)), p  # â = softmax(W u^{K+1}), eq. (3)

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        states, s = self.question(self.tgt_embed(prev_tokens)[:, None], state["s"][None])
        logits, p = self._predict(memory, states)
        return torch.log_softmax(logits[:, 0], -1), {"s": s[0]}, p[:, 0]

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        states, _ = self.question(self.dropout(self.tgt_embed(tgt_in)))  # the question: the target prefix
        return self._predict(memory, states)[0]  # (batch, tgt_len, vocab); every step's hops at once
