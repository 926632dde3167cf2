"""Files the commands need at run time, installed with the package (see README.md here).

Paths are found from this module, so they work from a checkout, an editable
install and a wheel alike.
"""

import os

ASSETS_DIR = os.path.dirname(os.path.abspath(__file__))
# The standard 30,522-entry uncased BERT WordPiece vocabulary.
VOCAB_FILE = os.path.join(ASSETS_DIR, "bert_uncased_vocab.txt")
# Jane Austen's six novels: the quickstart's corpus.
AUSTEN_DIR = os.path.join(ASSETS_DIR, "austen")
