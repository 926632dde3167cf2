"""SavedModel export: layout, assets, signatures, and the same answers as the
Keras model on ids from `keras_bert.BertTokenizer`.

References are independent where one exists: seqeval's chunking for entities,
Model Garden's SQuAD feature writer and post-processing (`squad_lib`, a copy of
google-research/bert's run_squad.py) for question answering.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import (
    CLASS_NAMES,
    SEQ_LENGTH,
    SIGNATURES,
    SQUAD_OPTIONS,
    TAG_NAMES,
    call,
    decode,
    export_log,
    export_metadata,
    export_path,
    keras_features,
    keras_model,
    kinds,
    normalized_mean,
    signature_defs,
    tokenizer,
)

from keras_bert.datasets.squad import answer_text

SENTENCES = [
    "It is a truth universally acknowledged.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home!",
    "naïve café in Zürich — 東京 ok",
    "short",
]
PAIRS = [
    "A second sentence.",
    "Another one, a bit longer than the first of them all.",
    "x",
    "Élan vital",
]


# === Layout and assets ===


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier"))
def test_layout_assets_and_metadata(kind):
    path = export_path(kind)
    assert os.path.basename(path) == "1"  # EXPORT_DIR/NAME/VERSION
    assert sorted(os.listdir(path)) == [
        "assets",
        "assets.extra",
        "fingerprint.pb",
        "saved_model.pb",
        "variables",
    ]
    assert os.listdir(os.path.join(path, "assets.extra")) == ["README.txt"]
    with open(os.path.join(path, "assets", "vocab.txt"), encoding="utf-8") as f:
        assert f.read().split("\n")[:-1] == tokenizer().vocab
    metadata = export_metadata(kind)
    assert metadata["seq_length"] == SEQ_LENGTH[kind]
    assert metadata["lowercase"] is True
    if kind == "classifier":
        assert metadata["label_names"] == CLASS_NAMES
        with open(os.path.join(path, "assets", "labels.txt"), encoding="utf-8") as f:
            assert f.read().splitlines() == CLASS_NAMES
    assert set(signature_defs(kind)) >= SIGNATURES
    assert not os.path.exists(path + ".partial")


@pytest.mark.parametrize("kind", kinds("embeddings", "classifier", "tagger", "squad"))
def test_readme_says_how_to_load_and_lists_the_signatures(kind):
    """Beside the graph, for whoever finds the folder: loading needs
    `import tensorflow_text` first, and each signature's inputs in order (as
    `served.NAME(...)` and Keras' TFSMLayer take them)."""
    with open(os.path.join(export_path(kind), "assets.extra", "README.txt"), encoding="utf-8") as f:
        readme = f.read()
    assert "    import tensorflow_text  # registers the tokenizer's ops\n" in readme
    assert "Op type not registered 'NormalizeUTF8'" in readme
    assert "TFSMLayer(" in readme and 'call_endpoint="serving_default"' in readme
    text_inputs = {
        "embeddings": "text",
        "classifier": "text, text_pair",
        "tagger": "text",
        "squad": "question, context",
    }[kind]
    listed = [
        line.strip().split(" -> ") for line in readme.splitlines() if line.startswith("  serv")
    ]
    assert [signature for signature, _ in listed] == [
        f"serving_default({text_inputs})",
        "serve_examples(inputs)",
        "serve_ids(input_ids, input_mask, segment_ids)",
    ]
    defs = signature_defs(kind)
    for signature, outputs in listed:
        name = signature.split("(")[0]
        assert outputs.split(", ") == sorted(defs[name].outputs), name


def test_export_progress_names_the_import_loading_needs():
    assert "load it after `import tensorflow_text`" in export_log("classifier")


def test_load_instructions_name_the_path_and_the_import():
    from keras_bert.export.saved_model import load_instructions

    text = load_instructions("models/sentiment/1")
    assert "import tensorflow_text  # registers the tokenizer's ops" in text
    assert "tf.saved_model.load('models/sentiment/1')" in text
    assert "TFSMLayer('models/sentiment/1', call_endpoint=\"serving_default\")" in text


def test_existing_version_is_not_overwritten_without_asking(tmp_path):
    from keras_bert.export import export_saved_model

    target = tmp_path / "model" / "1"
    target.mkdir(parents=True)
    with pytest.raises(FileExistsError, match="overwrite"):
        export_saved_model(keras_model("embeddings"), tokenizer(), str(target))


