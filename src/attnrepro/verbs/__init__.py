"""What each `attnrepro` verb does, by family: data.py, model.py, evaluation.py, cluster.py.

`attnrepro.cli` holds the parser and the dispatch; a verb here reads its config with
`attnrepro.config.load_config` and imports what it runs (torch, matplotlib) only when it runs.
"""

TOKENIZER_FILES = ("src.model", "tgt.model")  # what load_tokenizer_pair reads from a --tokenizer-dir
