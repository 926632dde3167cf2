"""BERT's successors at equal pretraining compute, in miniature, on real text.

    python recipes/ablations/successors.py [--row NAME ...] [--seeds 0,1,2]
        [--output-dir successors_output] [--smoke]

Rows: BERT with masked-LM only at 15 % and at 40 % of the tokens masked
(Wettig et al., 2023), BERT as ELECTRA's discriminator (replaced-token
detection, a generator a quarter as wide; Clark et al., 2020), and the
ModernBERT-style block with masked-LM at 30 % (Warner et al., 2024). Every row
is pretrained on the quickstart's corpus (the six Austen novels, every fifth
chapter held out) with the same vocabulary, width, depth, length, batch and
learning-rate schedule, for as many steps as give it the pretraining FLOPs of
BERT's 1,000 (`training_flops`, the matrix products counted analytically; the
table prints each row's steps and pretraining figures). Each export is then
fine-tuned with Keras' `fit`, a run per seed, on two real tasks: rotten_tomatoes
(accuracy on its 1,280 dev reviews, as in `ablations.py`) and the quickstart's
task (which novel a passage of a held-out chapter comes from, six classes).

Runs are cached in OUTPUT/runs/ and OUTPUT/pretrain/ as `ablations.py` caches
them; each call rewrites OUTPUT/successors.md and OUTPUT/successors.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ablations  # noqa: E402  (the tables' sizes, fine-tuning and plot)

from keras_bert.assets import AUSTEN_DIR  # noqa: E402

BASE_STEPS_NAME = "bert_mlm15"


@dataclasses.dataclass(frozen=True)
class Successor:
    name: str
    label: str
    architecture: str  # "bert" or "modernbert"
    objective: str  # the pretrainer's: "none" (masked LM only) or "electra"
    masked_lm_prob: float

    def max_predictions(self, seq_length: int) -> int:
        return max(round(seq_length * self.masked_lm_prob), 1)


ROWS = (
    Successor("bert_mlm15", "BERT, MLM 15 %", "bert", "none", 0.15),
    Successor("bert_mlm40", "BERT, MLM 40 %", "bert", "none", 0.40),
    Successor("electra", "BERT + ELECTRA RTD (15 %)", "bert", "electra", 0.15),
    Successor("modernbert_mlm30", "ModernBERT-style, MLM 30 %", "modernbert", "none", 0.30),
)
# ELECTRA's generator width, a fraction of the discriminator's (its paper's 1/4).
GENERATOR_FRACTION = 0.25
COLUMNS = (("classify", "rotten_tomatoes acc"), ("novels", "quickstart task acc (6 novels)"))
# Fine-tuning's rate and epochs: the quickstart's when results/ was measured. The
# quickstart has since moved to 6 epochs at 5e-4 (1e-3 sat at the edge of what
# trains there); these stay, so that the committed table is what this script gives.
FINETUNE_LEARNING_RATE = 1e-3
FINETUNE_EPOCHS = 5


# === Equal compute ===


def _encoder_flops(tokens, hidden, intermediate, layers, gated=False):
    """Forward matrix-product FLOPs of `layers` blocks over one sequence of
    `tokens`: the four attention projections, scores and context, and the
    feed-forward pair (a gated one has three matrices)."""
    feed_forward = (3 if gated else 2) * hidden * intermediate
    per_token = 2 * (4 * hidden * hidden + feed_forward)
    attention = 2 * 2 * tokens * tokens * hidden
    return layers * (tokens * per_token + attention)


def _masked_lm_head_flops(predictions, hidden, embedding, vocab):
    """The prediction transform then the tied output layer, at `predictions` positions."""
    return 2 * predictions * (hidden * embedding + embedding * vocab)


def training_flops(row: Successor, model: dict, seq_length: int, vocab: int) -> int:
    """Matrix-product FLOPs of one training sequence (forward and backward,
    3x the forward): embeddings' lookups and element-wise work left out, the
    same for every row."""
    hidden, layers = model["hidden_size"], model["num_hidden_layers"]
    intermediate = model["intermediate_size"]
    predictions = row.max_predictions(seq_length)
    gated = row.architecture == "modernbert"
    forward = _encoder_flops(seq_length, hidden, intermediate, layers, gated)
    forward += _masked_lm_head_flops(
        predictions if row.objective != "electra" else 0, hidden, hidden, vocab
    )
    if row.objective == "electra":
        width = max(1, round(hidden * GENERATOR_FRACTION))
        forward += 2 * seq_length * (hidden * hidden + hidden)  # the discriminator's head
        forward += 2 * seq_length * hidden * width  # embeddings projected to the generator
        forward += _encoder_flops(seq_length, width, 4 * width, layers)
        forward += _masked_lm_head_flops(predictions, width, hidden, vocab)
    return 3 * forward


def equal_compute_steps(row: Successor, size: ablations.Size, vocab: int) -> int:
    """Steps giving `row` the pretraining FLOPs of BERT MLM 15 %'s `size.pretrain_steps`."""
    base = next(r for r in ROWS if r.name == BASE_STEPS_NAME)
    budget = size.pretrain_steps * training_flops(base, size.model, size.seq_length, vocab)
    return max(1, round(budget / training_flops(row, size.model, size.seq_length, vocab)))


