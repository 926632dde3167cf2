"""Task models that take raw text: strings in `fit` train exactly as the same
ids do, `predict` on strings answers as the exported SavedModel does, and a
`.keras` file keeps taking strings."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from task_models import NAMES, assert_same_weights, classifier, reviews, tiny_encoder

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.assets import VOCAB_FILE
from keras_bert.datasets import squad
from keras_bert.datasets.tagging import TaggedSentences, encode_tagged, read_conll
from keras_bert.export import export_saved_model
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.feature_extractor import BertFeatureExtractor
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor


def test_strings_train_as_their_ids_do(datasets_dir):
    texts, labels = reviews(datasets_dir)
    by_text = classifier()
    by_text.compile(optimizer=keras.optimizers.Adam(1e-3))
    by_text.fit(texts, labels, batch_size=4, epochs=2, shuffle=False, verbose=0)

    by_ids = classifier(preprocessor=False)
    by_ids.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    features = BertTokenizer(VOCAB_FILE).pack(tf.constant(texts), seq_length=32)
    by_ids.fit(
        {k: v.numpy() for k, v in features.items()},
        np.asarray([NAMES.index(label) for label in labels]),
        batch_size=4,
        epochs=2,
        shuffle=False,
        verbose=0,
    )
    assert_same_weights(by_text, by_ids)

    # A tf.data pipeline of (text, label name) batches takes the same steps.
    by_dataset = classifier()
    by_dataset.compile(optimizer=keras.optimizers.Adam(1e-3))
    by_dataset.fit(
        tf.data.Dataset.from_tensor_slices((texts, labels)).batch(4), epochs=2, verbose=0
    )
    assert_same_weights(by_dataset, by_ids)
    assert by_text.evaluate(texts, labels, verbose=0, return_dict=True)[
        "accuracy"
    ] == pytest.approx(
        by_ids.evaluate(
            {k: v.numpy() for k, v in features.items()},
            np.asarray([NAMES.index(x) for x in labels]),
            verbose=0,
            return_dict=True,
        )["accuracy"]
    )


def test_pairs_validation_data_and_regression(datasets_dir):
    texts, _ = reviews(datasets_dir, 8)
    pairs = list(reversed(texts))
    model = BertClassifier(
        tiny_encoder(), 1, preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=32)
    )
    model.compile()
    scores = np.linspace(0, 5, 8).astype("float32")
    history = model.fit(
        {"text": texts, "text_pair": pairs},
        scores,
        epochs=1,
        verbose=0,
        validation_data=((texts, pairs), scores),
    )
    assert set(history.history) == {"loss", "val_loss"}
    predicted = model.predict((texts, pairs))
    assert predicted.shape == (8, 1)  # as for ids: one output per example
    features = BertTokenizer(VOCAB_FILE).pack(tf.constant(texts), tf.constant(pairs), 32)
    np.testing.assert_allclose(predicted, model(features).numpy(), atol=1e-5)
    np.testing.assert_allclose(model.classify((texts, pairs))["score"], predicted[:, 0], atol=1e-5)


def test_unknown_label_names_fail_clearly(datasets_dir):
    texts, _ = reviews(datasets_dir, 2)
    model = classifier()
    model.compile()
    with pytest.raises(ValueError, match=r"label\(s\) \['good'\] not among"):
        model.fit(texts, ["good", "rotten"], verbose=0)
    ids_only = classifier(preprocessor=False)
    with pytest.raises(ValueError, match="has no preprocessor"):
        ids_only.predict_labels(texts)


def test_a_reloaded_keras_file_is_compiled_and_fits_strings(tmp_path, datasets_dir):
    """(Its answers, config and exported answers: test_tasks.py's harness.)"""
    texts, _ = reviews(datasets_dir, 6)
    model = classifier(seed=3)
    model.compile()
    model.save(tmp_path / "model.keras")
    restored = keras.models.load_model(tmp_path / "model.keras")
    assert isinstance(restored.preprocessor, BertPreprocessor) and restored.compiled
    before = restored.get_weights()
    restored.fit(texts, ["fresh"] * 6, epochs=1, verbose=0)  # compiled on load, takes strings
    assert any(np.any(a != b) for a, b in zip(restored.get_weights(), before))


def test_feature_extractor_on_text():
    encoder = tiny_encoder(num_hidden_layers=2)  # two top layers, concatenated
    model = BertFeatureExtractor(
        encoder, num_top_layers=2, preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=16)
    )
    out = model.predict(["a sentence", "another one"])
    features = BertTokenizer(VOCAB_FILE).pack(
        tf.constant(["a sentence", "another one"]), seq_length=16
    )
    np.testing.assert_allclose(
        out["sentence_embedding"], model(features)["sentence_embedding"].numpy(), atol=1e-6
    )
    assert out["token_features"].shape == (2, 16, 64)
    # One output, when one is asked for; then both again.
    embeddings = model.predict(["a sentence", "another one"], output="sentence_embedding")
    np.testing.assert_allclose(embeddings, out["sentence_embedding"], atol=1e-6)
    tokens = model.predict(["a sentence", "another one"], output="token_features")
    np.testing.assert_allclose(tokens, out["token_features"], atol=1e-6)
    assert set(model.predict(["a sentence"])) == {"sentence_embedding", "token_features"}
    with pytest.raises(ValueError, match="output must be one of"):
        model.predict(["a sentence"], output="pooled")


