"""The registry of architectures: the one declaration of each config `arch`.

An entry says where the model is implemented (`attnrepro.models.<module>.<cls>`), what it is (its short
name, paper and defining mechanism: the README's models table), whether `decode_step` returns attention
(the alignment figures) and whether training runs a Python step loop (`train.step_compile`), its
constructor's parameters with their defaults and bounds, and the tiny sizes every shared test builds it
at. Everything else is generated from or checked against it: the schema's per-arch `params`
(schemas/arch_params.schema.yaml, `attnrepro regenerate schema`), the README's models table, the tests'
and the benchmarks' lists of archs. The model constructors take their parameters without defaults:
`attnrepro.models.build_model` fills them from here.

Plain data at the bottom layer, so that the config check and the workflow read it without torch.
Adding an architecture: docs/design.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Param:
    """A constructor argument as a config's `models.NAME.params` gives it: its default (whose Python type is
    the parameter's: int, float, bool or str), what it means, and the bounds the schema checks."""

    default: int | float | bool | str
    doc: str = ""
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    multiple_of: int | None = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Arch:
    """One architecture (module docstring); `params` in the constructor's order, `tiny` a subset of them."""

    module: str
    cls: str
    name: str  # in figure legends and the README's table
    paper: str
    mechanism: str
    attention: bool  # decode_step returns weights over the source
    step_loop: bool  # training runs one decoder step per target position in Python (models/step_compile.py)
    params: dict[str, Param]
    tiny: dict[str, Any] = field(default_factory=dict)  # the shared tests' sizes, over the defaults

    @property
    def defaults(self) -> dict[str, Any]:
        return {key: p.default for key, p in self.params.items()}


def size(default: int, doc: str = "") -> Param:
    return Param(default, doc, minimum=1)


DROPOUT = Param(0.0, minimum=0, maximum=1)
INIT = Param(
    "paper",
    "paper = Bahdanau 2014 App. B.1 (orthogonal recurrent, N(0, 0.01^2) elsewhere); pytorch = PyTorch's default "
    "initialisation, which Adam trains far faster in a few minutes",
    choices=("paper", "pytorch"),
)
# Bahdanau et al. 2014, App. A.2: 620-dimensional embeddings, 1000 hidden units, 500 maxout units
EMB, HIDDEN, MAXOUT = size(620), size(1000), Param(500, "maxout units l; 0 = no deep output", minimum=0)
BAHDANAU = {"emb": EMB, "hidden": HIDDEN, "maxout": MAXOUT, "dropout": DROPOUT}
TINY_RNN = {"emb": 8, "hidden": 12, "maxout": 6}

