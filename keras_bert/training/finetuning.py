"""Fine-tuning and evaluation: `finetune(FinetuneConfig)` and `evaluate(...)`.

One driver for the four task families of the paper:

  classify  sentence (pair) classification, `BertClassifier`;
  regress   sentence (pair) regression (STS-B), `BertClassifier(num_classes=1)`;
  tag       token tagging on first word pieces, `BertTokenClassifier`;
  squad     extractive QA (SQuAD v1.1 / v2.0), `BertSpanExtractor`.

Data comes from files (TSV / CSV / JSONL tables, GLUE TSVs, CoNLL files,
SQuAD JSON) or from TFDS, written `tfds:<name>:<split>` (`tfds:glue/cola:train`,
`tfds:conll2003:dev`, `tfds:squad/v2.0:validation`). Each run writes to
`output_dir`: `model.keras`, `vocab.txt`, `finetune_config.json` (what
`evaluate` needs), `dev_results.json` and TensorBoard logs; `search="paper"`
runs the paper's grid and writes `search_results.md`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import time
import weakref
from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.source import resolve, tokenizer_settings
from keras_bert.config import BertConfig
from keras_bert.models.batch_trimming import LENGTH_MULTIPLE
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.tagger import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor, config_sharing_preprocessor
from keras_bert.progress import Progress
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.training import distribute
from keras_bert.training.checkpointing import write_json
from keras_bert.training.finetuning_run import FinetuneRun, RunResult, discard_run_state
from keras_bert.training.recipe_files import read_recipe

TASKS = ("classify", "regress", "tag", "squad")
DATA_FORMATS = {
    "classify": "a TSV/CSV/JSONL table of text column(s) and a label column, or GLUE",
    "regress": "a TSV/CSV/JSONL table of text column(s) and a numeric label, or GLUE STS-B",
    "tag": "a CoNLL file (word<TAB>tag lines) or tfds:conll2003",
    "squad": "a SQuAD JSON file or tfds:squad/*",
}
# The paper's fine-tuning grid (Appendix A.3).
PAPER_GRID = {"batch_size": (16, 32), "learning_rate": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
# Its GLUE protocol (Section 4.1): batch 32, 3 epochs, the best of four learning rates on dev.
GLUE_GRID = {"batch_size": (32,), "learning_rate": (5e-5, 4e-5, 3e-5, 2e-5), "epochs": (3,)}
SEARCHES = ("paper", "glue")


@dataclasses.dataclass
class FinetuneConfig:
    """Everything one fine-tuning run needs; plain data (saved as JSON)."""
    task: str                          # one of TASKS
    train: str = None                  # file or tfds:<name>:<split>
    dev: str = None
    init_checkpoint: str = None        # .keras encoder, HF folder, TF1 checkpoint or folder
    output_dir: str = None
    vocab_file: str = None             # default: the checkpoint's vocab.txt, else shipped uncased
    lowercase: bool = None             # None: the checkpoint's casing (tokenizer_settings)
    preset: str = "tiny"               # encoder size without --init-checkpoint (smoke tests)
    seq_length: int = 128
    batch_size: int = 32
    learning_rate: float = 5e-5
    epochs: float = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clipnorm: float = 1.0              # global-norm gradient clipping (the original's); null: none
    dropout: float = 0.1
    seed: int = 0
    lora_rank: int | None = None       # LoRA adapters of this rank, the encoder frozen
    # Tables and GLUE.
    glue_task: str = None              # read train/dev as this GLUE task (TSV or tfds)
    text_columns: list = None
    label_column: str = "label"
    label_names: list = None           # default: the labels seen in train, sorted
    # SQuAD.
    version_2_with_negative: bool = False
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    null_score_diff_threshold: float = 0.0
    # Run control.
    max_train_examples: int = None     # a prefix of the training data (smoke runs)
    max_dev_examples: int = None
    eval_batch_size: int = 64
    early_stopping_patience: int = None  # epochs without dev improvement before stopping
    steps_per_epoch: int = None        # for smoke tests; default: the whole training set
    bucket_by_length: bool = False     # batches of similar lengths (faster; changes batching)
    # Devices, precision, XLA: the names of PretrainConfig (keras_bert.training.distribute).
    strategy: str = "auto"             # auto, one_device, mirrored, multi_worker, tpu
    tpu: str = None                    # TPU name or grpc:// address for strategy "tpu"
    devices: list = None               # for "mirrored": e.g. ["/gpu:0", "/gpu:1"]
    mixed_precision: str = None        # bfloat16 (TPU, CPU) or float16 (GPU, loss-scaled)
    jit_compile: object = "auto"       # XLA: true, false, auto (on with a GPU / TPU)
    gradient_accumulation_steps: int = 1  # micro-batches of batch_size per update
    train_loop: str = "auto"           # fit, or custom (strategy.run; multi-worker's)
    # Checkpoints (output_dir/checkpoints): every N steps and at each epoch's end.
    checkpoint_every: int = None       # None: at the end of each epoch only
    keep_checkpoints: int = 2
    log_every: int = 50                # steps between train_log.jsonl / TensorBoard records
    tensorboard: bool = True
    verbose: int | str = "auto"  # Keras progress: "auto" (a bar on a terminal, else 2), 0, 1, 2
    search: str = None                 # "paper" (Appendix A.3's grid) or "glue" (Section 4.1's)
    restarts: int = 1                  # random restarts per grid point
    tune_null_threshold: bool = False  # SQuAD v2.0: keep dev's best no-answer threshold
    overwrite: bool = False            # replace a finished model (or unfinished run) in output_dir

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        for name in ("seq_length", "batch_size", "doc_stride", "max_query_length",
                     "max_answer_length", "n_best_size", "eval_batch_size", "restarts",
                     "max_train_examples", "max_dev_examples", "early_stopping_patience",
                     "steps_per_epoch", "gradient_accumulation_steps", "checkpoint_every",
                     "keep_checkpoints", "log_every", "lora_rank"):
            value = getattr(self, name)
            if value is None and name not in ("seq_length", "batch_size"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.seq_length < 3:
            raise ValueError(f"seq_length must be at least 3 ([CLS] a word [SEP]), "
                             f"got {self.seq_length}")
        if not self.epochs > 0:
            raise ValueError(f"epochs must be > 0 (a run with no training writes an "
                             f"untrained model), got {self.epochs!r}")
        if not 0 <= self.warmup_proportion <= 1 or not 0 <= self.dropout < 1:
            raise ValueError("warmup_proportion must lie in [0, 1] and dropout in [0, 1)")
        distribute.check_runtime_fields(self)


# === Encoder and tokenizer ===


def load_encoder(init_checkpoint: str | None, preset: str = "tiny",
                 dtype: str | None = None) -> BertEncoder:
    """BertEncoder from any pretrained source `BertEncoder.from_pretrained` reads
    (HuggingFace, TF1, `.keras` files of an encoder or a model with an
    `encoder`, finetune outputs, pretraining model_dirs), or random weights of
    `preset`; `dtype` a Keras dtype policy (e.g. "mixed_bfloat16")."""
    if not init_checkpoint:
        return BertEncoder(BertConfig.preset(preset), dtype=dtype)
    return BertEncoder.from_pretrained(init_checkpoint, dtype=dtype)


def resolve_tokenizer(config: FinetuneConfig) -> tuple[BertTokenizer, str, FinetuneConfig]:
    """The run's tokenizer, its vocabulary file, and the config with the casing
    decided: the checkpoint's unless `lowercase` is given (a contradiction fails)."""
    source = resolve(config.init_checkpoint) if config.init_checkpoint else None
    vocab_file, lowercase = tokenizer_settings(source, config.vocab_file, config.lowercase)
    tokenizer = BertTokenizer(vocab_file, lowercase=lowercase)
    return tokenizer, vocab_file, dataclasses.replace(config, lowercase=lowercase)


