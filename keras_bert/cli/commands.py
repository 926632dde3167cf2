"""The `keras-bert` command: parses arguments and calls one library function each.

Each subcommand is registered by an `add_*` function below; the work itself
lives in the library modules. `run_command` is the one error boundary: an
expected failure (`keras_bert.errors.expected_failure`: bad input, a missing
file, a busy or unwritable output) is one line on stderr and exit code 2; any
other exception is a bug and keeps its traceback (exit code 1); `--verbose`
shows the traceback of expected failures too.
"""

import argparse
import contextlib
import math
import os
import sys
import traceback

from keras_bert import errors, features, progress, safe_output, text_files
from keras_bert.cli import native_logs

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # also set by the package, for `python cli.py`


# === Argument types: bad values are refused here, before any work starts ===


def _number(kind, low, high=None, low_open=False):
    """An argparse type: a `kind` number in [low, high] (low excluded with `low_open`)."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):  # nan passes every comparison below
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if (value <= low if low_open else value < low) or (high is not None and value > high):
            bound = f"> {low}" if low_open else f">= {low}"
            bound += f" and <= {high}" if high is not None else ""
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1)
non_negative_int = _number(int, 0)
positive_float = _number(float, 0, low_open=True)
# 512: the position embeddings of every BERT checkpoint (a model's own limit is checked later).
sequence_length = _number(int, 3, 512)


def input_file(text):
    """An argparse type: a path that must be a file (not a directory); gs:// and globs pass."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file")
    return text


