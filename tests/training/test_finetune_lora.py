"""`keras-bert finetune --lora-rank`: the encoder frozen, the adapters saved
apart, model.keras merged."""

import os
import random

import keras
import numpy as np
import pytest

from keras_bert import BertEncoder
from keras_bert.models.classifier import BertClassifier

from harness import run_command, small_config, tolerance

CONFIG = small_config(vocab_size=30)


@pytest.mark.precision
def test_cli_finetune_with_lora_writes_adapters_and_a_merged_model(
    tmp_path, tiny_vocab_file, capsys
):
    rng = random.Random(0)
    lines = ["label\tsentence"] + [
        f"{label}\t{word} {' '.join(rng.choice(['the', 'fox', 'dog']) for _ in range(3))}"
        for label, word in [("pos", "quick"), ("neg", "lazy")] * 16
    ]
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    base_path = str(tmp_path / "base.keras")
    BertEncoder(CONFIG).save(base_path)
    output = str(tmp_path / "run")
    # With a dev set, the run ends on its best epoch's adapters (kept in best/ meanwhile).
    assert (
        run_command(
            "finetune --task classify --train {train} --dev {dev} "
            "--init-checkpoint {init_checkpoint} --vocab-file "
            "{vocab_file} --seq-length 16 --batch-size 8 --epochs 1 "
            "--learning-rate 1e-3 --lora-rank 2 --no-tensorboard "
            "--output-dir {output_dir}",
            train=tmp_path / "train.tsv",
            dev=tmp_path / "train.tsv",
            init_checkpoint=base_path,
            vocab_file=tiny_vocab_file,
            output_dir=output,
        )
        == 0
    )
    capsys.readouterr()
    assert {"lora_weights.npz", "model.keras"} <= set(os.listdir(output))
    merged = keras.models.load_model(os.path.join(output, "model.keras"))
    assert merged.lora_rank is None

    # The adapters on a fresh model from the same base give the merged model's logits.
    adapted = BertClassifier.from_pretrained(
        base_path,
        num_classes=2,
        label_names=["neg", "pos"],
        vocab_file=tiny_vocab_file,
        seq_length=16,
    )
    adapted.load_lora_weights(os.path.join(output, "lora_weights.npz"))
    texts = ["quick the fox", "lazy dog dog", "the fox"]
    # W + BA summed once (merged) or per call (adapted): ~80 roundings deep.
    np.testing.assert_allclose(
        adapted.predict(texts), merged.predict(texts), atol=tolerance(depth=80)
    )
    base = BertClassifier.from_pretrained(
        base_path, num_classes=2, vocab_file=tiny_vocab_file, seq_length=16
    )
    base_kernel = base.encoder.transformer_blocks[0].attention.query.kernel.numpy()
    assert not np.allclose(
        merged.encoder.transformer_blocks[0].attention.query.kernel.numpy(), base_kernel
    )
    # Frozen: the encoder's LayerNorms and embeddings are the base's.
    np.testing.assert_array_equal(
        merged.encoder.token_embedding.embeddings.numpy(),
        base.encoder.token_embedding.embeddings.numpy(),
    )
