"""One reader for every text file: bad bytes, NUL, Windows line ends and unpaired files, named by file and
line, the same way in every command that reads text (run through `attnrepro.cli.main`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from attnrepro.cli import main
from attnrepro.data.text import check_parallel, count_lines, raw_pairs, read_lines
from attnrepro.errors import DataError

from conftest import REPO, TINY_PARAMS


def test_lines_split_only_at_newline_and_a_windows_file_reads_as_its_unix_twin(tmp_path):
    unix, windows = tmp_path / "unix", tmp_path / "windows"
    unix.write_bytes("a\u2028b\x85c\rd\n\ne\u00a0f\nlast".encode())
    windows.write_bytes(b"\xef\xbb\xbf" + unix.read_bytes().replace(b"\n", b"\r\n"))  # Notepad: BOM and CRLF
    assert read_lines(unix) == read_lines(windows) == ["a\u2028b\x85c\rd", "", "e\u00a0f", "last"]
    assert count_lines(unix) == count_lines(windows) == 4
    (tmp_path / "empty").write_bytes(b"")
    assert read_lines(tmp_path / "empty") == [] and count_lines(tmp_path / "empty") == 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"caf\xe9\n", r"not UTF-8 \(byte 0xe9 at column 4\)"),
        ("né ".encode() + b"\xc3(\n", r"not UTF-8 \(byte 0xc3 at column 4\)"),  # columns count characters
        (b"ok\x00\n", r"NUL byte at column 3 \(UTF-16 text\? convert the file to UTF-8\)"),
        ("a".encode("utf-16-le") + b"\n", r"NUL byte at column 2 \(UTF-16 text\? convert the file to UTF-8\)"),
    ],
)
def test_a_line_that_is_not_text_names_file_line_and_column(tmp_path, line, message):
    path = tmp_path / "f.txt"
    path.write_bytes(b"fine\n" + line + b"more\n")
    with pytest.raises(DataError, match=rf"^{path}:2: {message}$"):
        read_lines(path)


def test_unpaired_files_name_the_first_line_without_counterpart(tmp_path):
    src, tgt = tmp_path / "s", tmp_path / "t"
    src.write_text("a\nb\nc")  # no newline at the end: still 3 lines
    tgt.write_text("x\ny\n")
    expected = rf"^{src}:3: line 3 has no counterpart: {tgt} has only 2 lines$"
    with pytest.raises(DataError, match=expected):
        list(raw_pairs(src, tgt))
    with pytest.raises(DataError, match=expected):
        check_parallel(src, tgt)
    with pytest.raises(DataError, match=expected):  # the longer file is named first, whichever side it is
        check_parallel(tgt, src)
    tgt.write_text("x\ny\nz\n")
    assert check_parallel(src, tgt) == 3 and list(raw_pairs(src, tgt))[2] == (b"c", b"z")


SRC = ["the cat sat", "a dog ran far", "the dog sat", "a cat ran"]
TGT = ["le chat", "un chien court", "le chien", "un chat"]
HYP = ["le chat", "un chien court vite", "le chat", "un chat"]
FILES = {"src": "newstest2014.src", "tgt": "newstest2014.tgt", "hyp": "hyp.txt"}  # clean reads {corpus}.src/.tgt


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """Configs, a word tokenizer, a tiny rnnsearch checkpoint and its attn.npz, and good inputs/."""
    from attnrepro.config import load_config
    from attnrepro.data.tokenize import WordVocab
    from attnrepro.models import build_model

    root = tmp_path_factory.mktemp("commands")
    raw = yaml.safe_load((REPO / "config/test.yaml").read_text())
    raw["tokenizers"] = {"words": {"kind": "word", "vocab_size": 20}}
    raw["models"] = {"rnnsearch10": {**raw["models"]["rnnsearch10"], "params": TINY_PARAMS["rnnsearch"]}}
    raw["evaluate"]["n_alignments"] = 1
    (root / "config.yaml").write_text(yaml.safe_dump(raw))
    good = root / "inputs"
    good.mkdir()
    (good / FILES["src"]).write_text("".join(line + "\n" for line in SRC))
    (good / FILES["tgt"]).write_text("".join(line + "\n" for line in TGT))
    assert main(command("tokenizer", root, good, root)) == 0
    src_vocab, tgt_vocab = (len(WordVocab.load(root / f"tok/{side}.model")) for side in ("src", "tgt"))
    torch.manual_seed(0)
    params = load_config(root / "config.yaml").model("rnnsearch10").params  # as training saves them: defaults filled
    model = build_model("rnnsearch", src_vocab, tgt_vocab, params)
    checkpoint = {"model": model.state_dict(), "arch": "rnnsearch", "params": params, "step": 1}
    torch.save({**checkpoint, "src_vocab": src_vocab, "tgt_vocab": tgt_vocab}, root / "checkpoint.pt")
    assert main(command("translate", root, good, root)) == 0  # attn.npz for figure-alignments
    (good / FILES["hyp"]).write_text(
        "".join(line + "\n" for line in HYP)
    )  # words to score, unlike an untrained model's
    return root


def command(verb: str, root: Path, inputs: Path, out: Path) -> list[str]:
    """The argv of `verb` reading the files in `inputs` and writing under `out`."""
    config = ["--config", str(root / "config.yaml")]
    src, tgt, hyp = (str(inputs / FILES[role]) for role in ("src", "tgt", "hyp"))
    tok, model = str(root / "tok"), ["--model", "rnnsearch10"]
    args = {
        "clean": ["--config", str(REPO / "config/wmt14_en_fr.yaml"), "--split", "test", "--raw-dir", str(inputs)],
        "tokenizer": [
            *config,
            "--name",
            "words",
            "--src",
            src,
            "--tgt",
            tgt,
            "--out-dir",
            f"{out}/tok",
            "--threads",
            "2",
        ],
        "encode": [*config, "--name", "words", "--tokenizer-dir", tok, "--src", src, "--tgt", tgt, "--threads", "2"],
        "translate": [
            *config,
            *model,
            "--checkpoint",
            str(root / "checkpoint.pt"),
            "--tokenizer-dir",
            tok,
            "--ref",
            tgt,
        ],
        "score": [
            *config,
            *model,
            "--tokenizer-dir",
            tok,
            "--src",
            src,
            "--hyp",
            hyp,
            "--ref",
            tgt,
            "--hyp-no-unk",
            hyp,
        ],
        "figure-alignments": [*config, *model, "--attention", str(root / "attn.npz"), "--hyp", hyp, "--src", src],
    }[verb]
    outputs = {
        "clean": ["--out-dir", f"{out}/clean"],
        "tokenizer": ["--out-dir", f"{out}/tok"],
        "encode": ["--out", f"{out}/train.npz"],
        "translate": [
            "--src",
            src,
            "--out",
            f"{out}/hyp.txt",
            "--attention",
            f"{out}/attn.npz",
            "--out-no-unk",
            f"{out}/hyp_no_unk.txt",
        ],
        "score": ["--hyp-no-unk", hyp, "--json", f"{out}/bleu.json", "--csv", f"{out}/bleu.csv"],
        "figure-alignments": ["--tokenizer-dir", tok, "--figure", f"{out}/align", "--caption", f"{out}/caption.rst"],
    }[verb]
    return [verb, *args, *outputs]


def spoil(good: Path, bad: Path, role: str, kind: str) -> tuple[Path, str]:
    """Copy good/ to bad/ with line 2 of `role`'s file made `kind`; the path and the message expected."""
    bad.mkdir()
    for name in FILES.values():
        (bad / name).write_bytes((good / name).read_bytes())
    path = bad / FILES[role]
    lines = path.read_bytes().splitlines(keepends=True)
    if kind == "unpaired":
        path.write_bytes(b"".join(lines[:3]))
        other = bad / FILES["tgt" if role == "src" else "src"]
        return path, f"{other}:4: line 4 has no counterpart: {path} has only 3 lines"
    lines[1] = (b"caf\xe9 " if kind == "not_utf8" else b"a\x00") + lines[1]
    path.write_bytes(b"".join(lines))
    what = "not UTF-8 (byte 0xe9 at column 4)" if kind == "not_utf8" else "NUL byte at column 2 (UTF-16 text?"
    return path, f"{path}:2: {what}"


