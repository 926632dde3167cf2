"""`keras-bert encode`: the arguments; the work is `keras_bert.cli.encode`."""

from keras_bert.cli.arguments import add_casing_arguments, keywords, sequence_length


def add(subparsers):
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
    parser.set_defaults(run=run)


def run(args):
    from keras_bert.cli.encode import encode_sentences

    for sentence, pieces, embedding in encode_sentences(
        args.text,
        **keywords(args, "init_checkpoint", "vocab_file", "preset", "seq_length", "lowercase"),
    ):
        head = " ".join(f"{x:+.3f}" for x in embedding[:6])
        print(
            f"{sentence!r}\n  pieces: {' '.join(pieces)}\n"
            f"  embedding ({len(embedding)} dims, mean-pooled, normalised): {head} ..."
        )
