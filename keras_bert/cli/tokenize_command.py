"""`keras-bert tokenize`: word pieces (or ids) of each stdin line, for quick inspection."""

import sys

from keras_bert import text_files
from keras_bert.cli.arguments import input_file


def add(subparsers):
    parser = subparsers.add_parser(
        "tokenize", help="word-piece lines from stdin (for quick inspection)"
    )
    parser.add_argument("--vocab-file", required=True, type=input_file)
    parser.add_argument("--cased", action="store_true", help="the vocabulary is cased")
    parser.add_argument("--ids", action="store_true", help="print ids instead of word pieces")
    parser.set_defaults(run=run)


def run(args):
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
