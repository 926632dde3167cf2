"""`keras-bert pretrain`: a pretraining recipe run (or resumed) in its model_dir."""

from keras_bert import safe_output
from keras_bert.cli.arguments import add_overrides_argument, add_precision_argument
from keras_bert.features import PRETRAINING_RUN_OBJECTIVES


def add(subparsers):
    parser = subparsers.add_parser(
        "pretrain",
        help="pretrain BERT (MLM + NSP, or ELECTRA) from a recipe; rerun the same command to resume",
    )
    parser.add_argument(
        "--config", required=True, help="YAML or JSON recipe (see recipes/pretraining)"
    )
    parser.add_argument(
        "--objective",
        choices=PRETRAINING_RUN_OBJECTIVES,
        default=None,
        help="[the recipe's] nsp, sop, none (masked LM alone), lm (next token), or electra "
        "(replaced-token detection: a small generator fills the masks, the model "
        "learns to spot its replacements; generator_hidden_size, generator_num_layers "
        "and discriminator_weight set it)",
    )
    add_overrides_argument(parser, "train_steps=10")
    add_precision_argument(parser)
    parser.set_defaults(run=run, fast_cpu_training=True)


def run(args):
    from keras_bert.training.pretraining import load_config, pretrain

    overrides = list(args.overrides)
    if args.objective:  # the recipe's field, as --set objective= would
        overrides.append(f"objective={args.objective}")
    if args.mixed_precision:  # the recipe's field, as --set mixed_precision= would
        overrides.append(f"mixed_precision={args.mixed_precision}")
    config = load_config(args.config, overrides)
    # The output folder is the recipe's model_dir, known only now.
    safe_output.check_not_input(
        config.model_dir, [config.train_files, config.eval_files], "config field model_dir"
    )
    with safe_output.output_lock(config.model_dir, folder=True):
        results = pretrain(config)
    print(" - ".join(f"{name}: {value:.4f}" for name, value in results.items()))
