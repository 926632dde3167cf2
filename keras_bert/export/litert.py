"""LiteRT (TensorFlow Lite) classifiers and sentence encoders with tokenization
inside: strings in, answers (or embeddings) out.

    export_litert(model, "reviews.tflite")               # a BertClassifier with a preprocessor
    runner = litert_interpreter("reviews.tflite").get_signature_runner()
    runner(text=np.array(["A gorgeous, witty, seductive movie."]))
    # {"logits": (B, C), "probabilities": (B, C), "label": (B,)}; a regressor: {"score": (B,)}
    # A BertSentenceEncoder: {"embedding": (B, D)}, its pooling, Dense layers and
    # normalisation inside, as `predict` returns.

The tokenizer inside is tensorflow-text's `FastBertTokenizer`: its two ops,
FastBertNormalize and FastWordpieceTokenize, have LiteRT kernels (registered
from `tensorflow_text.tflite_registrar`), while the exact `BertTokenizer` of the
SavedModels needs regex, ICU and string ops that LiteRT lacks. Its ids are the
original `FullTokenizer`'s on real text but for one rule: uncased, it
decomposes compatibility characters (NFKD: "…" -> "...", "½" -> "1⁄2", U+2011
-> "-") where the original decomposes only canonically (NFD). Of the 12,381
texts in data/ (rotten_tomatoes and wnut16 train and dev, bbc_news dev), 32
differ, each through such a character (tests/export/test_litert.py checks the
dev texts). Cased vocabularies do no
decomposition at all, as the original.

The rest is LiteRT's builtin ops: [CLS] text [SEP] padded to `seq_length` in
dense ops, the encoder traced on the plain ops (`with_fast_kernels(model, False)`: Keras' exact GELU
becomes LiteRT's GELU op; the fast kernels' erfc has no LiteRT kernel), every
weight frozen into the file. `quantize="int8"`: dynamic-range quantization
(int8 weights, activations quantized per call), the converter's
`Optimize.DEFAULT`: XNNPACK multiplies int8 by int8, with VNNI's dot products
where the CPU has them; at batch 1 it is the fastest CPU form keras_bert has
(benchmarks/results/cpu_serving.md). One text per row (no pairs).

What the file holds is written into it as JSON (a `keras_bert` metadata
entry of the flatbuffer, as the SavedModels' `keras_bert_export.json`):
task, precision ("float32" or "int8_dynamic_range"), padding, sequence
length, casing and the version that wrote it. `litert_metadata(path)` reads it.

Legend for shape comments: B = batch, P = word pieces, T = sequence length, C = classes.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

# LiteRT's converter keeps tables read by ResourceGather (the embeddings) as
# resource variables its interpreter leaves uninitialised (NaN outputs):
# freezing the traced function first makes every weight a constant.
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from keras_bert import safe_output
from keras_bert.models.fast_path import with_fast_kernels
from keras_bert.preprocessing.classification import class_names, classify_logits
from keras_bert.version import __version__

if TYPE_CHECKING:
    import keras

    from keras_bert.text.tokenizer import BertTokenizer

LITERT_QUANTIZE_MODES = ("int8",)
LITERT_PADDINGS = ("max_length", "longest")
# The flatbuffer's metadata entry that holds the export's facts as JSON.
METADATA_NAME = "keras_bert"
# The custom ops a file may hold: tensorflow-text's, whose kernels
# `litert_interpreter` registers. Any other would fail at the file's first call.
TFTEXT_CUSTOM_OPS = frozenset(
    {
        "FastBertNormalize",
        "FastWordpieceTokenize",
        "FastWordpieceTokenizeWithOffsets",
        "RaggedTensorToTensor",
    }
)


def litert_tokenizer(tokenizer: BertTokenizer) -> tf_text.FastBertTokenizer:
    """`tokenizer`'s vocabulary and casing as a `FastBertTokenizer` (LiteRT kernels)."""
    return tf_text.FastBertTokenizer(
        vocab=tokenizer.vocab,
        suffix_indicator="##",
        unknown_token="[UNK]",
        # Bytes, not characters, as BertTokenizer's own FastWordpieceTokenizer.
        max_bytes_per_word=4 * tokenizer.max_chars_per_word + 4,
        token_out_type=tf.int32,
        lower_case_nfd_strip_accents=tokenizer.lowercase,
    )


