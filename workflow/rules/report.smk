localrules:
    report,


rule report:
    """Bahdanau et al. 2014, Fig. 2: BLEU by source length for every model, table and figure."""
    input:
        expand(f"{RESULTS}/{{model}}/bleu_by_length.csv", model=MODELS),
    output:
        table=f"{RESULTS}/tables/bleu_by_length.csv",
        png=f"{RESULTS}/figures/bleu_by_length.png",
        pdf=f"{RESULTS}/figures/bleu_by_length.pdf",
    params:
        config=RESOLVED_CONFIG,
        results=lambda wildcards, input: os.path.dirname(os.path.dirname(input[0])),
        figure=lambda wildcards, output: os.path.splitext(output.png)[0],
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/report.log",
    shell:
        "attnrepro report --config {params.config:q} --results {params.results:q} --table {output.table:q}"
        " --figure {params.figure:q} > {log:q} 2>&1"
