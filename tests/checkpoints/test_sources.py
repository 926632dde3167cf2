"""`resolve` and `BertEncoder.from_pretrained` on every source kind, from the real
MiniLM weights: the same encoder outputs from each, the casing each states, and
the commands' use of it."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, BertConfig, BertEncoder, BertTokenizer, checkpoints, cli
from keras_bert.checkpoints import Casing
from keras_bert.export import export_model_dir
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.training import finetuning
from keras_bert.training.pretraining import export_tf1

SENTENCES = ["Emma Woodhouse, handsome, clever, and rich.", "The film is charming."]


def link_folder(source, target, skip=()):
    """A copy of a folder whose files are links to the original's."""
    os.makedirs(target)
    for name in os.listdir(source):
        if name not in skip and os.path.isfile(os.path.join(source, name)):
            os.symlink(os.path.join(source, name), os.path.join(target, name))
    return str(target)


@pytest.fixture(scope="module")
def sources(minilm_path, tmp_path_factory):
    """Path of each source kind, all holding MiniLM's encoder."""
    root = tmp_path_factory.mktemp("sources")
    vocab = os.path.join(minilm_path, "vocab.txt")
    paths = {"huggingface": minilm_path}
    # The same weights, with tokenizer_config.json saying cased.
    paths["huggingface_cased"] = link_folder(
        minilm_path, root / "hf_cased", skip=("tokenizer_config.json",)
    )
    (root / "hf_cased" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    encoder = BertEncoder.from_pretrained(minilm_path)
    # An original folder, named as Google names its releases.
    tf1 = root / "uncased_L-6_H-384_A-12"
    export_tf1(BertPretrainer(encoder), str(tf1))
    shutil.copyfile(vocab, tf1 / "vocab.txt")
    paths["tf1_folder"] = str(tf1)
    paths["tf1_prefix"] = str(tf1 / "bert_model.ckpt")
    # Google's zips have no `checkpoint` index file.
    paths["tf1_release"] = link_folder(
        tf1, root / "release" / "uncased_L-6_H-384_A-12", skip=("checkpoint",)
    )
    # A `keras-bert pretrain` model_dir: export/ holds the original layout, no vocabulary.
    export_tf1(BertPretrainer(encoder), str(root / "run" / "export"))
    paths["pretrain_model_dir"] = str(root / "run")
    os.makedirs(root / "keras")
    encoder.save(str(root / "keras" / "encoder.keras"))
    paths["keras"] = str(root / "keras" / "encoder.keras")
    # A `keras-bert finetune` output, as save_finetuned writes one.
    finetuned = root / "finetuned"
    os.makedirs(finetuned)
    BertClassifier(encoder, 2).save(str(finetuned / "model.keras"))
    shutil.copyfile(vocab, finetuned / "vocab.txt")
    (finetuned / "finetune_config.json").write_text(
        json.dumps({"task": "classify", "lowercase": True, "label_names": ["neg", "pos"]})
    )
    paths["finetune_output"] = str(finetuned)
    return paths


EXPECTED = {
    # name: (kind, has its own vocabulary, casing)
    "huggingface": ("huggingface", True, Casing(True, "tokenizer_config.json do_lower_case true")),
    "huggingface_cased": (
        "huggingface",
        True,
        Casing(False, "tokenizer_config.json do_lower_case false"),
    ),
    "tf1_folder": ("tf1", True, Casing(True, "TF1 folder name uncased_L-6_H-384_A-12")),
    "tf1_prefix": ("tf1", True, Casing(True, "TF1 folder name uncased_L-6_H-384_A-12")),
    "tf1_release": ("tf1", True, Casing(True, "TF1 folder name uncased_L-6_H-384_A-12")),
    "pretrain_model_dir": ("tf1", False, None),
    "keras": ("keras", False, None),
    "finetune_output": (
        "finetune_output",
        True,
        Casing(True, "finetune_config.json lowercase true"),
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_resolve_reads_kind_config_vocabulary_and_casing(sources, name, minilm_path):
    source = checkpoints.resolve(sources[name])
    kind, has_vocab, casing = EXPECTED[name]
    assert source.kind == kind
    assert source.config == BertConfig.from_json_file(os.path.join(minilm_path, "config.json"))
    assert (source.vocab_file is not None) == has_vocab
    assert source.casing == casing


@pytest.fixture(scope="module")
def packed(real_vocab_file):
    tokenizer = BertTokenizer(real_vocab_file)
    return {k: v.numpy() for k, v in tokenizer.pack(SENTENCES, seq_length=24).items()}


@pytest.mark.slow  # nine MiniLM encoders (~20 s); .keras and TF1 loads run fast in test_finetuning
def test_every_source_gives_the_same_encoder(sources, packed):
    reference = BertEncoder.from_pretrained(sources["huggingface"])(packed)
    for name in sorted(EXPECTED):
        outputs = BertEncoder.from_pretrained(sources[name])(packed)
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(outputs[key], reference[key], atol=1e-6, err_msg=name)
    half = BertEncoder.from_pretrained(sources["keras"], dtype="mixed_bfloat16")
    assert half.pooler.dtype_policy.name == "mixed_bfloat16"


def test_the_source_states_the_casing_before_the_vocabulary(sources, real_vocab_file):
    cased = checkpoints.resolve(sources["huggingface_cased"])
    # Its vocabulary alone would say uncased: tokenizer_config.json wins.
    assert checkpoints.casing_from_vocabulary(cased.vocab_file).lowercase is True
    assert checkpoints.tokenizer_settings(cased) == (cased.vocab_file, False)
    # Without a stated casing, the vocabulary in use decides.
    run = checkpoints.resolve(sources["pretrain_model_dir"])
    assert checkpoints.tokenizer_settings(run, real_vocab_file) == (real_vocab_file, True)
    with pytest.raises(
        ValueError,
        match=r"lowercase=True \(uncased\) contradicts .*hf_cased, "
        r"which is cased \(lowercase=False: "
        r"tokenizer_config.json do_lower_case false\)",
    ):
        checkpoints.tokenizer_settings(cased, lowercase=True)


def test_commands_use_the_detected_casing(sources, capsys, tmp_path):
    tokenizer, _, config = finetuning.resolve_tokenizer(
        finetuning.FinetuneConfig(task="classify", init_checkpoint=sources["huggingface_cased"])
    )
    assert tokenizer.lowercase is False and config.lowercase is False
    with pytest.raises(ValueError, match="lowercase=False .cased. contradicts .*uncased_L-6"):
        finetuning.resolve_tokenizer(
            finetuning.FinetuneConfig(
                task="classify", init_checkpoint=sources["tf1_prefix"], lowercase=False
            )
        )
    with pytest.raises(
        ValueError,
        match="contradicts .*finetuned, which is uncased .*finetune_config.json lowercase true",
    ):
        finetuning.evaluate(sources["finetune_output"], "unused.tsv", lowercase=False)
    with pytest.raises(ValueError, match="contradicts .*finetuned"):
        export_model_dir(sources["finetune_output"], str(tmp_path / "m" / "1"), lowercase=False)
    assert not os.path.exists(tmp_path / "m")
    # encode: a cased model keeps "Emma", which the uncased vocabulary lacks.
    assert cli.main(["encode", "Emma", "--init-checkpoint", sources["huggingface"]]) == 0
    assert "pieces: emma" in capsys.readouterr().out
    assert cli.main(["encode", "Emma", "--init-checkpoint", sources["huggingface_cased"]]) == 0
    assert "pieces: [UNK]" in capsys.readouterr().out
    assert (
        cli.main(["encode", "Emma", "--init-checkpoint", sources["huggingface_cased"], "--uncased"])
        == 2
    )
    assert "contradicts" in capsys.readouterr().err


BAD_SOURCES = [
    # (files written, the path given, error, message: a regular expression)
    (
        {"notes.txt": b"text"},
        "",
        FileNotFoundError,
        "not a checkpoint folder; looked for a HuggingFace folder .config.json",
    ),
    (
        {"notes.txt": b"text"},
        "notes.txt",
        ValueError,
        "notes.txt: not a checkpoint; give a HuggingFace folder",
    ),
    ({}, "absent", FileNotFoundError, "not found: .*absent"),
    (
        {"tf1/bert_config.json": b"{}"},
        "tf1",
        FileNotFoundError,
        "tf1: has bert_config.json but no TF1 checkpoint",
    ),
    (
        {"other/bert_model.ckpt.index": b""},
        "other/bert_model.ckpt",
        FileNotFoundError,
        "no bert_config.json beside it",
    ),
    (
        {"broken.keras": b"not a zip"},
        "broken.keras",
        ValueError,
        "broken.keras: not a Keras .keras file",
    ),
    (
        {"unfinished/finetune_config.json": b"{}"},
        "unfinished",
        FileNotFoundError,
        "has finetune_config.json but no model.keras",
    ),
    (
        {"run/finetune_config.json": b'{"task": "cl'},
        "run",
        ValueError,
        "finetune_config.json: not valid JSON",
    ),
]


@pytest.mark.parametrize("files, given, error, message", BAD_SOURCES)
def test_unknown_layouts_name_the_path_and_what_was_looked_for(
    tmp_path, files, given, error, message
):
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    with pytest.raises(error, match=message):
        checkpoints.resolve(str(tmp_path / given))


def test_a_keras_file_without_an_encoder_is_named(tmp_path):
    keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)]).save(str(tmp_path / "x.keras"))
    with pytest.raises(ValueError, match="x.keras: holds a Sequential, neither a BertEncoder"):
        checkpoints.resolve(str(tmp_path / "x.keras"))