def pack_single(
    ids: tf.RaggedTensor, seq_length: int, cls_id: int, sep_id: int, longest: bool = False
) -> dict[str, tf.Tensor]:
    """Word pieces (B, P) -> [CLS] pieces [SEP], cut to `seq_length` and padded
    to it, or with `longest` to the batch's longest row (T <= seq_length), in
    dense ops only (ragged ops have no LiteRT kernels but RaggedTensorToTensor)."""
    if longest:
        body = ids.to_tensor(default_value=0)[:, : seq_length - 2]  # (B, T - 2)
    else:
        body = ids.to_tensor(default_value=0, shape=[None, seq_length - 2])  # (B, T - 2)
    length = tf.minimum(ids.row_lengths(), seq_length - 2)[:, None]  # (B, 1)
    batch = tf.shape(body)[0]
    padded = tf.concat([tf.fill([batch, 1], cls_id), body, tf.zeros([batch, 1], tf.int32)], 1)
    positions = tf.range(tf.shape(padded)[1], dtype=length.dtype)[None, :]  # (1, T)
    input_ids = tf.where(positions == length + 1, sep_id, padded)  # (B, T)
    input_mask = tf.cast(positions <= length + 1, tf.int32)
    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": tf.zeros_like(input_mask),
    }


def classifier_function(
    model: keras.Model, tokenizer: BertTokenizer, seq_length: int, longest: bool = False
) -> tf.types.experimental.ConcreteFunction:
    """text (B,) -> the classifier's answers (pass a model on the plain ops)."""
    fast_tokenizer = litert_tokenizer(tokenizer)
    labels = class_names(model.num_classes, getattr(model, "label_names", None))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def serve(text):
        features = pack_single(
            fast_tokenizer.tokenize(text), seq_length, tokenizer.cls_id, tokenizer.sep_id, longest
        )
        logits = tf.cast(model(features, training=False), tf.float32)  # (B, C)
        return classify_logits(logits, labels)

    return serve.get_concrete_function()


def sentence_encoder_function(
    model: keras.Model, tokenizer: BertTokenizer, seq_length: int, longest: bool = False
) -> tf.types.experimental.ConcreteFunction:
    """text (B,) -> {"embedding": (B, D)} (pass a model on the plain ops)."""
    fast_tokenizer = litert_tokenizer(tokenizer)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def serve(text):
        features = pack_single(
            fast_tokenizer.tokenize(text), seq_length, tokenizer.cls_id, tokenizer.sep_id, longest
        )
        return {"embedding": tf.cast(model(features, training=False), tf.float32)}  # (B, D)

    return serve.get_concrete_function()


# The task models LiteRT takes, and the function each is traced as.
LITERT_FUNCTIONS = {
    "BertClassifier": classifier_function,
    "BertSentenceEncoder": sentence_encoder_function,
}


