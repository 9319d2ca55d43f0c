"""diagonal: the two cursors move in sync, whatever the decoder state."""

from __future__ import annotations

import torch

from attnrepro.data.batching import pad
from attnrepro.data.tokenize import BOS, PAD
from attnrepro.models.diagonal import DiagonalWindow

from conftest import tiny_model


def test_attention_peak_of_step_i_is_round_i_tx_over_ty():
    model = tiny_model("diagonal")  # length_ratio 1.3
    lengths = [9, 4, 13]
    src = pad([torch.arange(4, 4 + n).numpy() for n in lengths])
    memory = model.encode(src, src != PAD)
    state = model.init_state(memory)
    prev = torch.full((len(lengths),), BOS)
    for i in range(20):
        _, state, attn = model.decode_step(memory, state, prev.fill_(5 + i % 3))
        for b, n in enumerate(lengths):
            expected = min(round(i * n / (1.3 * n)), n - 1)
            assert int(attn[b].argmax()) == expected
            assert torch.all(attn[b, n:] == 0)


def test_window_ignores_the_decoder_state_and_has_no_parameters():
    window = DiagonalWindow(length_ratio=2.0, width=0.5)
    mask = torch.ones(1, 10, dtype=torch.bool)
    memory = {"src_mask": mask, "annotations": torch.zeros(1, 10, 4)}
    a = window(memory, torch.randn(1, 6), torch.tensor([6]))
    b = window(memory, torch.randn(1, 6), torch.tensor([6]))
    torch.testing.assert_close(a, b)
    assert int(a.argmax()) == 3  # 6 * 10 / 20
    assert list(window.parameters()) == []
    assert not hasattr(tiny_model("diagonal").attention, "v_a")
