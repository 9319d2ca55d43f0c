# Tables and figures from finished runs (no rule here trains or translates), each marked for
# `snakemake --report results/report.html` with a caption from workflow/report/*.rst. A caption
# says what the paper showed and includes results/{dataset}/captions/*.rst, which the job writes
# from our numbers ("what we see").

from attnrepro.models import has_attention

ATTENTION_MODELS = [name for name, m in CFG.models.items() if has_attention(m.arch)]
N_ALIGNMENTS = CFG.evaluate.n_alignments
CAPTIONS = f"{RESULTS}/captions"


localrules:
    tables,
    figure_length,
    figure_alignments,
    figure_training,


rule tables:
    """Bahdanau Table 1, Vaswani Table 2 and BLEU by length, CSV + Markdown, the papers' numbers beside ours."""
    input:
        bleu=expand(f"{RESULTS}/{{model}}/bleu.json", model=MODELS),
        by_length=expand(f"{RESULTS}/{{model}}/bleu_by_length.csv", model=MODELS),
        logs=expand(f"{RESULTS}/{{model}}/train_log.csv", model=MODELS),
        checkpoints=expand(f"{RESULTS}/{{model}}/checkpoint.pt", model=MODELS),
    output:
        table1=f"{RESULTS}/tables/table1.csv",
        table1_md=f"{RESULTS}/tables/table1.md",
        table1_html=report(
            f"{RESULTS}/tables/table1.html",
            caption="../report/table1.rst",
            category="Tables",
            labels={"table": "Table 1: BLEU, All and No UNK (Bahdanau et al. 2014)"},
        ),
        table2=f"{RESULTS}/tables/table2.csv",
        table2_md=f"{RESULTS}/tables/table2.md",
        table2_html=report(
            f"{RESULTS}/tables/table2.html",
            caption="../report/table2.rst",
            category="Tables",
            labels={"table": "Table 2: BLEU and training cost (Vaswani et al. 2017)"},
        ),
        by_length=f"{RESULTS}/tables/bleu_by_length.csv",
        by_length_md=f"{RESULTS}/tables/bleu_by_length.md",
        by_length_html=report(
            f"{RESULTS}/tables/bleu_by_length.html",
            caption="../report/bleu_by_length_table.rst",
            category="Tables",
            labels={"table": "BLEU by source length (the numbers of Fig. 2)"},
        ),
        table1_caption=f"{CAPTIONS}/table1.rst",
        table2_caption=f"{CAPTIONS}/table2.rst",
        by_length_caption=f"{CAPTIONS}/bleu_by_length_table.rst",
        by_length_band=f"{RESULTS}/tables/bleu_by_length_band.csv",  # `attnrepro compare` checks a run against one
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("report", wildcards),
        results=lambda wildcards, input: os.path.dirname(os.path.dirname(input.logs[0])),
        out_dir=lambda wildcards, output: os.path.dirname(output.table1),
        captions=lambda wildcards, output: os.path.dirname(output.table1_caption),
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/tables.log",
    shell:
        "attnrepro tables --config {params.config:q} --results {params.results:q} --out-dir {params.out_dir:q}"
        " --captions {params.captions:q} > {log:q} 2>&1"


rule figure_length:
    """Bahdanau et al. 2014, Fig. 2: BLEU by source sentence length, every model on one figure."""
    input:
        by_length=expand(f"{RESULTS}/{{model}}/bleu_by_length.csv", model=MODELS),
        logs=expand(f"{RESULTS}/{{model}}/train_log.csv", model=MODELS),
        checkpoints=expand(f"{RESULTS}/{{model}}/checkpoint.pt", model=MODELS),  # the legend: where training stopped
    output:
        png=report(
            f"{RESULTS}/figures/bleu_by_length.png",
            caption="../report/fig2.rst",
            category="Figures",
            labels={"figure": "Fig. 2: BLEU by sentence length"},
        ),
        pdf=f"{RESULTS}/figures/bleu_by_length.pdf",
        caption=f"{CAPTIONS}/bleu_by_length.rst",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("report", wildcards),
        results=lambda wildcards, input: os.path.dirname(os.path.dirname(input.logs[0])),
        figure=lambda wildcards, output: os.path.splitext(output.png)[0],
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/figure_length.log",
    shell:
        "attnrepro figure-length --config {params.config:q} --results {params.results:q}"
        " --figure {params.figure:q} --caption {output.caption:q} > {log:q} 2>&1"


rule figure_alignments:
    """Bahdanau et al. 2014, Fig. 3: one model's attention on evaluate.n_alignments test sentences."""
    input:
        tokenizer=model_tokenizer,
        attention=f"{RESULTS}/{{model}}/attn.npz",
        hyp=f"{RESULTS}/{{model}}/hyp.txt",
        src=f"{RESULTS}/data/test.src",
    output:
        figures=[
            report(
                f"{RESULTS}/figures/alignment_{{model}}_{k}.png",
                caption="../report/fig3.rst",
                category="Alignments (Fig. 3)",
                subcategory="{model}",
                labels={"model": "{model}", "sentence": f"{k + 1} of {N_ALIGNMENTS}"},
            )
            for k in range(N_ALIGNMENTS)
        ],
        caption=f"{CAPTIONS}/alignments_{{model}}.rst",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("figure_alignments", wildcards),
        # fig3.rst's: a run name is not always a key of config["models"] (NAME_seed2 with `seeds`)
        label=lambda wildcards: CFG.model(wildcards.model).label,
        arch=lambda wildcards: CFG.model(wildcards.model).arch,
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
        figure=lambda wildcards: f"{RESULTS}/figures/alignment_{wildcards.model}",
    wildcard_constraints:
        model="|".join(ATTENTION_MODELS) or "(?!)",  # archs without attention have no Fig. 3
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/figure_alignments_{{model}}.log",
    shell:
        "attnrepro figure-alignments --config {params.config:q} --model {wildcards.model:q}"
        " --attention {input.attention:q} --hyp {input.hyp:q} --src {input.src:q}"
        " --tokenizer-dir {params.tokenizer_dir:q} --figure {params.figure:q} --caption {output.caption:q}"
        " > {log:q} 2>&1"


rule figure_training:
    """Training loss, validation loss (and validation BLEU when logged) against step, every model."""
    input:
        logs=expand(f"{RESULTS}/{{model}}/train_log.csv", model=MODELS),
        checkpoints=expand(f"{RESULTS}/{{model}}/checkpoint.pt", model=MODELS),  # the legend: where training stopped
    output:
        png=report(
            f"{RESULTS}/figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="Figures",
            labels={"figure": "Training curves"},
        ),
        pdf=f"{RESULTS}/figures/training_curves.pdf",
        caption=f"{CAPTIONS}/training_curves.rst",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("report", wildcards),
        results=lambda wildcards, input: os.path.dirname(os.path.dirname(input.logs[0])),
        figure=lambda wildcards, output: os.path.splitext(output.png)[0],
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/figure_training.log",
    shell:
        "attnrepro figure-training --config {params.config:q} --results {params.results:q}"
        " --figure {params.figure:q} --caption {output.caption:q} > {log:q} 2>&1"


# Every table and figure; `rule all` and `rule figures` (Snakefile) request these.
REPORT_FILES = [
    *rules.tables.output,
    *rules.figure_length.output,
    *rules.figure_training.output,
    *expand(f"{RESULTS}/figures/alignment_{{model}}_{{k}}.png", model=ATTENTION_MODELS, k=range(N_ALIGNMENTS)),
    *expand(f"{CAPTIONS}/alignments_{{model}}.rst", model=ATTENTION_MODELS),
]
