"""seq2seq (Sutskever et al. 2014): reversed source, uniform init, the paper's size."""

from __future__ import annotations

import torch

from attnrepro.data.batching import pad
from attnrepro.data.tokenize import PAD
from attnrepro.models import build_model, count_parameters
from attnrepro.models.seq2seq import reverse_padded

from conftest import tiny_model


def test_reverse_padded_keeps_padding_at_the_end():
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD], [11, PAD, PAD, PAD]])
    assert reverse_padded(src, src != PAD).tolist() == [[8, 7, 6, 5], [10, 9, PAD, PAD], [11, PAD, PAD, PAD]]


def test_encoder_reads_the_source_reversed():
    model = tiny_model("seq2seq")
    src = pad([torch.tensor([5, 6, 7, 8]).numpy(), torch.tensor([9, 10]).numpy()])
    memory = model.encode(src, src != PAD)
    model.reverse_source = False
    manual = model.encode(reverse_padded(src, src != PAD), src != PAD)
    forward_order = model.encode(src, src != PAD)
    torch.testing.assert_close(memory["h"], manual["h"])
    assert not torch.allclose(memory["h"], forward_order["h"])


def test_uniform_initialisation_in_plus_minus_0_08():
    torch.manual_seed(0)
    model = build_model("seq2seq", 50, 40, {"emb": 16, "hidden": 16, "layers": 4})
    values = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert values.abs().max() <= 0.08
    assert values.abs().max() > 0.079 and abs(float(values.mean())) < 0.005  # spread over the whole range


def test_paper_scale_has_384m_parameters():
    with torch.device("meta"):  # count without allocating 1.5 GB
        model = build_model("seq2seq", 160_000, 80_000, {"emb": 1000, "hidden": 1000, "layers": 4})
    assert abs(count_parameters(model) - 384e6) / 384e6 < 0.02
