"""SavedModels with tokenization inside, in TensorFlow Serving's layout.

`export_saved_model(model, tokenizer, path)` (or `export_saved_model(model, path)` for a
model with a preprocessor) writes one servable version
(`EXPORT_DIR/NAME/VERSION`). Strings go in, useful values come out; the
signatures per task are described in each `export_<task>.py` module:

| model | `serving_default` inputs -> outputs |
|---|---|
| `BertEncoder` | `text` -> `embedding` (mean-pooled, L2-normalised: a `BertSentenceEncoder`'s) |
| `BertClassifier` | `text`, optional `text_pair` -> `probabilities`, `logits`, `label` (1) |
| `BertTokenClassifier` | `text` -> per-word `tokens`/`tags` and `entity_*` (type, char offsets, text) |
| `BertSpanExtractor` | `question`, `context` -> `answer`, char `start`/`end`, `score` (+ `has_answer`) |

(1) A regressor: `score`; a multi-label classifier: `labels` (the names above
its threshold) in place of `label`.

Every export also has `serve_examples` (serialized `tf.Example` under `inputs`,
for TensorFlow Serving's Classify / Regress / Predict APIs) and `serve_ids`
(`input_ids`, `input_mask`, `segment_ids` for clients that tokenize
themselves). The vocabulary, the label names and the export settings travel
as assets: `assets/vocab.txt`, `assets/labels.txt`, `assets/keras_bert_export.json`;
`assets.extra/README.txt` says how to load it and lists the signatures.

Each signature is also an attribute of the loaded object under its name
(`served.serving_default(text)`): the inputs in order or by name, as Keras'
`TFSMLayer(path, call_endpoint="serving_default")` calls them.

Loading needs tensorflow-text's ops registered (`import tensorflow_text`, or
its op libraries linked, as TensorFlow Serving does): the tokenizer runs on them.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from typing import TYPE_CHECKING, Any, Sequence

import tensorflow as tf

from keras_bert import safe_output
from keras_bert.kernels.precision import resolve as resolve_precision
from keras_bert.progress import Progress

if TYPE_CHECKING:
    import keras

    from keras_bert.export.base import TaskServing
    from keras_bert.text.tokenizer import BertTokenizer

EXPORT_METADATA = "keras_bert_export.json"
ASSETS_EXTRA = "assets.extra"
# The tokenizer's ops (NormalizeUTF8, FastWordpieceTokenizeWithOffsets, ...) are
# tensorflow-text's custom ops: a process registers them by importing it before
# it loads the SavedModel (TensorFlow Serving links them).
IMPORT_TEXT_OPS = "import tensorflow_text"


def task_serving(
    model: keras.Model,
    tokenizer: BertTokenizer,
    seq_length: int | None = None,
    label_names: Sequence[str] | None = None,
    **task_options: Any,
) -> TaskServing:
    """The `TaskServing` (signatures) for this model's task."""
    from keras_bert.models.encoder import BertEncoder

    if isinstance(model, BertEncoder):
        from keras_bert.export.sentence_encoder import EncoderServing

        _no_options("an encoder (embeddings)", task_options)
        return EncoderServing(model, tokenizer, seq_length or 128)
    kind = type(model).__name__
    if kind == "BertClassifier":
        from keras_bert.export.classifier import ClassifierServing

        threshold = task_options.pop("threshold", None)  # multi-label classifiers'
        _no_options(kind, task_options)
        return ClassifierServing(
            model, tokenizer, seq_length or 128, label_names, threshold=threshold
        )
    if kind == "BertTokenClassifier":
        from keras_bert.export.tagger import TaggerServing

        _no_options(kind, task_options)
        return TaggerServing(model, tokenizer, seq_length or 128, label_names)
    if kind == "BertSentenceEncoder":
        from keras_bert.export.sentence_encoder import SentenceEncoderServing

        _no_options(kind, task_options)
        return SentenceEncoderServing(model, tokenizer, seq_length or 256)
    if kind == "BertSpanExtractor":
        from keras_bert.export.squad import SquadServing

        if label_names is not None:
            raise ValueError("label_names: a BertSpanExtractor has no labels")
        return SquadServing(model, tokenizer, seq_length or 384, **task_options)
    raise ValueError(
        f"cannot export a {kind}: expected a BertEncoder, BertClassifier, "
        "BertTokenClassifier, BertSpanExtractor or BertSentenceEncoder"
    )


