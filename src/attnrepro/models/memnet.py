"""Memory network decoder: Weston, Chopra & Bordes 2014, "Memory Networks" (arXiv 1410.3916),
in the differentiable multi-hop form of Sukhbaatar et al. 2015, "End-To-End Memory
Networks" (MemN2N, arXiv 1503.08895), §2-§4.

This is the project's adaptation: neither paper translates. The memories are the source
positions: memory i holds source word x_i, embedded twice, as input memory
m_i = l_i ∘ A x_i + T_A(i) and output memory c_i = l_i ∘ C x_i + T_C(i), with the position
encoding of §4.1, l_kj = (1 - j/J) - (k/d)(1 - 2j/J), taken over the J source positions, and
the temporal encoding T(i) of §4.1 that orders the memories. The question is the target
prefix: a GRU reads y_{t-1} together with its previous answer u^{K+1}_{t-1} (so the question
knows what it has read so far), and its state, mapped to u^1, queries the memory for K hops,
p^k = softmax(u^k·m^k_i), o^k = Σ_i p^k_i c^k_i, u^{k+1} = u^k + o^k (§2.1-2.2); the next word
is predicted from u^{K+1}, â = softmax(W u^{K+1}) (eq. 3 with the hops of §2.2). Adjacent
weight tying (§2.2): A^{k+1} = C^k (and T_A^{k+1} = T_C^k), so K hops use K + 1 embedding
matrices. The question embedding B and the answer matrix W are not tied to them: the
question and the answer are in the target language, the memories in the source language.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnrepro.errors import ConfigError
from attnrepro.models.base import Memory, Seq2SeqModel, State, dot_rows, masked_softmax
from attnrepro.models.step_compile import step_function


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
        dim: int,
        hidden: int,
        hops: int,
        max_positions: int,
        dropout: float,
    ):
        super().__init__()
        self.hops = hops
        # Adjacent tying: memory_embed[k] is C^k and A^{k+1}; memory_embed[0] is A^1. Same for T.
        self.memory_embed = nn.ModuleList(
            nn.Embedding(src_vocab, dim, padding_idx=self.pad_id) for _ in range(hops + 1)
        )
        self.temporal = nn.ModuleList(nn.Embedding(max_positions, dim) for _ in range(hops + 1))  # T_A, T_C
        self.tgt_embed = nn.Embedding(tgt_vocab, dim, padding_idx=self.pad_id)  # B, the question's words
        self.question = nn.GRUCell(2 * dim, hidden)  # input [B y_{t-1}; u^{K+1}_{t-1}]
        self.query = nn.Linear(hidden, dim)  # u^1
        self.out = nn.Linear(dim, tgt_vocab)  # W
        self.dropout = nn.Dropout(dropout)
        for embedding in [*self.memory_embed, *self.temporal, self.tgt_embed]:
            nn.init.normal_(embedding.weight, std=0.1)  # §4.2: Gaussian, zero mean, σ = 0.1

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        if src.size(1) > self.temporal[0].num_embeddings:
            raise ConfigError(
                f"memnet: a source of {src.size(1)} tokens is longer than params.max_positions="
                f"{self.temporal[0].num_embeddings}"
            )
        encoding = position_encoding(src_mask.sum(1), src.size(1), self.out.in_features).to(self.out.weight.dtype)
        positions = torch.arange(src.size(1), device=src.device)
        memory: Memory = {"src_mask": src_mask}
        for k, (embed, temporal) in enumerate(zip(self.memory_embed, self.temporal)):
            memory[f"m{k}"] = self.dropout(encoding * embed(src) + temporal(positions))  # (batch, src_len, dim)
        return memory

    def init_state(self, memory: Memory) -> State:
        batch, dim = memory["src_mask"].size(0), self.out.in_features
        zeros = memory["m0"].new_zeros
        return {"s": zeros(batch, self.question.hidden_size), "answer": zeros(batch, dim)}

    def read(self, memory: Memory, u: Tensor) -> list[tuple[Tensor, Tensor, Tensor]]:
        """The K hops from query u^1 (batch, dim): [(u^k, o^k, p^k)] for k = 1..K."""
        hops = []
        for k in range(self.hops):
            scores = dot_rows(memory[f"m{k}"], u)  # u^k · m_i, (batch, src_len)
            p = masked_softmax(scores, memory["src_mask"])  # eq. (1)
            o = torch.bmm(p[:, None], memory[f"m{k + 1}"]).squeeze(1)  # o = Σ_i p_i c_i, eq. (2)
            hops.append((u, o, p))
            u = u + o  # u^{k+1} = u^k + o^k, §2.2
        return hops

    def _step(self, memory: Memory, state: State, y_prev: Tensor) -> tuple[Tensor, State, Tensor]:
        s = self.question(torch.cat([y_prev, state["answer"]], -1), state["s"])
        u, o, p = self.read(memory, self.query(s))[-1]
        answer = u + o  # u^{K+1}
        return answer, {"s": s, "answer": answer}, p

    def decode_step(self, memory: Memory, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        answer, state, p = self._step(memory, state, self.tgt_embed(prev_tokens))
        return torch.log_softmax(self.out(answer), -1), state, p  # â = softmax(W u^{K+1}), eq. (3)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        memory = self.encode(src, src_mask)
        y_prev = self.dropout(self.tgt_embed(tgt_in))  # (batch, tgt_len, dim)
        state = self.init_state(memory)
        answers = []
        teacher_step = step_function(self, self._step)  # eager, fused or graphed: train.step_compile
        for y_t in y_prev.unbind(1):  # unbind: one backward copy, not one per step
            answer, state, _ = teacher_step(memory, state, y_t)
            answers.append(answer)
        return self.out(self.dropout(torch.stack(answers, 1)))  # (batch, tgt_len, vocab)
