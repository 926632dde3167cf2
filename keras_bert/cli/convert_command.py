"""`keras-bert convert`: a HuggingFace or TF1 checkpoint to a `.keras` file."""


def add(subparsers):
    parser = subparsers.add_parser(
        "convert", help="convert a HuggingFace or original TF1 checkpoint to a .keras file"
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        help="HuggingFace folder, TF1 checkpoint prefix, or folder holding one",
    )
    parser.add_argument("--output", required=True, help="path of the .keras file to write")
    parser.set_defaults(run=run)


def run(args):
    from keras_bert.models.encoder import convert_checkpoint

    path = convert_checkpoint(args.checkpoint, args.output)
    print(f"wrote {path}")
