"""Graves' addressing: a monotone Gaussian window (2013) and the NTM read head (2014)."""

from __future__ import annotations

import torch

from attnrepro.data.batching import pad
from attnrepro.data.tokenize import BOS, PAD
from attnrepro.models.graves import gaussian_window, ntm_address

from conftest import tiny_model


def test_window_centre_kappa_never_decreases():
    model = tiny_model("graves_window")
    src = pad([torch.arange(4, 4 + n).numpy() for n in (9, 5, 12)])
    memory = model.encode(src, src != PAD)
    state = model.init_state(memory)
    prev = torch.full((3,), BOS)
    kappas = [state["kappa"]]
    for i in range(15):
        _, state, phi = model.decode_step(memory, state, prev.fill_(5 + i % 4))
        kappas.append(state["kappa"])
        assert torch.all(phi[src == PAD] == 0)
    steps = torch.stack(kappas)  # (steps, batch, K)
    assert torch.all(steps[1:] > steps[:-1])  # κ_t = κ_{t-1} + exp(κ̂_t), eq. (51)


def test_one_component_with_a_large_beta_is_one_hot_at_round_kappa():
    mask = torch.ones(2, 10, dtype=torch.bool)
    kappa = torch.tensor([[3.05], [7.96]])
    phi = gaussian_window(torch.full((2, 1), 2.0), torch.full((2, 1), 100.0), kappa, mask)
    # u runs 1..U (Graves 2013, eq. 46): u = round(κ) is index round(κ) - 1; φ there is α exp(-β (κ - u)^2)
    expected = torch.zeros(2, 10)
    expected[0, 2] = 2.0 * torch.exp(torch.tensor(-100 * 0.05**2))
    expected[1, 7] = 2.0 * torch.exp(torch.tensor(-100 * 0.04**2))
    torch.testing.assert_close(phi, expected, atol=1e-6, rtol=1e-5)


def _ntm_inputs(length: int = 6):
    torch.manual_seed(0)
    memory = torch.nn.functional.normalize(torch.randn(1, length, 4), dim=-1)  # unit rows
    mask = torch.ones(1, length, dtype=torch.bool)
    prev = torch.softmax(torch.randn(1, length), -1)
    key = torch.randn(1, 4)
    return memory, mask, prev, key


IDENTITY_SHIFT = torch.tensor([[0.0, 1.0, 0.0]])


def test_gate_one_gives_the_content_weights():
    memory, mask, prev, key = _ntm_inputs()
    beta = torch.tensor([2.0])
    w = ntm_address(memory, mask, prev, key, beta, torch.tensor([1.0]), IDENTITY_SHIFT, torch.tensor([1.0]))
    content = torch.softmax(beta * torch.nn.functional.cosine_similarity(key[:, None], memory, dim=-1), -1)
    torch.testing.assert_close(w, content)


def test_shift_plus_one_rotates_the_weights_by_one():
    memory, mask, prev, key = _ntm_inputs()
    shift = torch.tensor([[0.0, 0.0, 1.0]])  # all mass on offset +1
    w = ntm_address(memory, mask, prev, key, torch.tensor([1.0]), torch.tensor([0.0]), shift, torch.tensor([1.0]))
    torch.testing.assert_close(w, torch.roll(prev, 1, dims=1))


def test_gamma_one_leaves_the_weights_unchanged_and_sharpening_sharpens():
    memory, mask, prev, key = _ntm_inputs()
    args = (memory, mask, prev, key, torch.tensor([1.0]), torch.tensor([0.0]), IDENTITY_SHIFT)
    torch.testing.assert_close(ntm_address(*args, torch.tensor([1.0])), prev)
    sharp = ntm_address(*args, torch.tensor([3.0]))
    assert float(sharp.max()) > float(prev.max())
    torch.testing.assert_close(sharp, prev**3 / (prev**3).sum())


def test_weights_sum_to_one_and_shift_is_circular_within_each_sentence():
    torch.manual_seed(1)
    memory = torch.nn.functional.normalize(torch.randn(2, 5, 4), dim=-1)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    prev = torch.tensor([[0.0, 0, 0, 0, 1], [0, 0, 1, 0, 0]])
    shift = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    w = ntm_address(memory, mask, prev, torch.randn(2, 4), torch.ones(2), torch.zeros(2), shift, torch.ones(2))
    torch.testing.assert_close(w.sum(1), torch.ones(2))
    assert int(w[0].argmax()) == 0 and int(w[1].argmax()) == 0  # wrapped around its own length
    assert torch.all(w[1, 3:] == 0)


def test_the_addressing_runs_in_float32_under_bf16_autocast():
    """A bf16 run (train.precision: bf16) hands the heads bf16 tensors: the NTM's eq. (7) mixed a bf16
    w_{t-1} with a float32 w^c and failed on the GPU; κ in bf16 would resolve positions to 0.25 past 32."""
    torch.manual_seed(0)
    batch, src_len, dim = 2, 5, 4
    memory = torch.nn.functional.normalize(torch.randn(batch, src_len, dim), dim=-1)
    mask = torch.ones(batch, src_len, dtype=torch.bool)
    prev = torch.softmax(torch.randn(batch, src_len), -1)
    head = (
        torch.randn(batch, dim),
        torch.rand(batch) + 0.5,
        torch.rand(batch),
        torch.softmax(torch.randn(batch, 3), -1),
    )
    head += (1 + torch.rand(batch),)
    exact = ntm_address(memory, mask, prev, *head)
    mixed = ntm_address(memory.bfloat16(), mask, prev.bfloat16(), *head)  # what autocast hands it
    assert mixed.dtype == torch.float32 and torch.allclose(mixed, exact, atol=2e-3)
    assert torch.allclose(mixed.sum(1), torch.ones(batch))
    for arch in ("graves_window", "graves_ntm"):
        model = tiny_model(arch)
        src = pad([torch.tensor([5, 6, 7]), torch.tensor([8, 9])]).long()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            memory_ = model.encode(src, src != PAD)
            state = model.init_state(memory_)
            for _ in range(3):
                _, state, weights = model.decode_step(memory_, state, torch.full((2,), BOS))
        assert weights.dtype == torch.float32, arch
        assert all(v.dtype == torch.float32 for k, v in state.items() if k in ("kappa", "weights")), arch
