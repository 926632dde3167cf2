"""Peak memory of one exported signature on growing requests, in a fresh process.

Run by tests/export/test_export_memory.py (and by hand, to profile):

    python tests/export/export_memory_check.py EXPORT_DIR SIGNATURE INPUT BYTES...

Loads the SavedModel as a Python user does (`tensorflow` and
`tensorflow_text` only), calls `SIGNATURE` once on a short text (loading and
the first call's costs out of the way), then on one text of each size in
`BYTES`, ascending, under the input `INPUT` (a `question` input gets a short
question; any other input none, as a classifier's optional `text_pair`). Prints one JSON line: the
peak resident memory (ru_maxrss, MiB) after the warm-up and after each size,
and each call's output sizes, so a test can ask that the growth over the
warm-up is linear in the request.
"""

import json
import os
import resource
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.modules["keras_bert"] = None  # a user's process: never keras_bert

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401

WORDS = "Emma Woodhouse , handsome , clever , and rich , lived nearly twenty-one years in Highbury"


def text_of(size):
    """About `size` bytes of plain words (a sentence repeated)."""
    return ((WORDS + " ") * (size // (len(WORDS) + 1) + 1))[:size]


def peak_mib():
    # Linux reports kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def call(function, input_name, text):
    inputs = {}
    for name in function.structured_input_signature[1]:
        if name == input_name:
            inputs[name] = tf.constant([text])
        elif name == "question":
            inputs[name] = tf.constant(["Who lived in Highbury?"])
        else:  # an optional input (a classifier's text_pair): none
            inputs[name] = tf.constant([], tf.string)
    outputs = function(**inputs)
    return {name: list(value.shape) for name, value in outputs.items()}


def main(path, signature, input_name, *sizes):
    function = tf.saved_model.load(path).signatures[signature]
    call(function, input_name, text_of(200))
    report = {"warm_mib": peak_mib(), "sizes": [], "peak_mib": [], "shapes": []}
    for size in sorted(int(s) for s in sizes):
        report["shapes"].append(call(function, input_name, text_of(size)))
        report["sizes"].append(size)
        report["peak_mib"].append(peak_mib())
    print(json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
