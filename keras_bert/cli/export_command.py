"""`keras-bert export`: a SavedModel with tokenization inside, for TensorFlow
Serving, or a LiteRT classifier."""

import argparse

from keras_bert.cli.arguments import (
    add_casing_arguments,
    add_precision_argument,
    input_file,
    keywords,
    positive_int,
    probability,
    sequence_length,
)


def add(subparsers):
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
        type=probability,
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
    add_precision_argument(parser)
    parser.add_argument(
        "--format",
        choices=("savedmodel", "litert"),
        default="savedmodel",
        help="litert: one .tflite classifier taking strings (--output FILE.tflite)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing version")
    # oneDNN on (the training commands' settings): an int8 export gets oneDNN's
    # kernel on AVX2 CPUs too, where TensorFlow leaves oneDNN off by itself.
    parser.set_defaults(run=run, fast_cpu_training=True)


def run(args):
    if args.format == "litert":
        from keras_bert.export.litert import export_litert_dir

        path = export_litert_dir(
            args.model_dir,
            args.output,
            **keywords(args, "seq_length", "quantize", "overwrite", "padding"),
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
        **keywords(
            args,
            "vocab_file",
            "lowercase",
            "seq_length",
            "overwrite",
            "padding",
            "length_multiple",
            "quantize",
            "jit_compile",
            "remove_padding",
        ),
        precision=args.mixed_precision,
        **options,
    )
    from keras_bert.export.saved_model import load_instructions

    print(f"wrote {path}")
    print(load_instructions(path))
