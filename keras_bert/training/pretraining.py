"""The pretraining driver: `pretrain(config)` and `keras-bert pretrain --config FILE`.

One run: build the strategy, the model (fresh, from a pretrained checkpoint,
or from an earlier phase's export), the optimizer and the dataset; restore the
latest checkpoint of `model_dir` if there is one; train; evaluate; export.

One driver, the pretrainer's `fit` with callbacks (the loss check, the log,
the checkpoints), as fine-tuning's; behind it two loops, chosen by
`train_loop: auto`:
- `fit`: Keras `Model.fit` (progress bar, callbacks, `jit_compile`,
  `steps_per_execution`), for one device, MirroredStrategy and TPUStrategy.
- `custom`: `strategy.run` over the same step (the pretrainer's
  `apply_update`: GradientTape, losses, apply) with the same callbacks, for
  MultiWorkerMirroredStrategy, which Keras 3's `fit` does not support
  (keras-team/keras#20585; `keras_bert.models.strategy_run_fit`).
Both run the pretrainer's own step (`keras_bert.models.update_step`), which
accumulates gradients over `gradient_accumulation_steps` micro-batches inside
it, so accumulation works under every strategy.

Resuming: a checkpoint (model, optimizer and its step) is written every
`checkpoint_every` steps by tf.train.CheckpointManager, which writes the
files first and updates the `checkpoint` index last, so a kill at any moment
leaves the previous checkpoint intact. The data order is a deterministic
function of `seed`, so a resumed run skips exactly the batches the restored
step has consumed: no batch is seen twice or lost. The checkpoint also holds
the dropout seed generators' states (Keras variables that the model's own
checkpoint dependencies do not reach), so a resumed run draws the dropout
masks the uninterrupted run draws and ends with the same weights; a
checkpoint written before they were saved restores with the masks of step 0.
Rerunning a finished run (latest checkpoint at train_steps, eval_results.json
written) does nothing and says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Sequence

import keras
import tensorflow as tf

from keras_bert import features, safe_output
from keras_bert.checkpoints import encoder_variables, head_variables
from keras_bert.config import BertConfig
from keras_bert.kernels import precision
from keras_bert.models.electra_pretrainer import (
    GENERATOR_FOLDER,
    ElectraPretrainer,
    electra_generator_config,
)
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.modernbert_electra import ModernBertElectraPretrainer
from keras_bert.models.modernbert_pretrainer import ModernBertPretrainer
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.strategy_run_fit import metric_values, runs_custom_loop
from keras_bert.pretraining_data import inputs
from keras_bert.pretraining_data.next_token import next_token_targets
from keras_bert.pretraining_data.options import MASKING_MIX_FIELDS, check_masking_mix
from keras_bert.progress import keras_verbose
from keras_bert.training import distribute, modernbert_pretraining
from keras_bert.training.callbacks import StopOnNonFiniteLoss, TrainLog
from keras_bert.training.checkpointing import (
    CheckpointWriter,
    checkpoint_step,
    optimizer_step,
    write_json,
)
from keras_bert.training.distribute import resolve_jit_compile
from keras_bert.training.optimization import create_optimizer
from keras_bert.training.recipe_files import (
    check_finite_fields,
    check_positive_int_fields,
    read_recipe,
)


@dataclasses.dataclass
class PretrainConfig:
    """Every setting of a pretraining run; recipes are these fields in YAML or JSON."""

    # === Model ===
    # A BertConfig preset name or a bert_config.json path; null with an
    # init_checkpoint (whose own config is used).
    model: str | None = "base"
    init_checkpoint: str = None  # HuggingFace / TF1 checkpoint, or an earlier phase's export/
    # "nsp", "sop", "none", "lm" (next token, left_to_right attention) or
    # "electra" (replaced-token detection: the model is the discriminator)
    objective: str = "nsp"
    attention: str = None  # "left_to_right" or "bidirectional" overrides the model's; null keeps it
    # "bert", or "modernbert": a ModernBertEncoder (keras_bert.training.modernbert_pretraining),
    # masked LM only (objective none) or replaced-token detection (objective
    # electra), its config modernbert_config: a preset (null: base), a config
    # JSON file or the fields themselves.
    architecture: str = "bert"
    modernbert_config: str | dict | None = None
    # === Data ===
    train_files: str = None  # comma-separated TFRecord patterns (local or gs://)
    eval_files: str = None
    seq_length: int = 128
    max_predictions_per_seq: int = 20
    batch_size: int = 256  # global batch of one step (all replicas, all workers)
    seed: int = 12345  # fixes the data order, hence the resume position
    # Masks drawn in tf.data each time a record is read (RoBERTa's dynamic
    # masking), from records written by `create-pretraining-data --no-mask`;
    # the masking fields below apply only then (static records carry their masks).
    dynamic_masking: bool = False
    vocab_file: str = None  # the records' vocabulary (its [CLS], [SEP], [MASK], ## pieces)
    masked_lm_prob: float = 0.15  # share of a sequence's tokens predicted
    # A chosen token becomes [MASK], a random token or stays: the original's 80 / 10 / 10.
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1
    keep_token_rate: float = 0.1
    whole_word_mask: bool = False
    # === ELECTRA (objective electra) ===
    # The generator's hidden size as a fraction of the model's (ELECTRA's
    # 0.25; heads of 64, feed-forward 4x), its layers (null: the model's),
    # and the weight of the discriminator's loss beside the generator's.
    # Architecture modernbert: the generator is the model's width (the
    # hidden size stays unset), its layers by default half the model's.
    generator_hidden_size: float = 0.25
    generator_num_layers: int | None = None
    discriminator_weight: float = 50.0
    # === Optimisation ===
    optimizer: str = "adamw"  # "adamw" or "lamb"
    learning_rate: float = 1e-4
    train_steps: int = 1_000_000  # optimizer updates
    warmup_steps: int = 10_000
    weight_decay: float = 0.01
    clipnorm: float | None = 1.0  # global-norm clipping; null for none
    # Micro-batches of batch_size per update (effective batch batch_size * this),
    # run one after another: for a big batch on small devices, any strategy.
    gradient_accumulation_steps: int = 1
    # === Runtime ===
    model_dir: str = None
    strategy: str = "auto"  # auto, one_device, mirrored, multi_worker, tpu
    devices: list = None  # for "mirrored": e.g. ["/gpu:0", "/gpu:1"]; null for all GPUs
    tpu: str = None  # TPU name or grpc:// address for strategy "tpu"
    # float32 (the default everywhere: keras_bert.kernels.precision), mixed_bfloat16,
    # mixed_float16 or auto (this machine's native precision; the run records the choice)
    mixed_precision: str | None = "float32"
    # XLA: true, false or auto: on where there is a GPU or TPU, off on a
    # CPU-only host, where it measured slower (benchmarks/pretraining_throughput.py).
    jit_compile: object = "auto"
    steps_per_execution: int = 1
    train_loop: str = "auto"
    checkpoint_every: int = 1000  # steps between checkpoints (and progress-bar epochs)
    keep_checkpoints: int = 5
    log_every: int = 100  # steps between TensorBoard / train_log.jsonl records
    eval_steps: int = 100
    verbose: str | int = "auto"  # Keras progress: "auto", 0, 1 or 2

    def __post_init__(self):
        check_finite_fields(self, non_negative=("learning_rate", "weight_decay", "clipnorm"))
        if self.objective not in features.PRETRAINING_RUN_OBJECTIVES:
            raise ValueError(
                f"config field objective must be one of {features.PRETRAINING_RUN_OBJECTIVES}, "
                f"got {self.objective!r}"
            )
        check_positive_int_fields(
            self,
            optional=("generator_num_layers",),
            required=(
                "seq_length",
                "max_predictions_per_seq",
                "batch_size",
                "train_steps",
                "steps_per_execution",
                "checkpoint_every",
                "keep_checkpoints",
                "log_every",
                "gradient_accumulation_steps",
            ),
        )
        if self.warmup_steps < 0 or self.warmup_steps > self.train_steps:
            raise ValueError(
                f"config field warmup_steps ({self.warmup_steps}) must be in "
                f"[0, train_steps={self.train_steps}]"
            )
        distribute.check_runtime_fields(self)
        if self.train_steps % self.checkpoint_every:
            raise ValueError(
                f"train_steps ({self.train_steps}) must be a multiple of "
                f"checkpoint_every ({self.checkpoint_every})"
            )
        if self.checkpoint_every % self.steps_per_execution:
            raise ValueError(
                f"checkpoint_every ({self.checkpoint_every}) must be a multiple "
                f"of steps_per_execution ({self.steps_per_execution})"
            )
        if not self.train_files:
            raise ValueError("config field train_files is required")
        if not self.model and not self.init_checkpoint:
            raise ValueError(
                "config field model is required (a preset name such as base, or "
                "a bert_config.json path) unless init_checkpoint is given"
            )
        if not self.model_dir:
            raise ValueError("config field model_dir is required")
        self._check_masking_fields()
        self._check_electra_fields()
        modernbert_pretraining.check_architecture_fields(self)

    def _check_electra_fields(self) -> None:
        if self.objective != "electra":
            changed = [name for name in _ELECTRA_FIELDS if getattr(self, name) != _DEFAULTS[name]]
            if changed:
                raise ValueError(
                    f"config field(s) {', '.join(changed)} apply to objective electra only "
                    f"(the objective is {self.objective!r})"
                )
            return
        if not 0 < self.generator_hidden_size <= 1:
            raise ValueError(
                "config field generator_hidden_size must be a fraction in (0, 1] of the "
                f"model's hidden size (ELECTRA's 0.25), got {self.generator_hidden_size!r}"
            )
        if self.discriminator_weight <= 0:
            raise ValueError(
                "config field discriminator_weight must be > 0 (ELECTRA's 50), "
                f"got {self.discriminator_weight!r}"
            )

    def _check_masking_fields(self) -> None:
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(
                f"config field masked_lm_prob must lie in [0, 1], got {self.masked_lm_prob!r}"
            )
        check_masking_mix(self.mask_token_rate, self.random_token_rate, self.keep_token_rate)
        if self.dynamic_masking:
            if self.objective == "lm":
                raise ValueError(
                    "config field dynamic_masking does not apply to objective lm, "
                    "which predicts the next token of unmasked input"
                )
            if not self.vocab_file:
                raise ValueError(
                    "config field vocab_file is required with dynamic_masking: the "
                    "records' vocabulary, whose [MASK] and random tokens the masks use"
                )
            return
        changed = [
            name for name in _DYNAMIC_MASKING_FIELDS if getattr(self, name) != _DEFAULTS[name]
        ]
        if changed:
            # Static records carry the masks create-pretraining-data drew: a
            # rate here would change nothing, silently.
            raise ValueError(
                f"config field(s) {', '.join(changed)} apply to dynamic masking only; "
                "set dynamic_masking: true (records written with create-pretraining-data "
                "--no-mask), or give them to create-pretraining-data "
                "(--masked-lm-prob, --mask-token-rate, ...)"
            )


# The fields of dynamic masking, and every field's default (to tell a set one).
_DYNAMIC_MASKING_FIELDS = (
    "vocab_file",
    "masked_lm_prob",
    *MASKING_MIX_FIELDS,
    "whole_word_mask",
)
_ELECTRA_FIELDS = ("generator_hidden_size", "generator_num_layers", "discriminator_weight")
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(PretrainConfig)}


def load_config(
    path: str | None = None, overrides: Sequence[str] = (), **fields: Any
) -> PretrainConfig:
    """A PretrainConfig from a YAML/JSON file, then `key=value` overrides (values
    parsed as YAML: `--set train_steps=10`, `--set eval_files=null`), then `fields`."""
    return read_recipe(
        PretrainConfig,
        path,
        overrides,
        float_fields=(
            "learning_rate",
            "weight_decay",
            "clipnorm",
            "masked_lm_prob",
            *MASKING_MIX_FIELDS,
            "generator_hidden_size",
            "discriminator_weight",
        ),
        **fields,
    )


# === Model ===


def bert_config_of(config: PretrainConfig) -> BertConfig:
    if config.model.endswith(".json"):
        bert_config = BertConfig.from_json_file(config.model)
    else:
        bert_config = BertConfig.preset(config.model)
    if config.attention is not None:
        bert_config = dataclasses.replace(bert_config, attention=config.attention)
    return bert_config


def _with_next_sentence(config: PretrainConfig) -> bool:
    return config.objective in ("nsp", "sop")


def build_model(
    config: PretrainConfig,
) -> BertPretrainer | ElectraPretrainer | ModernBertPretrainer | ModernBertElectraPretrainer:
    """The pretrainer of a run, inside the current strategy scope."""
    dtype = distribute.model_dtype(config.mixed_precision)
    if config.architecture == modernbert_pretraining.MODERNBERT:
        return modernbert_pretraining.build_pretrainer(config, dtype)
    if config.init_checkpoint:
        if config.objective == "electra":
            pretrainer = ElectraPretrainer.from_pretrained(
                config.init_checkpoint,
                config.generator_hidden_size,
                config.generator_num_layers,
                config.discriminator_weight,
                dtype=dtype,
            )
        else:
            pretrainer = BertPretrainer.from_pretrained(
                config.init_checkpoint, objective=config.objective, dtype=dtype
            )
        if pretrainer.encoder.config.max_position_embeddings < config.seq_length:
            raise ValueError(
                f"{config.init_checkpoint}: max_position_embeddings "
                f"{pretrainer.encoder.config.max_position_embeddings} < seq_length "
                f"{config.seq_length}"
            )
        return pretrainer
    encoder = BertEncoder(bert_config_of(config), dtype=dtype)
    if config.objective == "electra":
        generator = electra_generator_config(
            encoder.config, config.generator_hidden_size, config.generator_num_layers
        )
        return ElectraPretrainer(
            encoder, generator, discriminator_weight=config.discriminator_weight
        )
    return BertPretrainer(encoder, objective=config.objective)


def build_optimizer(config: PretrainConfig) -> keras.optimizers.Optimizer:
    """The run's optimizer (a checkpoint of the run restores into it)."""
    return create_optimizer(
        config.optimizer,
        config.learning_rate,
        config.train_steps,
        config.warmup_steps,
        weight_decay=config.weight_decay,
        clipnorm=config.clipnorm,
    )


