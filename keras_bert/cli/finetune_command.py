"""`keras-bert finetune`: flags over a recipe over `FinetuneConfig`'s defaults,
then one fine-tuning run (or search)."""

from keras_bert.cli.arguments import (
    TASK_CHOICES,
    add_casing_arguments,
    add_data_arguments,
    add_overrides_argument,
    add_precision_argument,
    bounded_number,
    input_file,
    positive_float,
    positive_int,
    probability,
    sequence_length,
)

# Each flag below stands for a FinetuneConfig field (`run` maps the ones in
# NOT_FIELDS) and defaults to None: what is not given comes from --config, else
# from FinetuneConfig's own defaults (shown in brackets). The task and its
# files, the training, how the run goes: in help order, around the shared groups.
TASK_FLAGS = (
    (
        "--task",
        {
            "choices": TASK_CHOICES,
            "help": "required (here or in --config); embed: sentence embeddings "
            "(BertSentenceEncoder), loss by --set embedding_loss=...",
        },
    ),
    (
        "--train",
        {
            "help": "file (TSV/CSV/JSONL, GLUE TSV, CoNLL, SQuAD JSON; embed: a TSV "
            "of anchor/positive[/negative] or text/text/score with a header "
            "row) or tfds:<name>:<split>; required"
        },
    ),
    ("--dev", {"help": "as --train; scored after every epoch"}),
    (
        "--init-checkpoint",
        {
            "help": "our .keras file, HuggingFace folder, TF1 checkpoint or folder; "
            "random --preset weights if absent"
        },
    ),
    ("--output-dir", {"help": "required; checkpoints go here too"}),
    (
        "--overwrite",
        {
            "action": "store_true",
            "help": "replace a finished model (or an unfinished run) in --output-dir",
        },
    ),
    (
        "--vocab-file",
        {
            "type": input_file,
            "help": "defaults to the checkpoint's vocab.txt, else the shipped uncased one",
        },
    ),
)
TRAINING_FLAGS = (
    ("--preset", {"help": "size when no checkpoint is given [tiny]"}),
    (
        "--seq-length",
        {"type": sequence_length, "help": "max sequence length [128] (384 for SQuAD)"},
    ),
    (
        "--batch-size",
        {"type": positive_int, "help": "rows per micro-batch, all replicas together [32]"},
    ),
    ("--learning-rate", {"type": positive_float, "help": "[5e-5]"}),
    ("--epochs", {"type": positive_float, "help": "[3]"}),
    ("--warmup-proportion", {"type": probability, "help": "[0.1]"}),
    ("--dropout", {"type": bounded_number(float, 0, 0.99), "help": "[0.1]"}),
    ("--seed", {"type": int, "help": "[0]"}),
    ("--doc-stride", {"type": positive_int, "help": "[128]"}),
    ("--max-query-length", {"type": positive_int, "help": "[64]"}),
    (
        "--lora-rank",
        {
            "type": positive_int,
            "help": "train rank-r LoRA adapters on the frozen encoder (try a higher "
            "--learning-rate, e.g. 5e-4); writes lora_weights.npz too",
        },
    ),
    ("--max-train-examples", {"type": positive_int}),
    ("--max-dev-examples", {"type": positive_int}),
    (
        "--early-stopping-patience",
        {"type": positive_int, "help": "stop after this many epochs without a better dev metric"},
    ),
    (
        "--search",
        {
            "choices": ["paper", "glue"],
            "help": "paper: batch {16,32} x lr {5e-5,3e-5,2e-5} x epochs {2,3,4}; "
            "glue: batch 32, 3 epochs, lr {5e-5,4e-5,3e-5,2e-5}; best on dev",
        },
    ),
    ("--restarts", {"type": positive_int, "help": "random restarts per grid point [1]"}),
    (
        "--bucket-by-length",
        {
            "action": "store_true",
            "help": "batch examples of similar lengths (much faster on CPU)",
        },
    ),
    (
        "--strategy",
        {
            "choices": ["auto", "one_device", "mirrored", "multi_worker", "tpu"],
            "help": "tf.distribute strategy [auto: TF_CONFIG's cluster, else all GPUs]",
        },
    ),
    ("--tpu", {"help": "TPU name or grpc:// address"}),
)
RUN_FLAGS = (
    (
        "--jit-compile",
        {"choices": ["true", "false", "auto"], "help": "XLA [auto: on with a GPU or TPU]"},
    ),
    (
        "--gradient-accumulation-steps",
        {"type": positive_int, "help": "micro-batches of --batch-size per update [1]"},
    ),
    (
        "--checkpoint-every",
        {"type": positive_int, "help": "steps between checkpoints [at each epoch's end only]"},
    ),
    (
        "--tune-null-threshold",
        {
            "action": "store_true",
            "help": "SQuAD v2.0: keep the dev set's best no-answer threshold",
        },
    ),
    ("--no-tensorboard", {"action": "store_true"}),
    (
        "--multi-label",
        {
            "action": "store_true",
            "help": "classify: any number of labels per text (the label column's names "
            "separated by --label-separator, or a JSONL list; an empty cell: none); "
            "a sigmoid per label, scored by micro / macro F1",
        },
    ),
)


def add(subparsers):
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a BERT encoder on a classification, regression, "
        "tagging, SQuAD or embedding task; rerun the same command to resume",
    )
    parser.add_argument(
        "--config",
        default=None,
        help="YAML or JSON recipe of FinetuneConfig fields (see "
        "recipes/finetuning); flags and --set override it",
    )
    add_overrides_argument(parser, "glue_task=mrpc")
    _add_config_flags(parser, TASK_FLAGS)
    add_casing_arguments(parser)
    _add_config_flags(parser, TRAINING_FLAGS)
    add_precision_argument(parser)
    _add_config_flags(parser, RUN_FLAGS)
    add_data_arguments(parser)
    parser.set_defaults(run=run, fast_cpu_training=True)


def _add_config_flags(parser, flags):
    for flag, options in flags:
        parser.add_argument(flag, default=None, **options)


# Flags that are not FinetuneConfig fields of the same name.
NOT_FIELDS = (
    "command",
    "run",
    "fast_cpu_training",
    "config",
    "overrides",
    "no_tensorboard",
    "text_columns",
    "jit_compile",
)


def run(args):
    import json

    from keras_bert.training.finetuning import finetune, load_finetune_config

    fields = {
        name: value
        for name, value in vars(args).items()
        if value is not None and name not in NOT_FIELDS
    }
    if args.no_tensorboard:
        fields["tensorboard"] = False
    if args.text_columns:
        fields["text_columns"] = args.text_columns.split(",")
    if args.jit_compile is not None:
        fields["jit_compile"] = {"true": True, "false": False}.get(args.jit_compile, "auto")
    config = load_finetune_config(args.config, args.overrides, **fields)
    if not config.output_dir:
        raise ValueError("finetune needs --output-dir (or output_dir in the --config recipe)")
    result = finetune(config)
    print(json.dumps({k: v for k, v in result.items() if k != "table"}, indent=2))
