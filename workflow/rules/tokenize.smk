# One tokenizer per name under `tokenizers`, trained on its train_split; every model names one.


rule tokenizer:
    """Sentencepiece or a word shortlist (tokenizers.NAME.kind), trained on the tokenizer's train_split
    (sentencepiece on `threads` threads; words counted by `threads` processes)."""
    input:
        src=split_text("src"),
        tgt=split_text("tgt"),
    output:
        src=f"{RESULTS}/tokenizer/{{tokenizer}}/src.model",
        tgt=f"{RESULTS}/tokenizer/{{tokenizer}}/tgt.model",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("tokenizer", wildcards),
        out_dir=lambda wildcards, output: os.path.dirname(output.src),
    threads: CFG.resources.threads
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/tokenizer_{{tokenizer}}.log",
    shell:
        "attnrepro tokenizer --config {params.config:q} --name {wildcards.tokenizer:q} --src {input.src:q}"
        " --tgt {input.tgt:q} --out-dir {params.out_dir:q} --threads {threads} > {log:q} 2>&1"


rule encode:
    """Token ids of a split (train = the tokenizer's train_split), streamed into one .npz by `threads` processes."""
    input:
        tokenizer=f"{RESULTS}/tokenizer/{{tokenizer}}/src.model",
        src=split_text("src"),
        tgt=split_text("tgt"),
    output:
        f"{RESULTS}/encoded/{{tokenizer}}/{{split}}.npz",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("encode", wildcards),
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
    wildcard_constraints:
        split="train|valid",
    threads: CFG.resources.threads
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/encode_{{tokenizer}}_{{split}}.log",
    shell:
        "attnrepro encode --config {params.config:q} --name {wildcards.tokenizer:q}"
        " --tokenizer-dir {params.tokenizer_dir:q} --src {input.src:q} --tgt {input.tgt:q}"
        " --out {output:q} --threads {threads} > {log:q} 2>&1"
