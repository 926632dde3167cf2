import os
import re

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def read_version():
    """The version lives in keras_bert/version.py alone (read, not imported:
    importing the package here would need its dependencies at build time)."""
    with open(os.path.join(HERE, "keras_bert", "version.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


setup(
    # The distribution name: "keras-bert" on PyPI is an unrelated project (same
    # import name, keras_bert); see the README's Install section.
    name="keras3-bert",
    version=read_version(),
    description="BERT (Devlin et al., 2018) for TensorFlow and Keras 3: in-graph WordPiece, "
    "pretraining data, MLM+NSP pretraining, fine-tuning and SavedModel export.",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["keras_bert", "keras_bert.*"]),
    license="Apache-2.0",
    # What the commands read at run time: Unicode tables, the shipped vocabulary
    # and the quickstart's corpus (keras_bert/assets/README.md); py.typed: PEP 561.
    package_data={
        "keras_bert": ["py.typed"],
        "keras_bert.text": ["unicode_classes.json"],
        "keras_bert.assets": ["README.md", "*.txt", "austen/*.txt"],
    },
    python_requires=">=3.10",
    install_requires=[
        "tensorflow~=2.20.0",
        "tensorflow-text~=2.20.0",
        "keras>=3.15,<3.16",  # the tested minor: tests/test_keras_internals.py
        "tensorflow-datasets",
        "safetensors",
        "numpy",
        "pyyaml",  # recipes (YAML or JSON config files)
    ],
    extras_require={
        # tf-models-official is the independent reference (Keras 2): tests and benchmarks only.
        # tensorflow-serving-api: request protos for the export tests (pinned to
        # TensorFlow's minor version: a newer one pulls a newer TensorFlow).
        # ruff: the lint CI runs (settings in pyproject.toml; the same rev in
        # .pre-commit-config.yaml).
        # hypothesis: the fuzzer (tests/fuzz), pinned: its strategies' draws change between
        # releases, and the fast profile's fixed examples should not.
        "test": [
            "pytest",
            "pytest-xdist",  # run.py's tests: one worker per core
            "import-linter",
            "tf-models-official==2.20.0",
            "seqeval",
            "tensorflow-serving-api~=2.20.0",
            "ruff==0.17.6",
            "hypothesis==6.170.15",
        ],
        # The peers of benchmarks/ that run beside TensorFlow (keras-hub's BertMaskedLM and
        # classifier; Model Garden is in "test"; HuggingFace tokenizers for serving_latency.py /
        # tokenizer.py). The PyTorch peers have an environment of their own:
        # benchmarks/requirements-peers.txt.
        "bench": ["keras-hub", "tf-models-official==2.20.0", "tokenizers"],
        # mypy on the public API in CI (pyproject.toml's [tool.mypy]); run.py's tests install it.
        "lint": ["mypy==2.4.1"],
        # The documentation site (mkdocs.yml): `mkdocs build --strict` in CI. Pinned: the
        # strict build fails on warnings, and a new release may add some.
        "docs": [
            "mkdocs==1.6.1",
            "mkdocs-material==9.8.2",
            "mkdocstrings[python]==1.0.8",
            "mkdocstrings-python==2.0.11",
        ],
        # create-pretraining-data --runner: Apache Beam (Dataflow, Flink, Spark); its
        # tfrecord extra and google-crc32c checksum the records (fast, in C).
        "beam": ["apache-beam[tfrecord]>=2.77", "google-crc32c"],
    },
    entry_points={"console_scripts": ["keras-bert=keras_bert.cli:main"]},
)
