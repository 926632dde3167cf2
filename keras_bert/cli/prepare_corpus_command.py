"""`keras-bert prepare-corpus`: books, text files or Wikipedia -> one sentence
per line, a blank line between documents."""

from keras_bert.cli.arguments import output_file


def add(subparsers):
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
    parser.set_defaults(run=run)


def run(args):
    from keras_bert.text.corpus import prepare_corpus

    documents, sentences = prepare_corpus(
        args.source, args.inputs, args.output_file, args.tfds_split, args.tfds_data_dir
    )
    print(f"wrote {documents} documents, {sentences} sentences to {args.output_file}")
