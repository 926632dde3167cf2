"""The paper's ablations in miniature, on real text: one command per table.

    python recipes/ablations/ablations.py objectives     # Table 5: NSP, no NSP, left to right (+ BiLSTM)
    python recipes/ablations/ablations.py masking        # Table 8: the masking mix
    python recipes/ablations/ablations.py feature_based  # Table 7: feature-based vs fine-tuning
    ... [--row NAME] [--seeds 0,1,2] [--output-dir ablations_output] [--smoke]

Every variant is pretrained on the shipped Austen novels with the same
vocabulary, model size, data, step budget and seed; each is then fine-tuned
(or, feature-based, frozen under a two-layer BiLSTM tagger) on real labelled
sets: rotten_tomatoes (sentence sentiment, the paper's SST-2 stands closest) and
wnut16 (tweet named entities, for the paper's CoNLL-2003 NER). Fine-tuning runs
once per seed; a cell is the mean ± standard deviation over the seeds.

Results are cached per run in `OUTPUT/runs/*.json` (a pretrained variant in
`OUTPUT/pretrain/VARIANT/`), so a table, or one `--row` of it, can be run in
parts and rerun for free; each command rewrites `OUTPUT/TABLE.md` and
`OUTPUT/TABLE.png` from whatever runs exist ("not run" where none does).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

from keras_bert.assets import AUSTEN_DIR  # noqa: E402

DATA = os.path.join(REPO, "data")


@dataclasses.dataclass(frozen=True)
class Size:
    vocab_size: int
    lowercase: bool  # the vocabulary, records and task tokenizers: False keeps the capitals
    max_book_chars: int  # characters of each novel used
    model: dict  # BertConfig fields beside the vocabulary size
    seq_length: int
    pretrain_steps: int
    pretrain_batch: int
    pretrain_learning_rate: float
    finetune_learning_rate: float  # classification
    tag_learning_rate: float  # fine-tuning on tagging: 5 % entity words need larger steps
    feature_learning_rate: float  # the fresh BiLSTM tagger on frozen features
    classify_epochs: int
    tag_epochs: int
    squad_epochs: int  # the SQuAD smoke check: 9 sample questions, trained and scored on
    max_train_examples: int | None
    max_dev_examples: int | None
    batch_size: int


# 4 layers: the feature-based choices read the last four. 15 tagging epochs
# at 1e-3: at 3 the tagger stays on the tag prior, `O` for every word; cased:
# capitals are the strongest entity cue in tweets. The BiLSTM tagger on frozen
# features at 1e-2: at 1e-3 it too stayed on the prior (F1 0.0). About two
# hours for the three tables at three seeds on 2 CPU cores (measured: README.md).
DEFAULT = Size(
    vocab_size=4000,
    lowercase=False,
    max_book_chars=10**9,
    model=dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2, intermediate_size=512),
    seq_length=64,
    pretrain_steps=1000,
    pretrain_batch=32,
    pretrain_learning_rate=1e-3,
    finetune_learning_rate=3e-4,
    tag_learning_rate=1e-3,
    feature_learning_rate=1e-2,
    classify_epochs=1,
    tag_epochs=15,
    squad_epochs=10,
    max_train_examples=None,
    max_dev_examples=None,
    batch_size=32,
)
# The smoke test's: every step of the same path, on a sliver.
SMOKE = Size(
    vocab_size=300,
    lowercase=False,
    max_book_chars=20_000,
    model=dict(hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=32),
    seq_length=32,
    pretrain_steps=1,
    pretrain_batch=4,
    pretrain_learning_rate=1e-3,
    finetune_learning_rate=1e-4,
    tag_learning_rate=1e-4,
    feature_learning_rate=1e-3,
    classify_epochs=1,
    tag_epochs=1,
    squad_epochs=1,
    max_train_examples=8,
    max_dev_examples=8,
    batch_size=4,
)


# === What is pretrained ===


@dataclasses.dataclass(frozen=True)
class Variant:
    objective: str  # the pretrainer's: nsp, none, lm
    attention: str = "bidirectional"
    mix: tuple = (0.8, 0.1, 0.1)  # mask / random / keep

    @property
    def name(self) -> str:
        if self.objective == "lm":
            return "left_to_right_lm"
        mix = "_".join(f"{round(100 * rate)}" for rate in self.mix)
        return f"{self.objective}_mix{mix}"


BERT = Variant("nsp")


# === The tables: rows (a variant, a head) and columns (a task, a setting) ===


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    label: str
    variant: Variant
    head: str = "linear"  # the task head: linear or bilstm
    feature: str | None = None  # a feature-based choice: the frozen encoder's features
    paper: tuple = ()  # the paper's figures, one per column of Table.paper_columns


@dataclasses.dataclass(frozen=True)
class Column:
    task: str  # classify (rotten_tomatoes accuracy), tag (wnut16 entity F1) or squad (smoke)
    label: str
    feature: str | None = None  # feature-based column (Table 8: concatenated last four)


@dataclasses.dataclass(frozen=True)
class Table:
    title: str
    rows: tuple
    columns: tuple
    paper_columns: tuple  # which of the paper's figures stand beside


# Only 9 real SQuAD-format questions ship (data/squad_samples): the span path
# is checked to run and learn on every variant, fitted and scored on the same
# questions, so the column says "smoke", not a comparison.
SQUAD_SMOKE = "SQuAD samples F1 (smoke: 9 questions, trained on)"
SQUAD_FILES = ("squad_v1_sample.json", "quoref_sample.json")


# MASK / SAME / RND in the paper's Table 8 -> (mask, random, keep) here.
def _mix(mask, same, random):
    return (mask / 100, random / 100, same / 100)


TABLES = {
    "objectives": Table(
        "Pretraining tasks (Devlin et al. 2018, Table 5)",
        rows=(
            Row("bert", "BERT (MLM + NSP)", BERT, paper=(92.7, 88.5)),
            Row("no_nsp", "No NSP", Variant("none"), paper=(92.6, 87.9)),
            Row("ltr", "LTR & No NSP", Variant("lm", "left_to_right"), paper=(92.1, 77.8)),
            Row(
                "ltr_bilstm",
                "+ BiLSTM",
                Variant("lm", "left_to_right"),
                head="bilstm",
                paper=(91.6, 84.9),
            ),
        ),
        columns=(
            Column("classify", "rotten_tomatoes acc"),
            Column("tag", "wnut16 F1"),
            Column("squad", SQUAD_SMOKE),
        ),
        paper_columns=("paper SST-2", "paper SQuAD F1"),
    ),
    "masking": Table(
        "Masking mix MASK / SAME / RND (Devlin et al. 2018, Table 8)",
        rows=tuple(
            Row(
                f"mask{m}_same{s}_rnd{r}",
                f"{m} / {s} / {r}",
                Variant("nsp", mix=_mix(m, s, r)),
                paper=paper,
            )
            for (m, s, r), paper in (
                ((80, 10, 10), (84.2, 95.4, 94.9)),
                ((100, 0, 0), (84.3, 94.9, 94.0)),
                ((80, 0, 20), (84.1, 95.2, 94.6)),
                ((80, 20, 0), (84.4, 95.2, 94.7)),
                ((0, 20, 80), (83.7, 94.8, 94.6)),
                ((0, 0, 100), (83.6, 94.9, 94.6)),
            )
        ),
        columns=(
            Column("classify", "rotten_tomatoes acc (fine-tune)"),
            Column("tag", "wnut16 F1 (fine-tune)"),
            Column("tag", "wnut16 F1 (feature-based)", feature="concat_last_four"),
        ),
        paper_columns=("paper MNLI", "paper NER fine-tune", "paper NER feature-based"),
    ),
    "feature_based": Table(
        "Feature-based vs fine-tuning on tagging (Devlin et al. 2018, Table 7)",
        rows=(Row("finetune", "Fine-tuning (all layers)", BERT, paper=(96.4,)),)
        + tuple(
            Row(feature, label, BERT, head="bilstm", feature=feature, paper=(paper,))
            for feature, label, paper in (
                ("embeddings", "Embeddings", 91.0),
                ("second_to_last_hidden", "Second-to-last hidden", 95.6),
                ("last_hidden", "Last hidden", 94.9),
                ("weighted_sum_last_four", "Weighted sum last four hidden", 95.9),
                ("concat_last_four", "Concat last four hidden", 96.1),
                ("weighted_sum_all", "Weighted sum all layers", 95.5),
            )
        ),
        columns=(Column("tag", "wnut16 F1"),),
        paper_columns=("paper CoNLL-2003 F1",),
    ),
}


# === Data ===


def prepare(output_dir: str, size: Size) -> tuple[str, str]:
    """The Austen corpus (one sentence a line) and a WordPiece vocabulary learned on it."""
    from keras_bert.text import corpus, vocab

    corpus_file = os.path.join(output_dir, "corpus.txt")
    vocab_file = os.path.join(output_dir, "vocab.txt")
    if not os.path.exists(vocab_file):
        books = sorted(glob.glob(os.path.join(AUSTEN_DIR, "*.txt")))
        if size.max_book_chars < 10**9:  # the smoke size: a slice of each novel
            sliced = []
            for book in books:
                path = os.path.join(output_dir, os.path.basename(book))
                with open(book, encoding="utf-8") as f, open(path, "w", encoding="utf-8") as out:
                    out.write(f.read()[: size.max_book_chars])
                sliced.append(path)
            books = sliced
        corpus.prepare_corpus("books", books, corpus_file)
        vocab.learn_vocabulary(
            [corpus_file], size.vocab_size, lowercase=size.lowercase, output=vocab_file
        )
    return corpus_file, vocab_file


def pretrain(
    variant: Variant,
    output_dir: str,
    size: Size,
    corpus_file: str,
    vocab_file: str,
    seed: int = 12345,
) -> str:
    """Records with the variant's masking mix, then pretraining; returns the export folder."""
    from keras_bert.config import BertConfig
    from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data
    from keras_bert.training import pretraining

    model_dir = os.path.join(output_dir, "pretrain", variant.name)
    export = os.path.join(model_dir, "export")
    if os.path.exists(os.path.join(model_dir, "eval_results.json")) or os.path.exists(
        os.path.join(export, "bert_config.json")
    ):
        return export
    os.makedirs(model_dir, exist_ok=True)
    max_predictions = max(size.seq_length * 15 // 100, 1)
    mix = dict(zip(("mask_token_rate", "random_token_rate", "keep_token_rate"), variant.mix))
    records = os.path.join(
        output_dir,
        "records",
        "mix" + "_".join(f"{round(100 * rate)}" for rate in variant.mix),
        "train.tfrecord",
    )
    if not os.path.exists(records):
        os.makedirs(os.path.dirname(records), exist_ok=True)
        options = PretrainingOptions(
            max_seq_length=size.seq_length,
            dupe_factor=1,
            max_predictions_per_seq=max_predictions,
            random_seed=seed,
            **mix,
        )
        create_pretraining_data(
            corpus_file, records, vocab_file, options, do_lower_case=size.lowercase, num_workers=1
        )
    with open(vocab_file, encoding="utf-8") as f:
        vocab_size = len(f.read().splitlines())
    bert_config = os.path.join(model_dir, "bert_config.json")
    BertConfig(
        vocab_size=vocab_size,
        max_position_embeddings=size.seq_length,
        attention=variant.attention,
        **size.model,
    ).to_json_file(bert_config)
    started = time.monotonic()
    metrics = pretraining.pretrain(
        pretraining.load_config(
            model=bert_config,
            objective=variant.objective,
            train_files=records,
            model_dir=model_dir,
            seq_length=size.seq_length,
            max_predictions_per_seq=max_predictions,
            batch_size=size.pretrain_batch,
            learning_rate=size.pretrain_learning_rate,
            train_steps=size.pretrain_steps,
            warmup_steps=size.pretrain_steps // 10,
            checkpoint_every=size.pretrain_steps,
            log_every=max(size.pretrain_steps // 10, 1),
            jit_compile=False,
            seed=seed,
            verbose=2,
        )
    )
    print(
        f"pretrained {variant.name} in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{k} {float(v):.3f}" for k, v in metrics.items()),
        flush=True,
    )
    return export


# === Fine-tuning and scoring one cell ===


def _read_reviews(path, limit):
    from keras_bert.datasets.text_classification import read_text_examples

    examples = read_text_examples(path, ["sentence"])
    return examples.texts_a[:limit], examples.labels[:limit]


def _squad_samples():
    """The shipped SQuAD-format questions: the official `data` list, the
    question ids and the model's text inputs."""
    from keras_bert.datasets.squad import load_squad_json

    dataset = [
        article
        for name in SQUAD_FILES
        for article in load_squad_json(os.path.join(DATA, "squad_samples", name))
    ]
    qas = [
        (qa, paragraph["context"])
        for article in dataset
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    x = {"question": [qa["question"] for qa, _ in qas], "context": [c for _, c in qas]}
    return dataset, [qa["id"] for qa, _ in qas], x


def _squad_smoke(export: str, common: dict, size: Size, head: str) -> float:
    """Fine-tunes a span extractor on the sample questions; their F1, in %.
    Windows of the recipe's short length: the question cut to half of it
    (run_squad's 64 leaves no room for a context at length 64)."""
    import keras_bert
    from keras_bert.datasets import squad
    from keras_bert.datasets.metrics import squad_v1_scores
    from keras_bert.training.optimization import create_adamw

    dataset, ids, x = _squad_samples()
    windows = dict(doc_stride=size.seq_length // 2, max_query_length=size.seq_length // 2)
    model = keras_bert.BertSpanExtractor.from_pretrained(export, head=head, **common, **windows)
    features = squad.feature_arrays(
        squad.convert_examples_to_features(
            squad.read_squad_examples(dataset, is_training=True),
            model.preprocessor.tokenizer,
            size.seq_length,
            is_training=True,
            **windows,
        )
    )
    targets = {
        "start_logits": features.pop("start_positions"),
        "end_logits": features.pop("end_positions"),
    }
    batch_size = 8  # a few dozen windows: batches of 32 would be one step an epoch
    steps = -(-len(features["input_ids"]) // batch_size) * size.squad_epochs
    model.compile(optimizer=create_adamw(size.tag_learning_rate, steps, steps // 10))
    model.fit(features, targets, batch_size=batch_size, epochs=size.squad_epochs, verbose=0)
    answers = model.predict_answers(x)
    return squad_v1_scores(dataset, {qid: a["answer"] for qid, a in zip(ids, answers)})["f1"]


def score(
    task: str,
    export: str,
    vocab_file: str,
    size: Size,
    seed: int,
    head: str = "linear",
    feature: str | None = None,
) -> float:
    """Fine-tunes (or trains the feature-based tagger) with Keras' `fit` on
    real text; returns dev accuracy (classify), entity F1 (tag) or the SQuAD
    samples' F1 (squad, a smoke check), in %."""
    import keras

    import keras_bert
    from keras_bert.datasets.metrics import entity_scores
    from keras_bert.datasets.tagging import read_conll
    from keras_bert.training.optimization import create_adamw

    keras.utils.set_random_seed(seed)  # the head's initialisation, dropout, batch order
    common = dict(vocab_file=vocab_file, lowercase=size.lowercase, seq_length=size.seq_length)
    if task == "squad":
        return _squad_smoke(export, common, size, head)
    learning_rate = (
        size.feature_learning_rate
        if feature
        else size.tag_learning_rate
        if task == "tag"
        else size.finetune_learning_rate
    )
    if task == "classify":
        texts, labels = _read_reviews(
            os.path.join(DATA, "rotten_tomatoes", "train.tsv"), size.max_train_examples
        )
        dev_texts, dev_labels = _read_reviews(
            os.path.join(DATA, "rotten_tomatoes", "dev.tsv"), size.max_dev_examples
        )
        model = keras_bert.BertClassifier.from_pretrained(
            export, num_classes=2, label_names=sorted(set(labels)), **common
        )
        epochs, train = size.classify_epochs, (texts, labels)
    else:
        train_set = read_conll(os.path.join(DATA, "wnut16", "train.conll"))
        dev = read_conll(os.path.join(DATA, "wnut16", "dev.conll"))
        words = train_set.words[: size.max_train_examples]
        tags = train_set.tags[: size.max_train_examples]
        tag_names = sorted({tag for row in train_set.tags for tag in row})
        model = keras_bert.BertTokenClassifier.from_pretrained(
            export,
            num_labels=len(tag_names),
            label_names=tag_names,
            head=head,
            head_layers=2 if feature else 1,
            feature=feature,
            **common,
        )
        epochs, train = size.tag_epochs, (words, tags)
    steps = -(-len(train[0]) // size.batch_size) * epochs
    optimizer = create_adamw(learning_rate, steps, steps // 10)
    if feature:  # the frozen encoder runs once, not every epoch: its head trains on the cache
        head = model.feature_head()
        head.compile(optimizer=optimizer, loss=model.default_loss())
        head.fit(
            model.frozen_dataset(*model.encode_text(*train), size.batch_size, seed=seed),
            epochs=epochs,
            shuffle=False,
            verbose=0,
        )  # the dataset shuffles
    else:
        model.compile(optimizer=optimizer)
        model.fit(*train, batch_size=size.batch_size, epochs=epochs, verbose=0)
    if task == "classify":
        return 100 * model.evaluate(dev_texts, dev_labels, return_dict=True, verbose=0)["accuracy"]
    dev_words = dev.words[: size.max_dev_examples]
    predicted = [row["tags"] for row in model.tag([" ".join(w) for w in dev_words])]
    return 100 * entity_scores(dev.tags[: len(dev_words)], predicted)["f1"]


def _run_name(row: Row, column: Column, seed: int) -> str:
    feature = column.feature or row.feature
    head = "bilstm" if feature else row.head
    return f"{row.variant.name}__{column.task}__{head}__{feature or 'finetune'}__seed{seed}"


def applies(row: Row, column: Column) -> bool:
    """The classifier has no BiLSTM head: the paper's BiLSTM row is scored on tagging only."""
    return not (column.task == "classify" and row.head == "bilstm")


def run_table(
    name: str,
    output_dir: str,
    size: Size,
    seeds: list[int],
    rows: list[str] | None = None,
    task: str | None = None,
) -> str:
    """Runs the missing cells of table `name` (or of its `rows`, or its `task`'s
    columns), then writes it."""
    table = TABLES[name]
    unknown = sorted(set(rows or ()) - {row.name for row in table.rows})
    if unknown:
        raise SystemExit(
            f"unknown --row {unknown} for table {name}; rows: {[row.name for row in table.rows]}"
        )
    os.makedirs(os.path.join(output_dir, "runs"), exist_ok=True)
    corpus_file, vocab_file = prepare(output_dir, size)
    for row in table.rows:
        if rows and row.name not in rows:
            continue
        export = pretrain(row.variant, output_dir, size, corpus_file, vocab_file)
        for column in table.columns:
            if not applies(row, column) or (task and column.task != task):
                continue
            for seed in seeds:
                path = os.path.join(output_dir, "runs", _run_name(row, column, seed) + ".json")
                if os.path.exists(path):
                    continue
                started = time.monotonic()
                feature = column.feature or row.feature
                value = score(
                    column.task,
                    export,
                    vocab_file,
                    size,
                    seed,
                    head="bilstm" if feature else row.head,
                    feature=feature,
                )
                seconds = time.monotonic() - started
                with open(path, "w") as f:
                    json.dump({"value": value, "seconds": round(seconds, 1)}, f)
                print(
                    f"{name} / {row.name} / {column.label} / seed {seed}: {value:.2f} "
                    f"({seconds:.0f} s)",
                    flush=True,
                )
    return write_table(name, output_dir, seeds)


# === The table and the plot ===


def _cell(output_dir, row, column, seeds):
    values = []
    for seed in seeds:
        path = os.path.join(output_dir, "runs", _run_name(row, column, seed) + ".json")
        if os.path.exists(path):
            with open(path) as f:
                values.append(json.load(f)["value"])
    return values


def _mean_std(values):
    mean = sum(values) / len(values)
    std = (
        math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        if len(values) > 1
        else 0.0
    )
    return mean, std


def write_table(name: str, output_dir: str, seeds: list[int]) -> str:
    """OUTPUT/NAME.md (mean ± sample std over the seeds that ran, n = how many)
    and OUTPUT/NAME.png; returns the markdown."""
    table = TABLES[name]
    header = ["row"] + [c.label for c in table.columns] + list(table.paper_columns)
    lines = [f"**{table.title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    plotted = []
    for row in table.rows:
        cells = []
        for column in table.columns:
            values = _cell(output_dir, row, column, seeds)
            if not applies(row, column):
                cells.append("—")
            elif not values:
                cells.append("not run")
            else:
                mean, std = _mean_std(values)
                cells.append(f"{mean:.1f} ± {std:.1f} (n={len(values)})")
                plotted.append((row.label, column.label, mean, std))
        lines.append("| " + " | ".join([row.label] + cells + [f"{p}" for p in row.paper]) + " |")
    markdown = "\n".join(lines) + "\n"
    with open(os.path.join(output_dir, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write(markdown)
    _plot(table, plotted, os.path.join(output_dir, f"{name}.png"))
    return markdown


def _plot(table, plotted, path):
    """Bars of the measured means with their seed spread, a group per column."""
    if not plotted:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [c.label for c in table.columns]
    figure, axes = plt.subplots(1, len(columns), figsize=(5.5 * len(columns), 3.5), squeeze=False)
    for axis, column in zip(axes[0], columns):
        bars = [(r, m, s) for r, c, m, s in plotted if c == column]
        axis.barh(
            [r for r, _, _ in bars],
            [m for _, m, _ in bars],
            xerr=[s for _, _, s in bars],
            color="tab:blue",
            alpha=0.8,
        )
        axis.set_title(column, fontsize=9)
        axis.invert_yaxis()
        axis.set_yticks(range(len(bars)))
        axis.set_yticklabels([r for r, _, _ in bars], fontsize=8)
        axis.set_xlim(0, 100)
    figure.suptitle(table.title + " - miniature, mean ± std over seeds", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=sorted(TABLES))
    parser.add_argument(
        "--row",
        action="append",
        default=None,
        help="run only this row (repeatable); default: every row",
    )
    parser.add_argument(
        "--task",
        choices=["classify", "tag", "squad"],
        default=None,
        help="run only the columns of this task; default: all",
    )
    parser.add_argument("--seeds", default="0,1,2", help="fine-tuning seeds, comma-separated")
    parser.add_argument("--output-dir", default="ablations_output")
    parser.add_argument("--smoke", action="store_true", help="one step of everything, tiny")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(
        run_table(
            args.table,
            args.output_dir,
            SMOKE if args.smoke else DEFAULT,
            seeds,
            args.row,
            args.task,
        )
    )


if __name__ == "__main__":
    main()