# === Data and pretraining ===


def prepare(output_dir: str, size: ablations.Size) -> dict:
    """The quickstart's corpus (held-out chapters excluded) and its novels task
    (train.tsv / dev.tsv), and a WordPiece vocabulary learned on the corpus."""
    from keras_bert.cli import quickstart
    from keras_bert.text import vocab

    vocab_file = os.path.join(output_dir, "vocab.txt")
    corpus_file = os.path.join(output_dir, "corpus.txt")
    if not os.path.exists(vocab_file):
        os.makedirs(output_dir, exist_ok=True)
        # The smoke size: the quickstart's own sliver (enough chapters to hold
        # some out), its passages capped as the smoke size caps examples.
        novels = (
            quickstart.FULL
            if size.max_train_examples is None
            else dataclasses.replace(quickstart.FAST, max_passages_per_book=size.max_train_examples)
        )
        books = sorted(glob.glob(os.path.join(AUSTEN_DIR, "*.txt")))
        corpus_file, _, _ = quickstart.build_novel_task(books, output_dir, novels)
        vocab.learn_vocabulary(
            [corpus_file], size.vocab_size, lowercase=size.lowercase, output=vocab_file
        )
    with open(vocab_file, encoding="utf-8") as f:
        vocab_size = len(f.read().splitlines())
    return {"corpus": corpus_file, "vocab": vocab_file, "vocab_size": vocab_size}


def _records(row: Successor, output_dir, size, data, seed):
    from keras_bert.pretraining_data import PretrainingOptions, create_pretraining_data

    path = os.path.join(output_dir, "records", f"masked{round(100 * row.masked_lm_prob)}.tfrecord")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        options = PretrainingOptions(
            max_seq_length=size.seq_length,
            dupe_factor=1,
            masked_lm_prob=row.masked_lm_prob,
            max_predictions_per_seq=row.max_predictions(size.seq_length),
            random_seed=seed,
        )
        create_pretraining_data(
            data["corpus"],
            path,
            data["vocab"],
            options,
            do_lower_case=size.lowercase,
            num_workers=1,
        )
    return path