def in_memory_columns(data: Any, tuple_names: Sequence[str] = ("text", "label")) -> Any:
    """In-memory training data as columns: a dict / DataFrame passes through,
    a tuple becomes named columns, a `tf.data.Dataset` of dicts or tuples
    (unbatched) is read into lists."""
    if isinstance(data, tf.data.Dataset):
        rows = list(data.as_numpy_iterator())
        if rows and isinstance(rows[0], dict):
            return {name: [row[name] for row in rows] for name in rows[0]}
        return {name: [row[i] for row in rows] for i, name in enumerate(
            tuple_names if not rows or len(rows[0]) == 2 else ("text", "text_pair", "label"))}
    if isinstance(data, tuple) and len(data) == 2:
        return dict(zip(tuple_names, data))
    return data


def _name(source: Any) -> str:
    """How errors name the data: its path, or "in-memory data"."""
    return source if isinstance(source, str) else "in-memory data"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _tfds_spec(source):
    """`tfds:<name>:<split>` -> (name, split), else None."""
    if not source or not source.startswith("tfds:"):
        return None
    parts = source.split(":")
    if len(parts) != 3:
        raise ValueError(f"TFDS source must read tfds:<name>:<split>, got {source!r}")
    return parts[1], parts[2]


def _prefix(n, limit):
    return n if limit is None else min(n, limit)


