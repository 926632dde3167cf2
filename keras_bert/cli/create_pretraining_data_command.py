"""`keras-bert create-pretraining-data`: text -> masked-LM / next-sentence
TFRecords, in worker processes or as an Apache Beam pipeline."""

import argparse
import os
import sys

from keras_bert import features
from keras_bert.cli.arguments import input_file, keywords, positive_int


def add(subparsers):
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
    parser.set_defaults(run=run, fast_exit=True)


def run(args):
    from keras_bert.cli.startup import import_tensorflow_lean
    from keras_bert.pretraining_data import create, options, workers

    num_workers = os.cpu_count() if args.num_workers is None else args.num_workers
    # Workers first: small forks that start while TensorFlow is imported.
    pool = workers.start_workers(num_workers) if num_workers > 1 and not args.runner else None
    import_tensorflow_lean()  # no Keras model here: skip Keras and its extras (seconds)
    settings = options.PretrainingOptions(
        mask=not args.no_mask,
        **keywords(
            args,
            "max_seq_length",
            "max_predictions_per_seq",
            "masked_lm_prob",
            "short_seq_prob",
            "dupe_factor",
            "random_seed",
            "do_whole_word_mask",
            "objective",
            "mask_token_rate",
            "random_token_rate",
            "keep_token_rate",
        ),
    )
    # What both ways of writing the records take.
    files = (args.input_file, args.output_file, args.vocab_file, settings)
    shared = keywords(args, "do_lower_case", "num_shards", "gzip")
    if args.runner:
        import shlex

        from keras_bert.pretraining_data.beam import create_pretraining_data_beam

        summary = create_pretraining_data_beam(
            *files,
            **shared,
            runner=args.runner,
            pipeline_args=shlex.split(args.pipeline_options),
        )
    else:
        try:
            summary = create.create_pretraining_data(
                *files, **shared, num_workers=num_workers, progress=not args.quiet, pool=pool
            )
        finally:
            if pool is not None:
                pool.terminate()
    print(summary.to_text(settings))
    warning = summary.unknown.warning(args.vocab_file)
    if warning:
        print(warning, file=sys.stderr)