def export_litert(
    model: keras.Model,
    path: str | os.PathLike,
    seq_length: int | None = None,
    quantize: str | None = None,
    overwrite: bool = False,
    padding: str = "max_length",
) -> str:
    """Writes `model` (a `BertClassifier` or `BertSentenceEncoder` with a
    preprocessor) as a `.tflite` file that takes strings; returns the path.

    LiteRT's tokenizer (`FastBertTokenizer`) follows the original BERT: a
    special token written in the text ("[MASK]") is split into pieces, where
    the SavedModel of a HuggingFace checkpoint reads it as the token.

    `seq_length`: default the preprocessor's. `quantize="int8"`: dynamic-range
    int8 weights. `padding`: "max_length" (every request padded to
    `seq_length`) or "longest" (to the request's longest text: a review of 27
    pieces costs 27 rows, not 128; the interpreter resizes its tensors to each
    new request shape). A LoRA model is exported merged.
    """
    if padding not in LITERT_PADDINGS:
        raise ValueError(f"padding must be one of {LITERT_PADDINGS}, got {padding!r}")
    path = os.fspath(path)
    traced_as = LITERT_FUNCTIONS.get(type(model).__name__)
    if traced_as is None:
        raise ValueError(
            f"LiteRT export takes a BertClassifier or a BertSentenceEncoder, got a "
            f"{type(model).__name__} (export taggers and readers as SavedModels)"
        )
    if getattr(model, "multi_label", False):
        raise ValueError(
            "LiteRT export of a multi_label=True classifier is not built (its labels "
            "above a threshold are a sort LiteRT is not tested with): export it as a "
            "SavedModel (export_saved_model), which answers them"
        )
    if getattr(model, "lowercase_text", False) and not model.preprocessor.tokenizer.lowercase:
        # sentence-transformers' do_lower_case on a cased vocabulary: str.lower in
        # the graph, which has no LiteRT kernel.
        raise ValueError(
            "this sentence encoder lowercases text before a cased tokenizer "
            "(do_lower_case), which LiteRT cannot do in the graph: export it as a SavedModel"
        )
    preprocessor = getattr(model, "preprocessor", None)
    if preprocessor is None:
        raise ValueError(
            "LiteRT export needs a model with a preprocessor (its vocabulary and "
            "casing go inside): build it with from_pretrained"
        )
    if quantize is not None and quantize not in LITERT_QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {LITERT_QUANTIZE_MODES}, got {quantize!r}")
    tokenizer = preprocessor.tokenizer
    if tokenizer.strip_accents != tokenizer.lowercase:
        # FastBertTokenizer, LiteRT's, strips accents exactly when it lowercases.
        raise ValueError(
            f"this preprocessor has lowercase={tokenizer.lowercase} but "
            f"strip_accents={tokenizer.strip_accents} (tokenizer_config.json's "
            "strip_accents), which LiteRT's tokenizer cannot do: export it as a SavedModel"
        )
    if not path.endswith(".tflite"):
        raise ValueError(f"the LiteRT file must end in .tflite, got {path}")
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} exists (pass overwrite=True / --overwrite to replace it)")
    seq_length = seq_length or preprocessor.seq_length
    max_positions = model.encoder.config.max_position_embeddings
    if not 3 <= seq_length <= max_positions:
        raise ValueError(
            f"seq_length must be in [3, {max_positions}] (the encoder's "
            f"max_position_embeddings), got {seq_length}"
        )
    if getattr(model, "lora_rank", None):
        model = model.merge_lora()
    # Held here until the conversion has read its weights: the traced function
    # refers to the copy's variables weakly, and a garbage collection between
    # tracing and freezing deleted them ("referencing variables which have been
    # deleted", seen once in the full suite).
    plain_model = with_fast_kernels(model, False)
    function = traced_as(
        plain_model, preprocessor.tokenizer, seq_length, longest=padding == "longest"
    )
    flatbuffer = convert(function, quantize)
    facts = {
        "task": type(model).__name__,
        "precision": "int8_dynamic_range" if quantize == "int8" else "float32",
        "padding": padding,
        "seq_length": seq_length,
        "lowercase": tokenizer.lowercase,
        "keras_bert_version": __version__,
    }
    return safe_output.write_bytes(path, with_metadata(flatbuffer, facts))