def output_file(text):
    """An argparse type: a file to write, which must not name a directory."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name")
    return text


# Command -> (the flag it writes, the flags it reads, whether it creates the
# output's folder, what it writes there): the dispatch refuses an output that
# is one of the inputs' files (or a file inside an input folder) and locks it
# while the command runs (one process per output). What a folder output
# receives: "whole" (replaced whole: no input may lie inside it) or the names
# written in it (none may be an input). Not in the parsed arguments: finetune
# passes those on as config fields.
FINETUNE_WRITES = features.FINETUNE_OUTPUT_FILES
OUTPUTS = {
    "vocab": ("output", ("input",), True, None),
    "convert": ("output", ("checkpoint",), True, None),
    # These two refuse a missing output folder themselves: the lock must not create it.
    "prepare-corpus": ("output_file", ("inputs",), False, None),
    "create-pretraining-data": ("output_file", ("input_file", "vocab_file"), False, None),
    "finetune": (
        "output_dir",
        ("train", "dev", "init_checkpoint", "vocab_file"),
        True,
        FINETUNE_WRITES,
    ),
    "predict": ("output", ("input", "model_dir"), True, None),
    "export": ("output", ("model_dir", "vocab_file"), True, "whole"),
    "quickstart": ("output", ("corpus",), True, None),
}


def add_precision_argument(parser, default=None):
    """--mixed-precision, one rule for every command (keras_bert.kernels.precision)."""
    parser.add_argument(
        "--mixed-precision",
        default=default,
        choices=["float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16", "auto"],
        help="[float32, on every machine] mixed_bfloat16, mixed_float16 (loss-scaled), "
        "or auto: what this machine multiplies natively, said in one line",
    )


def add_casing_arguments(parser):
    """--cased / --uncased for a command reading a checkpoint; neither: its own casing."""
    casing = parser.add_mutually_exclusive_group()
    casing.add_argument(
        "--cased",
        dest="lowercase",
        action="store_false",
        default=None,
        help="the model is cased (default: the checkpoint's casing, from "
        "tokenizer_config.json, the TF1 folder name or the vocabulary)",
    )
    casing.add_argument(
        "--uncased",
        dest="lowercase",
        action="store_true",
        default=None,
        help="the model is uncased: text is lowercased (default: detected)",
    )


# === tokenize ===


def add_tokenize(subparsers):
    parser = subparsers.add_parser(
        "tokenize", help="word-piece lines from stdin (for quick inspection)"
    )
    parser.add_argument("--vocab-file", required=True, type=input_file)
    parser.add_argument("--cased", action="store_true", help="the vocabulary is cased")
    parser.add_argument("--ids", action="store_true", help="print ids instead of word pieces")
    parser.set_defaults(run=run_tokenize)


def run_tokenize(args):
    from keras_bert.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(args.vocab_file, lowercase=not args.cased)
    # Bytes, to name an invalid UTF-8 line (a text stdin, e.g. a StringIO, is read as is).
    for number, raw in enumerate(getattr(sys.stdin, "buffer", sys.stdin), 1):
        try:
            line = raw if isinstance(raw, str) else raw.decode("utf-8")
            if number == 1:
                line = text_files.strip_bom(line)
        except UnicodeDecodeError:
            # Named and skipped (an empty output line keeps the lines aligned).
            print(
                f"keras-bert tokenize: stdin line {number}: not valid UTF-8, skipped",
                file=sys.stderr,
                flush=True,
            )
            print(flush=True)
            continue
        ids = tokenizer.tokenize([line.rstrip("\r\n")])[0].numpy().tolist()
        pieces = [str(i) for i in ids] if args.ids else [tokenizer.vocab[i] for i in ids]
        print(" ".join(pieces), flush=True)


# === vocab ===


def add_vocab(subparsers):
    parser = subparsers.add_parser("vocab", help="learn a WordPiece vocabulary from text files")
    parser.add_argument(
        "--input",
        required=True,
        nargs="+",
        type=input_file,
        help="text files or glob patterns (local or gs://)",
    )
    parser.add_argument(
        "--vocab-size",
        type=positive_int,
        required=True,
        help="the most tokens, special ones included",
    )
    parser.add_argument("--output", required=True, type=output_file, help="vocab.txt to write")
    parser.add_argument("--cased", action="store_true", help="keep case and accents")
    parser.add_argument(
        "--num-unused",
        type=non_negative_int,
        default=0,
        help="[unusedN] slots; 99 gives Google's ids ([UNK] 100 ... [MASK] 103)",
    )
    parser.set_defaults(run=run_vocab)


def run_vocab(args):
    from keras_bert.text import unknown_rate
    from keras_bert.text.tokenizer import BertTokenizer
    from keras_bert.text.vocab import learn_vocabulary_and_counts

    vocab, word_counts = learn_vocabulary_and_counts(
        args.input,
        args.vocab_size,
        lowercase=not args.cased,
        output=args.output,
        num_unused=args.num_unused,
    )
    print(f"wrote {len(vocab)} tokens to {args.output}")
    # The learned vocabulary on its own corpus: a rare script left out of the
    # alphabet, or too small a --vocab-size, shows here.
    unknown_rate.report(
        unknown_rate.count_word_counts(BertTokenizer(vocab, lowercase=not args.cased), word_counts),
        "the input text",
        args.output,
    )


# === encode ===


def add_encode(subparsers):
    parser = subparsers.add_parser(
        "encode", help="encode sentences with a BERT encoder and print their embeddings"
    )
    parser.add_argument("text", nargs="+", help="sentences to encode")
    parser.add_argument(
        "--vocab-file",
        default=None,
        help="defaults to the checkpoint's vocab.txt, else the shipped uncased one",
    )
    parser.add_argument(
        "--init-checkpoint",
        default=None,
        help="HuggingFace folder, TF1 checkpoint or folder; random weights if absent",
    )
    parser.add_argument("--preset", default="tiny", help="size when no checkpoint is given")
    parser.add_argument("--seq-length", type=sequence_length, default=128)
    add_casing_arguments(parser)
    parser.set_defaults(run=run_encode)


def run_encode(args):
    from keras_bert.cli.encode import encode_sentences

    for sentence, pieces, embedding in encode_sentences(
        args.text,
        init_checkpoint=args.init_checkpoint,
        vocab_file=args.vocab_file,
        preset=args.preset,
        seq_length=args.seq_length,
        lowercase=args.lowercase,
    ):
        head = " ".join(f"{x:+.3f}" for x in embedding[:6])
        print(
            f"{sentence!r}\n  pieces: {' '.join(pieces)}\n"
            f"  embedding ({len(embedding)} dims, mean-pooled, normalised): {head} ..."
        )


# === convert ===


def add_convert(subparsers):
    parser = subparsers.add_parser(
        "convert", help="convert a HuggingFace or original TF1 checkpoint to a .keras file"
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="HuggingFace folder, TF1 checkpoint prefix, or folder holding one",
    )
    parser.add_argument("--output", required=True, help="path of the .keras file to write")
    parser.set_defaults(run=run_convert)


def run_convert(args):
    from keras_bert.models.encoder import convert_checkpoint

    path = convert_checkpoint(args.checkpoint, args.output)
    print(f"wrote {path}")


# === prepare-corpus / create-pretraining-data ===


def add_prepare_corpus(subparsers):
    parser = subparsers.add_parser(
        "prepare-corpus",
        help="books, text files or Wikipedia -> one sentence per line, "
        "a blank line between documents",
    )
    parser.add_argument(
        "inputs", nargs="+", help="files, directories or globs; TFDS names for --source tfds"
    )
    parser.add_argument(
        "--source",
        choices=["books", "text", "tfds", "wikiextractor"],
        default="books",
        help="books: a chapter is a document; text: a file "
        "is a document; tfds: e.g. wikipedia/20230601.en; wikiextractor: "
        "WikiExtractor output of a Wikipedia dump",
    )
    parser.add_argument("--output-file", required=True, type=output_file)
    parser.add_argument("--tfds-split", default="train")
    parser.add_argument("--tfds-data-dir", default=None)
    parser.set_defaults(run=run_prepare_corpus)


def run_prepare_corpus(args):
    from keras_bert.text.corpus import prepare_corpus

    documents, sentences = prepare_corpus(
        args.source, args.inputs, args.output_file, args.tfds_split, args.tfds_data_dir
    )
    print(f"wrote {documents} documents, {sentences} sentences to {args.output_file}")


def add_create_pretraining_data(subparsers):
    parser = subparsers.add_parser(
        "create-pretraining-data",
        help="text -> masked-LM / next-sentence TFRecord shards "
        "(the original create_pretraining_data.py)",
    )
    parser.add_argument(
        "--input-file",
        required=True,
        help="comma-separated files or globs: one sentence per line, "
        "a blank line between documents",
    )
    parser.add_argument(
        "--output-file",
        required=True,
        help="a file, comma-separated files, or the prefix of --num-shards shards",
    )
    parser.add_argument("--vocab-file", required=True, type=input_file)
    parser.add_argument("--do-lower-case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--do-whole-word-mask", action="store_true")
    parser.add_argument("--max-seq-length", type=positive_int, default=128)
    parser.add_argument("--max-predictions-per-seq", type=positive_int, default=20)
    parser.add_argument("--masked-lm-prob", type=float, default=0.15)
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    for rate, default, becomes in (
        ("mask", 0.8, "[MASK]"),
        ("random", 0.1, "a random token"),
        ("keep", 0.1, "itself"),
    ):
        parser.add_argument(
            f"--{rate}-token-rate",
            type=float,
            default=default,
            help=f"share of the chosen tokens that become {becomes} (the three rates sum to 1)",
        )
    parser.add_argument("--dupe-factor", type=positive_int, default=10)
    parser.add_argument("--random-seed", type=int, default=12345)
    parser.add_argument(
        "--objective",
        choices=features.OBJECTIVES,
        default="nsp",
        help="nsp: BERT next sentence; sop: ALBERT sentence order; none: "
        "RoBERTa packing of full sentences, no next_sentence_labels",
    )
    parser.add_argument(
        "--no-mask",
        action="store_true",
        help="write unmasked records, for dynamic masking at read time",
    )
    parser.add_argument("--num-shards", type=positive_int, default=1)
    parser.add_argument("--num-workers", type=positive_int, default=None, help="default: all cores")
    parser.add_argument("--gzip", action="store_true", help="GZIP-compressed TFRecords")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--runner",
        default=None,
        help="run as an Apache Beam pipeline on this runner (DirectRunner, "
        "DataflowRunner, FlinkRunner, SparkRunner; the beam extra): "
        "blocks per input file, records in runner-chosen shards",
    )
    parser.add_argument(
        "--pipeline-options",
        default="",
        help='further Beam options, e.g. "--project=P --region=R '
        '--temp_location=gs://B/tmp --setup_file=./setup.py"',
    )
    parser.set_defaults(run=run_create_pretraining_data, fast_exit=True)


def run_create_pretraining_data(args):
    import os

    from keras_bert.cli.startup import import_tensorflow_lean
    from keras_bert.pretraining_data import create, options, workers

    num_workers = os.cpu_count() if args.num_workers is None else args.num_workers
    # Workers first: small forks that start while TensorFlow is imported.
    pool = workers.start_workers(num_workers) if num_workers > 1 and not args.runner else None
    import_tensorflow_lean()  # no Keras model here: skip Keras and its extras (seconds)
    settings = options.PretrainingOptions(
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob,
        short_seq_prob=args.short_seq_prob,
        dupe_factor=args.dupe_factor,
        random_seed=args.random_seed,
        do_whole_word_mask=args.do_whole_word_mask,
        objective=args.objective,
        mask=not args.no_mask,
        mask_token_rate=args.mask_token_rate,
        random_token_rate=args.random_token_rate,
        keep_token_rate=args.keep_token_rate,
    )
    if args.runner:
        import shlex

        from keras_bert.pretraining_data.beam import create_pretraining_data_beam

        summary = create_pretraining_data_beam(
            args.input_file,
            args.output_file,
            args.vocab_file,
            settings,
            do_lower_case=args.do_lower_case,
            num_shards=args.num_shards,
            gzip=args.gzip,
            runner=args.runner,
            pipeline_args=shlex.split(args.pipeline_options),
        )
    else:
        try:
            summary = create.create_pretraining_data(
                args.input_file,
                args.output_file,
                args.vocab_file,
                settings,
                do_lower_case=args.do_lower_case,
                num_shards=args.num_shards,
                num_workers=num_workers,
                gzip=args.gzip,
                progress=not args.quiet,
                pool=pool,
            )
        finally:
            if pool is not None:
                pool.terminate()
    print(summary.to_text(settings))
    warning = summary.unknown.warning(args.vocab_file)
    if warning:
        print(warning, file=sys.stderr)


# === pretrain ===


def add_pretrain(subparsers):
    parser = subparsers.add_parser(
        "pretrain", help="pretrain BERT (MLM + NSP) from a recipe; rerun the same command to resume"
    )
    parser.add_argument(
        "--config", required=True, help="YAML or JSON recipe (see recipes/pretraining)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field, e.g. --set train_steps=10",
    )
    add_precision_argument(parser)
    parser.set_defaults(run=run_pretrain, fast_cpu_training=True)


def run_pretrain(args):
    from keras_bert.training.pretraining import load_config, pretrain

    overrides = list(args.overrides)
    if args.mixed_precision:  # the recipe's field, as --set mixed_precision= would
        overrides.append(f"mixed_precision={args.mixed_precision}")
    config = load_config(args.config, overrides)
    # The output folder is the recipe's model_dir, known only now.
    safe_output.check_not_input(
        config.model_dir, [config.train_files, config.eval_files], "config field model_dir"
    )
    with safe_output.output_lock(config.model_dir, folder=True):
        results = pretrain(config)
    print(" - ".join(f"{name}: {value:.4f}" for name, value in results.items()))


# === finetune / evaluate ===


def _add_data_arguments(parser):
    parser.add_argument(
        "--glue-task",
        default=None,
        help="read the data as this GLUE task (cola, sst2, mrpc, stsb, qqp, "
        "mnli, qnli, rte, wnli): original TSVs or tfds:glue/<task>:<split>",
    )
    parser.add_argument(
        "--text-columns",
        default=None,
        help="comma-separated text column(s) of a TSV/CSV/JSONL table "
        "(default: every column but the label, at most two; embed: "
        "2 or 3, e.g. title,text)",
    )
    parser.add_argument(
        "--label-column",
        default=None,
        help="[label] (embed: a score column [score, or a numeric label])",
    )
    parser.add_argument(
        "--label-separator",
        default=None,
        help="multi-label: what separates a row's label names [|], e.g. sports|politics",
    )
    parser.add_argument(
        "--threshold",
        type=_number(float, 0, 1),
        default=None,
        help="multi-label: a label is predicted where its probability is above "
        "this [0.5; evaluate: the model folder's]",
    )
    parser.add_argument(
        "--version-2-with-negative",
        action="store_true",
        default=None,
        help="SQuAD v2.0: questions may have no answer",
    )
    parser.add_argument(
        "--null-score-diff-threshold",
        type=float,
        default=None,
        help='SQuAD v2.0: answer "" when null score - best span score '
        "exceeds this (tune it on dev: see best_f1_thresh)",
    )


def add_finetune(subparsers):
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a BERT encoder on a classification, regression, "
        "tagging, SQuAD or embedding task; rerun the same command to resume",
    )
    # Every flag defaults to None: what is not given comes from --config, else
    # from FinetuneConfig's own defaults (shown in brackets).
    parser.add_argument(
        "--config",
        default=None,
        help="YAML or JSON recipe of FinetuneConfig fields (see "
        "recipes/finetuning); flags and --set override it",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field, e.g. --set glue_task=mrpc",
    )
    parser.add_argument(
        "--task",
        default=None,
        choices=["classify", "regress", "tag", "squad", "embed"],
        help="required (here or in --config); embed: sentence embeddings "
        "(BertSentenceEncoder), loss by --set embedding_loss=...",
    )
    parser.add_argument(
        "--train",
        default=None,
        help="file (TSV/CSV/JSONL, GLUE TSV, CoNLL, SQuAD JSON; embed: a TSV "
        "of anchor/positive[/negative] or text/text/score with a header "
        "row) or tfds:<name>:<split>; required",
    )
    parser.add_argument("--dev", default=None, help="as --train; scored after every epoch")
    parser.add_argument(
        "--init-checkpoint",
        default=None,
        help="our .keras file, HuggingFace folder, TF1 checkpoint or folder; "
        "random --preset weights if absent",
    )
    parser.add_argument("--output-dir", default=None, help="required; checkpoints go here too")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        default=None,
        help="replace a finished model (or an unfinished run) in --output-dir",
    )
    parser.add_argument(
        "--vocab-file",
        default=None,
        type=input_file,
        help="defaults to the checkpoint's vocab.txt, else the shipped uncased one",
    )
    add_casing_arguments(parser)
    parser.add_argument("--preset", default=None, help="size when no checkpoint is given [tiny]")
    parser.add_argument(
        "--seq-length",
        type=sequence_length,
        default=None,
        help="max sequence length [128] (384 for SQuAD)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="rows per micro-batch, all replicas together [32]",
    )
    parser.add_argument("--learning-rate", type=positive_float, default=None, help="[5e-5]")
    parser.add_argument("--epochs", type=positive_float, default=None, help="[3]")
    parser.add_argument(
        "--warmup-proportion", type=_number(float, 0, 1), default=None, help="[0.1]"
    )
    parser.add_argument("--dropout", type=_number(float, 0, 0.99), default=None, help="[0.1]")
    parser.add_argument("--seed", type=int, default=None, help="[0]")
    parser.add_argument("--doc-stride", type=positive_int, default=None, help="[128]")
    parser.add_argument("--max-query-length", type=positive_int, default=None, help="[64]")
    parser.add_argument(
        "--lora-rank",
        type=positive_int,
        default=None,
        help="train rank-r LoRA adapters on the frozen encoder (try a higher "
        "--learning-rate, e.g. 5e-4); writes lora_weights.npz too",
    )
    parser.add_argument("--max-train-examples", type=positive_int, default=None)
    parser.add_argument("--max-dev-examples", type=positive_int, default=None)
    parser.add_argument(
        "--early-stopping-patience",
        type=positive_int,
        default=None,
        help="stop after this many epochs without a better dev metric",
    )
    parser.add_argument(
        "--search",
        choices=["paper", "glue"],
        default=None,
        help="paper: batch {16,32} x lr {5e-5,3e-5,2e-5} x epochs {2,3,4}; "
        "glue: batch 32, 3 epochs, lr {5e-5,4e-5,3e-5,2e-5}; best on dev",
    )
    parser.add_argument(
        "--restarts", type=positive_int, default=None, help="random restarts per grid point [1]"
    )
    parser.add_argument(
        "--bucket-by-length",
        action="store_true",
        default=None,
        help="batch examples of similar lengths (much faster on CPU)",
    )
    parser.add_argument(
        "--strategy",
        default=None,
        choices=["auto", "one_device", "mirrored", "multi_worker", "tpu"],
        help="tf.distribute strategy [auto: TF_CONFIG's cluster, else all GPUs]",
    )
    parser.add_argument("--tpu", default=None, help="TPU name or grpc:// address")
    add_precision_argument(parser)
    parser.add_argument(
        "--jit-compile",
        default=None,
        choices=["true", "false", "auto"],
        help="XLA [auto: on with a GPU or TPU]",
    )
    parser.add_argument(
        "--gradient-accumulation-steps",
        type=positive_int,
        default=None,
        help="micro-batches of --batch-size per update [1]",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=positive_int,
        default=None,
        help="steps between checkpoints [at each epoch's end only]",
    )
    parser.add_argument(
        "--tune-null-threshold",
        action="store_true",
        default=None,
        help="SQuAD v2.0: keep the dev set's best no-answer threshold",
    )
    parser.add_argument("--no-tensorboard", action="store_true", default=None)
    parser.add_argument(
        "--multi-label",
        action="store_true",
        default=None,
        help="classify: any number of labels per text (the label column's names "
        "separated by --label-separator, or a JSONL list; an empty cell: none); "
        "a sigmoid per label, scored by micro / macro F1",
    )
    _add_data_arguments(parser)
    parser.set_defaults(run=run_finetune, fast_cpu_training=True)


# Flags that are not FinetuneConfig fields of the same name.
_FINETUNE_NOT_FIELDS = (
    "command",
    "run",
    "fast_cpu_training",
    "config",
    "overrides",
    "no_tensorboard",
    "text_columns",
    "jit_compile",
)


def run_finetune(args):
    import json

    from keras_bert.training.finetuning import finetune, load_finetune_config

    fields = {
        name: value
        for name, value in vars(args).items()
        if value is not None and name not in _FINETUNE_NOT_FIELDS
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


def add_evaluate(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="score a fine-tuned model (a finetune --output-dir) on a data set; "
        "--task embed: also a pretrained sentence encoder",
    )
    parser.add_argument(
        "--model-dir",
        required=True,
        help="a finetune --output-dir; with --task embed also a pretrained "
        "sentence encoder (sentence-transformers folder or ORG/NAME in the "
        "local HuggingFace cache, BERT checkpoint, .keras)",
    )
    parser.add_argument("--data", required=True, help="file or tfds:<name>:<split>")
    parser.add_argument(
        "--task",
        default=None,
        choices=["classify", "regress", "tag", "squad", "embed"],
        help="default: the model folder's; embed: retrieval figures (each "
        "row's first text queries its second) or Spearman on scored pairs",
    )
    parser.add_argument(
        "--seq-length",
        type=sequence_length,
        default=None,
        help="embed, a pretrained encoder: its length [the folder's max_seq_length]",
    )
    parser.add_argument(
        "--max-examples",
        type=positive_int,
        default=None,
        help="score the first N examples (rows, sentences, questions) only "
        "[default: the whole --data]; the output says how many were scored of how many",
    )
    _add_data_arguments(parser)
    add_casing_arguments(parser)
    parser.set_defaults(run=run_evaluate)


def run_evaluate(args):
    import json

    from keras_bert.training.finetuning import evaluate

    result = evaluate(
        args.model_dir,
        args.data,
        task=args.task,
        seq_length=args.seq_length,
        max_examples=args.max_examples,
        glue_task=args.glue_task,
        label_column=args.label_column,
        label_separator=args.label_separator,
        threshold=args.threshold,
        lowercase=args.lowercase,
        text_columns=args.text_columns.split(",") if args.text_columns else None,
        version_2_with_negative=args.version_2_with_negative or None,
        null_score_diff_threshold=args.null_score_diff_threshold,
    )
    print(json.dumps(result, indent=2))


# === predict ===


def add_predict(subparsers):
    parser = subparsers.add_parser(
        "predict", help="a fine-tuned model's answers for a file of texts, one JSON line each"
    )
    parser.add_argument("--model-dir", required=True, help="a finetune --output-dir")
    parser.add_argument(
        "--input",
        required=True,
        type=input_file,
        help="text lines, JSON Lines (text / text_pair; question / context) or a SQuAD JSON file",
    )
    parser.add_argument(
        "--input-format",
        choices=("text", "jsonl", "squad"),
        default=None,
        help="default by extension: .jsonl JSON Lines, .json a SQuAD file, "
        "anything else one text per line",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=output_file,
        help="the answers, FILE.jsonl: one line per input line, each with its "
        '`line` number (a blank input line: {"line": N, "blank": true})',
    )
    parser.add_argument(
        "--include-input",
        action="store_true",
        help="copy each input's fields (text, text_pair, ...) into its answer",
    )
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument(
        "--threshold",
        type=_number(float, 0, 1),
        default=None,
        help="multi-label: answer the labels whose probability is above this "
        "[the model folder's, 0.5 unless finetune --threshold said otherwise]",
    )
    parser.set_defaults(run=run_predict)


def run_predict(args):
    from keras_bert.cli.predict import predict_file

    count = predict_file(
        args.model_dir,
        args.input,
        args.output,
        args.batch_size,
        input_format=args.input_format,
        include_input=args.include_input,
        threshold=args.threshold,
    )
    print(f"wrote {count} answers to {args.output}: every input answered, blank lines included")


# === export ===


def add_export(subparsers):
    parser = subparsers.add_parser(
        "export", help="SavedModel with tokenization inside, for TensorFlow Serving"
    )
    parser.add_argument(
        "--model-dir",
        required=True,
        help="a `keras-bert finetune` output folder; or a pretrained encoder "
        "(HuggingFace folder, TF1 checkpoint, .keras) for embeddings",
    )
    parser.add_argument(
        "--output",
        required=True,
        help="EXPORT_DIR/NAME/VERSION (VERSION an integer), as TF Serving reads",
    )
    parser.add_argument(
        "--vocab-file", default=None, type=input_file, help="default: the model folder's vocab.txt"
    )
    add_casing_arguments(parser)
    parser.add_argument(
        "--seq-length",
        type=sequence_length,
        default=None,
        help="default: the fine-tuning length (128 for embeddings)",
    )
    parser.add_argument(
        "--max-windows",
        type=positive_int,
        default=None,
        help="question answering: most context windows searched (default 64)",
    )
    parser.add_argument(
        "--threshold",
        type=_number(float, 0, 1),
        default=None,
        help="multi-label classifiers: the `labels` output holds the names whose "
        "probability is above this [the model folder's, else 0.5]",
    )
    parser.add_argument(
        "--padding",
        choices=("max_length", "longest"),
        default="max_length",
        help="pad each request to --seq-length, or (classifiers, embeddings) to "
        "its longest text rounded up to --length-multiple: faster on short texts",
    )
    parser.add_argument(
        "--length-multiple",
        type=positive_int,
        default=8,
        help="with --padding longest: padded lengths are multiples of this",
    )
    parser.add_argument(
        "--quantize",
        choices=("int8",),
        default=None,
        help="store the dense layers' kernels as int8, run on oneDNN's int8 "
        "kernel (LiteRT: dynamic-range int8)",
    )
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile the model part of the signatures with XLA, once per "
        "request shape: faster at batch 1 (TF Serving: "
        "--xla_cpu_compilation_enabled)",
    )
    parser.add_argument(
        "--remove-padding",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the per-token layers on the real tokens only (default: on, "
        "except with --jit-compile); --no-remove-padding: every padded "
        "position too, 6-9 %% faster on batches of full-length texts",
    )
    parser.add_argument(
        "--format",
        choices=("savedmodel", "litert"),
        default="savedmodel",
        help="litert: one .tflite classifier taking strings (--output FILE.tflite)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing version")
    parser.set_defaults(run=run_export)


def run_export(args):
    if args.format == "litert":
        from keras_bert.export.litert import export_litert_dir

        path = export_litert_dir(
            args.model_dir,
            args.output,
            seq_length=args.seq_length,
            quantize=args.quantize,
            overwrite=args.overwrite,
        )
        print(f"wrote {path}")
        return
    from keras_bert.export import export_model_dir

    options = {} if args.max_windows is None else {"max_windows": args.max_windows}
    if args.threshold is not None:
        options["threshold"] = args.threshold
    path = export_model_dir(
        args.model_dir,
        args.output,
        vocab_file=args.vocab_file,
        lowercase=args.lowercase,
        seq_length=args.seq_length,
        overwrite=args.overwrite,
        padding=args.padding,
        length_multiple=args.length_multiple,
        quantize=args.quantize,
        jit_compile=args.jit_compile,
        remove_padding=args.remove_padding,
        **options,
    )
    from keras_bert.export.saved_model import load_instructions

    print(f"wrote {path}")
    print(load_instructions(path))


# === quickstart ===


def add_quickstart(subparsers):
    parser = subparsers.add_parser(
        "quickstart", help="the whole of BERT on the shipped Austen novels, in minutes"
    )
    parser.add_argument("--output", default="quickstart_output", help="folder for every artefact")
    parser.add_argument(
        "--corpus",
        default=None,
        help="glob of books with CHAPTER headings "
        "(default: the shipped keras_bert/assets/austen/*.txt)",
    )
    parser.add_argument("--fast", action="store_true", help="a sliver of everything (for tests)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="every random choice of the run (data, weights, orders, dropout)",
    )
    add_precision_argument(parser, default="float32")
    parser.set_defaults(run=run_quickstart, fast_cpu_training=True)


def run_quickstart(args):
    from keras_bert.cli.quickstart import quickstart

    quickstart(
        args.output,
        corpus=args.corpus,
        fast=args.fast,
        seed=args.seed,
        mixed_precision=args.mixed_precision,
    )


COMMANDS = [
    add_tokenize,
    add_vocab,
    add_encode,
    add_convert,
    add_prepare_corpus,
    add_create_pretraining_data,
    add_pretrain,
    add_finetune,
    add_evaluate,
    add_predict,
    add_export,
    add_quickstart,
]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-bert",
        description=__doc__.splitlines()[0],
        epilog="--verbose, anywhere on the line (or KERAS_BERT_VERBOSE=1), keeps TensorFlow's "
        "and XLA's C++ log lines, which are hidden by default.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def command_reference():
    """docs/guides/command-line.md's command table, generated from the parser (a test
    keeps them equal)."""
    rows = ["| command | what it does |", "|---|---|"]
    for action in build_parser()._subparsers._group_actions:
        for choice in action._choices_actions:
            rows.append(f"| `keras-bert {choice.dest}` | {choice.help} |")
    return "\n".join(rows)


def main(argv=None):
    command_line = argv is None  # the `keras-bert` command itself, not a caller's process
    argv = list(sys.argv[1:] if command_line else argv)
    if "--verbose" in argv:
        argv = [arg for arg in argv if arg != "--verbose"]
        native_logs.keep_native_logs()
    args = build_parser().parse_args(argv)
    if getattr(args, "fast_cpu_training", False):
        from keras_bert.cli.startup import use_fast_cpu_training_settings

        use_fast_cpu_training_settings()
    log_filter = None
    if command_line:
        _terminate_like_ctrl_c()
        log_filter = native_logs.route_stderr_through_filter()
        progress.show_progress(True)  # into log files too, a line per interval
    try:
        code = run_command(args)
    finally:
        if log_filter is not None:
            log_filter.close()
    if command_line and getattr(args, "fast_exit", False):
        # Everything is written and closed, and the interpreter's shutdown with
        # TensorFlow loaded takes seconds.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, a batch system's end of a job), raised where Python
    runs next: as Ctrl-C, it unwinds every `finally`, so partial outputs are
    removed and locks released. (SIGKILL cannot be caught: a partial file it
    leaves keeps its `.partial-PID` name, and the next write of that output
    removes it.)"""


