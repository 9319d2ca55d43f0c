# score takes seconds of CPU per model: on a cluster it runs on the submitting machine.
localrules:
    score,


rule score:
    """sacreBLEU (with signature) and tokenized BLEU on the test set with bootstrap intervals: overall,
    by source-length bucket, and on the sentences without an unknown word (Bahdanau Table 1's "No UNK")."""
    input:
        tokenizer=model_tokenizer,
        src=f"{RESULTS}/data/test.src",
        ref=f"{RESULTS}/data/test.tgt",
        hyp=f"{RESULTS}/{{model}}/hyp.txt",
        hyp_no_unk=f"{RESULTS}/{{model}}/hyp_no_unk.txt",
    output:
        json=f"{RESULTS}/{{model}}/bleu.json",
        csv=f"{RESULTS}/{{model}}/bleu_by_length.csv",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("score", wildcards),
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/score_{{model}}.log",
    shell:
        "attnrepro score --config {params.config:q} --model {wildcards.model:q} --tokenizer-dir {params.tokenizer_dir:q}"
        " --src {input.src:q} --hyp {input.hyp:q} --hyp-no-unk {input.hyp_no_unk:q} --ref {input.ref:q}"
        " --json {output.json:q} --csv {output.csv:q}"
        " > {log:q} 2>&1"