def with_metadata(flatbuffer: bytes, facts: dict[str, Any]) -> bytes:
    """`flatbuffer` with `facts` as JSON in its `keras_bert` metadata entry
    (a buffer of its own, which the interpreter does not read)."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(json.dumps(facts, sort_keys=True).encode(), np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = METADATA_NAME
    entry.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), entry]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def litert_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The facts `export_litert` wrote into `path` ({} for a file it did not write)."""
    from tensorflow.lite.python import schema_py_generated as schema

    with open(path, "rb") as f:
        model = schema.Model.GetRootAs(f.read(), 0)
    for index in range(model.MetadataLength()):
        entry = model.Metadata(index)
        if entry.Name().decode() == METADATA_NAME:
            return json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes())
    return {}


def convert(function: tf.types.experimental.ConcreteFunction, quantize: str | None = None) -> bytes:
    """A traced function of one string input -> a LiteRT flatbuffer (builtin
    ops and tensorflow-text's), its weights frozen, one `serving_default`."""
    frozen = convert_variables_to_constants_v2(function)
    (spec,) = function.structured_input_signature[0]

    # Re-wrapped so the file keeps one signature with named outputs.
    @tf.function(input_signature=[spec])
    def serving_default(text):
        return tf.nest.pack_sequence_as(function.structured_outputs, frozen(text))

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serving_default.get_concrete_function()], tf.Module()
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's tokenizer ops
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    flatbuffer = converter.convert()
    check_custom_ops(flatbuffer)
    return flatbuffer


def custom_ops(flatbuffer: bytes) -> set[str]:
    """The custom ops a LiteRT flatbuffer calls (those not among LiteRT's builtins)."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.Model.GetRootAs(flatbuffer, 0)
    codes = (model.OperatorCodes(i).CustomCode() for i in range(model.OperatorCodesLength()))
    return {code.decode() for code in codes if code}


def check_custom_ops(flatbuffer: bytes) -> None:
    """Refuses a file that calls an op no registered kernel runs: the converter
    writes a TensorFlow op it cannot lower as a custom op (`allow_custom_ops`,
    needed for the tokenizer's), and the interpreter fails only at the first
    call ("Encountered unresolved custom op")."""
    unknown = custom_ops(flatbuffer) - TFTEXT_CUSTOM_OPS
    if unknown:
        raise ValueError(
            f"this model traces to TensorFlow op(s) {sorted(unknown)} that LiteRT has no "
            "kernel for (only tensorflow-text's tokenizer ops are registered): the file "
            "would fail at its first call; export it as a SavedModel (export_saved_model)"
        )


def litert_interpreter(path: str | os.PathLike, num_threads: int | None = None):
    """A LiteRT interpreter of `path` with tensorflow-text's kernels registered:
    `ai-edge-litert`'s if it is installed, else the one TensorFlow still ships."""
    try:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps
    except ImportError:
        from tensorflow.lite.python.interpreter import InterpreterWithCustomOps
    interpreter = InterpreterWithCustomOps(
        model_path=os.fspath(path),
        num_threads=num_threads,
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
    )
    interpreter.allocate_tensors()
    return interpreter


def run_litert(interpreter, texts) -> dict[str, np.ndarray]:
    """The `serving_default` answers for `texts` (a list of strings)."""
    runner = interpreter.get_signature_runner()
    return runner(text=np.array(list(texts), dtype=object))


def export_litert_dir(
    model_dir: str,
    output: str,
    seq_length: int | None = None,
    quantize: str | None = None,
    overwrite: bool = False,
    padding: str = "max_length",
) -> str:
    """`export_litert` of a `keras-bert finetune` output folder's `model.keras`."""
    import keras

    import keras_bert.models  # noqa: F401 (registers the classes load_model looks up)

    model_file = os.path.join(model_dir, "model.keras")
    if not os.path.exists(model_file):
        raise FileNotFoundError(
            f"{model_dir}: no model.keras (expected a `keras-bert finetune` output folder)"
        )
    model = keras.models.load_model(model_file, compile=False)
    return export_litert(
        model,
        output,
        seq_length=seq_length,
        quantize=quantize,
        overwrite=overwrite,
        padding=padding,
    )