# === Tasks: data, model, loss and evaluation of each family ===


class _ClassificationTask:
    """classify / regress on tables or GLUE."""

    def __init__(self, config, tokenizer):
        self.config, self.tokenizer = config, tokenizer
        self.regression = config.task == "regress"
        self.glue = None
        if config.glue_task:
            from keras_bert.tasks.glue import get_task
            self.glue_name, self.glue = get_task(config.glue_task)
            if self.glue.regression != self.regression:
                raise ValueError(f"GLUE task {self.glue_name} needs --task "
                                 f"{'regress' if self.glue.regression else 'classify'}")
        self.label_names = None if self.regression else config.label_names
        if self.glue is not None and not self.regression:
            self.label_names = list(self.glue.label_names)

    def read(self, source, limit):
        from keras_bert.tasks import glue, text_classification
        spec = _tfds_spec(source) if isinstance(source, str) else None
        if not isinstance(source, str):
            examples = text_classification.text_examples_from_columns(
                in_memory_columns(source), self.config.text_columns,
                self.config.label_column, self.regression, source=_name(source))
        elif spec is not None:
            name, split = spec
            if not name.startswith("glue/"):
                raise ValueError(f"{source}: classification reads TFDS glue/<task> only")
            examples = glue.read_glue_tfds(self.glue_name if self.glue else name[5:], split)
        elif self.glue is not None:
            examples = glue.read_glue_tsv(self.glue_name, source)
        else:
            examples = text_classification.read_text_examples(
                source, self.config.text_columns, self.config.label_column, self.regression)
        n = _prefix(len(examples), limit)
        examples.texts_a, examples.labels = examples.texts_a[:n], examples.labels[:n]
        examples.ids = examples.ids[:n]
        if examples.texts_b is not None:
            examples.texts_b = examples.texts_b[:n]
        return examples

    def prepare(self, source, limit=None, training=False):
        from keras_bert.tasks.text_classification import (encode_labels, encode_texts,
                                                          label_vocabulary)
        examples = self.read(source, limit)
        if training and self.label_names is None and not self.regression:
            self.label_names = label_vocabulary(examples.labels)
        features = encode_texts(self.tokenizer, examples.texts_a, examples.texts_b,
                                self.config.seq_length)
        targets = encode_labels(examples.labels, self.label_names, _name(source))
        return {"features": features, "targets": targets, "weights": None,
                "examples": examples, "source": _name(source)}

    def build_model(self, encoder):
        num_classes = 1 if self.regression else len(self.label_names)
        return BertClassifier(encoder, num_classes, dropout=self.config.dropout,
                              label_names=self.label_names,
                              preprocessor=preprocessor_of(self.config, self.tokenizer))

    @property
    def primary_metric(self):
        if self.glue is not None:
            return self.glue.metric
        return "pearson" if self.regression else "accuracy"

    def evaluate(self, model, data):
        from keras_bert.tasks import metrics
        from keras_bert.tasks.glue import glue_metrics
        outputs = predict(model, data["features"], self.config.eval_batch_size)
        if self.regression:
            predictions, labels = outputs[:, 0], data["targets"][:, 0]
        else:
            predictions, labels = np.argmax(outputs, axis=-1), data["targets"]
        if self.glue is not None:
            return glue_metrics(self.glue_name, labels, predictions)
        if self.regression:
            return {"pearson": metrics.pearson(labels, predictions),
                    "spearman": metrics.spearman(labels, predictions)}
        result = {"accuracy": metrics.accuracy(labels, predictions)}
        if len(self.label_names) == 2:
            result["f1"] = metrics.f1(labels, predictions)
        return result


