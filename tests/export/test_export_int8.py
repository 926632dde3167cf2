"""`quantize="int8"` on the real MiniLM weights: the int8 export's sentence
embeddings against the float32 export's, on real review sentences.

Tolerance: each product rounds its activations to 256 levels of the whole
tensor's range and its kernel columns to 255, an error of about 1 % of an
operand's scale per product; over MiniLM's 6 blocks the mean-pooled embedding
keeps its direction to a cosine of 0.99 on average and 0.975 at worst. Measured
on these 48 reviews against the float32 export: with the padding packed out
(the default) worst 0.979, mean 0.9918; with remove_padding=False worst 0.985,
mean 0.9915 (the range each call quantizes to is over other rows: the errors
move, their size does not). The fine-tuned rotten_tomatoes classifier's dev accuracy with int8 is in
docs/benchmarks.md ("Serving").
"""

import csv
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.export import export_saved_model
from keras_bert.export.serving_ops import ops_in_saved_model, ops_serving_lacks
from keras_bert.kernels.int8_dense import int8_kernel_available

from repo_paths import DATASETS_DIR

MIN_COSINE, MIN_MEAN_COSINE = 0.975, 0.99


def reviews(count=48):
    with open(os.path.join(DATASETS_DIR, "rotten_tomatoes", "dev.tsv"), encoding="utf-8") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t")][:count]


@pytest.mark.slow
@pytest.mark.skipif(
    not int8_kernel_available(), reason="this TensorFlow lacks oneDNN's int8 kernel"
)
def test_int8_embeddings_keep_the_float32_direction(minilm_path, real_vocab_file, tmp_path):
    encoder = BertEncoder.from_pretrained(minilm_path)
    tokenizer = BertTokenizer(real_vocab_file)
    embeddings = {}
    for quantize in (None, "int8"):
        path = export_saved_model(
            encoder,
            tokenizer,
            str(tmp_path / str(quantize) / "1"),
            seq_length=64,
            padding="longest",
            quantize=quantize,
        )
        assert ops_serving_lacks(path) == []
        if quantize:
            assert "QuantizedMatMulWithBiasAndDequantize" in ops_in_saved_model(path)
        serve = tf.saved_model.load(path).signatures["serving_default"]
        embeddings[quantize] = serve(text=tf.constant(reviews()))["embedding"].numpy()
    cosines = np.sum(embeddings[None] * embeddings["int8"], axis=1)  # both L2-normalised
    print(f"cosine float32 / int8: min {cosines.min():.4f}, mean {cosines.mean():.4f}")
    assert cosines.min() >= MIN_COSINE and cosines.mean() >= MIN_MEAN_COSINE