def _terminate_like_ctrl_c():
    import signal

    def handler(number, frame):
        raise Terminated()

    with contextlib.suppress(ValueError):  # not the main thread: leave the default
        signal.signal(signal.SIGTERM, handler)


def run_command(args):
    """Runs the parsed command inside the one error boundary; returns the exit
    code: 0, 2 for an expected failure (one line on stderr), 130 on Ctrl-C.
    A bug's exception propagates with its traceback."""
    try:
        with _guarded_output(args):
            return args.run(args) or 0
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(
            f"keras-bert {args.command}: {'terminated' if terminated else 'interrupted'}",
            file=sys.stderr,
            flush=True,
        )
        return 143 if terminated else 130
    except Exception as e:
        message = errors.expected_failure(e)
        if message is None:
            raise  # a bug: the traceback is the report
        if native_logs.verbose_requested():
            traceback.print_exc()
        one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
        print(
            f"keras-bert {args.command}: error: {one_line or type(e).__name__}",
            file=sys.stderr,
            flush=True,
        )
        return 2


@contextlib.contextmanager
def _guarded_output(args):
    """The command's output (`OUTPUTS`): refused if it is an input, locked
    while the command runs."""
    flag, input_flags, make_parents, writes = OUTPUTS.get(args.command, (None, (), True, None))
    output = getattr(args, flag, None) if flag else None
    if not output:
        yield
        return
    inputs = []
    for name in input_flags:
        value = getattr(args, name, None)
        inputs.extend(value if isinstance(value, (list, tuple)) else [value])
    option = "--" + flag.replace("_", "-")
    safe_output.check_not_input(output, inputs, option)
    if writes == "whole":
        safe_output.check_inputs_outside(output, inputs, option)
    for name in writes if isinstance(writes, tuple) else ():
        safe_output.check_not_input(os.path.join(output, name), inputs, option)
    with safe_output.output_lock(output, make_parents=make_parents):
        yield


if __name__ == "__main__":
    sys.exit(main())
