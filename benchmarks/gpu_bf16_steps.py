"""One bf16 training step (autocast, as `train.precision: bf16`) of every architecture on a GPU: the loss
and whether every gradient is finite. Part of benchmarks/gpu_check.sh.

    python benchmarks/gpu_bf16_steps.py [--device cuda]
"""

from __future__ import annotations

import argparse

import torch

from attnrepro.decoding.search import autocast
from attnrepro.models import REGISTRY, tiny_model
from attnrepro.training.validation import loss_fn

SRC_VOCAB, TGT_VOCAB = 23, 19


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    device = torch.device(parser.parse_args().device)
    torch.manual_seed(0)
    src = torch.randint(4, SRC_VOCAB, (8, 12), device=device)
    tgt = torch.randint(4, TGT_VOCAB, (8, 10), device=device)
    for arch in sorted(REGISTRY):
        model = tiny_model(arch, SRC_VOCAB, TGT_VOCAB).to(device).train()  # cuDNN RNNs backpropagate in train mode only
        with autocast(device, "bf16"):
            loss = loss_fn(model(src, src != 0, tgt), tgt, 0.1)
        loss.backward()
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.grad is not None)
        print(f"{arch:14s} bf16 loss {float(loss.detach()):.3f}, gradients finite: {finite}", flush=True)


if __name__ == "__main__":
    main()