# === Tagging ===


def wnut(datasets_dir, count=12):
    sentences = read_conll(os.path.join(datasets_dir, "wnut16", "dev.conll"))
    return sentences.words[:count], sentences.tags[:count]


def tag_names(datasets_dir):
    sentences = read_conll(os.path.join(datasets_dir, "wnut16", "train.conll"))
    return sorted({tag for tags in sentences.tags for tag in tags})


def test_tagging_alignment_in_graph_equals_the_training_conversion(datasets_dir):
    words, tags = wnut(datasets_dir)
    names = tag_names(datasets_dir)
    model = BertTokenClassifier(
        tiny_encoder(),
        len(names),
        label_names=names,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )
    expected, labels, weights, _ = encode_tagged(
        BertTokenizer(VOCAB_FILE), TaggedSentences(words, tags), names, 24
    )
    texts = [" ".join(w) for w in words]
    features, targets, got_weights = model.map_text_batch(
        tf.constant(texts), tf.ragged.constant(tags)
    )
    for name in expected:
        np.testing.assert_array_equal(features[name].numpy(), expected[name], err_msg=name)
    np.testing.assert_array_equal(targets.numpy(), np.maximum(labels, 0))
    np.testing.assert_array_equal(got_weights.numpy(), weights)
    # Word lists and whitespace texts give the same in-memory features.
    from_words = model.encode_text(words, tags)
    from_texts = model.encode_text(texts, tags)
    for a, b in zip(from_words, from_texts):
        keras.tree.map_structure(np.testing.assert_array_equal, a, b)
    model.compile()
    model.fit(words, tags, epochs=1, verbose=0)  # word lists straight into fit
    with pytest.raises(ValueError, match="text 0: .* words but .* tags"):
        model.encode_text(texts[:1], [tags[0][:-1]])


