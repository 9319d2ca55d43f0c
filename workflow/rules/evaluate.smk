rule score:
    """sacreBLEU on the test set, overall (with signature) and by source-length bucket."""
    input:
        src=f"{RESULTS}/data/test.src",
        ref=f"{RESULTS}/data/test.tgt",
        hyp=f"{RESULTS}/{{model}}/hyp.txt",
    output:
        json=f"{RESULTS}/{{model}}/bleu.json",
        csv=f"{RESULTS}/{{model}}/bleu_by_length.csv",
    params:
        config=RESOLVED_CONFIG,
        evaluate=config["evaluate"],
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/score_{{model}}.log",
    shell:
        "attnrepro score --config {params.config:q} --model {wildcards.model:q} --src {input.src:q}"
        " --hyp {input.hyp:q} --ref {input.ref:q} --json {output.json:q} --csv {output.csv:q} > {log:q} 2>&1"
