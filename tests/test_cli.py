"""The console script."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from attnrepro.cli import main

from conftest import REPO


def test_params_prints_the_count_on_its_last_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no results/synthetic/tokenizer/ here: the config's nominal vocabulary
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


def test_a_user_error_is_one_line_naming_the_key_and_exit_status_1(tmp_path, capsys):
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    raw["models"]["transformer"]["params"]["heads"] = 3
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["params", "--config", str(config), "--model", "transformer"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"attnrepro params: error: {config}: models.transformer.params.heads=3 does not divide "
        "models.transformer.params.d_model=128 (d_k = d_model / heads)"
    ]


def test_a_bug_shows_its_traceback(monkeypatch):
    """A ValueError is not a user error: it used to be printed as one line, hiding where it came from."""

    def buggy(args):
        raise ValueError("an index off by one")

    monkeypatch.setattr("attnrepro.cli.cmd_params", buggy)
    with pytest.raises(ValueError, match="an index off by one"):
        main(["params", "--config", str(REPO / "config/config.yaml"), "--model", "rnnsearch50"])


def test_the_console_script_prints_a_traceback_for_a_bug_and_one_line_for_a_user_error(tmp_path):
    code = (
        "import sys; import attnrepro.cli as cli\n"
        "def buggy(args): raise KeyError('src_mask')\n"
        "cli.cmd_params = buggy if sys.argv[1] == 'bug' else cli.cmd_params\n"
        "sys.exit(cli.main(sys.argv[2:]))\n"
    )
    args = ["params", "--config", str(tmp_path / "missing.yaml"), "--model", "rnnsearch50"]
    user = subprocess.run([sys.executable, "-c", code, "user", *args], capture_output=True, text=True)
    assert user.returncode == 1
    assert user.stderr == f"attnrepro params: error: {tmp_path / 'missing.yaml'}: no such config file\n"
    args[2] = str(REPO / "config/config.yaml")
    bug = subprocess.run([sys.executable, "-c", code, "bug", *args], capture_output=True, text=True)
    assert bug.returncode == 1 and bug.stderr.startswith("Traceback (most recent call last):")
    assert bug.stderr.rstrip().endswith("KeyError: 'src_mask'")