# === Data ===


def distributed_dataset(
    strategy: tf.distribute.Strategy,
    config: PretrainConfig,
    file_pattern: str,
    is_training: bool,
    skip_steps: int = 0,
) -> tf.distribute.DistributedDataset:
    """Per-replica batches of `batch_size / replicas` (times gradient_accumulation_steps
    for training: one element per update), each worker reading its own files;
    with `skip_steps`, the first that many steps are skipped."""
    if config.batch_size % strategy.num_replicas_in_sync:
        raise ValueError(
            f"batch_size {config.batch_size} is not divisible by the "
            f"{strategy.num_replicas_in_sync} replicas"
        )

    def dataset_fn(input_context):
        per_replica = input_context.get_per_replica_batch_size(config.batch_size)
        if is_training:
            per_replica *= config.gradient_accumulation_steps
        dataset = inputs.pretraining_dataset(
            file_pattern,
            config.seq_length,
            config.max_predictions_per_seq,
            per_replica,
            is_training=is_training,
            with_next_sentence=_with_next_sentence(config),
            input_context=input_context,
            seed=config.seed,
            dynamic_masking=config.dynamic_masking,
            vocab_file=config.vocab_file,
            masked_lm_prob=config.masked_lm_prob,
            whole_word_mask=config.whole_word_mask,
            mask_token_rate=config.mask_token_rate,
            random_token_rate=config.random_token_rate,
            keep_token_rate=config.keep_token_rate,
        )
        if config.objective == "lm":
            dataset = dataset.map(next_token_targets, num_parallel_calls=tf.data.AUTOTUNE)
        if skip_steps:
            # Each input pipeline feeds this many replicas per step.
            replicas = input_context.num_replicas_in_sync // input_context.num_input_pipelines
            dataset = dataset.skip(skip_steps * replicas)
        return dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


