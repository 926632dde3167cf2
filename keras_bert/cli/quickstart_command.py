"""`keras-bert quickstart`: the arguments; the work is `keras_bert.cli.quickstart`."""

from keras_bert.cli.arguments import add_precision_argument


def add(subparsers):
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
    parser.set_defaults(run=run, fast_cpu_training=True)


def run(args):
    from keras_bert.cli.quickstart import quickstart

    quickstart(
        args.output,
        corpus=args.corpus,
        fast=args.fast,
        seed=args.seed,
        mixed_precision=args.mixed_precision,
    )
