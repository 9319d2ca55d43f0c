"""One batched beam search for every model, and translation of a file with it.

All sentences of a batch and all their beams advance together as one (batch*beam) row
block; no Python loop runs over sentences. A finished beam keeps its score and emits
<pad> at no cost, so beam 1 is exactly greedy decoding. The final choice divides each
score by the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016), which
Vaswani et al. 2017 (§6.1) used with α = 0.6; α = 0 ranks by log-probability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnrepro.config import SearchConfig
from attnrepro.data.batching import pad, sentence_batches
from attnrepro.data.tokenize import BOS, EOS, PAD, Tokenizer
from attnrepro.models.base import Seq2SeqModel


@dataclass
class Hypothesis:
    tokens: list[int]  # without </s>
    score: float  # log-probability (including </s>), before the length penalty
    attention: np.ndarray | None  # (len(tokens), src_len) or None for models without attention


NEVER_EMITTED = torch.tensor([PAD, BOS])  # a hypothesis never contains these


def length_penalty(lengths: Tensor, alpha: float) -> Tensor:
    return ((5.0 + lengths) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_mask: Tensor,
    beam: int,
    max_lens: Tensor,
    alpha: float = 0.0,
) -> list[Hypothesis]:
    """src, src_mask: (batch, src_len); max_lens: (batch,) longest output per sentence (with </s>)."""
    model.eval()
    batch = src.size(0)
    rows = batch * beam
    memory = model.encode(src, src_mask)
    memory, state = model.reorder(memory, model.init_state(memory), torch.arange(batch).repeat_interleave(beam))

    scores = torch.zeros(batch, beam)
    scores[:, 1:] = float("-inf")  # all beams start as one hypothesis
    prev = torch.full((rows,), BOS, dtype=torch.long)
    finished = torch.zeros(rows, dtype=torch.bool)
    lengths = torch.zeros(rows)
    # Back-pointers, one entry per step: the token each row emitted, the row it extended, and the
    # attention of the rows before the reordering. The best hypotheses are traced back once at the
    # end, so no step copies the whole history (which would cost O(step x src_len) per step).
    step_tokens: list[Tensor] = []  # (rows,) each
    step_origins: list[Tensor] = []  # (rows,) each
    step_attention: list[Tensor] = []  # (rows, src_len) each
    row_max = max_lens.repeat_interleave(beam)
    block = torch.arange(batch)[:, None] * beam  # first row of each sentence

    for step in range(int(max_lens.max())):
        log_probs, state, attn = model.decode_step(memory, state, prev)  # (rows, vocab)
        vocab = log_probs.size(1)
        log_probs = log_probs.index_fill(1, NEVER_EMITTED, float("-inf"))
        # Finished beams continue with <pad> at no cost; beams at their length limit must end.
        log_probs = torch.where(finished[:, None], _only(PAD, vocab), log_probs)
        at_limit = ~finished & (row_max == step + 1)
        log_probs = torch.where(at_limit[:, None], log_probs + _only(EOS, vocab), log_probs)

        candidates = (scores.view(rows, 1) + log_probs).view(batch, beam * vocab)
        scores, flat = candidates.topk(beam, dim=1)  # (batch, beam)
        origin = (block + flat // vocab).view(-1)  # row each new beam extends
        token = (flat % vocab).view(-1)

        _, state = model.reorder(None, state, origin)
        was_finished = finished[origin]
        lengths = lengths[origin] + (~was_finished).float()
        finished = was_finished | (token == EOS)
        step_tokens.append(token)
        step_origins.append(origin)
        if attn is not None:
            step_attention.append(attn)
        prev = token
        if bool(finished.all()):
            break

    best = (scores / length_penalty(lengths.view(batch, beam), alpha)).argmax(1)  # (batch,)
    best_rows = block[:, 0] + best
    tokens, attention = _trace_back(best_rows, step_tokens, step_origins, step_attention)
    n_tokens, best_scores, src_lens = (
        lengths[best_rows].long().tolist(),
        scores[torch.arange(batch), best],
        src_mask.sum(1),
    )
    hypotheses = []
    for b in range(batch):
        seq = tokens[b, : n_tokens[b]].tolist()
        if seq and seq[-1] == EOS:
            seq = seq[:-1]
        weights = None if attention is None else attention[b, : len(seq), : int(src_lens[b])].numpy()
        hypotheses.append(Hypothesis(seq, float(best_scores[b]), weights))
    return hypotheses


def _trace_back(
    rows: Tensor, step_tokens: list[Tensor], step_origins: list[Tensor], step_attention: list[Tensor]
) -> tuple[Tensor, Tensor | None]:
    """Follow the back-pointers from final `rows` (batch,): tokens (batch, steps), attention (batch, steps, src_len)."""
    steps = len(step_tokens)
    tokens = torch.empty(rows.size(0), steps, dtype=torch.long)
    attention = torch.empty(rows.size(0), steps, step_attention[0].size(1)) if step_attention else None
    for t in reversed(range(steps)):
        tokens[:, t] = step_tokens[t][rows]
        rows = step_origins[t][rows]  # the row this one extended: its attention was computed there
        if attention is not None:
            attention[:, t] = step_attention[t][rows]
    return tokens, attention


def _only(token: int, vocab: int) -> Tensor:
    """A log-probability row that allows only `token`."""
    row = torch.full((vocab,), float("-inf"))
    row[token] = 0.0
    return row


def translate_lines(
    model: Seq2SeqModel,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    lines: list[str],
    sc: SearchConfig,
) -> list[Hypothesis]:
    """Beam-search every line (batched by length); hypotheses come back in input order."""
    encoded = [np.asarray(src_tok.encode(line), dtype=np.int64) for line in lines]
    lens = np.array([len(e) for e in encoded])
    results: list[Hypothesis | None] = [None] * len(lines)
    for indices in sentence_batches(lens, sc.batch_size):
        nonempty = [i for i in indices if lens[i] > 0]
        for i in indices:
            if lens[i] == 0:
                results[i] = Hypothesis([], 0.0, None)
        if not nonempty:
            continue
        src = pad([encoded[i] for i in nonempty])
        max_lens = torch.from_numpy(np.floor(sc.max_len_a * lens[nonempty] + sc.max_len_b).astype(np.int64) + 1)
        for i, hyp in zip(nonempty, beam_search(model, src, src != PAD, sc.beam, max_lens, sc.length_penalty)):
            results[i] = hyp
    return results  # type: ignore[return-value]
