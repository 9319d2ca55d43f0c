# results/{dataset}/data/{split}.{src,tgt}: generated (data.synthetic) or downloaded, extracted and
# cleaned from the published corpora (data.wmt: download -> extract -> clean).

if CFG.synthetic is not None:

    rule generate:
        """The embedded synthetic corpus (attnrepro.data.synthetic), deterministic from its seed."""
        output:
            multiext(
                f"{RESULTS}/data/",
                "train.src", "train.tgt", "valid.src", "valid.tgt", "test.src", "test.tgt",
            ),
        params:
            config=RESOLVED_CONFIG,
            settings=lambda wildcards: job_params("generate", wildcards),
            out_dir=lambda wildcards, output: os.path.dirname(output[0]),
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/generate.log",
        shell:
            "attnrepro generate --config {params.config:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"

elif CFG.europarl is not None:

    localrules:
        download,

    rule download:
        """Every day file data.europarl's manifest lists for the configured days: copied from data.europarl.mirror
        when set, else downloaded from data.europarl.url (resumed, retried); each verified against the manifest's
        size and sha256, then renamed. One job: 650 small files are a minute, 650 jobs would be ten."""
        input:
            manifest=EUROPARL.manifest,
        output:
            [f"{DOWNLOADS}/{path}" for path in EUROPARL_FILES],
        params:
            settings=lambda wildcards: job_params("download", wildcards),
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/download.log",
        shell:
            "attnrepro europarl-download --config {RESOLVED_CONFIG:q} --out-dir {DOWNLOADS:q} > {log:q} 2>&1"

    rule extract:
        """One split of data.europarl: its days (by date) decoded from data.europarl.encoding, each day's two
        sides checked line for line; valid and test sampled per length bucket (or the committed ids taken)."""
        input:
            days=lambda wildcards: [f"{DOWNLOADS}/{path}" for path in EUROPARL_SPLIT_FILES[wildcards.corpus]],
            ids=lambda wildcards: europarl_ids(wildcards.corpus),
        output:
            src=f"{RESULTS}/raw/{{corpus}}.src",
            tgt=f"{RESULTS}/raw/{{corpus}}.tgt",
            ids=f"{RESULTS}/raw/{{corpus}}.ids",
        params:
            settings=lambda wildcards: job_params("extract", wildcards),
            out_dir=lambda wildcards, output: os.path.dirname(output.src),
        wildcard_constraints:
            corpus="train|valid|test",
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/extract_{{corpus}}.log",
        shell:
            "attnrepro europarl-extract --config {RESOLVED_CONFIG:q} --split {wildcards.corpus:q}"
            " --download-dir {DOWNLOADS:q} --out-dir {params.out_dir:q} > {log:q} 2>&1"

else:

    localrules:
        download,

    rule download:
        """One file of data.wmt.files: copied from data.wmt.mirror when there, else downloaded (resumed from
        its .part, retried, its end confirmed); verified, then renamed."""
        output:
            f"{DOWNLOADS}/{{archive}}",
        params:  # not the config's or lock file's path: datasets that share an archive share its download
            file=lambda wildcards: FILE_OF_ARCHIVE[wildcards.archive],
            settings=lambda wildcards: job_params("download", wildcards),
        wildcard_constraints:
            archive="|".join(re.escape(name) for name in FILE_OF_ARCHIVE),
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/download_{{archive}}.log",
        shell:
            "attnrepro download --config {RESOLVED_CONFIG:q} --file {params.file:q} --lock {LOCK_FILE:q}"
            " --out {output:q} > {log:q} 2>&1"

    rule extract:
        """One corpus of data.wmt.corpora, streamed out of its downloaded files as plain text (SGML -> text);
        one archive may hold both sides."""
        input:
            src=lambda wildcards: f"{DOWNLOADS}/{WMT.side_file(wildcards.corpus, 'src').name}",
            tgt=lambda wildcards: f"{DOWNLOADS}/{WMT.side_file(wildcards.corpus, 'tgt').name}",
        output:
            src=f"{RESULTS}/raw/{{corpus}}.src",
            tgt=f"{RESULTS}/raw/{{corpus}}.tgt",
        params:
            config=RESOLVED_CONFIG,
            settings=lambda wildcards: job_params("extract", wildcards),
        wildcard_constraints:
            corpus="|".join(WMT.corpora),
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/extract_{{corpus}}.log",
        shell:
            "attnrepro extract --config {params.config:q} --corpus {wildcards.corpus:q}"
            " --src-input {input.src:q} --tgt-input {input.tgt:q} --src {output.src:q} --tgt {output.tgt:q}"
            " > {log:q} 2>&1"


if CFG.synthetic is None:

    rule clean:
        """A split's corpora validated, normalised and (train*) filtered; counts in {split}.manifest.json."""
        input:
            src=split_raw("src"),
            tgt=split_raw("tgt"),
        output:
            src=f"{RESULTS}/data/{{split}}.src",
            tgt=f"{RESULTS}/data/{{split}}.tgt",
            manifest=f"{RESULTS}/data/{{split}}.manifest.json",
        params:
            config=RESOLVED_CONFIG,
            settings=lambda wildcards: job_params("clean", wildcards),
            raw_dir=f"{RESULTS}/raw",
            out_dir=lambda wildcards, output: os.path.dirname(output.src),
        conda:
            "../../envs/attnrepro.yaml"
        log:
            f"{RESULTS}/logs/clean_{{split}}.log",
        shell:
            "attnrepro clean --config {params.config:q} --split {wildcards.split:q} --raw-dir {params.raw_dir:q}"
            " --out-dir {params.out_dir:q} > {log:q} 2>&1"
