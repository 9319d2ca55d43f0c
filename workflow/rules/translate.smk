rule translate:
    """Beam search over the test set; attention weights of every sentence go to attn.npz. The No UNK
    subset (its references name it) is searched again with UNK banned, into hyp_no_unk.txt."""
    input:
        tokenizer=model_tokenizer,
        checkpoint=translation_checkpoint,
        src=f"{RESULTS}/data/test.src",
        ref=f"{RESULTS}/data/test.tgt",
    output:
        hyp=f"{RESULTS}/{{model}}/hyp.txt",
        hyp_no_unk=f"{RESULTS}/{{model}}/hyp_no_unk.txt",
        attention=f"{RESULTS}/{{model}}/attn.npz",
    params:
        config=RESOLVED_CONFIG,
        settings=lambda wildcards: job_params("translate", wildcards),
        tokenizer_dir=lambda wildcards, input: os.path.dirname(input.tokenizer),
    threads: lambda wildcards: model_resources(wildcards).threads
    priority: lambda wildcards: model_resources(wildcards).priority  # a long model's search starts early too
    resources:
        gpu=lambda wildcards: min(model_resources(wildcards).gpu, 1),  # beam search runs in one process
        gpu_model=lambda wildcards: model_resources(wildcards).gpu_model,
        cpus_per_gpu=lambda wildcards: model_resources(wildcards).cpus_per_gpu,
        mem_mb=lambda wildcards: model_resources(wildcards).mem_mb,
        runtime=lambda wildcards: model_resources(wildcards).translate_runtime,
    conda:
        model_software
    log:
        f"{RESULTS}/logs/translate_{{model}}.log",
    benchmark:  # wall time, CPU time and peak memory (max_rss, MB) of the job, measured by Snakemake
        f"{RESULTS}/benchmarks/translate_{{model}}.tsv"
    shell:
        "attnrepro translate --config {params.config:q} --model {wildcards.model:q} --checkpoint {input.checkpoint:q}"
        " --tokenizer-dir {params.tokenizer_dir:q} --src {input.src:q} --out {output.hyp:q}"
        " --attention {output.attention:q} --ref {input.ref:q} --out-no-unk {output.hyp_no_unk:q}"
        " --threads {threads} > {log:q} 2>&1"
