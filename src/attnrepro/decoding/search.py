"""One batched beam search for every model, and translation of encoded or plain-text sources with it.

All sentences of a batch and all their beams advance together as one (batch*beam) row block
on the model's device; no Python loop runs over sentences. Each step every live hypothesis is
extended by every token and the 2*beam best extensions of each sentence are kept as candidates
(fairseq, tensor2tensor). A candidate ending in </s> that ranks among the first `beam` moves to
the sentence's pool of finished hypotheses, scored by log-probability / lp(Y) with the GNMT
length penalty lp(Y) = ((5 + |Y|) / 6)^α, |Y| counting </s> (Wu et al. 2016, §7; α = 0.6 in
Vaswani et al. 2017, §6.1; α = 0 ranks by log-probability). The first `beam` candidates that do
not end in </s> are the next step's live hypotheses, so a finished hypothesis never takes a live
one's place and is never dropped. The answer is the pool's best; the pool keeps only its best
member, since no other is ever returned. Pruning ranks live hypotheses by raw log-probability
(all have the same length, so lp would not change their order).

A sentence stops when no live hypothesis can still beat its best finished one: a live score can
only fall, and lp only grows up to the sentence's longest output, so live / lp(max_len) bounds
what any continuation can reach (tensor2tensor's bound; with α = 0 it is the live score itself).
A hypothesis that reaches the longest output (`max_len`, </s> included) must end with </s>.
Beam 1 with α = 0 is exactly greedy decoding. The best hypotheses are traced back once through
per-step back-pointers, attention included.

`translate_ids` (validation BLEU) and `translate_lines` (`attnrepro translate`) batch sources by
length (`search.batch_size` sentences, or `search.batch_tokens` source tokens x beam) and search
on one device (`search.device`; validation searches where the model trains), under bf16 autocast
when the model trained in bf16. `search.ban_unk` never emits <unk>, as Bahdanau et al. 2014
decoded Table 1's No-UNK column.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnrepro.config import SearchConfig
from attnrepro.data.batching import pad, sentence_batches
from attnrepro.data.tokenize import BOS, EOS, PAD, UNK, Tokenizer
from attnrepro.errors import ConfigError
from attnrepro.models.base import Seq2SeqModel


@dataclass
class Hypothesis:
    tokens: list[int]  # without </s>
    score: float  # log-probability (including </s>), before the length penalty
    attention: np.ndarray | None  # (len(tokens), src_len) or None for models without attention


def length_penalty(lengths: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, §7)."""
    return ((5.0 + lengths) / 6.0) ** alpha


