"""Beam search on a GPU: the same hypotheses as on the CPU, validation BLEU on the GPU, and throughput.

    python benchmarks/gpu_search.py                       # CUDA: checks, then paper-size throughput
    python benchmarks/gpu_search.py --device cpu --tiny   # a minutes-long check of the script itself

1. Every architecture at the registry's tiny sizes translates 64 random sources at beam 4 (α 0 and
   0.6) on the CPU and on `--device` (fp32, then bf16 autocast): it prints how many hypotheses
   are identical (fp32 should give 64/64; bf16 may differ where log-probabilities are close).
2. `ValidBleu` on `--device` scores 100 against the CPU's translations (the same search).
3. sentences/s and output tokens/s of `translate_ids` with random paper-size weights (RNNsearch:
   Bahdanau App. A, 30 000 words + specials, beam 12; Transformer base: Vaswani 2017, 37 000
   shared tokens, beam 4, α 0.6), 10-40-token sources, at most |x| + 10 tokens: batches of 64
   sentences and of 60 000 source tokens x beam, fp32 and bf16; a few sentences on the CPU for
   comparison. Random weights rarely emit </s>, so most searches run to the length limit: an
   upper bound of a trained model's cost.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from attnrepro.config import SearchConfig
from attnrepro.data.batching import Corpus
from attnrepro.data.tokenize import WordVocab
from attnrepro.decoding.search import search_device, translate_ids
from attnrepro.models import REGISTRY, build_model, tiny_model
from attnrepro.training.validation import ValidBleu

CPU = torch.device("cpu")
SRC_VOCAB, TGT_VOCAB = 23, 19  # tiny vocabularies for the tiny models
RNNSEARCH = {"emb": 620, "hidden": 1000, "align": 1000, "maxout": 500}
BASE = {"d_model": 512, "d_ff": 2048, "heads": 8, "layers": 6, "dropout": 0.1, "share_embeddings": True}


def sources(n: int, lo: int, hi: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    return [g.integers(4, vocab, size=g.integers(lo, hi + 1)) for _ in range(n)]


def same_as_cpu(device: torch.device) -> None:
    src = sources(64, 1, 14, SRC_VOCAB)
    for arch in sorted(REGISTRY):
        for alpha in (0.0, 0.6):
            sc = SearchConfig(beam=4, length_penalty=alpha, max_len_a=1.5, max_len_b=3, batch_size=16)
            cpu = translate_ids(tiny_model(arch, SRC_VOCAB, TGT_VOCAB, seed=1), src, sc, CPU)
            there = translate_ids(tiny_model(arch, SRC_VOCAB, TGT_VOCAB, seed=1), src, sc, device)
            bf16 = translate_ids(tiny_model(arch, SRC_VOCAB, TGT_VOCAB, seed=1), src, sc, device, precision="bf16")
            same = sum(a.tokens == b.tokens for a, b in zip(cpu, there))
            diff = max((abs(a.score - b.score) for a, b in zip(cpu, there) if a.tokens == b.tokens), default=0.0)
            same16 = sum(a.tokens == b.tokens for a, b in zip(cpu, bf16))
            print(f"{arch:14s} alpha {alpha}: fp32 {same}/64 as on the CPU (score diff {diff:.1e}); bf16 {same16}/64")


def valid_bleu(device: torch.device) -> None:
    vocab = WordVocab(["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(TGT_VOCAB - 4)])
    src, tgt = sources(40, 2, 9, SRC_VOCAB, seed=1), sources(40, 2, 9, TGT_VOCAB, seed=2)
    offsets = [np.concatenate(([0], np.cumsum([len(s) for s in side]))) for side in (src, tgt)]
    sc = SearchConfig(beam=3, batch_size=8)
    bleu = ValidBleu(Corpus(np.concatenate(src), offsets[0], np.concatenate(tgt), offsets[1]), vocab, sc)
    model = tiny_model("rnnsearch", SRC_VOCAB, TGT_VOCAB, seed=3)
    bleu.references = [vocab.decode(h.tokens) for h in translate_ids(model, src, sc, CPU)]
    print(f"ValidBleu on {device} against the CPU's translations: {bleu(model.to(device)):.2f}")


def throughput(arch: str, params: dict, vocab: int, sc: SearchConfig, n: int, device, precision: str) -> None:
    torch.manual_seed(0)
    model = build_model(arch, vocab, vocab, params).to(device)
    src = sources(n, 10, 40, vocab, seed=3)
    translate_ids(model, src[:16], sc, device, precision=precision)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    hyps = translate_ids(model, src, sc, device, precision=precision)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    tokens = sum(len(h.tokens) + 1 for h in hyps)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0
    batching = f"batch_tokens {sc.batch_tokens}" if sc.batch_tokens else f"batch_size {sc.batch_size}"
    print(
        f"{arch:11s} {device.type:4s} {precision} {batching:19s}: {n} sentences in {seconds:6.2f} s,"
        f" {n / seconds:7.1f} sentences/s, {tokens / seconds:8.0f} tokens/s, peak {peak:.1f} GiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="search.device to check against the CPU")
    parser.add_argument("--sentences", type=int, default=512, help="per throughput run on --device")
    parser.add_argument("--cpu-sentences", type=int, default=8, help="per throughput run on the CPU")
    parser.add_argument("--tiny", action="store_true", help="tiny models for the throughput runs")
    args = parser.parse_args()
    device = search_device(args.device)
    print("torch", torch.__version__, torch.cuda.get_device_name(0) if device.type == "cuda" else "(CPU)", flush=True)
    same_as_cpu(device)
    valid_bleu(device)
    rnn, base = (REGISTRY["rnnsearch"].tiny, REGISTRY["transformer"].tiny) if args.tiny else (RNNSEARCH, BASE)
    vocabs = (TGT_VOCAB, TGT_VOCAB) if args.tiny else (30004, 37000)
    for (arch, params, beam, alpha), vocab in zip((("rnnsearch", rnn, 12, 0.0), ("transformer", base, 4, 0.6)), vocabs):
        limits = {"beam": beam, "length_penalty": alpha, "max_len_a": 1.0, "max_len_b": 10}
        by_sentences, by_tokens = SearchConfig(**limits, batch_size=64), SearchConfig(**limits, batch_tokens=60000)
        throughput(arch, params, vocab, by_sentences, args.cpu_sentences, CPU, "fp32")
        for sc in (by_sentences, by_tokens):
            for precision in ("fp32", "bf16"):
                throughput(arch, params, vocab, sc, args.sentences, device, precision)


if __name__ == "__main__":
    main()
