"""`keras-bert predict`: the arguments; the work is `keras_bert.cli.predict`."""

from keras_bert.cli.arguments import (
    input_file,
    keywords,
    output_file,
    positive_int,
    probability,
)


def add(subparsers):
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
        type=probability,
        default=None,
        help="multi-label: answer the labels whose probability is above this "
        "[the model folder's, 0.5 unless finetune --threshold said otherwise]",
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_bert.cli.predict import predict_file

    count = predict_file(
        args.model_dir,
        args.input,
        args.output,
        args.batch_size,
        **keywords(args, "input_format", "include_input", "threshold"),
    )
    print(f"wrote {count} answers to {args.output}: every input answered, blank lines included")
