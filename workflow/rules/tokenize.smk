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
    log:
        f"{RESULTS}/logs/tokenizer.log",
    shell:
        "attnrepro tokenizer --config {params.config:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out-dir {RESULTS}/tokenizer > {log:q} 2>&1"


rule encode:
    input:
        rules.tokenizer.output,
        src=f"{RESULTS}/data/{{split}}.src",
        tgt=f"{RESULTS}/data/{{split}}.tgt",
    output:
        f"{RESULTS}/encoded/{{split}}.npz",
    params:
        config=RESOLVED_CONFIG,
    log:
        f"{RESULTS}/logs/encode_{{split}}.log",
    shell:
        "attnrepro encode --config {params.config:q} --tokenizer-dir {RESULTS}/tokenizer"
        " --src {input.src:q} --tgt {input.tgt:q} --out {output:q} > {log:q} 2>&1"