def _tokenizer_and_length(model, tokenizer, seq_length):
    """The tokenizer and length to export with: given ones win over the
    model's preprocessor (an encoder has none and needs a tokenizer)."""
    preprocessor = getattr(model, "preprocessor", None)
    if tokenizer is None:
        if preprocessor is None:
            raise ValueError(
                f"a {type(model).__name__} without a preprocessor needs the "
                "`tokenizer` it was trained with: export_saved_model(model, "
                "tokenizer, path)"
            )
        tokenizer = preprocessor.tokenizer
    if seq_length is None and preprocessor is not None:
        seq_length = preprocessor.seq_length
    return tokenizer, seq_length


def _no_options(what, task_options):
    if task_options:
        raise ValueError(f"{sorted(task_options)}: question-answering options, not for {what}")


QUANTIZE_MODES = ("int8",)


def export_saved_model(
    model: keras.Model,
    tokenizer: BertTokenizer | str | os.PathLike | None = None,
    path: str | os.PathLike | None = None,
    seq_length: int | None = None,
    label_names: Sequence[str] | None = None,
    overwrite: bool = False,
    padding: str = "max_length",
    length_multiple: int = 8,
    quantize: str | None = None,
    jit_compile: bool = False,
    remove_padding: bool | None = None,
    precision: str | None = None,
    **task_options: Any,
) -> str:
    """Writes `model` + `tokenizer` as a SavedModel at `path` and returns `path`.

    `export_saved_model(model, path)` exports a task model that carries its
    `preprocessor` (vocabulary, casing, sequence length come from it).

    Args:
      model: a `BertEncoder` or a task model (classifier, tagger, span extractor,
        sentence encoder).
      tokenizer: the `BertTokenizer` the model was trained with; default: the
        model's preprocessor's.
      path: the version folder, `EXPORT_DIR/NAME/VERSION` (VERSION an integer,
        as TensorFlow Serving expects). Written to a temporary sibling first and
        renamed, so a model server polling `EXPORT_DIR/NAME` never loads half a model.
      seq_length: tokens per sequence (default: the preprocessor's, else 128; 384
        for question answering).
        Longer texts are cut (pairs by the original longest-first rule).
      label_names: class / tag names, index-aligned with the logits; defaults to
        the model's own `label_names`, else "0", "1", ...
      overwrite: replace an existing `path`.
      padding: how the string signatures pad each request: "max_length" (to
        `seq_length`) or, for classifiers and encoders, "longest" (to the
        batch's longest sequence rounded up to a multiple of `length_multiple`;
        same outputs, and short texts cost what their length costs: see
        `BertTokenizer.pack`). `serve_ids` takes whatever width it is sent.
      length_multiple: see `padding` (a handful of distinct shapes per server).
      quantize: "int8": the Dense kernels of a copy of `model` stored as int8
        with per-column scales (Keras' `Model.quantize`); the encoder's
        products run on oneDNN's int8 kernel, activations quantized per call
        and per token to 63 levels each side of zero (`keras_bert.kernels.int8_dense`;
        where this TensorFlow does not run that kernel, Keras' int8 path, with
        a warning: oneDNN must be on, `TF_ENABLE_ONEDNN_OPTS=1` on AVX2 CPUs). `model` itself is
        unchanged. A model with LoRA adapters is exported merged (`merge_lora`).
      jit_compile: the model part of the signatures compiled with XLA, once
        per request shape (the first request of a shape waits ~1-2 s for it;
        pair it with `padding="longest"` for a few shapes). It pays where the
        per-op cost dominates, batch 1 and short texts: see docs/benchmarks.md,
        "Serving". TensorFlow Serving runs it with `--xla_cpu_compilation_enabled`.
      remove_padding: the embeddings, projections, feed-forward layers and
        LayerNorms run on the real tokens only, packed (attention alone sees
        the padded batch): a request padded to `seq_length` is mostly padding
        (reviews: 27 pieces of 128), one padded to its batch's longest often
        half. The same outputs at every real position (to float rounding);
        padded positions of token-level outputs are 0. Default (None): on,
        except with `jit_compile` (XLA would compile once per token count;
        True with it is refused) and for span extractors (their logits at the
        padding stay the padded model's: run_squad's softmax spans them; the
        answers are the same either way). Off, a batch of full-length texts
        runs 6-9 % faster (its gathers); see `keras_bert.models.unpadded`.
      precision: what the encoder computes in, named as for training
        (`keras_bert.kernels.precision.resolve`): None, the model's own
        policy; "float32", "mixed_bfloat16" / "bfloat16" or "auto" (this
        machine's native precision: bfloat16 where the CPU multiplies it,
        AVX512_BF16 or AMX, else float32). A mixed policy is served with its
        weights stored in the compute dtype ("bfloat16": no per-request casts,
        half the file; the products round them to bfloat16 either way), in a
        copy of the model. Recorded as `precision` in the export's metadata.
      **task_options: question answering: `version_2_with_negative`,
        `doc_stride`, `max_query_length`, `max_answer_length`, `n_best_size`,
        `null_score_diff_threshold`, `max_windows` (see `export_squad`); a
        multi-label classifier: `threshold` (default 0.5), above which a
        label's probability makes it one of the `labels` answered.
    """
    if path is None and isinstance(tokenizer, (str, os.PathLike)):
        tokenizer, path = None, tokenizer  # export_saved_model(model, path)
    if path is None:
        raise TypeError("export_saved_model needs the `path` to write")
    tokenizer, seq_length = _tokenizer_and_length(model, tokenizer, seq_length)
    path = os.fspath(path)
    if tf.io.gfile.exists(path):
        if not overwrite:
            raise FileExistsError(
                f"{path} exists (pass overwrite=True / --overwrite to replace it)"
            )
    with Progress(2, "steps", detail="building the serving signatures") as bar:
        if getattr(model, "lora_rank", None):
            model = model.merge_lora()  # W + (alpha / r) A B: no adapter products per request
        from keras_bert.export.base import model_precision

        policy = (
            model_precision(model)
            if precision is None
            else resolve_precision(precision, "precision")
        )
        if remove_padding is None:  # as the task trains (`TextTask.removes_padding`)
            remove_padding = not jit_compile and getattr(model, "removes_padding", True)
        # Before the copies below: quantizing a model takes a minute.
        _check_options(quantize, policy, length_multiple, jit_compile, remove_padding)
        model = precision_copy(model, policy)
        if quantize is not None:
            model = quantized_copy(model, quantize)
            _warn_without_int8_kernel()
        serving = task_serving(model, tokenizer, seq_length, label_names, **task_options)
        if padding not in serving.PADDINGS:
            raise ValueError(
                f"padding={padding!r}: a {serving.task} export pads with one of {serving.PADDINGS}"
            )
        serving.padding, serving.length_multiple = padding, length_multiple
        serving.quantize = quantize
        serving.jit_compile = jit_compile
        serving.remove_padding = remove_padding
        root = tf.Module()
        # Only what the graphs read: the weights and the assets (see TaskServing).
        root.model_variables = list(serving.model.variables)
        # The signatures' own state (a classifier's warned-about-pairs flag).
        root.serving_state = list(getattr(serving, "state_variables", []))
        signatures = serving.signatures()
        # The same functions as attributes, under the signatures' names: a loaded
        # signature with more than one input is keyword-only (a SignatureDef's
        # inputs are an unordered map), and Keras' TFSMLayer calls its endpoint
        # with the inputs positionally, looking the name up as an attribute
        # before the signature map. A loaded attribute takes its inputs in order
        # or by name and fills `text_pair`'s default. The SignatureDefs, all
        # that TensorFlow Serving reads, come from `signatures` alone.
        for name, function in signatures.items():
            setattr(root, name, function)
        bar.update(1, "tracing and writing the SavedModel")
        # Written as a sibling folder and renamed into place: a failed or
        # killed export never leaves a folder that looks like a SavedModel.
        with (
            safe_output.replacing(path, folder=True) as staging,
            tempfile.TemporaryDirectory() as scratch,
        ):
            root.assets = _write_assets(serving, scratch)
            tf.saved_model.save(root, staging, signatures=signatures)
            _write_readme(staging, serving, signatures)
        bar.update(2, f"wrote {path}; in Python, load it after `{IMPORT_TEXT_OPS}`")
    return path


