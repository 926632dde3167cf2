"""Fine-tuning and evaluation: `finetune(FinetuneConfig)` and `evaluate(...)`.

One driver for the four task families of the paper, and embeddings:

  classify  sentence (pair) classification, `BertClassifier`;
  regress   sentence (pair) regression (STS-B), `BertClassifier(num_classes=1)`;
  tag       token tagging on first word pieces, `BertTokenClassifier`;
  squad     extractive QA (SQuAD v1.1 / v2.0), `BertSpanExtractor`;
  embed     sentence embeddings trained contrastively, `BertSentenceEncoder`.

Data comes from files (TSV / CSV / JSONL tables, GLUE TSVs, CoNLL files,
SQuAD JSON, TSVs of pairs, triplets or scored pairs) or from TFDS, written
`tfds:<name>:<split>` (`tfds:glue/cola:train`, `tfds:conll2003:dev`,
`tfds:squad/v2.0:validation`). Each run writes to
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
import sys
import time
from typing import Any, Mapping, Sequence

import keras
import tensorflow as tf

from keras_bert import features, safe_output
from keras_bert.checkpoints.source import resolve, tokenizer_options, tokenizer_settings
from keras_bert.config import BertConfig
from keras_bert.datasets import readers, squad
from keras_bert.errors import UserError
from keras_bert.kernels import precision
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.sentence_encoder import BertSentenceEncoder
from keras_bert.preprocessing.preprocessor import BertPreprocessor, config_sharing_preprocessor
from keras_bert.text import unknown_rate
from keras_bert.text.tokenizer import BertTokenizer
from keras_bert.training import distribute, finetuning_run
from keras_bert.training.checkpointing import write_json
from keras_bert.training.finetuning_run import RunResult, discard_run_state
from keras_bert.training.recipe_files import (
    check_finite_fields,
    check_positive_int_fields,
    read_recipe,
)
from keras_bert.training.task_families import TaskFamily, make_task

TASKS = ("classify", "regress", "tag", "squad", "embed")
DATA_FORMATS = {
    "classify": "a TSV/CSV/JSONL table of text column(s) and a label column, or GLUE",
    "regress": "a TSV/CSV/JSONL table of text column(s) and a numeric label, or GLUE STS-B",
    "tag": "a CoNLL file (word<TAB>tag lines) or tfds:conll2003",
    "squad": "a SQuAD JSON file or tfds:squad/*",
    "embed": "a TSV file with a header row: anchor<TAB>positive[<TAB>negative], or "
    "text<TAB>text<TAB>score",
}
# Contrastive losses of --task embed (`keras_bert.models.contrastive`); "auto":
# CoSENT for scored pairs, in-batch negatives otherwise.
EMBEDDING_LOSSES = (
    "auto",
    "multiple_negatives_ranking",
    "multiple_negatives_symmetric_ranking",
    "cosent",
)
# The paper's fine-tuning grid (Appendix A.3).
PAPER_GRID = {"batch_size": (16, 32), "learning_rate": (5e-5, 3e-5, 2e-5), "epochs": (2, 3, 4)}
# Its GLUE protocol (Section 4.1): batch 32, 3 epochs, the best of four learning rates on dev.
GLUE_GRID = {"batch_size": (32,), "learning_rate": (5e-5, 4e-5, 3e-5, 2e-5), "epochs": (3,)}
SEARCHES = ("paper", "glue")


@dataclasses.dataclass
class FinetuneConfig:
    """Everything one fine-tuning run needs; plain data (saved as JSON)."""

    task: str  # one of TASKS
    train: str = None  # file or tfds:<name>:<split>
    dev: str = None
    init_checkpoint: str = None  # .keras encoder, HF folder, TF1 checkpoint or folder
    output_dir: str = None
    vocab_file: str = None  # default: the checkpoint's vocab.txt, else shipped uncased
    lowercase: bool = None  # None: the checkpoint's casing (tokenizer_settings)
    preset: str = "tiny"  # encoder size without --init-checkpoint (smoke tests)
    seq_length: int = 128
    batch_size: int = 32
    learning_rate: float = 5e-5
    epochs: float = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clipnorm: float | None = 1.0  # global-norm gradient clipping (the original's); null: none
    dropout: float = 0.1
    seed: int = 0
    lora_rank: int | None = None  # LoRA adapters of this rank, the encoder frozen
    # Tables and GLUE.
    glue_task: str = None  # read train/dev as this GLUE task (TSV or tfds)
    text_columns: list = None
    label_column: str = "label"
    label_names: list = None  # default: the labels seen in train, sorted
    # Multi-label classification (task classify): any number of labels per text,
    # the label column's names separated by label_separator (a JSONL list too).
    multi_label: bool = False
    label_separator: str = "|"
    threshold: float = 0.5  # multi-label: a label is predicted above this probability
    # SQuAD.
    version_2_with_negative: bool = False
    doc_stride: int = squad.DOC_STRIDE
    max_query_length: int = squad.MAX_QUERY_LENGTH
    max_answer_length: int = squad.MAX_ANSWER_LENGTH
    n_best_size: int = squad.N_BEST_SIZE
    null_score_diff_threshold: float = squad.NULL_SCORE_DIFF_THRESHOLD
    # Embeddings (text_columns picks the 2-3 text columns, label_column a score column).
    embedding_loss: str = "auto"  # one of EMBEDDING_LOSSES
    loss_scale: float = 20.0  # the contrastive losses' scale (sentence-transformers')
    mini_batch_size: int = None  # gradient caching: a batch's embeddings in chunks
    pooling: str = None  # default: the sentence-transformers folder's, else mean
    normalize: bool = None  # L2-normalised embeddings; default: the folder's, else no
    # Run control.
    max_train_examples: int = None  # a prefix of the training data (smoke runs)
    max_dev_examples: int = None
    eval_batch_size: int = 64
    early_stopping_patience: int = None  # epochs without dev improvement before stopping
    steps_per_epoch: int = None  # for smoke tests; default: the whole training set
    bucket_by_length: bool = False  # batches of similar lengths (faster; changes batching)
    # Devices, precision, XLA: the names of PretrainConfig (keras_bert.training.distribute).
    strategy: str = "auto"  # auto, one_device, mirrored, multi_worker, tpu
    tpu: str = None  # TPU name or grpc:// address for strategy "tpu"
    devices: list = None  # for "mirrored": e.g. ["/gpu:0", "/gpu:1"]
    # float32 (the default everywhere: keras_bert.kernels.precision), bfloat16,
    # float16 (loss-scaled) or auto (native; the run records the choice)
    mixed_precision: str | None = "float32"
    jit_compile: object = "auto"  # XLA: true, false, auto (on with a GPU / TPU)
    gradient_accumulation_steps: int = 1  # micro-batches of batch_size per update
    train_loop: str = "auto"  # fit, or custom (strategy.run; multi-worker's)
    # Checkpoints (output_dir/checkpoints): every N steps and at each epoch's end.
    checkpoint_every: int = None  # None: at the end of each epoch only
    keep_checkpoints: int = 2
    log_every: int = 50  # steps between train_log.jsonl / TensorBoard records
    tensorboard: bool = True
    verbose: int | str = "auto"  # Keras progress: "auto" (a bar on a terminal, else 2), 0, 1, 2
    search: str = None  # "paper" (Appendix A.3's grid) or "glue" (Section 4.1's)
    restarts: int = 1  # random restarts per grid point
    tune_null_threshold: bool = False  # SQuAD v2.0: keep dev's best no-answer threshold
    overwrite: bool = False  # replace a finished model (or unfinished run) in output_dir

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        check_finite_fields(self, non_negative=("learning_rate", "weight_decay", "clipnorm"))
        check_positive_int_fields(
            self,
            required=("seq_length", "batch_size"),
            optional=(
                "doc_stride",
                "max_query_length",
                "max_answer_length",
                "n_best_size",
                "eval_batch_size",
                "restarts",
                "max_train_examples",
                "max_dev_examples",
                "early_stopping_patience",
                "steps_per_epoch",
                "gradient_accumulation_steps",
                "checkpoint_every",
                "keep_checkpoints",
                "log_every",
                "lora_rank",
                "mini_batch_size",
            ),
        )
        if self.seq_length < 3:
            raise ValueError(
                f"seq_length must be at least 3 ([CLS] a word [SEP]), got {self.seq_length}"
            )
        if not self.epochs > 0:
            raise ValueError(
                f"epochs must be > 0 (a run with no training writes an "
                f"untrained model), got {self.epochs!r}"
            )
        if not 0 <= self.warmup_proportion <= 1 or not 0 <= self.dropout < 1:
            raise ValueError("warmup_proportion must lie in [0, 1] and dropout in [0, 1)")
        if self.multi_label and (self.task != "classify" or self.glue_task):
            raise ValueError(
                "multi_label is for --task classify on tables (GLUE tasks have one "
                f"label per text); got task {self.task!r}"
                + (f" and glue_task {self.glue_task!r}" if self.glue_task else "")
            )
        if not isinstance(self.label_separator, str) or not self.label_separator.strip():
            raise ValueError(
                f"label_separator must be a character such as '|', got {self.label_separator!r}"
            )
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold must be a probability in [0, 1], got {self.threshold!r}")
        if self.threshold != 0.5 and not self.multi_label:
            raise ValueError(
                f"threshold {self.threshold}: a threshold is for multi-label classification "
                "(--multi-label); a single-label model answers its most probable class"
            )
        if self.embedding_loss not in EMBEDDING_LOSSES:
            raise ValueError(
                f"embedding_loss must be one of {EMBEDDING_LOSSES}, got {self.embedding_loss!r}"
            )
        if not self.loss_scale > 0:
            raise ValueError(f"loss_scale must be > 0, got {self.loss_scale!r}")
        if self.task == "embed" and self.gradient_accumulation_steps != 1:
            raise ValueError(
                "gradient_accumulation_steps: a contrastive loss compares every "
                "row of the batch with every other, so micro-batches would change "
                "it; set mini_batch_size instead (gradient caching: the whole "
                "batch's loss and gradients in the memory of one mini-batch)"
            )
        distribute.check_runtime_fields(self)


# === Encoder and tokenizer ===


def load_encoder(
    init_checkpoint: str | None, preset: str = "tiny", dtype: str | None = None
) -> BertEncoder:
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
    tokenizer = BertTokenizer(vocab_file, lowercase=lowercase, **tokenizer_options(source))
    return tokenizer, vocab_file, dataclasses.replace(config, lowercase=lowercase)


def preprocessor_of(config: FinetuneConfig, tokenizer: BertTokenizer) -> BertPreprocessor:
    """The preprocessor saved inside the fine-tuned model: the run's
    tokenizer (vocabulary, casing) and sequence length, so `model.keras`
    takes text. A vocabulary that does not fit the encoder is refused naming
    its file (`TextTask`, the task model's boundary)."""
    return BertPreprocessor.from_tokenizer(tokenizer, seq_length=config.seq_length)


# === Training ===


def _single_run(
    config: FinetuneConfig,
    task: TaskFamily,
    train_data: Any,
    dev_data: Any,
    run_dir: str | None,
    tokenizer: BertTokenizer,
    strategy: tf.distribute.Strategy | None = None,
) -> RunResult:
    """Trains one task model with one `fit`, resuming `run_dir`'s
    checkpoints (see `finetuning_run`)."""
    strategy = strategy or distribute.build_strategy(
        config.strategy, tpu=config.tpu, devices=config.devices
    )
    return finetuning_run.train(
        config,
        task,
        train_data,
        dev_data,
        run_dir,
        _model_builder(config, task, tokenizer),
        strategy,
    )


def _model_builder(config, task, tokenizer):
    """`build(dtype)`: the run's task model on its pretrained encoder."""

    def build(dtype):
        encoder = load_encoder(config.init_checkpoint, config.preset, dtype)
        if config.seq_length > encoder.config.max_position_embeddings:
            raise ValueError(
                f"seq_length {config.seq_length} exceeds the encoder's "
                f"{encoder.config.max_position_embeddings} positions; "
                "use at most that"
            )
        return task.build_model(encoder, preprocessor_of(config, tokenizer))

    return build


def resume_finetuning(output_dir: str, train: Any = None) -> keras.Model:
    """The task model of an unfinished `keras-bert finetune` run (killed, or
    stopped by Ctrl-C) at its newest checkpoint, compiled as the run compiled
    it, for `model.fit(...)` to continue in Python.

    The model comes back with the checkpoint's weights and dropout RNG and the
    run's optimizer: AdamW with its weight decay and clipping, the warmup and
    linear decay over the run's total steps, at the step the checkpoint
    reached (`model.optimizer.iterations`), its moments restored; the run's
    loss, metrics and gradient accumulation. `fit` then takes the next
    updates from there. (`fit` draws its own batches unless given the run's
    `ExactResume` callback: the command orders each epoch by its seed,
    `keras_bert.dataset_options.epoch_order`. Rerunning the same command
    instead resumes with its order, dev scoring, best model and checkpoints.)

    The model is built as the command built it, from the run's
    `checkpoints/finetune_config.json`: its pretrained checkpoint, and its
    training data (to count the schedule's steps): `train`, when the run's
    data was not a file (or it moved).

    A finished run cannot continue: its schedule ended at a learning rate of
    0 and its folder keeps the model (`model.keras`, the best on dev) without
    the optimizer's state. Train it further as a new run starting from it:
    `keras-bert finetune --init-checkpoint OUTPUT_DIR ...`, or in Python
    `BertClassifier.from_pretrained(output_dir)` (any task model) and
    `compile(optimizer=create_adamw(...))`.
    """
    checkpoints = os.path.join(output_dir, "checkpoints")
    config_path = os.path.join(checkpoints, "finetune_config.json")
    if not os.path.exists(config_path):
        safe_output.check_not_in_progress(output_dir)
        if os.path.exists(os.path.join(output_dir, "model.keras")):
            raise UserError(
                f"{output_dir} holds a finished run: its schedule ended at a learning "
                "rate of 0 and its optimizer state was not kept, so it cannot continue. "
                f"Train further as a new run from it: keras-bert finetune --init-checkpoint "
                f"{output_dir} ..., or in Python <TaskModel>.from_pretrained({output_dir!r}) "
                "and compile(optimizer=create_adamw(...))"
            )
        raise FileNotFoundError(
            f"{output_dir}: no checkpoints/finetune_config.json (not the output folder "
            "of a keras-bert finetune run)"
        )
    safe_output.check_not_in_progress(output_dir)
    with open(config_path, encoding="utf-8") as f:
        saved = json.load(f)
    config = FinetuneConfig(**{**saved, "output_dir": output_dir, "verbose": 0})
    train = config.train if train is None else train
    if train is None:
        raise ValueError(
            f"{output_dir}: the run's training data was not a file: pass it as "
            "`train` (the schedule's length is counted from it)"
        )
    tokenizer, _, config = resolve_tokenizer(config)
    task = make_task(config)
    train_data = task.read(train, config.max_train_examples, training=True)
    strategy = distribute.build_strategy(config.strategy, tpu=config.tpu, devices=config.devices)
    run = finetuning_run.compiled_run(
        config, task, train_data, output_dir, _model_builder(config, task, tokenizer), strategy
    )
    run.resume.set_model(run.model)
    if not run.resume.restore():
        raise UserError(f"{checkpoints}: no checkpoint to continue from")
    return run.model


def save_finetuned(
    model: keras.Model,
    config: FinetuneConfig,
    task: TaskFamily,
    tokenizer_vocab: str,
    output_dir: str,
    dev_results: dict[str, Any] | None = None,
) -> None:
    """Writes vocab.txt, finetune_config.json, dev_results.json and model.keras,
    each whole, model.keras last: a folder with model.keras is complete."""
    os.makedirs(output_dir, exist_ok=True)
    if getattr(model, "lora_rank", None):
        model.save_lora_weights(os.path.join(output_dir, "lora_weights.npz"))
        model = model.merge_lora()  # model.keras: the merged model, loadable without adapters
    safe_output.copy_file(tokenizer_vocab, os.path.join(output_dir, "vocab.txt"))
    saved = dataclasses.asdict(config)
    saved["label_names"] = task.label_names
    write_json(os.path.join(output_dir, "finetune_config.json"), saved)
    if dev_results is not None:
        write_json(os.path.join(output_dir, "dev_results.json"), dev_results)
    # A plain, uncompiled copy outside any strategy: loading it needs neither
    # the optimizer nor its schedule nor the devices it trained on.
    plain = model.__class__.from_config(config_sharing_preprocessor(model))
    plain.set_weights(model.get_weights())
    with safe_output.replacing(
        os.path.join(output_dir, "model.keras"), keep_extension=True
    ) as partial:
        plain.save(partial)


def finetune(config: FinetuneConfig, train: Any = None, dev: Any = None) -> dict[str, Any]:
    """Fine-tunes and scores on dev; returns a dict of results.

    The data: `config.train` / `config.dev` (files or `tfds:` names), or
    in memory as `train` / `dev`: for classification and regression a dict
    of columns (`text`, optional `text_pair`, `label`; or a DataFrame), a
    (texts, labels) tuple or an unbatched `tf.data.Dataset` of those; for
    tagging {"words": word lists or texts, "tags": tag lists}; for SQuAD the
    SQuAD JSON's `data` list; for embeddings a dict of text columns (and a
    `score` column) or `keras_bert.datasets.text_rows.TextRows`.

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
    if not config.output_dir:
        return _finetune(config, train, dev)
    # One run per output folder at a time, and never over one of its own inputs.
    for name in features.FINETUNE_OUTPUT_FILES:
        safe_output.check_not_input(
            os.path.join(config.output_dir, name),
            [
                source
                for source in (config.train, config.dev, config.init_checkpoint, config.vocab_file)
                if isinstance(source, str)
            ],
            "output_dir",
        )
    with safe_output.output_lock(config.output_dir, folder=True):
        return _finetune(config, train, dev)


def _finetune(config: FinetuneConfig, train: Any, dev: Any) -> dict[str, Any]:
    finished = os.path.join(config.output_dir or "", "model.keras")
    if config.output_dir and os.path.exists(finished) and not config.overwrite:
        raise FileExistsError(
            f"{config.output_dir} already holds a fine-tuned model "
            f"({finished}); pass --overwrite to replace it, or choose "
            "another --output-dir"
        )
    # The strategy before the data is read: multi-worker collectives must be
    # configured before TensorFlow's runtime starts, which tokenizing does.
    strategy = distribute.build_strategy(config.strategy, tpu=config.tpu, devices=config.devices)
    # The precision the run uses, resolved once ("auto" said in one line) and
    # recorded as such in finetune_config.json: a resume on another machine
    # keeps it, and evaluate / export read what the model was trained in.
    config = dataclasses.replace(
        config, mixed_precision=precision.resolve(config.mixed_precision, "mixed_precision")
    )
    tokenizer, vocab_file, config = resolve_tokenizer(config)
    task = make_task(config)
    try:
        train_data = task.read(train, config.max_train_examples, training=True)
        dev_data, dev_used, dev_total = (
            task.read_part(dev, config.max_dev_examples) if dev is not None else (None, 0, 0)
        )
    except ValueError as e:
        raise ValueError(f"{e} (--task {config.task} reads {DATA_FORMATS[config.task]})") from None
    dev_counts = {}
    if dev is not None:
        print(scored_line(dev_used, dev_total, dev, "max_dev_examples"), flush=True)
        dev_counts = {"dev_examples_scored": dev_used, "dev_examples_in_data": dev_total}
    # A vocabulary that cannot spell the text (language, casing) says so now.
    unknown_rate.report_texts(
        tokenizer, task.fit_data(train_data)[0], "the training texts", vocab_file or "of the model"
    )
    if config.output_dir and config.overwrite:
        discard_run_state(config.output_dir)
        shutil.rmtree(os.path.join(config.output_dir, RUNS), ignore_errors=True)
    if config.search is None:
        start = time.time()
        run = _single_run(
            config, task, train_data, dev_data, config.output_dir, tokenizer, strategy
        )
        result = {
            "dev": run.dev,
            "best_epoch": run.best_epoch,
            "steps": run.steps,
            "seconds": round(time.time() - start, 1),
            "primary_metric": task.primary_metric,
            **dev_counts,
        }
        config = _with_tuned_threshold(config, run.dev)
        if config.output_dir and run.chief:
            _finish(run.model, config, task, vocab_file, config.output_dir, result)
        return result
    if config.search not in SEARCHES:
        raise ValueError(f"unknown search {config.search!r}; choose one of {SEARCHES}")
    if dev_data is None:
        raise ValueError("--search needs --dev to choose the best run")
    result = _paper_search(config, task, train_data, dev_data, tokenizer, vocab_file, strategy)
    return {**result, **dev_counts}


def scored_line(used: int, total: int, source: Any, option: str) -> str:
    """What part of the data is scored, in one line: all of it, or the first
    `used` examples, naming the option that cut it."""
    name = readers.source_name(source)
    if used == total:
        return f"scoring all {total:,} examples of {name}"
    return f"scoring the first {used:,} of {total:,} examples of {name} ({option} {used})"


RUNS = "runs"  # the search's runs, one folder each, under output_dir


def load_finetune_config(
    path: str | None = None, overrides: Sequence[str] = (), **fields: Any
) -> FinetuneConfig:
    """A FinetuneConfig from a YAML/JSON recipe (`recipes/finetuning/*.yaml`),
    then `key=value` overrides, then `fields` (the command's flags)."""
    return read_recipe(
        FinetuneConfig,
        path,
        overrides,
        float_fields=(
            "learning_rate",
            "epochs",
            "warmup_proportion",
            "weight_decay",
            "dropout",
            "null_score_diff_threshold",
            "clipnorm",
            "loss_scale",
            "threshold",
        ),
        choices={"task": TASKS, "search": SEARCHES, "embedding_loss": EMBEDDING_LOSSES},
        **fields,
    )


def _with_tuned_threshold(config, dev_metrics):
    """SQuAD v2.0 with `tune_null_threshold`: the no-answer threshold that
    maximises dev F1 (the official script's best_f1_thresh) becomes the
    model's own, saved in finetune_config.json for evaluate, predict, export."""
    if not (
        config.task == "squad"
        and config.version_2_with_negative
        and config.tune_null_threshold
        and dev_metrics
    ):
        return config
    threshold = float(dev_metrics["best_f1_thresh"])
    print(
        f"null_score_diff_threshold tuned on dev: {threshold:.4f} "
        f"(best_f1 {dev_metrics['best_f1']:.2f})",
        flush=True,
    )
    return dataclasses.replace(config, null_score_diff_threshold=threshold)


def _finish(model, config, task, vocab_file, directory, results):
    """The finished run's folder: the model whole, its training state gone."""
    save_finetuned(model, config, task, vocab_file, directory, results)
    discard_run_state(directory, keep_logs=True)


def _paper_search(config, task, train_data, dev_data, tokenizer, vocab_file, strategy):
    """The grid, one run after another; each run finished before is read back
    (a killed search resumes at its first unfinished run, mid-run included)."""
    rows, best = [], None
    grid = PAPER_GRID if config.search == "paper" else GLUE_GRID
    grid = itertools.product(
        grid["batch_size"], grid["learning_rate"], grid["epochs"], range(config.restarts)
    )
    for batch_size, learning_rate, epochs, restart in grid:
        run_config = dataclasses.replace(
            config,
            batch_size=batch_size,
            learning_rate=learning_rate,
            epochs=epochs,
            seed=config.seed + restart,
            search=None,
        )
        name = f"b{batch_size}_lr{learning_rate:g}_e{epochs}_s{run_config.seed}"
        run_dir = os.path.join(config.output_dir, RUNS, name) if config.output_dir else None
        done = _finished_search_run(run_dir)
        if done is not None:
            print(
                f"{run_dir}: finished before, {task.primary_metric} "
                f"{done['dev'][task.primary_metric]:.4f}",
                flush=True,
            )
            row, dev_metrics = done["run"], done["dev"]
        else:
            start = time.time()
            run = _single_run(run_config, task, train_data, dev_data, run_dir, tokenizer, strategy)
            dev_metrics = run.dev
            row = {
                "batch_size": batch_size,
                "learning_rate": learning_rate,
                "epochs": epochs,
                "seed": run_config.seed,
                "best_epoch": run.best_epoch,
                task.primary_metric: dev_metrics[task.primary_metric],
                "seconds": round(time.time() - start, 1),
            }
            if run_dir and run.chief:
                _finish(
                    run.model,
                    _with_tuned_threshold(run_config, dev_metrics),
                    task,
                    vocab_file,
                    run_dir,
                    {"dev": dev_metrics, "run": row},
                )
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
        safe_output.write_text(os.path.join(config.output_dir, "search_results.md"), table)
    print(table, flush=True)
    return {
        "dev": best[2],
        "best_run": best[1],
        "runs": rows,
        "table": table,
        "primary_metric": task.primary_metric,
    }


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
        safe_output.copy_file(os.path.join(run_dir, name), os.path.join(output_dir, name))


def results_table(rows: Sequence[Mapping[str, Any]], metric: str) -> str:
    """Markdown table of the search, best run marked."""
    best = max(range(len(rows)), key=lambda i: rows[i][metric])
    lines = [
        f"| batch | learning rate | epochs | seed | best epoch | dev {metric} | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(rows):
        mark = " **best**" if i == best else ""
        lines.append(
            f"| {row['batch_size']} | {row['learning_rate']:g} | {row['epochs']} | "
            f"{row['seed']} | {row['best_epoch']} | {row[metric]:.4f}{mark} | "
            f"{row['seconds']} |"
        )
    return "\n".join(lines) + "\n"


# === Evaluation of a saved model ===


def load_finetuned(model_dir: str) -> tuple[keras.Model, dict[str, Any]]:
    """A `finetune` output folder -> (its model, taking text; its saved config).

    Folders written before models carried their preprocessor get one from
    their vocab.txt and finetune_config.json (casing, sequence length)."""
    config_path = os.path.join(model_dir, "finetune_config.json")
    if not os.path.exists(config_path):
        safe_output.check_not_in_progress(model_dir)
        raise FileNotFoundError(f"{model_dir}: no finetune_config.json (not a finetune output)")
    with open(config_path) as f:
        saved = json.load(f)
    model = keras.models.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    if getattr(model, "preprocessor", None) is None:
        config = FinetuneConfig(**saved)
        model.preprocessor = preprocessor_of(
            config, BertTokenizer(os.path.join(model_dir, "vocab.txt"), lowercase=config.lowercase)
        )
    return model, saved


def evaluate(
    model_dir: str,
    data: Any,
    task: str | None = None,
    seq_length: int | None = None,
    max_examples: int | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Scores a fine-tuned model (a `finetune` output folder) on `data` with
    its task model's `score`: the whole of `data`, or its first
    `max_examples` examples (rows, sentences, SQuAD questions). The result
    holds the figures and `examples_scored` / `examples_in_data`, how many
    examples were scored of how many `data` has; a line says so too.

    The task, sequence length and labels come from the folder's
    `finetune_config.json`; `overrides` change any of its fields (for
    instance `null_score_diff_threshold` for SQuAD v2.0). `task`, when
    given, must be the folder's. `task="embed"` also scores a pretrained
    sentence encoder as it is (zero-shot): a sentence-transformers folder
    (or its `ORG/NAME` in the local HuggingFace cache), a BERT checkpoint
    (mean-pooled) or a `.keras` `BertSentenceEncoder`, at `seq_length`
    (default: the folder's max_seq_length).
    """
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if overrides.get("max_dev_examples") is not None:
        raise ValueError(
            "evaluate scores the whole data; max_examples=N scores its first N "
            "examples (max_dev_examples is a fine-tuning run's dev limit)"
        )
    if max_examples is not None and (
        not isinstance(max_examples, int) or isinstance(max_examples, bool) or max_examples < 1
    ):
        raise ValueError(f"max_examples must be a positive integer, got {max_examples!r}")
    if not os.path.exists(os.path.join(model_dir, "finetune_config.json")):
        safe_output.check_not_in_progress(model_dir)
        if task == "embed":
            return _evaluate_pretrained_embeddings(
                model_dir, data, seq_length, max_examples, overrides
            )
        raise FileNotFoundError(
            f"{model_dir}: no finetune_config.json (not a finetune output); "
            "--task embed scores a pretrained sentence encoder (a "
            "sentence-transformers folder, a BERT checkpoint) as it is"
        )
    model, saved = load_finetuned(model_dir)
    if task is not None and task != saved["task"]:
        raise ValueError(f"{model_dir} was fine-tuned with --task {saved['task']}, not {task}")
    if seq_length is not None and seq_length != saved["seq_length"]:
        raise ValueError(
            f"seq_length {seq_length}: the model in {model_dir} reads "
            f"{saved['seq_length']} tokens (its fine-tuning length)"
        )
    saved.update({k: v for k, v in overrides.items() if v is not None})
    config = FinetuneConfig(**saved)
    # The casing the model was fine-tuned with (finetune_config.json); an override must agree.
    tokenizer_settings(resolve(model_dir), lowercase=config.lowercase)
    task_family = make_task(config)
    task_family.label_names = saved["label_names"]
    try:
        part, used, total = task_family.read_part(data, max_examples)
    except ValueError as e:
        raise ValueError(
            f"{e} (the model in {model_dir} was fine-tuned with --task "
            f"{config.task}, which reads {DATA_FORMATS[config.task]})"
        ) from None
    # On standard error: standard output is the figures' JSON, for a pipe.
    print(scored_line(used, total, data, "max_examples"), file=sys.stderr, flush=True)
    return {**task_family.score(model, part), "examples_scored": used, "examples_in_data": total}


def _evaluate_pretrained_embeddings(path, data, seq_length, max_examples, overrides):
    lowercase = overrides.pop("lowercase", None)
    model = BertSentenceEncoder.from_pretrained(path, seq_length=seq_length, lowercase=lowercase)
    config = FinetuneConfig(task="embed", **{k: v for k, v in overrides.items() if v is not None})
    task_family = make_task(config)
    try:
        rows, used, total = task_family.read_part(data, max_examples)
    except ValueError as e:
        raise ValueError(f"{e} (--task embed reads {DATA_FORMATS['embed']})") from None
    # On standard error: standard output is the figures' JSON, for a pipe.
    print(scored_line(used, total, data, "max_examples"), file=sys.stderr, flush=True)
    return {**task_family.score(model, rows), "examples_scored": used, "examples_in_data": total}
