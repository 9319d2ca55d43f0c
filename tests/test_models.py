"""The model interface: padding invariance, attention properties, each mechanism's defining property."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import torch

from attnrepro.data.batching import pad
from attnrepro.data.tokenize import BOS, PAD
from attnrepro.errors import ConfigError
from attnrepro.models import REGISTRY, STEP_LOOP_ARCHS, build_model, count_parameters, has_attention, model_class
from attnrepro.models.base import dot_rows

from conftest import ATTENTION_ARCHS, REPO, SRC_VOCAB, TGT_VOCAB, TINY_PARAMS, tiny_model


def _sentences() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(4, SRC_VOCAB, (n,), generator=g) for n in (7, 3, 5)]


def test_registry_builds_every_arch():
    assert set(REGISTRY) == set(TINY_PARAMS)
    with pytest.raises(ValueError, match="unknown arch 'nope'"):
        build_model("nope", 5, 5, {})
    with pytest.raises(ConfigError, match=r"^params.hiden: not a parameter of arch transducer \(emb, hidden, "):
        build_model("transducer", 5, 5, {"hiden": 3})


@pytest.mark.parametrize("arch", sorted(REGISTRY))
def test_the_registry_declares_exactly_the_constructors_parameters(arch):
    """The registry is the one place a parameter and its default are written: the constructor takes each of them,
    none with a default of its own (one with a default, as RNNsearch's `attention`, is a subclass's hook, not a
    config key); tiny sizes name declared parameters."""
    spec = REGISTRY[arch]
    signature = inspect.signature(model_class(arch)).parameters
    required = [name for name, p in signature.items() if p.default is inspect.Parameter.empty]
    assert required == ["src_vocab", "tgt_vocab", *spec.params], arch  # and in the registry's order
    assert set(spec.tiny) <= set(spec.params) and spec.tiny, arch
    for key, param in spec.params.items():  # each default inside its own bounds (the schema would refuse it)
        if param.choices:
            assert param.default in param.choices, (arch, key)
        assert param.minimum is None or param.default >= param.minimum, (arch, key)
        assert param.exclusive_minimum is None or param.default > param.exclusive_minimum, (arch, key)
        assert param.maximum is None or param.default <= param.maximum, (arch, key)


@pytest.mark.parametrize("arch", sorted(REGISTRY))
def test_the_registry_says_which_models_train_through_a_python_step_loop(arch, monkeypatch):
    """`step_loop` (what train.step_compile compiles, and the archs test_step_compile checks) is true exactly for
    the models whose teacher-forced forward fetches its step through step_function."""
    fetched = []

    def recording(original):
        return lambda model, method: fetched.append(method) or original(model, method)

    model_class(arch)  # its module imported
    for name, module in list(sys.modules.items()):
        if name.startswith("attnrepro.models.") and name != "attnrepro.models.step_compile":
            if hasattr(module, "step_function"):
                monkeypatch.setattr(module, "step_function", recording(module.step_function))
    model = tiny_model(arch).train()
    src = torch.randint(4, SRC_VOCAB, (2, 5))
    model(src, torch.ones_like(src, dtype=torch.bool), torch.randint(4, TGT_VOCAB, (2, 4)))
    assert bool(fetched) == REGISTRY[arch].step_loop == (arch in STEP_LOOP_ARCHS), arch


def test_registry_knows_which_archs_return_attention():
    src = torch.randint(4, SRC_VOCAB, (2, 5))
    for arch in REGISTRY:
        model = tiny_model(arch)
        memory = model.encode(src, torch.ones_like(src, dtype=torch.bool))
        _, _, attn = model.decode_step(memory, model.init_state(memory), torch.full((2,), BOS))
        assert (attn is not None) == has_attention(arch) == (arch in ATTENTION_ARCHS), arch


def test_registry_and_config_import_neither_torch_nor_matplotlib():
    """Snakemake imports both to parse the DAG; a model's module (and torch) loads only in build_model."""
    code = (
        "import sys, attnrepro.config, attnrepro.models\n"
        "assert attnrepro.models.has_attention('rnnsearch')\n"
        "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["[]"], out.stdout


def test_models_without_attention_return_none():
    for name in set(TINY_PARAMS) - set(ATTENTION_ARCHS):
        model = tiny_model(name)
        memory = model.encode(torch.tensor([[5, 6]]), torch.ones(1, 2, dtype=torch.bool))
        assert model.decode_step(memory, model.init_state(memory), torch.tensor([BOS]))[2] is None


def test_padding_never_changes_outputs(arch):
    model = tiny_model(arch).double()  # float64: any difference is leakage, not rounding
    sentences = _sentences()
    src = pad([s.numpy() for s in sentences])
    tgt_in = torch.tensor([[BOS, 5, 6, 7]] * len(sentences))
    batched = model(src, src != PAD, tgt_in)
    for i, sentence in enumerate(sentences):
        alone = model(sentence[None], torch.ones(1, len(sentence), dtype=torch.bool), tgt_in[i : i + 1])
        torch.testing.assert_close(batched[i], alone[0], rtol=1e-10, atol=1e-10)


def test_decode_steps_match_teacher_forcing(arch):
    model = tiny_model(arch).double()
    sentences = _sentences()
    src = pad([s.numpy() for s in sentences])
    src_mask = src != PAD
    tgt_in = torch.tensor([[BOS, 5, 6, 7, 8]] * len(sentences))
    logits = model(src, src_mask, tgt_in)
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    for t in range(tgt_in.size(1)):
        log_probs, state, _ = model.decode_step(memory, state, tgt_in[:, t])
        torch.testing.assert_close(log_probs, torch.log_softmax(logits[:, t], -1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attention_arch", ATTENTION_ARCHS)
def test_attention_rows_sum_to_one_and_are_zero_on_padding(attention_arch):
    model = tiny_model(attention_arch)
    src = pad([s.numpy() for s in _sentences()])
    src_mask = src != PAD
    memory = model.encode(src, src_mask)
    state = model.init_state(memory)
    prev = torch.full((src.size(0),), BOS)
    for token in (BOS, 5, 9):
        _, state, attn = model.decode_step(memory, state, prev.fill_(token))
        assert attn.shape == src.shape
        if attention_arch != "graves_window":  # Graves' window φ is a sum of Gaussians, not normalised
            torch.testing.assert_close(attn.sum(1), torch.ones(src.size(0)))
        assert torch.all(attn[~src_mask] == 0)
        assert torch.all(attn[src_mask] > 0)
        assert attn.std() > 0  # not uniform


def test_rnnenc_sees_the_source_only_through_c():
    model = tiny_model("rnnenc")
    src = pad([s.numpy() for s in _sentences()])
    src_mask = src != PAD
    memory = model.encode(src, src_mask)
    assert set(memory) == {"context"}
    assert memory["context"].shape == (src.size(0), 12)
    # A different source with the same c gives identical outputs: the decoder reads nothing else.
    other = torch.randint(4, SRC_VOCAB, src.shape)
    other_memory = model.encode(other, torch.ones_like(src_mask))
    assert not torch.allclose(other_memory["context"], memory["context"])
    prev = torch.tensor([BOS] * src.size(0))
    a, _, attn = model.decode_step(memory, model.init_state(memory), prev)
    b, _, _ = model.decode_step({"context": memory["context"]}, model.init_state(memory), prev)
    assert attn is None
    torch.testing.assert_close(a, b)
    c, _, _ = model.decode_step(other_memory, model.init_state(other_memory), prev)
    assert not torch.allclose(a, c)


def test_rnnsearch_precomputes_keys_and_starts_from_backward_state():
    model = tiny_model("rnnsearch")
    src = pad([s.numpy() for s in _sentences()])
    src_mask = src != PAD
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(memory["keys"], model.attention.U_a(memory["annotations"]))
    # s_0 = tanh(W_s ←h_1): the backward half of the first annotation (Bahdanau App. A.2.2)
    backward_first = memory["annotations"][:, 0, 12:]
    torch.testing.assert_close(memory["s0"], torch.tanh(model.init_proj(backward_first)))


def test_paper_initialisation_of_rnnsearch():
    torch.manual_seed(0)
    model = build_model("rnnsearch", SRC_VOCAB, TGT_VOCAB, {"emb": 8, "hidden": 12, "align": 10, "maxout": 6})
    assert torch.count_nonzero(model.attention.v_a.weight) == 0  # v_a = 0 (App. B.1)
    w_hh = model.encoder.weight_hh_l0.detach()
    for gate in w_hh.chunk(3):  # each recurrent gate matrix is orthogonal
        torch.testing.assert_close(gate @ gate.T, torch.eye(12), atol=1e-5, rtol=0)
    assert model.attention.U_a.weight.std() < 0.002


def test_seq2seq_paper_initialisation_is_sutskevers_uniform_and_pytorch_keeps_unit_embeddings():
    params = {"emb": 32, "hidden": 16, "layers": 2}
    torch.manual_seed(0)
    paper = build_model("seq2seq", 200, 200, params)  # Sutskever 3.4: every parameter in [-0.08, 0.08]
    assert all(float(p.abs().max()) <= 0.08 for p in paper.parameters())
    assert 0.04 < float(paper.src_embed.weight.std()) < 0.05  # uniform(-0.08, 0.08): std 0.08 / √3
    torch.manual_seed(0)
    pytorch = build_model("seq2seq", 200, 200, {**params, "init": "pytorch"})  # for Adam: N(0, 1) embeddings
    assert (
        0.9 < float(pytorch.src_embed.weight[1:].std()) < 1.1 and float(pytorch.src_embed.weight[PAD].abs().max()) == 0
    )
    bound = 1 / 16**0.5  # nn.LSTM's own U(-1/√hidden, 1/√hidden)
    assert 0.9 * bound < float(pytorch.encoder.weight_hh_l0.abs().max()) <= bound


def test_parameter_count_matches_hand_count():
    e, h, a, m, vs, vt = 8, 12, 10, 6, SRC_VOCAB, TGT_VOCAB
    model = build_model("rnnsearch", vs, vt, {"emb": e, "hidden": h, "align": a, "maxout": m})
    gru = lambda i, hid: 3 * (i * hid + hid * hid + 2 * hid)  # noqa: E731
    expected = (
        vs * e
        + vt * e  # embeddings
        + 2 * gru(e, h)  # BiGRU encoder
        + h * h
        + h  # W_s
        + h * a
        + 2 * h * a
        + a
        + a  # W_a, U_a (+bias), v_a
        + gru(e + 2 * h, h)  # decoder GRU
        + (h + e + 2 * h) * 2 * m
        + 2 * m
        + m * vt
        + vt  # maxout + W_o
    )
    assert count_parameters(model) == expected


@pytest.mark.parametrize("deep_output_arch", ["rnnenc", "rnnsearch", "diagonal", "graves_window", "graves_ntm"])
def test_readout_sees_the_target_embedding_dropped_out_once(deep_output_arch):
    """Dropout p = 0.5 keeps E y or zeroes it: every kept entry is 2 E y (twice dropped out: 4 E y)."""
    params = TINY_PARAMS[deep_output_arch]
    torch.manual_seed(0)
    model = build_model(deep_output_arch, SRC_VOCAB, TGT_VOCAB, {**params, "dropout": 0.5}).train()
    seen = []
    model.readout.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0]))
    src = pad([s.numpy() for s in _sentences()])
    tgt_in = torch.tensor([[BOS, 5, 6, 7, 8]] * src.size(0))
    model(src, src != PAD, tgt_in)
    hidden, emb = params["hidden"], params["emb"]
    readout_y = seen[0][..., hidden : hidden + emb]  # the readout's input is [s; E y; c]
    embedded = model.tgt_embed(tgt_in)
    kept = readout_y != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(readout_y[kept], 2 * embedded[kept])


