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
import math
import os
import shutil
import time
import warnings
from typing import Any, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.source import resolve, tokenizer_settings
from keras_bert.config import BertConfig
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.tagger import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor
from keras_bert.progress import Progress, keras_verbose
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.training.optimization import create_adamw

TASKS = ("classify", "regress", "tag", "squad")
DATA_FORMATS = {
    "classify": "a TSV/CSV/JSONL table of text column(s) and a label column, or GLUE",
    "regress": "a TSV/CSV/JSONL table of text column(s) and a numeric label, or GLUE STS-B",
    "tag": "a CoNLL file (word<TAB>tag lines) or tfds:conll2003",
    "squad": "a SQuAD JSON file or tfds:squad/*",
}
# The paper's fine-tuning grid (Appendix A.3).
PAPER_GRID = {"batch_size": (16, 32), "learning_rate": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}


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
    tensorboard: bool = True
    verbose: int | str = "auto"  # Keras progress: "auto" (a bar on a terminal, else 2), 0, 1, 2
    search: str = None                 # "paper": the batch x lr x epochs grid
    restarts: int = 1                  # random restarts per grid point
    overwrite: bool = False            # replace a finished model already in output_dir

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        for name in ("seq_length", "batch_size", "doc_stride", "max_query_length",
                     "max_answer_length", "n_best_size", "eval_batch_size", "restarts",
                     "max_train_examples", "max_dev_examples", "early_stopping_patience",
                     "steps_per_epoch", "lora_rank"):
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


# === Encoder and tokenizer ===


def load_encoder(init_checkpoint: str | None, preset: str = "tiny") -> BertEncoder:
    """BertEncoder from any pretrained source `BertEncoder.from_pretrained` reads
    (HuggingFace, TF1, `.keras` files of an encoder or a model with an
    `encoder`, finetune outputs, pretraining model_dirs), or random weights of `preset`."""
    if not init_checkpoint:
        return BertEncoder(BertConfig.preset(preset))
    return BertEncoder.from_pretrained(init_checkpoint)


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


class DevEvaluation(keras.callbacks.Callback):
    """Scores the dev set with the official metric after every epoch, logs
    `dev_<metric>` (TensorBoard shows it), keeps the best weights and stops
    after `patience` epochs without improvement (None: never stops early)."""

    def __init__(self, task: _ClassificationTask | _TaggingTask | _SquadTask, dev_data: dict,
                 patience: int | None = None) -> None:
        super().__init__()
        self.task, self.dev_data, self.patience = task, dev_data, patience
        self.best, self.best_metrics, self.best_epoch, self.best_weights = -math.inf, None, None, None
        self.history = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        result = self.task.evaluate(self.model, self.dev_data)
        self.history.append(result)
        for name, value in result.items():
            if isinstance(value, (int, float)):
                logs[f"dev_{name}"] = value
        score = result[self.task.primary_metric]
        print(f"\nepoch {epoch + 1}: dev " + ", ".join(
            f"{k} {v:.4f}" for k, v in result.items() if isinstance(v, float)), flush=True)
        if score > self.best:
            self.best, self.best_metrics, self.best_epoch = score, result, epoch + 1
            self.best_weights = self.model.get_weights()
        elif self.patience is not None and epoch + 1 - self.best_epoch >= self.patience:
            self.model.stop_training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