# === Checkpoints and export ===


def finished_results(config: PretrainConfig) -> dict[str, Any] | None:
    """The saved eval_results.json of a run whose latest checkpoint is at
    train_steps (and whose export and results were written), else None."""
    step = checkpoint_step(os.path.join(config.model_dir, "checkpoints"))
    results_path = os.path.join(config.model_dir, "eval_results.json")
    if step is None or not tf.io.gfile.exists(results_path):
        return None
    with tf.io.gfile.GFile(results_path) as f:
        try:
            record = json.load(f)
        except ValueError:
            return None  # torn by a kill while written: evaluate again
    if step < config.train_steps or record.get("step") != step:
        return None
    return record


def export_tf1(pretrainer: BertPretrainer, directory: str) -> str:
    """Writes the weights with the original google-research/bert names and
    `bert_config.json`, so `BertEncoder.from_pretrained(directory)` (and
    Google's code) reads them: the next phase and fine-tuning start from here.
    The folder is written beside `directory` and renamed into place whole
    (`safe_output.replacing`): a failed or killed export leaves the previous
    one, never a folder with some of the files."""
    named = dict(encoder_variables(pretrainer.encoder))
    named.update(
        {
            name: variable
            for name, (variable, transposed) in head_variables(pretrainer).items()
            if not transposed
        }
    )
    if pretrainer.next_sentence_head is not None:
        kernel = pretrainer.next_sentence_head.dense.kernel
        named["cls/seq_relationship/output_weights"] = tf.transpose(
            keras.ops.convert_to_numpy(kernel)
        )
    with safe_output.replacing(directory, folder=True) as staging:
        _write_tf1_folder(staging, named, pretrainer.encoder.config)
    return directory


