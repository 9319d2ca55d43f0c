"""What the training loop measures: cross-entropy per target token, on training batches and on
the validation set, and the validation set's BLEU under beam search."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from attnrepro.config import SearchConfig
from attnrepro.data.batching import Corpus, collate, token_batches
from attnrepro.data.tokenize import PAD, Tokenizer
from attnrepro.decoding.search import translate_ids
from attnrepro.evaluation.scoring import corpus_bleu
from attnrepro.models.base import Seq2SeqModel


def loss_fn(logits: torch.Tensor, tgt_out: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """Mean cross-entropy per real target token (the loop rescales it to train.loss_norm)."""
    return nn.functional.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
    )


@torch.no_grad()
def valid_loss(
    model: Seq2SeqModel,
    corpus: Corpus,
    batch_tokens: int,
    device: torch.device | None = None,
    autocast: contextlib.AbstractContextManager | None = None,
    pairs: np.ndarray | None = None,
    average: str = "token",
) -> float:
    """Cross-entropy over `pairs` (default: all), </s> included, whatever train.loss_norm: per target token
    (`average` token: the log of the perplexity), or the mean over sentences of each one's per-token loss
    (sentence: every sentence weighs the same, so every bucket of a per-bucket validation split does)."""
    pairs = np.arange(len(corpus)) if pairs is None else pairs
    model.eval()
    total, count = 0.0, 0
    for batch_pairs in token_batches(corpus.src_lens[pairs], corpus.tgt_lens[pairs], batch_tokens, seed=0):
        batch = collate(corpus, pairs[batch_pairs]).to(device or torch.device("cpu"))
        with autocast or contextlib.nullcontext():
            logits = model(batch.src, batch.src_mask, batch.tgt_in)
        token_losses = nn.functional.cross_entropy(  # (batch, tgt_len), 0 on padding
            logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=PAD, reduction="none"
        ).view(batch.tgt_out.shape)
        if average == "sentence":
            total += float((token_losses.sum(1) / (batch.tgt_out != PAD).sum(1)).sum())
            count += len(batch_pairs)
        else:
            total += float(token_losses.sum())
            count += batch.n_tgt_tokens
    model.train()
    return total / count


class ValidBleu:
    """sacreBLEU of the beam-search translations of the validation set.

    The references are the validation targets decoded from their ids (lossless for
    sentencepiece; word vocabularies show their <unk>). The search is `translate`'s
    (attnrepro.decoding.search.translate_ids), on the device the model trains on, under bf16
    autocast when `precision` (the model's train.precision) is bf16.
    """

    def __init__(self, corpus: Corpus, tgt_tok: Tokenizer, sc: SearchConfig, precision: str = "fp32"):
        self.corpus, self.tgt_tok, self.sc, self.precision = corpus, tgt_tok, sc, precision
        self.references = [tgt_tok.decode(corpus.tgt(i).tolist()) for i in range(len(corpus))]

    def __call__(self, model: Seq2SeqModel) -> float:
        sources = [self.corpus.src(i) for i in range(len(self.corpus))]
        device = next(model.parameters()).device
        hypotheses = translate_ids(model, sources, self.sc, device, precision=self.precision)
        model.train()
        return corpus_bleu([self.tgt_tok.decode(h.tokens) for h in hypotheses], self.references)[0]