def _model_fields(row: Successor, model_dir: str, size, data) -> dict:
    """The pretraining config's model fields: a bert_config.json, or a
    ModernBERT config of the same width, depth and feed-forward size."""
    from keras_bert.config import BertConfig

    if row.architecture == "modernbert":
        return {
            "architecture": "modernbert",
            "modernbert_config": {
                "vocab_size": data["vocab_size"],
                "hidden_size": size.model["hidden_size"],
                "num_hidden_layers": size.model["num_hidden_layers"],
                "num_attention_heads": size.model["num_attention_heads"],
                "intermediate_size": size.model["intermediate_size"],
                "max_position_embeddings": size.seq_length,
                "pad_token_id": 0,  # the learned vocabulary's [PAD]
            },
        }
    bert_config = os.path.join(model_dir, "bert_config.json")
    BertConfig(
        vocab_size=data["vocab_size"], max_position_embeddings=size.seq_length, **size.model
    ).to_json_file(bert_config)
    fields = {"model": bert_config}
    if row.objective == "electra":
        fields["generator_hidden_size"] = GENERATOR_FRACTION
    return fields


def pretraining_fields(row: Successor, model_dir, size, data, records, steps, seed=12345) -> dict:
    """`row`'s pretraining config fields for `steps` steps: the schedule every
    row shares (10 % warmup, a checkpoint at the end, ten log lines)."""
    return {
        **_model_fields(row, model_dir, size, data),
        "objective": row.objective,
        "train_files": records,
        "model_dir": model_dir,
        "seq_length": size.seq_length,
        "max_predictions_per_seq": row.max_predictions(size.seq_length),
        "batch_size": size.pretrain_batch,
        "learning_rate": size.pretrain_learning_rate,
        "train_steps": steps,
        "warmup_steps": steps // 10,
        "checkpoint_every": steps,
        "log_every": max(steps // 10, 1),
        "jit_compile": False,
        "seed": seed,
        "verbose": 2,
    }


def pretrain(row: Successor, output_dir: str, size, data, seed: int = 12345) -> dict:
    """Pretrains `row` for its equal-compute steps; its export folder and
    final training metrics (cached in OUTPUT/pretrain/ROW/successor.json)."""
    from keras_bert.training import pretraining

    model_dir = os.path.join(output_dir, "pretrain", row.name)
    summary_path = os.path.join(model_dir, "successor.json")
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            return json.load(f)
    os.makedirs(model_dir, exist_ok=True)
    steps = equal_compute_steps(row, size, data["vocab_size"])
    records = _records(row, output_dir, size, data, seed)
    started = time.monotonic()
    metrics = pretraining.pretrain(
        pretraining.load_config(
            **pretraining_fields(row, model_dir, size, data, records, steps, seed)
        )
    )
    summary = {
        "export": os.path.join(model_dir, "export"),
        "steps": steps,
        "training_flops_per_sequence": training_flops(
            row, size.model, size.seq_length, data["vocab_size"]
        ),
        "seconds": round(time.monotonic() - started, 1),
        "metrics": {name: round(float(value), 4) for name, value in metrics.items()},
    }
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"pretrained {row.name}: {summary}", flush=True)
    return summary


# === Fine-tuning ===