def export_electra(pretrainer: ElectraPretrainer, directory: str) -> str:
    """Writes the discriminator with google-research/electra's names and its
    `bert_config.json`, so `BertEncoder.from_pretrained(directory)` (hence
    every task model's) and `ElectraDiscriminator.from_pretrained` read it,
    and the generator in `generator/` (the same layout, its embeddings
    copies of the discriminator's) for `ElectraGenerator.from_pretrained`
    and `ElectraPretrainer.from_pretrained(directory)` (the next phase).
    Written whole or not at all, as `export_tf1`."""
    discriminator, generator = pretrainer.original_variables()
    with safe_output.replacing(directory, folder=True) as staging:
        _write_tf1_folder(staging, discriminator, pretrainer.encoder.config)
        _write_tf1_folder(
            os.path.join(staging, GENERATOR_FOLDER), generator, pretrainer.generator_config
        )
    return directory


def _write_tf1_folder(folder, variables, bert_config):
    """`variables` (original name -> variable or array) as the TF1 checkpoint
    `bert_model.ckpt` in `folder`, with its `checkpoint` index and `bert_config.json`."""
    tensors = {name: keras.ops.convert_to_numpy(v) for name, v in variables.items()}
    names = sorted(tensors)
    tf.io.gfile.makedirs(folder)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(folder, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.cast(tensors[n], tf.float32) for n in names],
    )
    safe_output.write_text(
        os.path.join(folder, "checkpoint"), 'model_checkpoint_path: "bert_model.ckpt"\n'
    )
    bert_config.to_json_file(os.path.join(folder, "bert_config.json"))