BAD_INPUTS = [
    ("clean", "src", "not_utf8"),
    ("clean", "tgt", "nul"),
    ("clean", "tgt", "unpaired"),
    ("tokenizer", "src", "not_utf8"),
    ("tokenizer", "tgt", "nul"),
    ("tokenizer", "tgt", "unpaired"),
    ("encode", "tgt", "not_utf8"),
    ("encode", "src", "nul"),
    ("encode", "src", "unpaired"),
    ("translate", "src", "not_utf8"),
    ("translate", "src", "nul"),
    ("translate", "tgt", "not_utf8"),  # the references: the No UNK subset is chosen by them
    ("score", "src", "not_utf8"),
    ("score", "hyp", "nul"),
    ("score", "tgt", "not_utf8"),  # the references
    ("figure-alignments", "src", "nul"),
    ("figure-alignments", "hyp", "not_utf8"),
]


@pytest.mark.parametrize(("verb", "role", "kind"), BAD_INPUTS)
def test_every_command_names_the_file_and_line_of_bad_text_in_one_line(workspace, tmp_path, capsys, verb, role, kind):
    path, message = spoil(workspace / "inputs", tmp_path / "inputs", role, kind)
    capsys.readouterr()
    assert main(command(verb, workspace, tmp_path / "inputs", tmp_path)) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "train.npz").exists() and not (tmp_path / "hyp.txt").exists()


