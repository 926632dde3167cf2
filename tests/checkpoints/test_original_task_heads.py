"""Checkpoints that google-research/bert's run_classifier.py and run_squad.py
fine-tuned: the encoder loads beside their heads, and the heads load into our
task models, checked against the original's own head arithmetic in NumPy."""

import os

import numpy as np
import pytest
from original_checkpoints import TINY_CONFIG, original_bert_tensors, write_original_folder

from keras_bert import BertClassifier, BertEncoder, BertSpanExtractor, checkpoints

HIDDEN = TINY_CONFIG["hidden_size"]


@pytest.fixture
def features():
    rng = np.random.default_rng(3)
    mask = np.array([[1] * 9 + [0] * 3, [1] * 12], np.int32)
    return {
        "input_ids": (rng.integers(5, TINY_CONFIG["vocab_size"], size=(2, 12)) * mask).astype(
            np.int32
        ),
        "input_mask": mask,
        "segment_ids": np.array([[0] * 5 + [1] * 7, [0] * 6 + [1] * 6], np.int32),
    }


CLASSIFIER_3 = {"output_weights": (3, HIDDEN), "output_bias": (3,)}
SQUAD = {"cls/squad/output_weights": (2, HIDDEN), "cls/squad/output_bias": (2,)}


def fine_tuned(folder, heads=None):
    """A fine-tuned original checkpoint folder: the encoder plus `heads` (name: shape)."""
    rng = np.random.default_rng(11)
    tensors = original_bert_tensors(TINY_CONFIG)
    for name, shape in (heads or {}).items():
        tensors[name] = (rng.standard_normal(shape) * 0.5).astype("float32")
    write_original_folder(str(folder), tensors)
    return str(folder), tensors


def test_run_classifier_checkpoint_gives_its_logits(tmp_path, features):
    folder, tensors = fine_tuned(tmp_path / "mnli_output", CLASSIFIER_3)
    # The encoder loads beside the head (before, "unexpected tensor(s) not part of BERT").
    encoder = BertEncoder.from_pretrained(folder)
    model = BertClassifier(encoder, num_classes=3)
    assert checkpoints.load_original_task_head(model, folder) == ["output_weights", "output_bias"]
    pooled = encoder(features)["pooled_output"].numpy().astype(np.float64)
    # run_classifier.py: logits = matmul(output_layer, output_weights, transpose_b=True) + bias.
    expected = pooled @ tensors["output_weights"].T.astype(np.float64) + tensors["output_bias"]
    np.testing.assert_allclose(model(features, training=False).numpy(), expected, atol=1e-5)


def test_run_squad_checkpoint_gives_its_start_and_end_logits(tmp_path, features):
    folder, tensors = fine_tuned(tmp_path / "squad_output", SQUAD)
    encoder = BertEncoder.from_pretrained(folder)
    model = BertSpanExtractor(encoder)
    assert checkpoints.load_original_task_head(model, folder) == [
        "cls/squad/output_weights",
        "cls/squad/output_bias",
    ]
    sequence = encoder(features)["sequence_output"].numpy().astype(np.float64)  # (B, T, H)
    weights, bias = tensors["cls/squad/output_weights"], tensors["cls/squad/output_bias"]
    # run_squad.py: logits = final_hidden @ output_weights^T + bias, unstacked: row 0 is
    # the start, row 1 the end.
    outputs = model(features, training=False)
    np.testing.assert_allclose(
        outputs["start_logits"].numpy(), sequence @ weights[0] + bias[0], atol=1e-5
    )
    np.testing.assert_allclose(
        outputs["end_logits"].numpy(), sequence @ weights[1] + bias[1], atol=1e-5
    )


def test_a_label_count_mismatch_names_checkpoint_tensor_shapes_and_setting(tmp_path):
    folder, _ = fine_tuned(tmp_path / "mnli_output", CLASSIFIER_3)
    model = BertClassifier(BertEncoder.from_pretrained(folder), num_classes=2)
    before = model.get_layer("classifier_output").kernel.numpy().copy()
    prefix = os.path.join(folder, "bert_model.ckpt")
    with pytest.raises(ValueError) as error:
        checkpoints.load_original_task_head(model, folder)
    message = str(error.value)
    assert message.startswith(f"{prefix}: tensor output_weights has shape (3, {HIDDEN})")
    assert f"classifier_output kernel is ({HIDDEN}, 2)" in message
    assert "pass num_classes=3" in message
    np.testing.assert_array_equal(model.get_layer("classifier_output").kernel.numpy(), before)

    squad, _ = fine_tuned(
        tmp_path / "broken_squad", dict(SQUAD, **{"cls/squad/output_weights": (2, HIDDEN + 1)})
    )
    with pytest.raises(
        ValueError,
        match=rf"broken_squad/bert_model.ckpt: tensor "
        rf"cls/squad/output_weights has shape \(2, {HIDDEN + 1}\)",
    ):
        checkpoints.load_original_task_head(
            BertSpanExtractor(BertEncoder.from_pretrained(folder)), squad
        )


def test_heads_the_checkpoint_or_the_model_lacks_are_left_alone(tmp_path):
    pretrained, _ = fine_tuned(tmp_path / "pretrained")
    squad, _ = fine_tuned(tmp_path / "squad_output", SQUAD)
    encoder = BertEncoder.from_pretrained(pretrained)
    classifier = BertClassifier(encoder, num_classes=2)
    kernel = classifier.get_layer("classifier_output").kernel.numpy().copy()
    assert checkpoints.load_original_task_head(classifier, pretrained) == []
    # A SQuAD head is no classifier: the classifier keeps its fresh head.
    assert checkpoints.load_original_task_head(classifier, squad) == []
    np.testing.assert_array_equal(classifier.get_layer("classifier_output").kernel.numpy(), kernel)
    # The BiLSTM ablation's span layer reads the BiLSTM, not the encoder's tokens.
    bilstm = BertSpanExtractor(encoder, head="bilstm")
    assert checkpoints.load_original_task_head(bilstm, squad) == []


def test_unknown_tensors_are_still_refused(tmp_path):
    folder, _ = fine_tuned(
        tmp_path / "custom", dict(CLASSIFIER_3, **{"my_head/kernel": (HIDDEN, 4)})
    )
    with pytest.raises(
        ValueError,
        match=r"unexpected tensor\(s\) not part of BERT: "
        r"\['my_head/kernel'\]",
    ):
        BertEncoder.from_pretrained(folder)


def test_from_pretrained_keeps_an_original_fine_tuned_head(tmp_path, features):
    """Where a user meets it: the task model's own from_pretrained / from_preset."""
    folder, tensors = fine_tuned(tmp_path / "mnli_output", CLASSIFIER_3)
    # The tiny encoder's own vocabulary (30 rows): without one, the shipped
    # 30,522-entry vocabulary does not fit its embedding and is refused.
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"w{i}" for i in range(TINY_CONFIG["vocab_size"] - len(words))]
    (tmp_path / "mnli_output" / "vocab.txt").write_text("\n".join(words) + "\n")
    for load in (BertClassifier.from_pretrained, BertClassifier.from_preset):
        model = load(folder, num_classes=3, seq_length=12)
        np.testing.assert_array_equal(
            model.get_layer("classifier_output").kernel.numpy(), tensors["output_weights"].T
        )
        np.testing.assert_array_equal(
            model.get_layer("classifier_output").bias.numpy(), tensors["output_bias"]
        )
    with pytest.raises(ValueError, match="pass num_classes=3"):
        BertClassifier.from_pretrained(folder, num_classes=2, seq_length=12)
