"""attnrepro: the history of attention in NMT, one DAG (see docs/design.md, README.md).

    snakemake --cores 2                                   # embedded default (config/config.yaml)
    snakemake --cores 8 --configfile config/wmt14_en_fr.yaml
    snakemake --cores 2 figures                           # tables and figures from finished runs
"""

import sys

from snakemake.utils import min_version

from attnrepro.config import anchor_paths, check_config_files, validate
from attnrepro.training.launch import pass_interrupts_to_jobs

min_version("8.20")

# --cores 0 (or --jobs 0) leaves no core for any job: Snakemake would wait at "Select jobs to execute..." until
# killed. Checked where Snakemake schedules (not in a job's own Snakemake); resources it scales down instead.
if not (workflow.remote_exec or workflow.subprocess_exec) and 0 in (
    workflow.resource_settings.cores,
    workflow.resource_settings.nodes,
):
    sys.exit("--cores 0 (or --jobs 0): no job can start without a core; give --cores N with N >= 1, or --cores all")

# SIGINT to Snakemake alone stops the running jobs too (training checkpoints), as Ctrl-C in a terminal does.
pass_interrupts_to_jobs()

# A --configfile on the command line replaces the embedded default instead of merging into it.
if not workflow.overwrite_configfiles:
    configfile: os.path.join(workflow.basedir, "config", "config.yaml")

# Snakemake's YAML loader keeps the last of a key given twice without a word: refuse it, naming both lines.
CONFIG_FILES = check_config_files(workflow.configfiles)
# The files a config names beside it (Europarl's manifest, its committed test sample) are read against the
# config file's folder, whatever the working directory.
anchor_paths(config, CONFIG_FILES)
# snakemake.utils.validate against workflow/schemas/ (defaults filled in place); a violation is one line naming the key
validate(config)


report: "workflow/report/workflow.rst"

include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/tokenize.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/translate.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


# The jobs' config file is written when a run has taken the lock and before its first job, never
# while the DAG is parsed: a dry run, or a second run the lock refuses, leaves it alone.
onstart:
    write_resolved_config(RESOLVED_CONFIG)


rule all:
    input:
        expand(f"{RESULTS}/{{model}}/bleu.json", model=MODELS),
        REPORT_FILES,
    default_target: True


rule figures:
    """Every table and figure (workflow/rules/report.smk) from finished runs; trains and translates nothing
    when the runs are finished."""
    input:
        REPORT_FILES,