@pytest.mark.parametrize("verb", ["clean", "tokenizer", "encode", "translate", "score", "figure-alignments"])
def test_windows_line_ends_give_every_command_the_output_of_the_unix_file(workspace, tmp_path, verb):
    windows = tmp_path / "windows"
    windows.mkdir()
    for name in FILES.values():
        (windows / name).write_bytes((workspace / "inputs" / name).read_bytes().replace(b"\n", b"\r\n"))
    outputs = {}
    for inputs in (workspace / "inputs", windows):
        out = tmp_path / f"out_{inputs.name}"
        out.mkdir()
        assert main(command(verb, workspace, inputs, out)) == 0
        outputs[inputs.name] = {
            p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.suffix != ".png"
        }
    if verb == "score":  # bleu.json names no input file; compare the numbers
        for name in ("inputs", "windows"):
            outputs[name][Path("bleu.json")] = json.loads(outputs[name][Path("bleu.json")])
    if verb == "clean":  # the manifest names the raw files
        for name in ("inputs", "windows"):
            del outputs[name][Path("clean/test.manifest.json")]
    assert outputs["inputs"] and outputs["inputs"] == outputs["windows"]


@pytest.mark.parametrize("verb", ["score", "figure-alignments"])
@pytest.mark.parametrize("separator", ["\r", "\u2028", "\x85"])
def test_a_line_separator_inside_a_hypothesis_keeps_it_one_line(workspace, tmp_path, verb, separator):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in FILES.values():
        (inputs / name).write_bytes((workspace / "inputs" / name).read_bytes())
    hyp = (inputs / FILES["hyp"]).read_text(encoding="utf-8").split("\n")
    hyp[1] = f"{hyp[1]}{separator}{hyp[1]}"  # str.splitlines and universal newlines would make it two
    (inputs / FILES["hyp"]).write_text("\n".join(hyp), encoding="utf-8", newline="")
    assert main(command(verb, workspace, inputs, tmp_path)) == 0
    if verb == "score":
        assert json.loads((tmp_path / "bleu.json").read_text())["n_sentences"] == len(SRC)