# === Checkpoints each epoch ===


class _CheckpointEachEpoch(keras.callbacks.Callback):
    """A checkpoint at each epoch's end (one epoch = `checkpoint_every` steps)."""

    def __init__(self, writer):
        super().__init__()
        self.writer = writer

    def on_epoch_end(self, epoch, logs=None):
        self.writer.save(optimizer_step(self.model.optimizer))


# === Training ===


def _fit(pretrainer, dataset, config, start_step, writer, chief):
    """One `fit` (Keras', or keras_bert's strategy.run loop under
    MultiWorkerMirroredStrategy: `keras_bert.models.strategy_run_fit`); one
    epoch = `checkpoint_every` steps, checkpointed at its end."""
    pretrainer.fit(
        dataset,
        initial_epoch=start_step // config.checkpoint_every,
        epochs=config.train_steps // config.checkpoint_every,
        steps_per_epoch=config.checkpoint_every,
        # The loss check first: a broken step stops before it is logged or checkpointed.
        # The checkpoint before the log's clock restarts: saving is not training time.
        callbacks=[
            StopOnNonFiniteLoss(writer.directory),
            _CheckpointEachEpoch(writer),
            TrainLog(
                config.model_dir,
                config.batch_size * config.gradient_accumulation_steps,
                config.log_every,
                enabled=chief,
            ),
        ],
        verbose=keras_verbose(config.verbose),
        shuffle=False,
    )


