rule translate:
    """Beam search over the test set; attention weights of every sentence go to attn.npz."""
    input:
        rules.tokenizer.output,
        checkpoint=f"{RESULTS}/{{model}}/checkpoint.pt",
        src=f"{RESULTS}/data/test.src",
    output:
        hyp=f"{RESULTS}/{{model}}/hyp.txt",
        attention=f"{RESULTS}/{{model}}/attn.npz",
    params:
        config=RESOLVED_CONFIG,
        search=config["search"],
    threads: CFG.resources.threads
    log:
        f"{RESULTS}/logs/translate_{{model}}.log",
    shell:
        "attnrepro translate --config {params.config:q} --checkpoint {input.checkpoint:q}"
        " --tokenizer-dir {RESULTS}/tokenizer --src {input.src:q} --out {output.hyp:q}"
        " --attention {output.attention:q} --threads {threads} > {log:q} 2>&1"
