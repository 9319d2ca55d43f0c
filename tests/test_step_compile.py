"""`train.step_compile`: compiled teacher-forced decoder steps give the eager step's loss and gradients, and the
CUDA-graph mode falls back to the compiled one where there is no GPU."""

from __future__ import annotations

import pytest
import torch
from test_objective import _assert_same, _batch, _loss_and_grads

from attnrepro.errors import ConfigError
from attnrepro.models import STEP_LOOP_ARCHS
from attnrepro.models.step_compile import effective_mode, set_step_compile, step_compile_of, step_function
from attnrepro.training.objective import Objective

from conftest import TINY_PARAMS, tiny_model

CPU = torch.device("cpu")
STEP_ARCHS = sorted(STEP_LOOP_ARCHS)  # a Python step loop (the registry's step_loop; test_models checks it)


# In float64 the compiled step must compute the eager step's function, not merely come close: float32 rounding
# differs between Inductor's fused kernels and PyTorch's (the Graves window's exp(-β(κ - u)²) of tiny_model's
# large weights turned it into 3e-5 of a gradient's scale), float64 rounding is 1e-13 of it.
FLOAT64_TOL = (1e-12, 1e-9, 1e-12)  # loss (relative), gradient (of its tensor's largest entry), gradient (absolute)


def _compiled_equals_eager(arch: str, mode: str) -> None:
    """Two batches of different shapes (the second recompiles with dynamic shapes): loss and gradients equal."""
    eager, compiled = tiny_model(arch).train().double(), tiny_model(arch).train().double()
    assert set_step_compile(compiled, mode, CPU) == "fused"
    for rows, src_len, tgt_len in ((5, 9, 7), (7, 6, 10)):
        batch = _batch(rows, src_len, tgt_len, seed=rows)
        _assert_same(
            _loss_and_grads(eager, Objective(eager, 0.1)(*batch)),
            _loss_and_grads(compiled, Objective(compiled, 0.1)(*batch)),
            FLOAT64_TOL,
        )


def test_a_fused_rnnsearch_step_gives_the_eager_loss_and_gradients():
    _compiled_equals_eager("rnnsearch", "fused")


@pytest.mark.slow  # about a minute of compiling per model on a cold cache
@pytest.mark.parametrize("arch", [a for a in STEP_ARCHS if a != "rnnsearch"])
def test_every_fused_step_gives_the_eager_loss_and_gradients(arch):
    _compiled_equals_eager(arch, "fused")


def test_graphed_falls_back_to_fused_without_cuda_and_says_so(capsys):
    assert effective_mode("graphed", CPU) == "fused" and effective_mode("graphed", torch.device("cuda")) == "graphed"
    model = tiny_model("rnnenc").train()
    assert set_step_compile(model, "graphed", CPU) == "fused"
    assert step_compile_of(model) == "fused"
    assert "graphed needs CUDA graphs, not available on cpu: running fused" in capsys.readouterr().out
    _compiled_equals_eager("rnnenc", "graphed")  # the fallback computes what eager does


def test_eager_steps_and_steps_without_gradients_are_the_method_itself():
    model = tiny_model("rnnsearch")
    assert step_function(model, model.teacher_step) == model.teacher_step  # never set: eager
    set_step_compile(model, "none", CPU)
    assert step_function(model, model.teacher_step) == model.teacher_step
    set_step_compile(model, "fused", CPU)
    assert step_function(model, model.teacher_step) != model.teacher_step
    with torch.no_grad():  # validation and beam search: eager (their shapes change from step to step)
        assert step_function(model, model.teacher_step) == model.teacher_step
    assert "_step_compile" not in model.state_dict() and not any("compiled" in k for k in model.state_dict())


@pytest.mark.parametrize("arch", sorted(set(TINY_PARAMS) - set(STEP_ARCHS)))
def test_a_model_without_a_step_loop_is_unchanged(arch):
    eager, other = tiny_model(arch).train(), tiny_model(arch).train()
    set_step_compile(other, "fused", CPU)
    batch = _batch(tgt_len=7)
    if arch == "transformer":
        eager, other = (tiny_model(arch, tgt_vocab=23).train() for _ in range(2))
        set_step_compile(other, "fused", CPU)
    _assert_same(
        _loss_and_grads(eager, Objective(eager, 0.0)(*batch)), _loss_and_grads(other, Objective(other, 0.0)(*batch))
    )


def test_an_unknown_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="train.step_compile"):
        set_step_compile(tiny_model("rnnenc"), "cudagraphs", CPU)


def _train(test_config, corpus, out, model, **overrides):
    from dataclasses import replace

    from attnrepro.data.tokenize import load_tokenizer
    from attnrepro.training.loop import load_checkpoint, train

    vocab = [len(load_tokenizer(test_config.tokenizer, corpus / f"tokenizer/{s}.model")) for s in ("src", "tgt")]
    mc = replace(model, train=replace(model.train, max_steps=6, valid_every=3, checkpoint_every=3, **overrides))
    train(mc, corpus / "encoded/train.npz", corpus / "encoded/valid.npz", *vocab, out, progress=False)
    return load_checkpoint(out / "checkpoint.pt")["model"]


def _assert_close_weights(a: dict, b: dict) -> None:
    for name in a:  # 6 updates from the same start: float rounding only
        torch.testing.assert_close(b[name], a[name], atol=1e-5, rtol=1e-4, msg=name)


def test_the_loop_trains_a_transformer_with_a_chunked_loss_to_the_same_weights(test_config, tiny_corpus, tmp_path):
    from dataclasses import replace

    params = {"d_model": 16, "d_ff": 32, "heads": 2, "layers": 1, "dropout": 0.0, "share_embeddings": False}
    model = replace(test_config.model("rnnsearch10"), name="transformer", arch="transformer", params=params)
    model = replace(model, train=replace(model.train, optimizer="adam", lr=1e-3, label_smoothing=0.1))
    plain = _train(test_config, tiny_corpus, tmp_path / "plain", model)
    _assert_close_weights(plain, _train(test_config, tiny_corpus, tmp_path / "chunked", model, loss_chunk_tokens=7))


@pytest.mark.slow  # a minute of compiling on a cold cache
def test_the_loop_trains_graphed_steps_on_a_cpu_as_fused_to_the_same_weights(
    test_config, tiny_corpus, tmp_path, capsys
):
    model = test_config.model("rnnsearch10")
    eager = _train(test_config, tiny_corpus, tmp_path / "eager", model)
    graphed = _train(test_config, tiny_corpus, tmp_path / "graphed", model, step_compile="graphed")
    assert "running fused" in capsys.readouterr().out
    _assert_close_weights(eager, graphed)
