"""`keras-bert finetune`'s flags are FinetuneConfig's fields: each flag names one
(or is one of the few the command maps), and the defaults its help shows in
brackets are the config's own."""

import dataclasses
import re

from keras_bert.cli import commands, finetune_command
from keras_bert.training.finetuning import FinetuneConfig


def finetune_actions():
    subparsers = commands.build_parser()._subparsers._group_actions[0]
    return [a for a in subparsers.choices["finetune"]._actions if a.dest != "help"]


def test_every_flag_names_a_config_field():
    fields = {field.name for field in dataclasses.fields(FinetuneConfig)}
    flags = {action.dest for action in finetune_actions()}
    assert flags - fields - set(finetune_command.NOT_FIELDS) == set()


def test_bracketed_defaults_are_the_configs():
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(FinetuneConfig)
        if field.default is not dataclasses.MISSING
    }
    shown = {
        action.dest: float(match.group(1))
        for action in finetune_actions()
        if (match := re.fullmatch(r"\[([0-9.e-]+)\]", action.help or ""))
    }
    # learning_rate, epochs, warmup_proportion, dropout, seed, doc_stride, max_query_length
    assert len(shown) == 7
    assert shown == {name: float(defaults[name]) for name in shown}
