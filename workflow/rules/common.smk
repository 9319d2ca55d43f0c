# Shared names for every rule file. Every `attnrepro` verb reads the validated config from
# results/{dataset}/config.yaml, which the Snakefile's `onstart` writes when a run starts (never
# while the DAG is parsed: a dry run, or a run the lock refuses, must not change what the jobs of
# a running workflow read). Each rule passes `job_params` of its job as a param, so Snakemake
# reruns exactly the jobs whose settings changed.

import dataclasses
import re

import yaml

from attnrepro.config import check_mirror, from_dict, lock_file_of

CFG = from_dict(config)  # semantic checks beyond the schema, before any job runs
check_mirror(CFG)  # a folder the jobs will read: named by a dry run, not first by the download job
DATASET = CFG.dataset
RESULTS = f"results/{DATASET}"
MODELS = list(CFG.models)
TOKENIZERS = list(CFG.tokenizers)
RESOLVED_CONFIG = f"{RESULTS}/config.yaml"


def write_resolved_config(path):
    """Write the validated config (defaults filled) that this run's jobs read; only when it changed."""
    text = yaml.safe_dump(config, sort_keys=False)
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(f"{path}.tmp", path)


wildcard_constraints:
    dataset=DATASET,
    model="|".join(MODELS),
    tokenizer="|".join(TOKENIZERS),
    split="|".join(CFG.splits),


# ---- data.wmt (download -> extract -> clean) ----
if CFG.wmt is not None:
    WMT = CFG.wmt
    DOWNLOADS = WMT.download_dir  # shared by every dataset that uses the same archives
    FILE_OF_ARCHIVE = {spec.name: key for key, spec in WMT.files.items()}
    # Sizes/sha256 the config does not give are pinned beside the config file naming them, as pip pins hashes.
    LOCK_FILE = WMT.lock_file or str(lock_file_of(CONFIG_FILES))


# ---- data.europarl (download -> extract by date -> clean) ----
if CFG.europarl is not None:
    from attnrepro.data.europarl import selected_days

    EUROPARL = CFG.europarl
    DOWNLOADS = EUROPARL.download_dir
    EUROPARL_DAYS = selected_days(EUROPARL)  # split -> its days, read from the manifest (a dry run names a bad row)
    EUROPARL_SPLIT_FILES = {
        split: [f.path for day in days for f in (day.src, day.tgt)] for split, days in EUROPARL_DAYS.items()
    }
    EUROPARL_FILES = [path for paths in EUROPARL_SPLIT_FILES.values() for path in paths]


def europarl_ids(split):
    """The committed sample of data.europarl.{valid,test} (an input: editing it re-extracts), or nothing."""
    spec = {"valid": EUROPARL.valid, "test": EUROPARL.test}.get(split)
    return [spec.ids] if spec is not None and spec.ids is not None else []


def split_raw(side):
    return lambda wildcards: [f"{RESULTS}/raw/{c}.{side}" for c in CFG.published.splits[wildcards.split]]


# ---- the parsed config a job reads: its rerun trigger ----
def _fields(obj, *drop):
    """A config dataclass as plain data (what Snakemake stores and compares), without the fields in `drop`."""
    values = dataclasses.asdict(obj)
    for name in drop:
        del values[name]
    return _sorted(values)


def _sorted(value):
    """Mappings with their keys in order: the order of keys in a YAML file never reruns a job."""
    return {k: _sorted(v) for k, v in sorted(value.items())} if isinstance(value, dict) else value


def _train_params(model):
    """Everything that shapes a training run; not the label, resources or (without valid_bleu) search."""
    mc = CFG.model(model)
    search = _fields(CFG.search_of(model)) if mc.train.valid_bleu else None
    return {**_fields(mc, "label", "resources", "search"), "valid_search": search}


def _clean_params(split):
    """A split's corpora; the filters only for train* splits (evaluation splits keep every sentence)."""
    data = CFG.published
    clean = _fields(data.clean) if split.startswith("train") else {"invalid_utf8": data.clean.invalid_utf8}
    return {"corpora": data.splits[split], "clean": clean}


def _europarl_params(split=None):
    """What a Europarl job reads: the corpus, the days and encoding; for a split its window and sample."""
    base = {k: str(v) for k, v in _fields(EUROPARL, "clean", "valid", "test", "retries", "timeout_s").items()}
    if split is None:
        return {k: base[k] for k in ("url", "manifest", "first_day", "last_day", "src_lang", "tgt_lang")}
    windows = {"valid": _fields(EUROPARL.valid), "test": _fields(EUROPARL.test)}
    return {**base, "windows": {k: {f: str(x) for f, x in w.items()} for k, w in windows.items()}, "split": split}


