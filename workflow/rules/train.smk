rule train:
    """One model on resources.gpu GPUs; resumes from results/{dataset}/{model}/resume/last.pt when rerun."""
    input:
        tokenizer=model_tokenizer,
        train=model_encoded("train"),
        valid=model_encoded("valid"),
    output:
        checkpoint=f"{RESULTS}/{{model}}/checkpoint.pt",
        log=f"{RESULTS}/{{model}}/train_log.csv",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("train", wildcards),
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
        out_dir=lambda wildcards, output: os.path.dirname(output.checkpoint),
    threads: lambda wildcards: model_resources(wildcards).threads
    priority: lambda wildcards: model_resources(wildcards).priority
    resources:
        gpu=lambda wildcards: model_resources(wildcards).gpu,
        gpu_model=lambda wildcards: model_resources(wildcards).gpu_model,
        cpus_per_gpu=lambda wildcards: model_resources(wildcards).cpus_per_gpu,
        mem_mb=lambda wildcards: model_resources(wildcards).mem_mb,
        runtime=train_runtime,
        slurm_extra=train_slurm_extra,
    conda:
        model_software
    log:
        f"{RESULTS}/logs/train_{{model}}.log",
    benchmark:  # wall time, CPU time and peak memory (max_rss, MB) of the job, measured by Snakemake
        f"{RESULTS}/benchmarks/train_{{model}}.tsv"
    shell:  # exec: the launcher replaces the shell, so SLURM's SIGTERM finds no shell to kill first
        "exec attnrepro launch --gpus {resources.gpu} -- train --config {params.config:q} --model {wildcards.model:q}"
        " --tokenizer-dir {params.tokenizer_dir:q} --train {input.train:q} --valid {input.valid:q}"
        " --out-dir {params.out_dir:q} --threads {threads} > {log:q} 2>&1"


rule average:
    """Vaswani et al. 2017, §6.1: translate with the mean of the last train.average_last checkpoints."""
    input:
        checkpoint=rules.train.output.checkpoint,
    output:
        f"{RESULTS}/{{model}}/averaged.pt",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("average", wildcards),
    log:
        f"{RESULTS}/logs/average_{{model}}.log",
    conda:
        "../../envs/attnrepro.yaml"
    shell:
        "attnrepro average --config {params.config:q} --model {wildcards.model:q}"
        " --checkpoint {input.checkpoint:q} --out {output:q} > {log:q} 2>&1"