def evaluate(
    strategy: tf.distribute.Strategy,
    pretrainer: BertPretrainer,
    config: PretrainConfig,
    custom_loop: bool,
) -> dict[str, float]:
    """Metrics over `eval_steps` batches of `eval_files` (read once, in order)."""
    dataset = distributed_dataset(strategy, config, config.eval_files, is_training=False)
    if not custom_loop:
        return pretrainer.evaluate(dataset, steps=config.eval_steps, return_dict=True, verbose=0)
    for metric in pretrainer.metrics:
        metric.reset_state()

    @tf.function
    def eval_step(batch):
        def replica_fn(batch):
            pretrainer.compute_loss(
                x=batch, y_pred=pretrainer(batch, training=False), training=False
            )

        strategy.run(replica_fn, args=(batch,))

    for _, batch in zip(range(config.eval_steps), dataset):
        eval_step(batch)
    return metric_values(pretrainer, skip=("loss",))


def pretrain(config: PretrainConfig | dict | str) -> dict[str, float]:
    """Runs (or resumes) one pretraining phase; returns the evaluation metrics
    (or the last training metrics when there are no eval_files)."""
    if not isinstance(config, PretrainConfig):
        config = load_config(**config) if isinstance(config, dict) else load_config(config)
    # One run per model_dir at a time (a second is refused naming the first's
    # pid and host; the lock of a run that is gone is taken over), and never
    # over its own records.
    safe_output.check_not_input(
        config.model_dir, [config.train_files, config.eval_files], "config field model_dir"
    )
    with safe_output.output_lock(config.model_dir):
        return _pretrain_locked(config)