def test_reorder_then_decode_equals_decoding_the_selected_rows(arch):
    """Beam search's pattern: expand memory and state, diverge, reorder the state alone, decode on."""
    model = tiny_model(arch).double()
    src = pad([s.numpy() for s in _sentences()])
    expand = torch.tensor([0, 0, 1, 1, 2, 2])  # two beams per sentence
    history = torch.tensor([[5, 6], [7, 8], [9, 5], [6, 7], [8, 9], [10, 11]])  # each row its own prefix
    choose = torch.tensor([1, 1, 3, 2, 4, 5])  # a row continues a row of its own sentence
    nxt = torch.tensor([12, 13, 14, 15, 16, 17])

    memory = model.encode(src, src != PAD)
    memory, state = model.reorder(memory, model.init_state(memory), expand)
    for t in range(2):
        _, state, _ = model.decode_step(memory, state, history[:, t])
    swap = torch.tensor([1, 0, 3, 2, 5, 4])
    _, state = model.reorder(None, state, swap)  # two reorders in a row compose: swap[swap[choose]] = choose
    _, state = model.reorder(None, state, swap[choose])
    reordered, _, attn = model.decode_step(memory, state, nxt)

    rows = expand[choose]
    memory = model.encode(src[rows], src[rows] != PAD)
    state = model.init_state(memory)
    for t in range(2):
        _, state, _ = model.decode_step(memory, state, history[choose, t])
    direct, _, direct_attn = model.decode_step(memory, state, nxt)
    torch.testing.assert_close(reordered, direct, rtol=1e-10, atol=1e-10)
    if attn is not None:
        torch.testing.assert_close(attn, direct_attn, rtol=1e-10, atol=1e-10)


def test_dot_rows_is_the_same_product_with_and_without_gradients():
    rows, vector = torch.randn(3, 5, 4, dtype=torch.double), torch.randn(3, 4, dtype=torch.double)
    expected = torch.einsum("bnd,bd->bn", rows, vector)
    torch.testing.assert_close(dot_rows(rows, vector), expected, rtol=1e-12, atol=1e-12)
    with torch.no_grad():
        torch.testing.assert_close(dot_rows(rows, vector), expected, rtol=1e-12, atol=1e-12)