class _TaggingTask:
    """tag: CoNLL files or tfds:conll2003."""

    def __init__(self, config, tokenizer):
        self.config, self.tokenizer = config, tokenizer
        self.label_names = config.label_names

    def prepare(self, source, limit=None, training=False):
        from keras_bert.tasks import tagging
        spec = _tfds_spec(source) if isinstance(source, str) else None
        if not isinstance(source, str):
            columns = in_memory_columns(source, ("words", "tags"))
            sentences = tagging.TaggedSentences(
                [w.split() if isinstance(w, str) else [_text(x) for x in w]
                 for w in columns["words"]],
                [[_text(t) for t in row] for row in columns["tags"]])
        elif spec is not None:
            if spec[0] != "conll2003":
                raise ValueError(f"{source}: tagging reads TFDS conll2003 only")
            sentences = tagging.read_conll2003_tfds(spec[1])
        else:
            sentences = tagging.read_conll(source)
        n = _prefix(len(sentences), limit)
        sentences = tagging.TaggedSentences(sentences.words[:n], sentences.tags[:n])
        if training and self.label_names is None:
            self.label_names = tagging.tag_vocabulary(sentences.tags)
        features, labels, weights, first_pieces = tagging.encode_tagged(
            self.tokenizer, sentences, self.label_names, self.config.seq_length, strict=training)
        # Ignored pieces get a valid id; their weight 0 removes them from the loss.
        return {"features": features, "targets": np.maximum(labels, 0), "weights": weights,
                "examples": sentences, "first_pieces": first_pieces,
                "source": _name(source)}

    def build_model(self, encoder):
        return BertTokenClassifier(encoder, len(self.label_names), dropout=self.config.dropout,
                                   label_names=self.label_names,
                                   preprocessor=preprocessor_of(self.config, self.tokenizer))

    primary_metric = "f1"

    def evaluate(self, model, data):
        from keras_bert.tasks.metrics import entity_scores
        from keras_bert.tasks.tagging import decode_tags
        logits = predict(model, data["features"], self.config.eval_batch_size)
        predicted = decode_tags(np.argmax(logits, axis=-1), data["first_pieces"],
                                self.label_names)
        return entity_scores(data["examples"].tags, predicted)


class _SquadTask:
    """squad: SQuAD JSON files or tfds:squad/<version>:<split>."""

    label_names = None

    def __init__(self, config, tokenizer):
        self.config, self.tokenizer = config, tokenizer

    def prepare(self, source, limit=None, training=False):
        from keras_bert.tasks import squad
        spec = _tfds_spec(source) if isinstance(source, str) else None
        if not isinstance(source, str):
            dataset = source["data"] if isinstance(source, Mapping) else list(source)
        elif spec is not None:
            if not spec[0].startswith("squad"):
                raise ValueError(f"{source}: span extraction reads TFDS squad/* only")
            dataset = squad.read_squad_tfds(spec[0], spec[1])
        else:
            dataset = squad.load_squad_json(source)
        examples = squad.read_squad_examples(
            dataset, is_training=training,
            version_2_with_negative=self.config.version_2_with_negative, source=_name(source))
        examples = examples[:_prefix(len(examples), limit)]
        features = squad.convert_examples_to_features(
            examples, self.tokenizer, self.config.seq_length, self.config.doc_stride,
            self.config.max_query_length, is_training=training)
        arrays = squad.feature_arrays(features)
        targets = {"start_logits": arrays.pop("start_positions"),
                   "end_logits": arrays.pop("end_positions")}
        return {"features": arrays, "targets": targets, "weights": None,
                "examples": examples, "squad_features": features,
                "dataset": dataset, "source": _name(source)}

    def build_model(self, encoder):
        return BertSpanExtractor(encoder, max_answer_length=self.config.max_answer_length,
                                 preprocessor=preprocessor_of(self.config, self.tokenizer))

    @property
    def primary_metric(self):
        return "best_f1" if self.config.version_2_with_negative else "f1"

    def predict(self, model, data):
        from keras_bert.tasks import squad
        outputs = predict(model, data["features"], self.config.eval_batch_size)
        return squad.postprocess(
            data["examples"], data["squad_features"], outputs["start_logits"],
            outputs["end_logits"], n_best_size=self.config.n_best_size,
            max_answer_length=self.config.max_answer_length,
            version_2_with_negative=self.config.version_2_with_negative,
            null_score_diff_threshold=self.config.null_score_diff_threshold)

    def evaluate(self, model, data):
        from keras_bert.tasks import metrics
        predictions, na_scores, _ = self.predict(model, data)
        evaluated = {e.qas_id for e in data["examples"]}
        dataset = _restrict_squad(data["dataset"], evaluated)
        if self.config.version_2_with_negative:
            return metrics.squad_v2_scores(dataset, predictions, na_scores,
                                           na_prob_threshold=self.config.null_score_diff_threshold)
        return metrics.squad_v1_scores(dataset, predictions)


