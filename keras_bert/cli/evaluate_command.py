"""`keras-bert evaluate`: a fine-tuned model's (or a sentence encoder's) official
figures on a data set."""

from keras_bert.cli.arguments import (
    TASK_CHOICES,
    add_casing_arguments,
    add_data_arguments,
    keywords,
    positive_int,
    sequence_length,
)


def add(subparsers):
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
        choices=TASK_CHOICES,
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
    add_data_arguments(parser)
    add_casing_arguments(parser)
    parser.set_defaults(run=run)


def run(args):
    import json

    from keras_bert.training.finetuning import evaluate

    result = evaluate(
        args.model_dir,
        args.data,
        text_columns=args.text_columns.split(",") if args.text_columns else None,
        version_2_with_negative=args.version_2_with_negative or None,
        **keywords(
            args,
            "task",
            "seq_length",
            "max_examples",
            "glue_task",
            "label_column",
            "label_separator",
            "threshold",
            "lowercase",
            "null_score_diff_threshold",
        ),
    )
    print(json.dumps(result, indent=2))
