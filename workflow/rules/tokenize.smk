rule tokenizer:
    """Sentencepiece or a word shortlist (config tokenizer.kind), trained on the training text."""
    input:
        src=f"{RESULTS}/data/train.src",
        tgt=f"{RESULTS}/data/train.tgt",
    output:
        src=f"{RESULTS}/tokenizer/src.model",
        tgt=f"{RESULTS}/tokenizer/tgt.model",
    params:
        config=RESOLVED_CONFIG,
        tokenizer=config["tokenizer"],
        out_dir=lambda wildcards, output: os.path.dirname(output.src),
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/tokenizer.log",
    shell:
        "attnrepro tokenizer --config {params.config:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule encode:
    input:
        tokenizer=rules.tokenizer.output.src,
        src=f"{RESULTS}/data/{{split}}.src",
        tgt=f"{RESULTS}/data/{{split}}.tgt",
    output:
        f"{RESULTS}/encoded/{{split}}.npz",
    params:
        config=RESOLVED_CONFIG,
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/encode_{{split}}.log",
    shell:
        "attnrepro encode --config {params.config:q} --tokenizer-dir {params.tokenizer_dir:q}"
        " --src {input.src:q} --tgt {input.tgt:q} --out {output:q} > {log:q} 2>&1"