def _check_options(quantize, policy, length_multiple, jit_compile, remove_padding):
    """The export's options that do not depend on the task, each error naming its field."""
    if quantize is not None and policy != "float32":
        raise ValueError(
            f"quantize={quantize!r} with precision {policy}: the int8 products "
            "take float32 activations; export with one of the two"
        )
    if not isinstance(length_multiple, int) or length_multiple < 1:
        raise ValueError(f"length_multiple must be a positive integer, got {length_multiple!r}")
    if not isinstance(jit_compile, bool):
        raise ValueError(f"jit_compile must be True or False, got {jit_compile!r}")
    if jit_compile and quantize is not None:
        raise ValueError(
            "jit_compile=True with quantize: XLA has no kernel for the "
            "int8 products; export with one of the two"
        )
    if not isinstance(remove_padding, bool):
        raise ValueError(
            f"remove_padding must be True, False or None (on unless "
            f"jit_compile), got {remove_padding!r}"
        )
    if remove_padding and jit_compile:
        raise ValueError(
            "remove_padding=True with jit_compile=True: XLA would compile the "
            "model once per number of real tokens; pick one"
        )


# What a served encoder stores its weights in, per training precision: serving
# has no optimizer to keep float32 master weights for, and a mixed policy would
# cast every weight to the compute dtype on every request (at batch 1 that cast
# took longer than the model's products). LayerNorm and softmax compute in
# float32 under every policy (keras_bert.kernels.layer_norm, layers.transformer).
SERVING_DTYPES = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}


