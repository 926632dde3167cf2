"""Where things are in the checkout, for tests in any sub-folder of tests/.

Importable from every test module because tests/conftest.py's folder is on
sys.path (pytest's default "prepend" import mode)."""

import os

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)
# Labelled real data (data/README.md); Austen's novels are package assets
# (keras_bert.assets.AUSTEN_DIR).
DATASETS_DIR = os.path.join(REPO_ROOT, "data")
