rule train:
    """One model; resumes from results/{dataset}/{model}/resume/last.pt when rerun."""
    input:
        rules.tokenizer.output,
        train=f"{RESULTS}/encoded/train.npz",
        valid=f"{RESULTS}/encoded/valid.npz",
    output:
        checkpoint=f"{RESULTS}/{{model}}/checkpoint.pt",
        log=f"{RESULTS}/{{model}}/train_log.csv",
    params:
        config=RESOLVED_CONFIG,
        model=lambda wildcards: config["models"][wildcards.model],
    threads: CFG.resources.threads
    resources:
        mem_mb=CFG.resources.mem_mb,
        runtime=CFG.resources.runtime,
    log:
        f"{RESULTS}/logs/train_{{model}}.log",
    shell:
        "attnrepro train --config {params.config:q} --model {wildcards.model} --tokenizer-dir {RESULTS}/tokenizer"
        " --train {input.train:q} --valid {input.valid:q} --out-dir {RESULTS}/{wildcards.model}"
        " --threads {threads} > {log:q} 2>&1"
