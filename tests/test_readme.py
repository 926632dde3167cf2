"""The README's command table is generated from the parser; keep them equal."""

import os
import re

from keras_bert.cli import command_reference
from repo_paths import REPO_ROOT

README = os.path.join(REPO_ROOT, "README.md")


def test_command_reference_in_sync():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"<!-- command-reference:start -->\n(.*)\n<!-- command-reference:end -->",
                      text, flags=re.S)
    assert block, "README.md lacks the command-reference markers"
    assert block.group(1) == command_reference(), (
        "README.md's command table is stale: paste keras_bert.cli.command_reference()")


def test_readme_gives_the_two_commands_and_ci_runs_the_same():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    commands = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    assert "python3 run.py quickstart" in commands
    assert "python3 run.py tests" in commands
    with open(os.path.join(os.path.dirname(README), ".ci", "run"), encoding="utf-8") as f:
        assert "\npython3 run.py tests\n" in f.read()