def score_novels(export: str, data: dict, size, seed: int) -> float:
    """The quickstart's task from `export`: fine-tuned with `fit` on passages of
    the training chapters (5 epochs at 1e-3, the quickstart's), accuracy in % on
    the held-out chapters' passages."""
    import keras

    import keras_bert
    from keras_bert.datasets.text_classification import read_text_examples
    from keras_bert.training.optimization import create_adamw

    keras.utils.set_random_seed(seed)
    folder = os.path.dirname(data["vocab"])
    train = read_text_examples(os.path.join(folder, "train.tsv"), ["sentence"])
    dev = read_text_examples(os.path.join(folder, "dev.tsv"), ["sentence"])
    names = sorted(set(train.labels))
    model = keras_bert.BertClassifier.from_pretrained(
        export,
        num_classes=len(names),
        label_names=names,
        vocab_file=data["vocab"],
        lowercase=size.lowercase,
        seq_length=size.seq_length,
    )
    epochs = FINETUNE_EPOCHS if size.max_train_examples is None else 1
    steps = -(-len(train.texts_a) // size.batch_size) * epochs
    model.compile(optimizer=create_adamw(FINETUNE_LEARNING_RATE, steps, steps // 10))
    model.fit(train.texts_a, train.labels, batch_size=size.batch_size, epochs=epochs, verbose=0)
    metrics = model.evaluate(dev.texts_a, dev.labels, return_dict=True, verbose=0)
    return 100 * metrics["accuracy"]


def _run_path(output_dir, row, task, seed):
    return os.path.join(output_dir, "runs", f"successor_{row.name}__{task}__seed{seed}.json")


def run(output_dir: str, size, seeds: list[int], rows: list[str] | None = None) -> str:
    unknown = sorted(set(rows or ()) - {row.name for row in ROWS})
    if unknown:
        raise SystemExit(f"unknown --row {unknown}; rows: {[row.name for row in ROWS]}")
    os.makedirs(os.path.join(output_dir, "runs"), exist_ok=True)
    data = prepare(output_dir, size)
    for row in ROWS:
        if rows and row.name not in rows:
            continue
        export = pretrain(row, output_dir, size, data)["export"]
        for task, label in COLUMNS:
            for seed in seeds:
                path = _run_path(output_dir, row, task, seed)
                if os.path.exists(path):
                    continue
                started = time.monotonic()
                if task == "classify":
                    value = ablations.score("classify", export, data["vocab"], size, seed)
                else:
                    value = score_novels(export, data, size, seed)
                seconds = time.monotonic() - started
                with open(path, "w") as f:
                    json.dump({"value": value, "seconds": round(seconds, 1)}, f)
                print(f"{row.name} / {label} / seed {seed}: {value:.2f} ({seconds:.0f} s)")
    return write_table(output_dir, seeds)


# === The table ===

TITLE = "BERT's successors at equal pretraining compute (miniature)"


def write_table(output_dir: str, seeds: list[int]) -> str:
    """OUTPUT/successors.md (mean ± sample std over the seeds run, each row's
    steps and final pretraining figures) and OUTPUT/successors.png."""
    header = ["row", "pretraining steps", *[label for _, label in COLUMNS], "pretraining figures"]
    lines = [f"**{TITLE}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    plotted = []
    for row in ROWS:
        summary_path = os.path.join(output_dir, "pretrain", row.name, "successor.json")
        summary = json.load(open(summary_path)) if os.path.exists(summary_path) else None
        cells = [str(summary["steps"]) if summary else "not run"]
        for task, label in COLUMNS:
            values = []
            for seed in seeds:
                path = _run_path(output_dir, row, task, seed)
                if os.path.exists(path):
                    with open(path) as f:
                        values.append(json.load(f)["value"])
            if values:
                mean, std = ablations._mean_std(values)
                cells.append(f"{mean:.1f} ± {std:.1f} (n={len(values)})")
                plotted.append((row.label, label, mean, std))
            else:
                cells.append("not run")
        figures = (
            ", ".join(f"{k} {v:.3f}" for k, v in summary["metrics"].items() if "loss" not in k)
            if summary
            else ""
        )
        lines.append("| " + " | ".join([row.label, *cells, figures]) + " |")
    markdown = "\n".join(lines) + "\n"
    with open(os.path.join(output_dir, "successors.md"), "w", encoding="utf-8") as f:
        f.write(markdown)
    table = ablations.Table(
        TITLE,
        rows=(),
        columns=tuple(ablations.Column(task, label) for task, label in COLUMNS),
        paper_columns=(),
    )
    ablations._plot(table, plotted, os.path.join(output_dir, "successors.png"))
    return markdown


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", action="append", default=None, help="run only this row")
    parser.add_argument("--seeds", default="0,1,2", help="fine-tuning seeds, comma-separated")
    parser.add_argument("--output-dir", default="successors_output")
    parser.add_argument("--smoke", action="store_true", help="one step of everything, tiny")
    args = parser.parse_args(argv)
    size = ablations.SMOKE if args.smoke else ablations.DEFAULT
    seeds = [int(seed) for seed in args.seeds.split(",")]
    print(run(args.output_dir, size, seeds, args.row))


if __name__ == "__main__":
    main()
