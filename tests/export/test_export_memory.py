"""An export's memory grows with the request, linearly: a long text sent to
any export is served, in a fresh process that loads the SavedModel as a
Python user does (tests/export/export_memory_check.py measures peak resident
memory, ru_maxrss, after a warm-up call and after each request).

The tagger used to cut each word out of its own copy of the whole text: a
100 KB request took 1.7 GB more, a 1 MB one was killed by the kernel.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from export_helpers import call, decode, export_path, kinds

INPUT = {
    "sentence_encoder": "text",
    "embeddings": "text",
    "classifier": "text",
    "regressor": "text",
    "tagger": "text",
    "squad": "context",
}
KB = 1000


def peak_growth(kind, *sizes, path=None):
    """MiB of peak memory above the warm-up, after a request of each size (ascending)."""
    script = os.path.join(os.path.dirname(__file__), "export_memory_check.py")
    run = subprocess.run(
        [sys.executable, script, path or export_path(kind), "serving_default", INPUT[kind]]
        + [str(size) for size in sizes],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["sizes"] == sorted(sizes)
    return [peak - report["warm_mib"] for peak in report["peak_mib"]], report["shapes"]


@pytest.mark.parametrize("kind", kinds())
def test_memory_grows_linearly_with_the_request(kind):
    (at_200, at_400, at_1000), shapes = peak_growth(kind, 200 * KB, 400 * KB, 1000 * KB)
    # Twice the text, about twice the memory (8 MiB of allowance for the
    # allocator's rounding on small figures); quadratic growth would be 4x.
    assert at_400 < 3 * max(at_200, 8), (at_200, at_400)
    # 1 MB is served, in well under 1,000 bytes of memory per byte of request
    # (the tagger took 1.7 GB at 100 KB before).
    assert at_1000 < 256, (at_200, at_400, at_1000)
    if kind == "tagger":  # every word of the long text comes back
        assert shapes[2]["tokens"][1] > 100_000


@pytest.mark.slow
def test_a_sentence_encoders_export_serves_a_long_request(tmp_path):
    import keras

    from keras_bert import BertEncoder, BertPreprocessor, BertSentenceEncoder
    from keras_bert.assets import VOCAB_FILE
    from keras_bert.export import export_saved_model

    from harness import tiny_config

    keras.utils.set_random_seed(0)
    model = BertSentenceEncoder(
        BertEncoder(tiny_config(vocab_size=30522)),
        preprocessor=BertPreprocessor(VOCAB_FILE, seq_length=24),
    )
    path = str(tmp_path / "model" / "1")
    export_saved_model(model, path)
    (at_200, at_400, at_1000), _ = peak_growth(
        "sentence_encoder", 200 * KB, 400 * KB, 1000 * KB, path=path
    )
    assert at_400 < 3 * max(at_200, 8), (at_200, at_400)
    assert at_1000 < 256, (at_200, at_400, at_1000)


@pytest.mark.slow
def test_tagger_words_in_a_batch_of_unequal_texts():
    """The words of each row come from that row alone, at every length in one batch."""
    texts = ["Emma lived in Highbury", "", "a", "  Mr.  Knightley\tcalled \u00e9t\u00e9 "]
    served = call("tagger", text=texts)
    expected = [text.split() for text in texts]
    assert list(served["num_tokens"]) == [len(words) for words in expected]
    for row, words in enumerate(expected):
        assert list(decode(served["tokens"][row][: len(words)])) == words
        starts = served["token_start"][row][: len(words)]
        ends = served["token_end"][row][: len(words)]
        assert [texts[row][s:e] for s, e in zip(starts, ends)] == words
        assert np.all(decode(served["tokens"][row][len(words) :]) == "")
