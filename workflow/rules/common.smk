# Shared names for every rule file. The validated config is written once to
# results/{dataset}/config.yaml, which every `attnrepro` verb reads back.

import re
from pathlib import Path

import yaml

from attnrepro.config import from_dict

CFG = from_dict(config)  # semantic checks beyond the schema, before any job runs
DATASET = CFG.dataset
RESULTS = f"results/{DATASET}"
MODELS = list(CFG.models)
TOKENIZERS = list(CFG.tokenizers)
RESOLVED_CONFIG = f"{RESULTS}/config.yaml"


def _write_resolved_config(path):
    """Write the validated config (defaults filled) only when it changed, keeping mtimes stable."""
    text = yaml.safe_dump(config, sort_keys=False)
    if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(f"{path}.tmp", path)


_write_resolved_config(RESOLVED_CONFIG)


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
    # Sizes/sha256 the config does not give are pinned beside the config file, as pip pins hashes.
    CONFIG_FILE = Path(workflow.configfiles[-1]) if workflow.configfiles else Path("config.yaml")
    LOCK_FILE = WMT.lock_file or str(CONFIG_FILE.with_name(f"{CONFIG_FILE.stem}.lock.yaml"))


def corpus_archive(wildcards):
    return f"{DOWNLOADS}/{WMT.files[WMT.corpora[wildcards.corpus].file].name}"


def split_raw(side):
    return lambda wildcards: [f"{RESULTS}/raw/{c}.{side}" for c in WMT.splits[wildcards.split]]


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