def _restrict_squad(dataset, qids):
    """The SQuAD `data` list cut to the questions in `qids` (for --max-dev-examples)."""
    articles = []
    for article in dataset:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for qa in paragraph["qas"] if qa["id"] in qids]
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            articles.append({**article, "paragraphs": paragraphs})
    return articles


def preprocessor_of(config: FinetuneConfig, tokenizer: BertTokenizer) -> BertPreprocessor:
    """The preprocessor saved inside the fine-tuned model: the run's
    vocabulary, casing and sequence length, so `model.keras` takes text."""
    return BertPreprocessor(tokenizer.vocab, lowercase=tokenizer.lowercase,
                            seq_length=config.seq_length,
                            max_chars_per_word=tokenizer.max_chars_per_word)


def make_task(config: FinetuneConfig, tokenizer: BertTokenizer
              ) -> _ClassificationTask | _TaggingTask | _SquadTask:
    if config.task in ("classify", "regress"):
        return _ClassificationTask(config, tokenizer)
    if config.task == "tag":
        return _TaggingTask(config, tokenizer)
    return _SquadTask(config, tokenizer)


# === Training ===


_FORWARD = weakref.WeakKeyDictionary()


def _forward(model):
    """`model(batch)` as one tf.function per model. Not `predict_on_batch`:
    under MultiWorkerMirroredStrategy that runs on every worker's replicas
    and gathers their outputs, while each worker here scores the whole dev
    set on its own (the weights are the same everywhere)."""
    if model not in _FORWARD:
        _FORWARD[model] = tf.function(lambda batch: model(batch, training=False),
                                      reduce_retracing=True)
    return _FORWARD[model]