def _trim_to_longest(elements, seq_length, multiple=8):
    """Cuts every (B, seq_length) tensor of a batch to its longest real sequence
    (rounded up to `multiple`, to bound retracing). Padding is masked out of
    attention and carries no label, so outputs on real tokens are unchanged;
    only the wasted work on padding goes."""
    longest = tf.reduce_max(tf.reduce_sum(elements[0]["input_mask"], axis=1))
    length = tf.minimum((longest + multiple - 1) // multiple * multiple, seq_length)

    def trim(t):
        if t.shape.rank == 2 and t.shape[1] == seq_length:
            return t[:, :length]
        return t

    return tf.nest.map_structure(trim, elements)


def _bucket_boundaries(seq_length):
    return list(range(16, seq_length, 16))


def batches_per_epoch(data: Mapping[str, Any], batch_size: int, seq_length: int,
                      bucket_by_length: bool = False) -> int:
    """Batches `_train_dataset` yields in one pass. With length buckets each
    bucket ends on its own partial batch, so there are more than n / batch_size;
    tf.data puts a length in bucket i when boundaries[i-1] <= length < boundaries[i]."""
    lengths = np.asarray(data["features"]["input_mask"]).sum(axis=1)
    if not bucket_by_length:
        return math.ceil(len(lengths) / batch_size)
    buckets = np.searchsorted(_bucket_boundaries(seq_length), lengths, side="right")
    return int(sum(math.ceil(count / batch_size) for count in np.bincount(buckets)))


def _train_dataset(data, batch_size, seed, seq_length, bucket_by_length=False):
    elements = (data["features"], data["targets"])
    if data["weights"] is not None:
        elements += (data["weights"],)
    n = len(next(iter(data["features"].values())))
    dataset = tf.data.Dataset.from_tensor_slices(elements).shuffle(
        n, seed=seed, reshuffle_each_iteration=True)
    if bucket_by_length:
        # Batches of similar lengths: less padding to cut, several times faster on CPU.
        boundaries = _bucket_boundaries(seq_length)
        dataset = dataset.bucket_by_sequence_length(
            lambda *e: tf.reduce_sum(e[0]["input_mask"]), boundaries,
            [batch_size] * (len(boundaries) + 1))
    else:
        dataset = dataset.batch(batch_size)
    dataset = dataset.map(lambda *e: _trim_to_longest(e, seq_length))
    return dataset.prefetch(tf.data.AUTOTUNE)


def predict(model: keras.Model, features: Mapping[str, np.ndarray], batch_size: int = 64
            ) -> np.ndarray | dict[str, np.ndarray]:
    """Model outputs for NumPy features, batch by batch on similar lengths with
    padding cut (see `_trim_to_longest`); outputs come back in the input order,
    zero-padded to the full sequence length."""
    seq_length = features["input_ids"].shape[1]
    lengths = features["input_mask"].sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    pieces = []
    with Progress(len(order), "sequences", detail="predicting") as bar:
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            length = min(-(-int(lengths[index].max()) // 8) * 8, seq_length)
            batch = {k: v[index, :length] for k, v in features.items()}
            pieces.append(model.predict_on_batch(batch))
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


def _single_run(config, task, train_data, dev_data, log_dir=None):
    """Trains one model; returns (model, dev metrics of its best epoch, epoch)."""
    keras.utils.set_random_seed(config.seed)
    # Taggers and span extractors leave the pooler unused: no gradient is expected.
    warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables \['pooler")
    encoder = load_encoder(config.init_checkpoint, config.preset)
    if config.seq_length > encoder.config.max_position_embeddings:
        raise ValueError(f"seq_length {config.seq_length} exceeds the encoder's "
                         f"{encoder.config.max_position_embeddings} positions; use at most that")
    model = task.build_model(encoder)
    if config.lora_rank:
        model.enable_lora(config.lora_rank)
    steps_per_epoch = config.steps_per_epoch or batches_per_epoch(
        train_data, config.batch_size, config.seq_length, config.bucket_by_length)
    epochs = math.ceil(config.epochs)
    total_steps = max(int(steps_per_epoch * config.epochs), 1)
    optimizer = create_adamw(config.learning_rate, total_steps,
                             int(config.warmup_proportion * total_steps),
                             weight_decay=config.weight_decay)
    # The task model's own loss, metrics and loss weights (`TextTask.compile`).
    model.compile(optimizer=optimizer)
    callbacks = []
    evaluation = None
    if dev_data is not None:
        evaluation = DevEvaluation(task, dev_data, config.early_stopping_patience)
        callbacks.append(evaluation)
    if log_dir and config.tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(log_dir, update_freq=50))
    dataset = _train_dataset(train_data, config.batch_size, config.seed, config.seq_length,
                             config.bucket_by_length)
    # One epoch is one pass over the data. Keras keeps a finite dataset's
    # iterator across epochs when given steps_per_epoch, so a count short of
    # the real one leaves batches for the next epoch to run out on. Told the
    # dataset's length instead (checked by tf.data), it starts each epoch
    # afresh and stops exactly at its end.
    fit_steps = None
    if config.steps_per_epoch:
        dataset, fit_steps = dataset.repeat(), steps_per_epoch
    else:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(steps_per_epoch))
    model.fit(dataset, epochs=epochs, steps_per_epoch=fit_steps,
              callbacks=callbacks, verbose=keras_verbose(config.verbose), shuffle=False)
    if evaluation is None:
        return model, None, epochs
    return model, evaluation.best_metrics, evaluation.best_epoch


def save_finetuned(model: keras.Model, config: FinetuneConfig,
                   task: _ClassificationTask | _TaggingTask | _SquadTask,
                   tokenizer_vocab: str, output_dir: str,
                   dev_results: dict[str, Any] | None = None) -> None:
    """Writes model.keras, vocab.txt, finetune_config.json (and dev_results.json)."""
    os.makedirs(output_dir, exist_ok=True)
    if getattr(model, "lora_rank", None):
        model.save_lora_weights(os.path.join(output_dir, "lora_weights.npz"))
        model = model.merge_lora()  # model.keras: the merged model, loadable without adapters
    # A plain, uncompiled copy: loading it needs neither the optimizer nor its schedule.
    plain = model.__class__.from_config(model.get_config())
    plain.set_weights(model.get_weights())
    partial = os.path.join(output_dir, "model.partial.keras")
    plain.save(partial)
    os.replace(partial, os.path.join(output_dir, "model.keras"))
    shutil.copyfile(tokenizer_vocab, os.path.join(output_dir, "vocab.txt"))
    saved = dataclasses.asdict(config)
    saved["label_names"] = task.label_names
    with open(os.path.join(output_dir, "finetune_config.json"), "w") as f:
        json.dump(saved, f, indent=2)
    if dev_results is not None:
        with open(os.path.join(output_dir, "dev_results.json"), "w") as f:
            json.dump(dev_results, f, indent=2)


def finetune(config: FinetuneConfig, train: Any = None, dev: Any = None) -> dict[str, Any]:
    """Fine-tunes and scores on dev; returns a dict of results.

    The data: `config.train` / `config.dev` (files or `tfds:` names), or
    in memory as `train` / `dev`: for classification and regression a dict
    of columns (`text`, optional `text_pair`, `label`; or a DataFrame), a
    (texts, labels) tuple or an unbatched `tf.data.Dataset` of those; for
    tagging {"words": word lists or texts, "tags": tag lists}; for SQuAD the
    SQuAD JSON's `data` list.

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
    tokenizer, vocab_file, config = resolve_tokenizer(config)
    task = make_task(config, tokenizer)
    try:
        train_data = task.prepare(train, config.max_train_examples, training=True)
        dev_data = task.prepare(dev, config.max_dev_examples) if dev is not None else None
    except ValueError as e:
        raise ValueError(f"{e} (--task {config.task} reads {DATA_FORMATS[config.task]})") \
            from None
    if config.search is None:
        start = time.time()
        log_dir = os.path.join(config.output_dir, "logs") if config.output_dir else None
        model, dev_metrics, epoch = _single_run(config, task, train_data, dev_data, log_dir)
        result = {"dev": dev_metrics, "best_epoch": epoch, "seconds": round(time.time() - start, 1),
                  "primary_metric": task.primary_metric}
        if config.output_dir:
            save_finetuned(model, config, task, vocab_file, config.output_dir, result)
        return result
    if config.search != "paper":
        raise ValueError(f"unknown search {config.search!r}; the only one is 'paper'")
    if dev_data is None:
        raise ValueError("--search needs --dev to choose the best run")
    return _paper_search(config, task, train_data, dev_data, vocab_file)


def _paper_search(config, task, train_data, dev_data, vocab_file):
    rows, best = [], None
    grid = itertools.product(PAPER_GRID["batch_size"], PAPER_GRID["learning_rate"],
                             PAPER_GRID["epochs"], range(config.restarts))
    for batch_size, learning_rate, epochs, restart in grid:
        run_config = dataclasses.replace(config, batch_size=batch_size, learning_rate=learning_rate,
                                         epochs=epochs, seed=config.seed + restart, search=None)
        name = f"b{batch_size}_lr{learning_rate:g}_e{epochs}_s{run_config.seed}"
        log_dir = os.path.join(config.output_dir, "logs", name) if config.output_dir else None
        start = time.time()
        model, dev_metrics, epoch = _single_run(run_config, task, train_data, dev_data, log_dir)
        score = dev_metrics[task.primary_metric]
        rows.append({"batch_size": batch_size, "learning_rate": learning_rate, "epochs": epochs,
                     "seed": run_config.seed, "best_epoch": epoch, task.primary_metric: score,
                     "seconds": round(time.time() - start, 1)})
        if best is None or score > best[0]:
            best = (score, rows[-1], dev_metrics)
            if config.output_dir:
                save_finetuned(model, run_config, task, vocab_file, config.output_dir,
                               {"dev": dev_metrics, "run": rows[-1]})
    table = results_table(rows, task.primary_metric)
    if config.output_dir:
        with open(os.path.join(config.output_dir, "search_results.md"), "w") as f:
            f.write(table)
    print(table, flush=True)
    return {"dev": best[2], "best_run": best[1], "runs": rows, "table": table,
            "primary_metric": task.primary_metric}


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