def test_cli_needs_a_numeric_version_folder(tmp_path, capsys):
    from keras_bert.cli import main

    assert main(["export", "--model-dir", str(tmp_path), "--output", str(tmp_path / "x")]) == 2
    assert "integer version" in capsys.readouterr().err


def test_signature_inputs_and_outputs():
    defs = signature_defs("classifier")
    default = defs["serving_default"]
    assert set(default.inputs) == {"text", "text_pair"}
    assert set(default.outputs) == {"probabilities", "logits", "label"}
    # TensorFlow Serving fills a left-out `text_pair` with this default: no pairs.
    assert tf.make_ndarray(default.defaults["text_pair"]).shape == (0,)
    assert set(defs["serve_examples"].inputs) == {"inputs"}
    assert set(defs["serve_examples"].outputs) == {"classes", "scores"}
    assert set(defs["serve_ids"].inputs) == {"input_ids", "input_mask", "segment_ids"}


@pytest.mark.slow
def test_regressor_signature_outputs():
    regressor = signature_defs("regressor")
    assert set(regressor["serving_default"].outputs) == {"score"}
    assert set(regressor["serve_examples"].outputs) == {"outputs"}


@pytest.mark.slow
def test_saved_model_cli_lists_the_signatures():
    from export_helpers import KINDS

    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    runs = {
        kind: subprocess.Popen(
            [cli, "show", "--dir", export_path(kind), "--all"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for kind in KINDS
    }
    for kind, run in runs.items():
        output, _ = run.communicate(timeout=300)
        assert run.returncode == 0, output
        for name in SIGNATURES:
            assert f"signature_def['{name}']" in output, (kind, output[-2000:])


# === Same answers as the Keras model ===


@pytest.mark.slow
def test_embeddings_match_keras():
    features = keras_features(SENTENCES, kind="embeddings")
    expected = normalized_mean(
        keras_model("embeddings")(features)["sequence_output"], features["input_mask"]
    )
    served = call("embeddings", text=SENTENCES)["embedding"]
    np.testing.assert_allclose(served, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)
    ids = call("embeddings", "serve_ids", **{k: v.numpy() for k, v in features.items()})
    np.testing.assert_allclose(ids["embedding"], expected, atol=1e-5)


@pytest.mark.parametrize("pairs", [None, PAIRS])
def test_classifier_matches_keras(pairs):
    logits = keras_model("classifier")(keras_features(SENTENCES, pairs)).numpy()
    inputs = {"text": SENTENCES} if pairs is None else {"text": SENTENCES, "text_pair": pairs}
    if pairs is None:  # Python callers pass the empty default TensorFlow Serving fills in
        inputs["text_pair"] = tf.constant([], tf.string)
    served = call("classifier", **inputs)
    np.testing.assert_allclose(served["logits"], logits, atol=1e-5)
    np.testing.assert_allclose(served["probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-5)
    assert list(decode(served["label"])) == [CLASS_NAMES[i] for i in logits.argmax(axis=1)]


def test_classifier_examples_and_ids_match_keras():
    pairs = [None, PAIRS[1], None, PAIRS[3]]  # per example: a pair or a single sentence
    examples = []
    for text, pair in zip(SENTENCES, pairs):
        feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
        if pair is not None:
            feature["text_pair"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[pair.encode()])
            )
        examples.append(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        )
    served = call("classifier", "serve_examples", inputs=examples)
    model = keras_model("classifier")
    for row, (text, pair) in enumerate(zip(SENTENCES, pairs)):
        expected = tf.nn.softmax(
            model(keras_features([text], None if pair is None else [pair]))
        ).numpy()[0]
        np.testing.assert_allclose(served["scores"][row], expected, atol=1e-5)
    assert decode(served["classes"]).tolist() == [CLASS_NAMES] * len(SENTENCES)
    features = keras_features(SENTENCES, PAIRS)
    ids = call("classifier", "serve_ids", **{k: v.numpy() for k, v in features.items()})
    np.testing.assert_allclose(ids["logits"], model(features).numpy(), atol=1e-5)


@pytest.mark.slow
def test_regressor_matches_keras():
    expected = keras_model("regressor")(keras_features(SENTENCES, PAIRS, "regressor")).numpy()
    served = call("regressor", text=SENTENCES, text_pair=PAIRS)
    np.testing.assert_allclose(served["score"], expected[:, 0], atol=1e-5)


# === Tagger ===

TAGGED = [
    "John Smith flew from New York to Paris on Monday .",
    "Élodie  Dupont\tvisited   東京 and Zürich",
    "a b c d e f g h i j k l m n o p q r s t",  # more words than pieces fit
    "no",
]


def python_tags(text):
    """Words (str.split()), the Keras model's tag on each word's first piece,
    and the words' character spans: the reference for the tagger signature."""
    words = text.split()
    pieces = [tokenizer().tokenize(tf.constant([w])).to_list()[0] for w in words]
    ids, firsts, packing = [tokenizer().cls_id], [], True
    for word_pieces in pieces:
        # Words in order while they fit before [SEP]; the first that does not ends it.
        packing = packing and len(ids) + len(word_pieces) <= SEQ_LENGTH["tagger"] - 1
        firsts.append(len(ids) if packing and word_pieces else -1)
        if packing:
            ids.extend(word_pieces)
    ids.append(tokenizer().sep_id)
    length = SEQ_LENGTH["tagger"]
    features = {
        "input_ids": np.array([ids + [0] * (length - len(ids))], np.int32),
        "input_mask": np.array([[1] * len(ids) + [0] * (length - len(ids))], np.int32),
        "segment_ids": np.zeros((1, length), np.int32),
    }
    logits = keras_model("tagger")(features).numpy()[0]
    tags = [TAG_NAMES[logits[f].argmax()] if f >= 0 else "O" for f in firsts]
    spans, cursor = [], 0
    for word in words:
        start = text.index(word, cursor)
        spans.append((start, start + len(word)))
        cursor = start + len(word)
    return words, tags, spans


@pytest.mark.slow
def test_tagger_matches_keras_and_seqeval():
    from seqeval.metrics.sequence_labeling import get_entities

    served = call("tagger", text=TAGGED)
    for row, text in enumerate(TAGGED):
        words, tags, spans = python_tags(text)
        count = served["num_tokens"][row]
        assert decode(served["tokens"][row, :count]).tolist() == words
        assert decode(served["tags"][row, :count]).tolist() == tags
        assert (
            list(zip(served["token_start"][row, :count], served["token_end"][row, :count])) == spans
        )
        expected = [
            (kind, spans[first][0], spans[last][1]) for kind, first, last in get_entities(tags)
        ]
        n = served["num_entities"][row]
        got = list(
            zip(
                decode(served["entity_type"][row, :n]),
                served["entity_start"][row, :n],
                served["entity_end"][row, :n],
            )
        )
        assert got == expected
        assert decode(served["entity_text"][row, :n]).tolist() == [
            text[start:end] for _, start, end in expected
        ]
    assert served["tags"][3, 1:].tolist() == [b""] * (served["tags"].shape[1] - 1)  # padding


@pytest.mark.slow
def test_tagger_ids_signature_tags_every_piece():
    features = keras_features(TAGGED, kind="tagger")
    logits = keras_model("tagger")(features).numpy()
    served = call("tagger", "serve_ids", **{k: v.numpy() for k, v in features.items()})
    # Every real piece; the padding is packed out of the encoder (remove_padding,
    # the default) and its logits are 0.
    real = features["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(served["logits"][real], logits[real], atol=1e-5)
    assert not served["logits"][~real].any()
    assert (
        decode(served["tags"])[real].tolist()
        == np.array(TAG_NAMES)[logits.argmax(-1)][real].tolist()
    )


# === Question answering ===

CONTEXTS = [
    "The Normans were the people who in the 10th and 11th centuries gave their name to "
    "Normandy, a region in France. They were descended from Norse raiders and pirates from "
    "Denmark, Iceland and Norway who, under their leader Rollo, agreed to swear fealty to "
    "King Charles III of West Francia. Through generations of assimilation and mixing with "
    "the native Frankish and Roman-Gaulish populations, their descendants would gradually "
    "merge with the Carolingian-based cultures of West Francia.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
    "disposition, seemed to unite some of the best blessings of existence.",
    "Zürich is the largest city in Switzerland.",
]
QUESTIONS = [
    "In what country is Normandy located?",
    "Who was clever and rich?",
    "What is the largest city of Switzerland, by population and area?",
]


def model_garden_squad(questions, contexts):
    """Model Garden's run_squad logic (windows, max context, n-best, null score)
    on the Keras model's logits: (predictions, n-best lists, null score diffs)."""
    import collections

    from official.nlp.data import squad_lib
    from official.nlp.tools import tokenization

    full_tokenizer = tokenization.FullTokenizer(tokenizer().vocab_file, do_lower_case=True)
    examples = [
        squad_lib.SquadExample(qas_id=str(i), question_text=q, doc_tokens=c.split())
        for i, (q, c) in enumerate(zip(questions, contexts))
    ]
    features = []
    squad_lib.convert_examples_to_features(
        examples,
        full_tokenizer,
        SEQ_LENGTH["squad"],
        SQUAD_OPTIONS["doc_stride"],
        SQUAD_OPTIONS["max_query_length"],
        is_training=False,
        batch_size=1,
        output_fn=lambda feature, is_padding: features.append(feature),
    )
    arrays = {
        name: np.array([getattr(f, name) for f in features], np.int32)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    outputs = {name: value.numpy() for name, value in keras_model("squad")(arrays).items()}
    # Ours ranks the n-best among [CLS] and the context only (keras_bert.datasets.squad);
    # run_squad ranks every position, and this random model scores padding as high as
    # the context: pushed below, run_squad's n-best is ours.
    for row, feature in enumerate(features):
        outside = np.setdiff1d(np.arange(SEQ_LENGTH["squad"]), [0, *feature.token_to_orig_map])
        for name in ("start_logits", "end_logits"):
            outputs[name][row, outside] -= 1e4
    result = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
    results = [
        result(f.unique_id, [float(x) for x in s], [float(x) for x in e])
        for f, s, e in zip(features, outputs["start_logits"], outputs["end_logits"])
    ]
    return squad_lib.postprocess_output(
        examples,
        features,
        results,
        n_best_size=SQUAD_OPTIONS["n_best_size"],
        max_answer_length=SQUAD_OPTIONS["max_answer_length"],
        do_lower_case=True,
        version_2_with_negative=True,
        null_score_diff_threshold=0.0,
    )


@pytest.mark.slow
def test_squad_matches_model_garden_run_squad():
    predictions, nbest, score_diffs = model_garden_squad(QUESTIONS, CONTEXTS)
    served = call("squad", question=QUESTIONS, context=CONTEXTS)
    # With the n-best among [CLS] and the context, this random model answers every
    # question: null-score wins are compared with squad_lib in test_squad.py
    # (test_postprocess_matches_squad_lib, synthetic_v2), no span at all in
    # test_export_bad_input.py (test_empty_text_has_no_words_and_no_answer).
    assert served["has_answer"].all()
    assert len(tokenizer().tokenize(tf.constant(CONTEXTS[:1])).to_list()[0]) > 3 * 16  # windows
    for row, context in enumerate(CONTEXTS):
        best = next((entry for entry in nbest[str(row)] if entry["text"]), None)
        if best is None:  # no span qualifies (run_squad then predicts "")
            assert served["score"][row] == -np.inf and not served["has_answer"][row]
            continue
        np.testing.assert_allclose(
            served["score"][row], best["start_logit"] + best["end_logit"], atol=1e-5
        )
        np.testing.assert_allclose(served["null_score_diff"][row], score_diffs[str(row)], atol=1e-5)
        assert bool(served["has_answer"][row]) == (predictions[str(row)] != "")
        answer = served["answer"][row].decode("utf-8")
        if served["has_answer"][row]:
            assert answer == predictions[str(row)]
            assert answer_text(context[served["start"][row] : served["end"][row]]) == answer
        else:
            assert (answer, served["start"][row], served["end"][row]) == ("", -1, -1)


@pytest.mark.slow
def test_squad_ids_signature_returns_the_logits():
    features = keras_features(QUESTIONS, CONTEXTS, kind="squad")
    outputs = keras_model("squad")(features)
    served = call("squad", "serve_ids", **{k: v.numpy() for k, v in features.items()})
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(served[name], outputs[name].numpy(), atol=1e-5)


@pytest.mark.slow
def test_export_metadata_of_squad():
    metadata = export_metadata("squad")
    assert {k: metadata[k] for k in SQUAD_OPTIONS} == SQUAD_OPTIONS
    assert json.dumps(metadata)