def predict(model: keras.Model, features: Mapping[str, np.ndarray], batch_size: int = 64
            ) -> np.ndarray | dict[str, np.ndarray]:
    """Model outputs for NumPy features, batch by batch on similar lengths with
    padding cut (see `keras_bert.models.batch_trimming`); outputs come back in
    the input order, zero-padded to the full sequence length. A model built
    under a TPUStrategy predicts there, at full length (static shapes)."""
    if isinstance(getattr(model, "distribute_strategy", None), tf.distribute.TPUStrategy):
        return model.predict(dict(features), batch_size=batch_size, verbose=0)
    seq_length = features["input_ids"].shape[1]
    lengths = features["input_mask"].sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    pieces = []
    with Progress(len(order), "sequences", detail="predicting") as bar:
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            length = min(-(-int(lengths[index].max()) // LENGTH_MULTIPLE) * LENGTH_MULTIPLE,
                         seq_length)
            batch = {k: v[index, :length] for k, v in features.items()}
            pieces.append(keras.tree.map_structure(np.asarray, _forward(model)(batch)))
            bar.advance(len(index))

    # Taggers and span extractors return a token axis, padded back to seq_length.
    per_token = not isinstance(model, BertClassifier)

    def pad(output):
        if not per_token:
            return output
        widths = [(0, 0), (0, seq_length - output.shape[1])] + [(0, 0)] * (output.ndim - 2)
        return np.pad(output, widths)

    def unsort(*parts):
        merged = np.concatenate(parts)
        result = np.empty_like(merged)
        result[order] = merged
        return result

    pieces = [keras.tree.map_structure(pad, piece) for piece in pieces]
    return keras.tree.map_structure(unsort, *pieces)


def _single_run(config: FinetuneConfig, task, train_data, dev_data, run_dir=None,
                vocab_file=None, strategy=None) -> RunResult:
    """Trains one model, resuming `run_dir`'s checkpoints (see `finetuning_run`)."""
    return FinetuneRun(
        config, task, train_data, dev_data, run_dir,
        build_encoder=lambda dtype: load_encoder(config.init_checkpoint, config.preset, dtype),
        save_model=lambda model, directory, results: save_finetuned(
            model, config, task, vocab_file, directory, results), strategy=strategy).run()


def save_finetuned(model: keras.Model, config: FinetuneConfig,
                   task: _ClassificationTask | _TaggingTask | _SquadTask,
                   tokenizer_vocab: str, output_dir: str,
                   dev_results: dict[str, Any] | None = None) -> None:
    """Writes vocab.txt, finetune_config.json, dev_results.json and model.keras,
    each whole, model.keras last: a folder with model.keras is complete."""
    os.makedirs(output_dir, exist_ok=True)
    if getattr(model, "lora_rank", None):
        model.save_lora_weights(os.path.join(output_dir, "lora_weights.npz"))
        model = model.merge_lora()  # model.keras: the merged model, loadable without adapters
    shutil.copyfile(tokenizer_vocab, os.path.join(output_dir, "vocab.txt.partial"))
    os.replace(os.path.join(output_dir, "vocab.txt.partial"), os.path.join(output_dir, "vocab.txt"))
    saved = dataclasses.asdict(config)
    saved["label_names"] = task.label_names
    write_json(os.path.join(output_dir, "finetune_config.json"), saved)
    if dev_results is not None:
        write_json(os.path.join(output_dir, "dev_results.json"), dev_results)
    # A plain, uncompiled copy outside any strategy: loading it needs neither
    # the optimizer nor its schedule nor the devices it trained on.
    plain = model.__class__.from_config(config_sharing_preprocessor(model))
    plain.set_weights(model.get_weights())
    partial = os.path.join(output_dir, "model.partial.keras")
    plain.save(partial)
    os.replace(partial, os.path.join(output_dir, "model.keras"))


def finetune(config: FinetuneConfig, train: Any = None, dev: Any = None) -> dict[str, Any]:
    """Fine-tunes and scores on dev; returns a dict of results.

    The data: `config.train` / `config.dev` (files or `tfds:` names), or
    in memory as `train` / `dev`: for classification and regression a dict
    of columns (`text`, optional `text_pair`, `label`; or a DataFrame), a
    (texts, labels) tuple or an unbatched `tf.data.Dataset` of those; for
    tagging {"words": word lists or texts, "tags": tag lists}; for SQuAD the
    SQuAD JSON's `data` list.

    With an `output_dir`, the run is checkpointed and rerunning the same
    command after a kill resumes it (`keras_bert.training.finetuning_run`);
    `overwrite` starts afresh.

    With `config.search == "paper"`, every (batch size, learning rate,
    epochs) of the paper's grid is run `config.restarts` times with different
    seeds; the best dev run is kept and a results table is written.
    """
    train = config.train if train is None else train
    dev = config.dev if dev is None else dev
    if train is None or (isinstance(train, str) and not train):
        raise ValueError("finetune needs --train (or in-memory `train` data)")
    finished = os.path.join(config.output_dir or "", "model.keras")
    if config.output_dir and os.path.exists(finished) and not config.overwrite:
        raise FileExistsError(f"{config.output_dir} already holds a fine-tuned model "
                              f"({finished}); pass --overwrite to replace it, or choose "
                              "another --output-dir")
    # The strategy before the data is read: multi-worker collectives must be
    # configured before TensorFlow's runtime starts, which tokenizing does.
    strategy = distribute.build_strategy(config.strategy, tpu=config.tpu, devices=config.devices)
    tokenizer, vocab_file, config = resolve_tokenizer(config)
    task = make_task(config, tokenizer)
    try:
        train_data = task.prepare(train, config.max_train_examples, training=True)
        dev_data = task.prepare(dev, config.max_dev_examples) if dev is not None else None
    except ValueError as e:
        raise ValueError(f"{e} (--task {config.task} reads {DATA_FORMATS[config.task]})") \
            from None
    if config.output_dir and config.overwrite:
        discard_run_state(config.output_dir)
        shutil.rmtree(os.path.join(config.output_dir, RUNS), ignore_errors=True)
    if config.search is None:
        start = time.time()
        run = _single_run(config, task, train_data, dev_data, config.output_dir, vocab_file,
                          strategy)
        result = {"dev": run.dev, "best_epoch": run.best_epoch, "steps": run.steps,
                  "seconds": round(time.time() - start, 1), "primary_metric": task.primary_metric}
        config = _with_tuned_threshold(config, run.dev)
        if config.output_dir and run.chief:
            _finish(run.model, config, task, vocab_file, config.output_dir, result)
        return result
    if config.search not in SEARCHES:
        raise ValueError(f"unknown search {config.search!r}; choose one of {SEARCHES}")
    if dev_data is None:
        raise ValueError("--search needs --dev to choose the best run")
    return _paper_search(config, task, train_data, dev_data, vocab_file, strategy)


RUNS = "runs"  # the search's runs, one folder each, under output_dir


def load_finetune_config(path: str | None = None, overrides: Sequence[str] = (),
                         **fields: Any) -> FinetuneConfig:
    """A FinetuneConfig from a YAML/JSON recipe (`recipes/finetuning/*.yaml`),
    then `key=value` overrides, then `fields` (the command's flags)."""
    return read_recipe(FinetuneConfig, path, overrides, float_fields=(
        "learning_rate", "epochs", "warmup_proportion", "weight_decay", "dropout",
        "null_score_diff_threshold", "clipnorm"), **fields)


def _with_tuned_threshold(config, dev_metrics):
    """SQuAD v2.0 with `tune_null_threshold`: the no-answer threshold that
    maximises dev F1 (the official script's best_f1_thresh) becomes the
    model's own, saved in finetune_config.json for evaluate, predict, export."""
    if not (config.task == "squad" and config.version_2_with_negative
            and config.tune_null_threshold and dev_metrics):
        return config
    threshold = float(dev_metrics["best_f1_thresh"])
    print(f"null_score_diff_threshold tuned on dev: {threshold:.4f} "
          f"(best_f1 {dev_metrics['best_f1']:.2f})", flush=True)
    return dataclasses.replace(config, null_score_diff_threshold=threshold)


def _finish(model, config, task, vocab_file, directory, results):
    """The finished run's folder: the model whole, its training state gone."""
    save_finetuned(model, config, task, vocab_file, directory, results)
    discard_run_state(directory, keep_logs=True)


def _paper_search(config, task, train_data, dev_data, vocab_file, strategy):
    """The grid, one run after another; each run finished before is read back
    (a killed search resumes at its first unfinished run, mid-run included)."""
    rows, best = [], None
    grid = PAPER_GRID if config.search == "paper" else GLUE_GRID
    grid = itertools.product(grid["batch_size"], grid["learning_rate"], grid["epochs"],
                             range(config.restarts))
    for batch_size, learning_rate, epochs, restart in grid:
        run_config = dataclasses.replace(config, batch_size=batch_size, learning_rate=learning_rate,
                                         epochs=epochs, seed=config.seed + restart, search=None)
        name = f"b{batch_size}_lr{learning_rate:g}_e{epochs}_s{run_config.seed}"
        run_dir = os.path.join(config.output_dir, RUNS, name) if config.output_dir else None
        done = _finished_search_run(run_dir)
        if done is not None:
            print(f"{run_dir}: finished before, {task.primary_metric} "
                  f"{done['dev'][task.primary_metric]:.4f}", flush=True)
            row, dev_metrics = done["run"], done["dev"]
        else:
            start = time.time()
            run = _single_run(run_config, task, train_data, dev_data, run_dir, vocab_file,
                              strategy)
            dev_metrics = run.dev
            row = {"batch_size": batch_size, "learning_rate": learning_rate, "epochs": epochs,
                   "seed": run_config.seed, "best_epoch": run.best_epoch,
                   task.primary_metric: dev_metrics[task.primary_metric],
                   "seconds": round(time.time() - start, 1)}
            if run_dir and run.chief:
                _finish(run.model, _with_tuned_threshold(run_config, dev_metrics), task,
                        vocab_file, run_dir, {"dev": dev_metrics, "run": row})
        rows.append(row)
        if best is None or row[task.primary_metric] > best[1][task.primary_metric]:
            if best is not None and best[0]:
                _drop_model(best[0])  # only the best run's model stays on disk
            best = (run_dir, row, dev_metrics)
        elif run_dir:
            _drop_model(run_dir)
    table = results_table(rows, task.primary_metric)
    if config.output_dir:
        _adopt_run(best[0], config.output_dir)
        with open(os.path.join(config.output_dir, "search_results.md"), "w") as f:
            f.write(table)
    print(table, flush=True)
    return {"dev": best[2], "best_run": best[1], "runs": rows, "table": table,
            "primary_metric": task.primary_metric}


def _finished_search_run(run_dir):
    path = os.path.join(run_dir, "dev_results.json") if run_dir else None
    if path is None or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _drop_model(run_dir):
    path = os.path.join(run_dir, "model.keras")
    if os.path.exists(path):
        os.remove(path)


def _adopt_run(run_dir, output_dir):
    """The best run's files become output_dir's own, model.keras last."""
    names = ["vocab.txt", "finetune_config.json", "dev_results.json", "model.keras"]
    if os.path.exists(os.path.join(run_dir, "lora_weights.npz")):
        names.insert(0, "lora_weights.npz")
    for name in names:
        shutil.copyfile(os.path.join(run_dir, name), os.path.join(output_dir, name + ".partial"))
        os.replace(os.path.join(output_dir, name + ".partial"), os.path.join(output_dir, name))


def results_table(rows: Sequence[Mapping[str, Any]], metric: str) -> str:
    """Markdown table of the search, best run marked."""
    best = max(range(len(rows)), key=lambda i: rows[i][metric])
    lines = [f"| batch | learning rate | epochs | seed | best epoch | dev {metric} | seconds |",
             "|---|---|---|---|---|---|---|"]
    for i, row in enumerate(rows):
        mark = " **best**" if i == best else ""
        lines.append(f"| {row['batch_size']} | {row['learning_rate']:g} | {row['epochs']} | "
                     f"{row['seed']} | {row['best_epoch']} | {row[metric]:.4f}{mark} | "
                     f"{row['seconds']} |")
    return "\n".join(lines) + "\n"


# === Evaluation of a saved model ===


def load_finetuned(model_dir: str) -> tuple[keras.Model, dict[str, Any]]:
    """A `finetune` output folder -> (its model, taking text; its saved config).

    Folders written before models carried their preprocessor get one from
    their vocab.txt and finetune_config.json (casing, sequence length)."""
    config_path = os.path.join(model_dir, "finetune_config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{model_dir}: no finetune_config.json (not a finetune output)")
    with open(config_path) as f:
        saved = json.load(f)
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    if getattr(model, "preprocessor", None) is None:
        config = FinetuneConfig(**saved)
        model.preprocessor = preprocessor_of(config, BertTokenizer(
            os.path.join(model_dir, "vocab.txt"), lowercase=config.lowercase))
    return model, saved


def evaluate(model_dir: str, data: str, **overrides: Any) -> dict[str, Any]:
    """Scores a fine-tuned model (a `finetune` output folder) on `data`.

    The task, vocabulary, sequence length and labels come from the folder's
    `finetune_config.json`; `overrides` change any of its fields (for
    instance `null_score_diff_threshold` for SQuAD v2.0).
    """
    config_path = os.path.join(model_dir, "finetune_config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{model_dir}: no finetune_config.json (not a finetune output)")
    with open(config_path) as f:
        saved = json.load(f)
    saved.update({k: v for k, v in overrides.items() if v is not None})
    config = FinetuneConfig(**saved)
    # The casing the model was fine-tuned with (finetune_config.json); an override must agree.
    vocab_file, lowercase = tokenizer_settings(resolve(model_dir), lowercase=config.lowercase)
    tokenizer = BertTokenizer(vocab_file, lowercase=lowercase)
    task = make_task(config, tokenizer)
    task.label_names = saved["label_names"]
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    try:
        data = task.prepare(data, config.max_dev_examples)
    except ValueError as e:
        raise ValueError(f"{e} (the model in {model_dir} was fine-tuned with --task "
                         f"{config.task}, which reads {DATA_FORMATS[config.task]})") from None
    return task.evaluate(model, data)