REGISTRY: dict[str, Arch] = {
    "rnnenc": Arch(
        "rnnenc", "RNNEncDec", "RNNencdec", "Cho et al. 2014 (RNN Encoder–Decoder)",
        "one fixed context vector `c = tanh(V h_T)`",
        attention=False, step_loop=True, params={**BAHDANAU, "init": INIT}, tiny=TINY_RNN,
    ),
    "seq2seq": Arch(
        "seq2seq", "Seq2Seq", "Seq2seq", "Sutskever, Vinyals, Le 2014", "deep LSTM, reversed source",
        attention=False, step_loop=False,
        params={
            "emb": size(1000), "hidden": size(1000), "layers": size(4), "dropout": DROPOUT,
            "init_range": Param(0.08, exclusive_minimum=0), "reverse_source": Param(True),
            "init": Param(
                "paper",
                "paper = Sutskever 2014 section 3.4, every parameter uniform in [-init_range, init_range] (for SGD "
                "0.7); pytorch = PyTorch's default initialisation (N(0, 1) embeddings), for Adam",
                choices=("paper", "pytorch"),
            ),
        },
        tiny={"emb": 8, "hidden": 12, "layers": 2},
    ),
    "rnnsearch": Arch(
        "rnnsearch", "RNNSearch", "RNNsearch", "Bahdanau, Cho, Bengio 2014",
        "BiGRU + additive attention, eq. (6), maxout output",
        attention=True, step_loop=True,
        params={
            "emb": EMB, "hidden": HIDDEN, "align": size(1000, "n', the alignment model's hidden size"),
            "maxout": MAXOUT, "dropout": DROPOUT, "init": INIT,
        },
        tiny={**TINY_RNN, "align": 10},
    ),
    "transducer": Arch(
        "transducer", "Transducer", "Transducer", "Graves 2012 (RNN Transducer)",
        "two cursors, trajectories marginalised by DP",
        attention=True, step_loop=False,
        params={"emb": size(620), "hidden": size(1000), "dropout": DROPOUT, "init": INIT},
        tiny={"emb": 8, "hidden": 12},
    ),
    "diagonal": Arch(
        "diagonal", "DiagonalSearch", "Diagonal", "the e-mail behind Bahdanau 2014",
        'attention fixed to source position i·T_x/T_y ("two cursors")',
        attention=True, step_loop=True,
        params={
            **BAHDANAU, "init": INIT,
            "length_ratio": Param(1.0, "expected target/source length, T_y = ratio * T_x", exclusive_minimum=0),
            "width": Param(1.0, "std of the window in source words", exclusive_minimum=0),
        },
        tiny={**TINY_RNN, "length_ratio": 1.3},
    ),
    "graves_window": Arch(
        "graves", "GravesWindow", "Graves window", "Graves 2013, §5.1",
        "mixture of K Gaussians, centres κ only move forward",
        attention=True, step_loop=True,
        params={"emb": EMB, "hidden": HIDDEN, "maxout": MAXOUT, "components": size(10), "dropout": DROPOUT},
        tiny={**TINY_RNN, "components": 3},
    ),
    "graves_ntm": Arch(
        "graves", "GravesNTM", "NTM head", "Graves, Wayne, Danihelka 2014, §3.3",
        "NTM read head: content + interpolation + shift + sharpening",
        attention=True, step_loop=True, params=BAHDANAU, tiny=TINY_RNN,
    ),
    "memnet": Arch(
        "memnet", "MemNet", "MemN2N", "Weston et al. 2014 / Sukhbaatar et al. 2015",
        "K = 3 hops over source-position memories (our adaptation)",
        attention=True, step_loop=True,
        params={
            "dim": size(500), "hidden": size(1000), "hops": size(3),
            "max_positions": size(256, "source positions with a temporal encoding"), "dropout": DROPOUT,
        },
        tiny={"dim": 8, "hidden": 12, "hops": 3},
    ),
    "transformer": Arch(
        "transformer", "Transformer", "Transformer", "Vaswani et al. 2017",
        "post-norm multi-head scaled dot-product self-attention",
        attention=True, step_loop=False,
        params={
            "d_model": Param(512, minimum=2, multiple_of=2),
            "d_ff": size(2048),
            "heads": size(8),
            "layers": size(6),
            "dropout": Param(0.1, "P_drop on every sublayer output and on the embedding sums (Vaswani 5.4)",
                             minimum=0, maximum=1),
            "share_embeddings": Param(
                True, "one embedding for source, target and pre-softmax (needs tokenizer.shared)"
            ),
            "ffn_dropout": Param(0.0, "dropout on the feed-forward layer's ReLU output (tensor2tensor's relu_dropout; "
                                 "not in the paper)", minimum=0, maximum=1),
        },
        tiny={"d_model": 8, "d_ff": 16, "heads": 2, "layers": 2, "dropout": 0.0, "share_embeddings": False},
    ),
}  # fmt: skip

ATTENTION_ARCHS = frozenset(name for name, arch in REGISTRY.items() if arch.attention)
STEP_LOOP_ARCHS = frozenset(name for name, arch in REGISTRY.items() if arch.step_loop)


def models_table() -> str:
    """The README's table of the registered archs (`attnrepro regenerate models-table` writes it there)."""
    rows = [
        "| model (`arch`) | paper | defining mechanism | file |",
        "|---|---|---|---|",
        *(f"| `{key}` | {a.paper} | {a.mechanism} | `models/{a.module}.py` |" for key, a in REGISTRY.items()),
    ]
    return "\n".join(rows)