@pytest.mark.slow
def test_tagger_and_span_extractor_predict_equal_their_exports(tmp_path, datasets_dir):
    words, tags = wnut(datasets_dir, 8)
    names = tag_names(datasets_dir)
    texts = [" ".join(w) for w in words]
    tagger = BertTokenClassifier(
        tiny_encoder(1),
        len(names),
        label_names=names,
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )
    tagger.compile(optimizer=keras.optimizers.Adam(1e-2))
    tagger.fit(texts, tags, epochs=3, verbose=0)  # some entities to compare
    tagger.get_layer("tagger_output").kernel.assign(tagger.get_layer("tagger_output").kernel * 5)
    served = tf.saved_model.load(export_saved_model(tagger, str(tmp_path / "tagger" / "1")))
    out = served.signatures["serving_default"](text=tf.constant(texts))
    for row, answer in enumerate(tagger.tag(texts)):
        n = int(out["num_tokens"][row])
        assert answer["tags"] == [t.decode() for t in out["tags"][row, :n].numpy()]
        m = int(out["num_entities"][row])
        assert [e["text"] for e in answer["entities"]] == [
            t.decode() for t in out["entity_text"][row, :m].numpy()
        ]
        assert [e["start"] for e in answer["entities"]] == list(out["entity_start"][row, :m])

    with open(os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")) as f:
        data = json.load(f)["data"]
    examples = squad.read_squad_examples(data, is_training=False)[:6]
    questions = [e.question_text for e in examples]
    contexts = [e.context for e in examples]
    reader = BertSpanExtractor(
        tiny_encoder(2), preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=96)
    )
    head = reader.get_layer("span_head").dense
    head.kernel.assign(head.kernel * 50)
    options = {"version_2_with_negative": True, "doc_stride": 32, "max_query_length": 24}
    served = tf.saved_model.load(
        export_saved_model(reader, str(tmp_path / "squad" / "1"), **options)
    )
    out = served.signatures["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts)
    )
    answers = reader.predict_answers({"question": questions, "context": contexts}, **options)
    assert [a["answer"] for a in answers] == [x.decode() for x in out["answer"].numpy()]
    assert [a["start"] for a in answers] == list(out["start"].numpy())
    np.testing.assert_allclose(
        [a["null_score_diff"] for a in answers], out["null_score_diff"].numpy(), atol=1e-5
    )


def test_span_extractor_trains_on_squad_fields(datasets_dir):
    with open(os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")) as f:
        data = json.load(f)["data"]
    paragraph = data[0]["paragraphs"][0]
    qas = paragraph["qas"][:4]
    x = {"question": [qa["question"] for qa in qas], "context": [paragraph["context"]] * len(qas)}
    y = {
        "text": [qa["answers"][0]["text"] for qa in qas],
        "answer_start": [qa["answers"][0]["answer_start"] for qa in qas],
    }
    reader = BertSpanExtractor(
        tiny_encoder(), preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=128)
    )
    features, targets, _ = reader.encode_text(x, y)
    # The same windows and positions as run_squad's conversion of the same questions.
    expected = squad.feature_arrays(
        squad.convert_examples_to_features(
            squad.read_squad_examples(
                [{"paragraphs": [{"context": paragraph["context"], "qas": qas}]}], is_training=True
            ),
            BertTokenizer(VOCAB_FILE),
            128,
            is_training=True,
        )
    )
    np.testing.assert_array_equal(features["input_ids"], expected["input_ids"])
    np.testing.assert_array_equal(targets["start_logits"], expected["start_positions"])
    np.testing.assert_array_equal(targets["end_logits"], expected["end_positions"])
    reader.compile()
    history = reader.fit(x, y, epochs=2, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]
    with pytest.raises(ValueError, match="not on a tf.data.Dataset of text"):
        reader.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(2), verbose=0)