def precision_copy(model: keras.Model, policy: str) -> keras.Model:
    """`model` itself if its encoder already computes and stores its weights as
    `policy` serves (`SERVING_DTYPES`), else a copy (same config but the
    encoder's dtype policy, same weights) that does."""
    from keras_bert.export.base import model_precision

    dtype = SERVING_DTYPES.get(policy, policy)
    if model_precision(model) == dtype:
        return model
    config = model.get_config()
    dtype_field = None if dtype == "float32" else dtype
    if "encoder" in config:  # a task model: its encoder's serialized config
        config["encoder"]["config"]["dtype"] = dtype_field
    else:
        config["dtype"] = dtype_field
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


# TensorFlow turns oneDNN on by itself only on CPUs with AVX512-VNNI, BF16 or
# AMX: on an AVX2 CPU a script's export falls to Keras' products, though
# oneDNN's int8 kernel runs there too (2.1x float32's product on 2 AMD EPYC cores).
NO_INT8_KERNEL = (
    "quantize='int8': this TensorFlow does not run oneDNN's int8 kernel (oneDNN is off: "
    "TF_ENABLE_ONEDNN_OPTS=0, or the default on CPUs without AVX512-VNNI, BF16 or AMX; or a "
    "build without oneDNN), so the export multiplies with Keras' int8 products, about half "
    "float32's speed. On x86-64 Linux set TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow is "
    "imported (`keras-bert export` does), and serve the export with it set too."
)


def _warn_without_int8_kernel() -> None:
    from keras_bert.kernels.int8_dense import int8_kernel_available

    if not int8_kernel_available():
        warnings.warn(NO_INT8_KERNEL, stacklevel=3)


def quantized_copy(model: keras.Model, mode: str) -> keras.Model:
    """A copy of `model` (same config, same weights) whose Dense and EinsumDense
    layers Keras has quantized to `mode`."""
    import keras

    if mode not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {mode!r}")
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    # type_check=False: Keras refuses subclasses of Dense (FastDense) by default;
    # FastDense takes Dense's own call once quantized, so Dense's quantize fits.
    copy.quantize(
        mode,
        filters=lambda layer: isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)),
        type_check=False,
    )
    return copy


def _write_assets(serving, folder):
    """vocab.txt, labels.txt (if any) and the export settings, as SavedModel assets."""
    files = {
        "vocab.txt": "".join(f"{token}\n" for token in serving.tokenizer.vocab),
        EXPORT_METADATA: json.dumps(
            {**serving.metadata(), "quantize": serving.quantize}, indent=2, sort_keys=True
        )
        + "\n",
    }
    labels = getattr(serving, "label_names", None)
    if labels is not None:
        files["labels.txt"] = "".join(f"{label}\n" for label in labels)
    assets = {}
    for name, content in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(content)
        assets[name.split(".")[0]] = tf.saved_model.Asset(os.path.join(folder, name))
    return assets


def load_instructions(path: str) -> str:
    """How to load and call the SavedModel at `path` from Python: what
    `assets.extra/README.txt` says, and the text for the export command to
    print after writing it."""
    return (
        f"Load it in Python after `{IMPORT_TEXT_OPS}`: the tokenizer's ops "
        "are tensorflow-text's (without it, tf.saved_model.load fails with "
        "\"Op type not registered 'NormalizeUTF8'\" or another of them).\n\n"
        "    import tensorflow as tf\n"
        f"    {IMPORT_TEXT_OPS}  # registers the tokenizer's ops\n"
        f"    served = tf.saved_model.load({path!r})\n"
        '    served.serving_default(tf.constant(["..."]))  # inputs in order or by name; '
        "defaults filled\n"
        '    served.signatures["serving_default"](**inputs)  # every input by name\n\n'
        f'In Keras: keras.layers.TFSMLayer({path!r}, call_endpoint="serving_default") '
        "(its first input positionally, any others by name).\n"
    )