def search_device(choice: str) -> torch.device:
    """`search.device`: auto is CUDA when torch sees a GPU, else the CPU (the training device's rule)."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("search.device is cuda but torch sees no GPU (torch.cuda.is_available() is False)")
    return torch.device("cuda" if choice != "cpu" and torch.cuda.is_available() else "cpu")


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for a model that trained in bf16 (`train.precision`), else nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


class _Pool:
    """The best finished hypothesis of each sentence: normalised and raw score, length, and the row it ended."""

    def __init__(self, batch: int, device: torch.device):
        self.best = torch.full((batch,), float("-inf"), device=device)  # log p / lp
        self.score = torch.full((batch,), float("-inf"), device=device)  # log p
        self.length = torch.zeros(batch, dtype=torch.long, device=device)  # tokens before </s>
        self.origin = torch.zeros(batch, dtype=torch.long, device=device)  # the row that emitted </s>

    def add(self, step: int, scores: Tensor, origins: Tensor, ended: Tensor, lp: float) -> None:
        """scores, origins, ended: (batch, beam) candidates of `step`; those `ended` finished there."""
        normalised = torch.where(ended, scores / lp, float("-inf"))
        best, pick = normalised.max(1)  # the first of equals: the higher raw rank
        better = best > self.best
        self.best = torch.where(better, best, self.best)
        self.score = torch.where(better, scores.gather(1, pick[:, None]).squeeze(1), self.score)
        self.origin = torch.where(better, origins.gather(1, pick[:, None]).squeeze(1), self.origin)
        self.length = self.length.masked_fill(better, step)


@dataclass
class _Trail:
    """Back-pointers, one entry per step: the token each live row emitted, the row it extended, and the
    attention of the rows before the reordering. The answers are traced back once at the end, so no
    step copies the whole history (which would cost O(step x src_len) per step)."""

    tokens: list[Tensor]  # (rows,) each
    origins: list[Tensor]  # (rows,) each
    attention: list[Tensor]  # (rows, src_len) each, empty for models without attention

    def add(self, tokens: Tensor, origins: Tensor, attention: Tensor | None) -> None:
        self.tokens.append(tokens)
        self.origins.append(origins)
        if attention is not None:
            self.attention.append(attention.float())

    def trace_back(self, origin: Tensor, length: Tensor) -> tuple[Tensor, Tensor | None]:
        """Tokens (batch, steps) and attention (batch, steps, src_len) of the hypotheses whose </s> row
        `origin` (batch,) extended after `length` (batch,) tokens; positions past `length` are undefined."""
        steps = int(length.max()) if length.numel() else 0
        tokens = origin.new_zeros(origin.size(0), steps)
        attention = (
            self.attention[0].new_zeros(origin.size(0), steps, self.attention[0].size(1)) if self.attention else None
        )
        row = origin  # the live row after step t, for every t < length
        for t in reversed(range(steps)):
            tokens[:, t] = self.tokens[t][row]
            extended = self.origins[t][row]  # its attention at step t was computed on the row it extended
            if attention is not None:
                attention[:, t] = self.attention[t][extended]
            row = torch.where(t < length, extended, row)
        return tokens, attention


@torch.no_grad()
def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    src_mask: Tensor,
    beam: int,
    max_lens: Tensor,
    alpha: float = 0.0,
    *,
    ban_unk: bool = False,
    precision: str = "fp32",
) -> list[Hypothesis]:
    """src, src_mask: (batch, src_len) on the model's device; max_lens: (batch,) longest output per sentence
    (with </s>). `ban_unk` never emits <unk> (Bahdanau Table 1's No-UNK column); `precision` "bf16" decodes
    under bf16 autocast, as the model trained."""
    model.eval()
    device, batch = src.device, src.size(0)
    rows, max_lens = batch * beam, max_lens.to(device)
    cast = autocast(device, precision)  # around every model call: init_state too computes from the memory
    with cast:
        memory = model.encode(src, src_mask)
        start = model.init_state(memory)
    memory, state = model.reorder(memory, start, torch.arange(batch, device=device).repeat_interleave(beam))
    live = torch.full((batch, beam), float("-inf"), device=device)
    live[:, 0] = 0.0  # all beams start as one hypothesis
    prev = torch.full((rows,), BOS, dtype=torch.long, device=device)
    never = torch.tensor([PAD, BOS, UNK] if ban_unk else [PAD, BOS], device=device)
    bound_lp = length_penalty(max_lens.float(), alpha)  # the largest lp a live hypothesis can still reach
    limit_steps = {int(n) - 1 for n in max_lens.tolist()}  # steps at which some sentence must end
    pool, trail = _Pool(batch, device), _Trail([], [], [])
    for step in range(int(max_lens.max())):
        with cast:
            log_probs, state, attn = model.decode_step(memory, state, prev)  # (rows, vocab)
        log_probs = log_probs.float().index_fill(1, never, float("-inf"))
        if step in limit_steps:
            log_probs = _only_eos(log_probs, (max_lens == step + 1).repeat_interleave(beam))
        live, origin, prev = _advance(live, log_probs, pool, step, float(length_penalty(step + 1.0, alpha)))
        _, state = model.reorder(None, state, origin)
        trail.add(prev, origin, attn)
        done = live.max(1).values / bound_lp <= pool.best  # no live hypothesis can beat the pool's best
        if bool(done.all()):
            break
        live = live.masked_fill(done[:, None], float("-inf"))
    return _hypotheses(pool, trail, src_mask)


def _advance(live: Tensor, log_probs: Tensor, pool: _Pool, step: int, lp: float) -> tuple[Tensor, Tensor, Tensor]:
    """One step's choice from the 2*beam best extensions of each sentence: those ending in </s> among the
    first `beam` go to the pool; the first `beam` others are the new live hypotheses.

    live: (batch, beam) scores; log_probs: (batch*beam, vocab). Returns the new live scores, and for
    each new live row the row it extends and its token, both (batch*beam,)."""
    (batch, beam), vocab = live.shape, log_probs.size(1)
    candidates, flat = (live.view(-1, 1) + log_probs).view(batch, beam * vocab).topk(2 * beam, dim=1)
    origin = torch.arange(batch, device=live.device)[:, None] * beam + flat // vocab  # (batch, 2*beam)
    token = flat % vocab
    ends = token == EOS
    top = slice(0, beam)
    pool.add(step, candidates[:, top], origin[:, top], ends[:, top] & candidates[:, top].isfinite(), lp)
    rank = torch.arange(2 * beam, device=live.device)
    keep = (ends * 2 * beam + rank).topk(beam, dim=1, largest=False).indices  # in rank order, </s> last
    return candidates.gather(1, keep), origin.gather(1, keep).view(-1), token.gather(1, keep).view(-1)


def _only_eos(log_probs: Tensor, at_limit: Tensor) -> Tensor:
    """Rows `at_limit` (rows,) reached their longest output: only </s> may follow."""
    not_eos = torch.arange(log_probs.size(1), device=log_probs.device) != EOS
    return log_probs.masked_fill(at_limit[:, None] & not_eos, float("-inf"))


def _hypotheses(pool: _Pool, trail: _Trail, src_mask: Tensor) -> list[Hypothesis]:
    """Each sentence's best finished hypothesis, on the CPU."""
    tokens, attention = trail.trace_back(pool.origin, pool.length)
    tokens, lengths, scores = tokens.cpu(), pool.length.tolist(), pool.score.tolist()
    attention = None if attention is None else attention.cpu()
    src_lens = src_mask.sum(1).tolist()
    return [
        Hypothesis(
            tokens[b, : lengths[b]].tolist(),
            scores[b],
            None if attention is None else attention[b, : lengths[b], : src_lens[b]].numpy(),
        )
        for b in range(len(lengths))
    ]


def output_lengths(src_lens: np.ndarray, sc: SearchConfig) -> np.ndarray:
    """Longest output of each sentence, </s> included: floor(max_len_a * |x| + max_len_b) + 1."""
    return np.floor(sc.max_len_a * np.asarray(src_lens) + sc.max_len_b).astype(np.int64) + 1


def decode_batches(src_lens: np.ndarray, sc: SearchConfig) -> list[np.ndarray]:
    """Length-sorted batches: `batch_size` sentences, or with `batch_tokens` > 0 as many sentences as keep
    padded source tokens x beam at most `batch_tokens` (a longer sentence goes alone)."""
    if sc.batch_tokens == 0:
        return sentence_batches(src_lens, sc.batch_size)
    order = np.argsort(src_lens, kind="stable")
    batches, start = [], 0
    for pos in range(1, len(order)):
        if (pos - start + 1) * int(src_lens[order[pos]]) * sc.beam > sc.batch_tokens:
            batches.append(order[start:pos])
            start = pos
    return batches + [order[start:]] if len(order) else batches


def translate_ids(
    model: Seq2SeqModel,
    encoded: list[np.ndarray],
    sc: SearchConfig,
    device: torch.device,
    *,
    precision: str = "fp32",
    ban_unk: bool | None = None,
) -> list[Hypothesis]:
    """Beam-search every source (token ids) on `device`, where the model is moved; hypotheses in input order.

    `ban_unk` overrides `sc.ban_unk`; an empty source translates to an empty hypothesis.
    """
    model.to(device)
    lens = np.array([len(e) for e in encoded], dtype=np.int64)
    max_lens = output_lengths(lens, sc)
    results = [Hypothesis([], 0.0, None) for _ in encoded]
    nonempty = np.flatnonzero(lens > 0)
    unk = sc.ban_unk if ban_unk is None else ban_unk
    for positions in decode_batches(lens[nonempty], sc):
        indices = nonempty[positions]
        src = pad([encoded[i] for i in indices]).to(device)
        limits = torch.from_numpy(max_lens[indices]).to(device)
        hyps = beam_search(model, src, src != PAD, sc.beam, limits, sc.length_penalty, ban_unk=unk, precision=precision)
        _align_whole_outputs(model, src, hyps)
        for i, hyp in zip(indices, hyps):
            results[i] = hyp
    return results


@torch.no_grad()
def _align_whole_outputs(model: Seq2SeqModel, src: Tensor, hyps: list[Hypothesis]) -> None:
    """Replace each hypothesis's attention by `model.alignment` of its whole output where the model has one
    (the transducer's posterior over cursor positions); a model that keeps the interface's default costs
    nothing here."""
    if type(model).alignment is Seq2SeqModel.alignment:
        return
    tgt_lens = torch.tensor([len(h.tokens) for h in hyps], device=src.device)
    tgt_in = pad([np.array([BOS, *h.tokens], dtype=np.int64) for h in hyps]).to(src.device)
    aligned = model.alignment(src, src != PAD, tgt_in, tgt_lens)
    if aligned is None:  # an override may still decline
        return
    for b, hyp in enumerate(hyps):
        hyp.attention = aligned[b, : len(hyp.tokens), : hyp.attention.shape[1]].float().cpu().numpy()


def translate_lines(
    model: Seq2SeqModel,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    lines: list[str],
    sc: SearchConfig,
    *,
    device: torch.device | None = None,
    precision: str = "fp32",
    ban_unk: bool | None = None,
) -> list[Hypothesis]:
    """Encode and beam-search every line (batched by length) on `device` (default: `sc.device`); input order."""
    encoded = [np.asarray(src_tok.encode(line), dtype=np.int64) for line in lines]
    device = search_device(sc.device) if device is None else device
    return translate_ids(model, encoded, sc, device, precision=precision, ban_unk=ban_unk)
