"""The registry of architectures: config `arch` name -> the class that implements it, and whether it attends.

The one list of archs. Plain data at the bottom layer, so that the config check (`constraints`) and the
workflow read it without torch; `attnrepro.models` builds a model from it. A new arch is one line here
(docs/design.md, "Adding an architecture").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    """Where an arch is implemented (`attnrepro.models.<module>.<cls>`) and whether decode_step returns attention."""

    module: str
    cls: str
    attention: bool


REGISTRY: dict[str, Arch] = {
    "rnnenc": Arch("rnnenc", "RNNEncDec", attention=False),
    "seq2seq": Arch("seq2seq", "Seq2Seq", attention=False),
    "rnnsearch": Arch("rnnsearch", "RNNSearch", attention=True),
    "transducer": Arch("transducer", "Transducer", attention=True),
    "diagonal": Arch("diagonal", "DiagonalSearch", attention=True),
    "graves_window": Arch("graves", "GravesWindow", attention=True),
    "graves_ntm": Arch("graves", "GravesNTM", attention=True),
    "memnet": Arch("memnet", "MemNet", attention=True),
    "transformer": Arch("transformer", "Transformer", attention=True),
}

ATTENTION_ARCHS = frozenset(name for name, arch in REGISTRY.items() if arch.attention)