def test_windowed_classification_averages_its_windows_by_hand(datasets_dir):
    texts, _ = reviews(datasets_dir, 16)
    long_text = " ".join(texts)  # ~400 pieces
    model = classifier(seq_length=32)
    tokenizer = BertTokenizer(VOCAB_FILE)
    pieces = tokenizer.tokenize(tf.constant([long_text])).to_list()[0]
    assert len(pieces) > 200
    # run_squad's cut: 30 pieces a window, a window every 20 pieces until the end.
    windows, start = [], 0
    while True:
        windows.append(pieces[start : start + 30])
        if start + 30 >= len(pieces):
            break
        start += 20
    ids = np.zeros((len(windows), 32), np.int32)
    mask = np.zeros_like(ids)
    for row, window in enumerate(windows):
        ids[row, : len(window) + 2] = [tokenizer.cls_id, *window, tokenizer.sep_id]
        mask[row, : len(window) + 2] = 1
    by_hand = (
        model({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
        .numpy()
        .mean(axis=0)
    )
    short = "a short review"
    out = model.classify([long_text, short], window_stride=20)
    np.testing.assert_allclose(out["logits"][0], by_hand, atol=1e-5)
    # A text that fits is one window: the same as without windows.
    np.testing.assert_allclose(out["logits"][1], model.classify([short])["logits"][0], atol=1e-6)
    assert model.predict_labels([long_text], window_stride=20) == [NAMES[int(np.argmax(by_hand))]]


# === from_pretrained ===


def test_from_pretrained_reads_config_vocabulary_and_casing(minilm_path, tmp_path):
    model = BertClassifier.from_pretrained(minilm_path, num_classes=2, label_names=NAMES)
    assert model.encoder.config.num_hidden_layers == 6
    assert model.preprocessor.lowercase is True  # MiniLM's tokenizer_config.json
    with open(os.path.join(minilm_path, "vocab.txt"), encoding="utf-8") as f:
        assert model.preprocessor.vocabulary == f.read().splitlines()
    encoder = BertEncoder.from_pretrained(minilm_path)
    features = model.preprocessor(["Emma Woodhouse, handsome, clever, and rich"])
    np.testing.assert_allclose(
        model.encoder(features)["pooled_output"].numpy(),
        encoder(features)["pooled_output"].numpy(),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="lowercase"):
        BertClassifier.from_pretrained(minilm_path, num_classes=2, lowercase=False)

    tagger = BertTokenClassifier.from_pretrained(minilm_path, num_labels=3, seq_length=64)
    reader = BertSpanExtractor.from_pretrained(minilm_path)
    assert (tagger.preprocessor.seq_length, reader.preprocessor.seq_length) == (64, 384)

    # A .keras file of a task model comes back whole: head, labels, preprocessor
    # (a tiny one: the file is read the same at any size, and MiniLM's is 90 MB).
    tiny = BertClassifier(
        tiny_encoder(), 2, label_names=NAMES, preprocessor=BertPreprocessor(VOCAB_FILE, 16)
    )
    tiny.save(tmp_path / "classifier.keras")
    again = BertClassifier.from_pretrained(str(tmp_path / "classifier.keras"))
    texts = ["a fine film", "a dull one"]
    np.testing.assert_allclose(again.predict(texts), tiny.predict(texts), atol=1e-6)
    assert again.label_names == NAMES
    # ... and as an encoder for another task: a new head on the same encoder.
    other = BertTokenClassifier.from_pretrained(str(tmp_path / "classifier.keras"), num_labels=2)
    features = tiny.preprocessor(texts)
    np.testing.assert_allclose(
        other.encoder(features)["sequence_output"].numpy(),
        tiny.encoder(features)["sequence_output"].numpy(),
        atol=1e-6,
    )
    assert other.preprocessor.lowercase is True


def test_span_extractor_n_best_matches_the_original_postprocessing(datasets_dir):
    with open(os.path.join(datasets_dir, "squad_samples", "squad_v1_sample.json")) as f:
        data = json.load(f)["data"]
    examples = squad.read_squad_examples(data, is_training=False)
    tokenizer = BertTokenizer(VOCAB_FILE)
    reader = BertSpanExtractor(
        tiny_encoder(4), preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=96)
    )
    head = reader.get_layer("span_head").dense
    head.kernel.assign(head.kernel * 50)
    answers = reader.predict_answers(
        {"question": [e.question_text for e in examples], "context": [e.context for e in examples]},
        n_best=5,
        doc_stride=32,
        max_query_length=24,
    )
    # run_squad.py's Python post-processing of the same logits (keras_bert.datasets.squad).
    features = squad.convert_examples_to_features(
        examples, tokenizer, 96, doc_stride=32, max_query_length=24
    )
    arrays = squad.feature_arrays(features)
    logits = reader.predict(
        {k: arrays[k] for k in ("input_ids", "input_mask", "segment_ids")}, verbose=0
    )
    _, _, nbest = squad.postprocess(
        examples,
        features,
        logits["start_logits"],
        logits["end_logits"],
        n_best_size=20,
        max_answer_length=30,
    )
    for example, answer in zip(examples, answers):
        assert answer["n_best"][0]["answer"] == answer["answer"]
        expected = [c["text"] for c in nbest[example.qas_id] if c["text"]][:5]
        assert [c["answer"] for c in answer["n_best"]][: len(expected)] == expected
        for candidate in answer["n_best"]:
            assert example.context[candidate["start"] : candidate["end"]] == candidate["answer"]