def _pretrain_locked(config: PretrainConfig) -> dict[str, float]:
    done = finished_results(config)
    if done is not None:
        print(
            f"{config.model_dir}: already finished at step {done['step']} (train_steps "
            f"{config.train_steps}); nothing to do, eval_results.json kept. Raise "
            "train_steps to train on.",
            flush=True,
        )
        return {name: value for name, value in done.items() if name != "step"}
    # Checked before model_dir is made: a run refused here leaves nothing behind.
    if config.architecture == modernbert_pretraining.MODERNBERT:
        if not config.init_checkpoint:
            modernbert_pretraining.modernbert_config_of(config)  # rotary: no position limit
    elif not config.init_checkpoint:
        bert_config = bert_config_of(config)
        if bert_config.max_position_embeddings < config.seq_length:
            raise ValueError(
                f"{config.model}: max_position_embeddings {bert_config.max_position_embeddings} "
                f"< the config's seq_length {config.seq_length}"
            )
        if config.objective == "electra":  # a width its heads cannot split is refused
            electra_generator_config(
                bert_config, config.generator_hidden_size, config.generator_num_layers
            )
    # The strategy before the records are read: multi-worker collectives must be
    # configured before TensorFlow's runtime starts, which reading a record does.
    strategy = distribute.build_strategy(config.strategy, tpu=config.tpu, devices=config.devices)
    # Resolved once ("auto" said in one line) and recorded in pretrain_config.json.
    config = dataclasses.replace(
        config,
        mixed_precision=precision.resolve(config.mixed_precision, "config field mixed_precision"),
    )
    for field in ("train_files", "eval_files"):
        if getattr(config, field):
            inputs.check_pretraining_records(
                getattr(config, field),
                config.seq_length,
                config.max_predictions_per_seq,
                with_next_sentence=_with_next_sentence(config),
                field=field,
            )
    created = not tf.io.gfile.exists(config.model_dir)
    try:
        try:
            return _pretrain(config, strategy)
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as e:
            # A record that fails its checksum mid-run: named, file and record.
            corrupted = inputs.corrupted_records_error(
                e, {"train_files": config.train_files, "eval_files": config.eval_files}
            )
            if corrupted is None:
                raise
            raise corrupted from e
    except Exception:
        # A run that fails before its first checkpoint leaves no model_dir of
        # a config file and empty logs that look like a run to resume.
        if (
            created
            and tf.train.get_checkpoint_state(os.path.join(config.model_dir, "checkpoints")) is None
        ):
            try:
                tf.io.gfile.rmtree(config.model_dir)
            except tf.errors.NotFoundError:  # another worker removed it first
                pass
        raise


def _pretrain(config, strategy):
    chief = distribute.is_chief(strategy)
    tf.io.gfile.makedirs(config.model_dir)
    if chief:
        safe_output.write_json(
            os.path.join(config.model_dir, "pretrain_config.json"), dataclasses.asdict(config)
        )

    # Same seed, same initial weights (and dropout masks) in every process:
    # a rerun reproduces a run, and every worker starts from one model.
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        pretrainer = build_model(config)
        pretrainer.compile(
            optimizer=build_optimizer(config),
            gradient_accumulation_steps=config.gradient_accumulation_steps,
            jit_compile=resolve_jit_compile(config.jit_compile),
            steps_per_execution=config.steps_per_execution,
            train_loop=config.train_loop,
        )
        # Built now so that restoring fills every slot variable at once.
        pretrainer.optimizer.build(pretrainer.trainable_variables)
    custom_loop = runs_custom_loop(pretrainer)
    # The model and its optimizer under their own keys (those of every
    # checkpoint written so far).
    writer = CheckpointWriter(
        strategy,
        pretrainer,
        pretrainer.optimizer,
        os.path.join(config.model_dir, "checkpoints"),
        config.keep_checkpoints,
    )
    restored = writer.restore_latest()
    start_step = optimizer_step(pretrainer.optimizer)
    if restored:
        print(f"resuming from {restored} at step {start_step}", flush=True)
    if start_step % config.checkpoint_every:
        raise ValueError(
            f"{restored}: step {start_step} is not a multiple of checkpoint_every "
            f"({config.checkpoint_every}); keep checkpoint_every when resuming"
        )

    if start_step < config.train_steps:
        dataset = distributed_dataset(
            strategy, config, config.train_files, is_training=True, skip_steps=start_step
        )
        _fit(pretrainer, dataset, config, start_step, writer, chief)

    results = metric_values(pretrainer, skip=("loss",))
    if config.eval_files:
        results = evaluate(strategy, pretrainer, config, custom_loop)
    if chief:
        if config.architecture == modernbert_pretraining.MODERNBERT:
            export = modernbert_pretraining.export
        else:
            export = export_electra if config.objective == "electra" else export_tf1
        export(pretrainer, os.path.join(config.model_dir, "export"))
        record = {
            "step": optimizer_step(pretrainer.optimizer),
            **{k: float(v) for k, v in results.items()},
        }
        write_json(os.path.join(config.model_dir, "eval_results.json"), record)
    return results
