"""The console script."""

from __future__ import annotations

import subprocess
import sys

from attnrepro.cli import main

from conftest import REPO


def test_params_prints_the_count_on_its_last_line(capsys):
    assert main(["params", "--config", str(REPO / "config/config.yaml"), "--model", "rnnsearch50"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # emb 64, hidden 128, align 128, maxout 64, vocab 1000 + 4 specials on both sides
    e, h, a, m, v = 64, 128, 128, 64, 1004
    gru = lambda i, hid: 3 * (i * hid + hid * hid + 2 * hid)  # noqa: E731
    expected = 2 * v * e + 2 * gru(e, h) + h * h + h + h * a + 2 * h * a + a + a + gru(e + 2 * h, h)
    expected += (3 * h + e) * 2 * m + 2 * m + m * v + v
    assert int(last) == expected


def test_params_with_explicit_vocabularies_and_unknown_model(capsys):
    config = str(REPO / "config/config.yaml")
    assert (
        main(["params", "--config", config, "--model", "rnnencdec30", "--src-vocab", "30000", "--tgt-vocab", "30000"])
        == 0
    )
    small = int(capsys.readouterr().out.strip().splitlines()[-1])
    assert small > 30000 * 64 * 2
    assert main(["params", "--config", config, "--model", "nope"]) == 1
    assert "no model named 'nope'" in capsys.readouterr().err


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "attnrepro.cli", "--help"], capture_output=True, text=True, check=True)
    for verb in (
        "generate",
        "tokenizer",
        "encode",
        "train",
        "average",
        "translate",
        "score",
        "tables",
        "figure-length",
        "figure-alignments",
        "figure-training",
        "params",
    ):
        assert verb in out.stdout
