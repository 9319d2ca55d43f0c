rule generate:
    """The embedded synthetic corpus (attnrepro.data.synthetic), deterministic from its seed."""
    output:
        multiext(
            f"{RESULTS}/data/",
            "train.src", "train.tgt", "valid.src", "valid.tgt", "test.src", "test.tgt",
        ),
    params:
        config=RESOLVED_CONFIG,
        synthetic=config["data"].get("synthetic"),
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    conda:
        "../../envs/attnrepro.yaml"
    log:
        f"{RESULTS}/logs/generate.log",
    shell:
        "attnrepro generate --config {params.config:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"