def _report_params():
    """Tables and figures read every model's settings and labels, and the evaluation's."""
    models = {name: _fields(m, "resources") for name, m in CFG.models.items()}
    return {"dataset": DATASET, "models": models, "evaluate": _fields(CFG.evaluate), "languages": CFG.languages}


_JOB_PARAMS = {
    "generate": lambda wc: _fields(CFG.synthetic),
    "download": lambda wc: (
        _europarl_params() if CFG.europarl is not None else {"url": WMT.files[FILE_OF_ARCHIVE[wc.archive]].url}
    ),  # sizes/hashes only check it
    "extract": lambda wc: (
        _europarl_params(wc.corpus) if CFG.europarl is not None else _fields(WMT.corpora[wc.corpus], "lines")
    ),  # lines: a check of the output
    "clean": lambda wc: _clean_params(wc.split),
    "tokenizer": lambda wc: {**_fields(CFG.tokenizer_named(wc.tokenizer)), "languages": CFG.languages},
    "encode": lambda wc: {**_fields(CFG.tokenizer_named(wc.tokenizer)), "languages": CFG.languages},
    "train": lambda wc: _train_params(wc.model),
    "average": lambda wc: {"average_last": CFG.model(wc.model).train.average_last},
    "translate": lambda wc: _fields(CFG.search_of(wc.model)),
    "score": lambda wc: {**_fields(CFG.evaluate, "n_alignments"), "label": CFG.model(wc.model).label},
    "figure_alignments": lambda wc: {"label": CFG.model(wc.model).label, "n": CFG.evaluate.n_alignments},
    "report": lambda wc: _report_params(),
}


def job_params(rule, wildcards):
    """The settings of the parsed config (CFG) that a job of `rule` reads, as plain data.

    Rules pass this as a param: Snakemake reruns a job when it changes, and only then (a model's
    resources or label never retrain it). Taken from CFG, not the raw `config`, so models that
    exist only in the parsed config (seed runs) work in every rule.
    """
    return _JOB_PARAMS[rule](wildcards)


# ---- tokenizers: each model names one ----
def tokenizer_of(model):
    return CFG.model(model).tokenizer


def model_tokenizer(wildcards):
    """The source tokenizer model of wildcards.model's tokenizer (its folder holds both sides)."""
    return f"{RESULTS}/tokenizer/{tokenizer_of(wildcards.model)}/src.model"


def model_encoded(split):
    return lambda wildcards: f"{RESULTS}/encoded/{tokenizer_of(wildcards.model)}/{split}.npz"


def split_text(side):
    """data/{split}.{side}; split "train" of a tokenizer is its train_split (e.g. Schwenk's selection)."""

    def text(wildcards):
        split = wildcards.get("split", "train")
        if split == "train":
            split = CFG.tokenizer_named(wildcards.tokenizer).train_split
        return f"{RESULTS}/data/{split}.{side}"

    return text


# ---- compute of a model's train/translate jobs (local runs and profiles/slurm) ----
def model_resources(wildcards):
    """resources of wildcards.model: the top-level config `resources` with the model's own over them."""
    return CFG.model(wildcards.model).resources


def model_software(wildcards):
    """The conda env (--software-deployment-method conda) of a model's train and translate jobs: the
    CUDA build of torch when the job asks for a GPU (resources.gpu > 0), else the CPU build."""
    return "../../envs/attnrepro-cuda.yaml" if model_resources(wildcards).gpu > 0 else "../../envs/attnrepro.yaml"


def train_runtime(wildcards):
    """Minutes: resources.runtime, else `attnrepro estimate`'s (capped at resources.max_runtime)."""
    if model_resources(wildcards).runtime is not None:
        return model_resources(wildcards).runtime
    from attnrepro.training.estimate import estimate

    return estimate(CFG, wildcards.model).runtime_min


def train_slurm_extra(wildcards):
    """sbatch options: SIGTERM before the time limit (checkpoint + requeue), then the config's."""
    from attnrepro.training.launch import slurm_extra

    res = model_resources(wildcards)
    return slurm_extra(res.slurm_extra, res.signal_s, train_runtime(wildcards))


def translation_checkpoint(wildcards):
    """averaged.pt for a model with train.average_last > 1, else the final checkpoint.pt."""
    averaged = CFG.model(wildcards.model).train.average_last > 1
    return f"{RESULTS}/{wildcards.model}/{'averaged' if averaged else 'checkpoint'}.pt"