def _write_readme(folder, serving, signatures):
    """`assets.extra/README.txt`: what the export is, how to load it, and its
    signatures' inputs (in order) and outputs. `assets.extra` is SavedModel's
    folder for files beside the graph: loaders leave it alone and TensorFlow
    Serving reads only `tf_serving_warmup_requests` there."""
    lines = [
        f"A keras_bert export of a {type(serving.model).__name__} ({serving.task}): "
        "strings in, answers out, the tokenizer inside the graph.",
        "",
        load_instructions("path/to/this/folder"),
        "Signatures (inputs in order -> outputs):",
    ]
    for name, function in signatures.items():
        inputs = ", ".join(spec.name for spec in function.input_signature)
        outputs = ", ".join(sorted(function.get_concrete_function().structured_outputs))
        lines.append(f"  {name}({inputs}) -> {outputs}")
    extra = f"{folder.rstrip('/')}/{ASSETS_EXTRA}"
    tf.io.gfile.makedirs(extra)
    with tf.io.gfile.GFile(f"{extra}/README.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


# === From a fine-tuning output folder (the `keras-bert export` command) ===


def export_model_dir(
    model_dir: str,
    output: str,
    vocab_file: str | None = None,
    lowercase: bool | None = None,
    seq_length: int | None = None,
    overwrite: bool = False,
    **task_options: Any,
) -> str:
    """Exports a `keras-bert finetune` output folder (`model.keras`, `vocab.txt`,
    `finetune_config.json`) or, for embeddings, a pretrained checkpoint
    (HuggingFace folder, TF1 checkpoint, `.keras` encoder).

    `lowercase=None` takes the casing the model was fine-tuned with, or the
    checkpoint's (`keras_bert.checkpoints.source.tokenizer_settings`); a value
    given must agree with it.
    `output` must be `EXPORT_DIR/NAME/VERSION` with an integer VERSION.
    """
    version = os.path.basename(os.path.normpath(output))
    if not re.fullmatch(r"\d+", version):
        raise ValueError(
            f"--output {output}: the last folder must be an integer version "
            "(TensorFlow Serving's layout EXPORT_DIR/NAME/VERSION, e.g. models/sst2/1)"
        )
    safe_output.check_not_input(output, [model_dir, vocab_file], "--output")
    from keras_bert.checkpoints.source import resolve, tokenizer_options, tokenizer_settings
    from keras_bert.text.tokenizer import BertTokenizer

    config_path = os.path.join(model_dir, "finetune_config.json")
    if os.path.exists(config_path):
        import keras

        import keras_bert.models  # noqa: F401 (registers the classes load_model looks up)

        with open(config_path, encoding="utf-8") as f:
            saved = json.load(f)
        source = resolve(model_dir)
        tokenizer = BertTokenizer(
            *tokenizer_settings(source, vocab_file, lowercase), **tokenizer_options(source)
        )
        model = keras.models.load_model(os.path.join(model_dir, "model.keras"), compile=False)
        options = {}
        if saved.get("task") == "squad":  # the run's span options, those it saved
            from keras_bert.preprocessing.squad import SpanFinder

            options = {key: saved[key] for key in SpanFinder.OPTIONS if key in saved}
        if saved.get("multi_label"):  # the run's threshold, unless given
            options["threshold"] = saved.get("threshold", 0.5)
        options.update(task_options)
        return export_saved_model(
            model,
            tokenizer,
            output,
            seq_length=seq_length or saved.get("seq_length"),
            label_names=saved.get("label_names"),
            overwrite=overwrite,
            **options,
        )
    from keras_bert.models.encoder import BertEncoder

    source = resolve(model_dir)
    tokenizer = BertTokenizer(
        *tokenizer_settings(source, vocab_file, lowercase), **tokenizer_options(source)
    )
    encoder = BertEncoder.from_pretrained(source)
    return export_saved_model(
        encoder, tokenizer, output, seq_length=seq_length, overwrite=overwrite, **task_options
    )
