"""`python -m keras_bert.cli ...`: the same as the `keras-bert` command."""

import sys

from keras_bert.cli.commands import main

sys.exit(main())
