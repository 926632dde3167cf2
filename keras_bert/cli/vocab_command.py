"""`keras-bert vocab`: a WordPiece vocabulary learned from text files, and its
unknown-word rate on them."""

from keras_bert.cli.arguments import input_file, non_negative_int, output_file, positive_int


def add(subparsers):
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
    parser.set_defaults(run=run)


def run(args):
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
