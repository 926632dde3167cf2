"""Why the ELECTRA row of `successors.py` fine-tunes at chance, measured.

    python recipes/ablations/electra_diagnosis.py [--output-dir successors_output]
        [--control-steps 300] [--seed 0] [--smoke]

Run after `successors.py` (it reads the exports in OUTPUT/pretrain/ and the
records and vocabulary beside them); writes OUTPUT/electra_diagnosis.md:

1. **Does the discriminator tell replaced tokens?** Its per-token AUC (the
   replaced tokens' logits ranked against the originals') on a batch of the
   records (the training records: it fails even on those), with the
   generator's own samples.
2. **Is the mechanism sound?** A control: the same pretraining with the
   generator's samples swapped for uniformly random ids (mostly rare words,
   easy to tell), for `--control-steps` steps, and its AUC on such samples.
3. **What did pretraining do to the encoder?** The token vectors' mean pairwise
   cosine after each block (the same batch's tokens): near 1 every token
   looks alike (the representations collapsed), a fresh encoder's is about 0.2.
4. **Against no pretraining:** rotten_tomatoes and the quickstart's task
   fine-tuned, as `successors.py` does, from a randomly initialised encoder of
   the same size.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ablations  # noqa: E402
import successors  # noqa: E402

ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")
MASKED_INPUTS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
# The rows whose encoders are compared (section 3), by their pretrain/ folder.
COMPARED = ("bert_mlm15", "electra")
# Token vectors sampled for the mean cosine (pairs: n (n - 1) / 2).
COSINE_SAMPLE = 500


@contextlib.contextmanager
def uniform_replacements():
    """ELECTRA's sampler swapped for one that ignores the generator: an id
    drawn uniformly from the vocabulary, from the same draw."""
    import tensorflow as tf

    from keras_bert.layers import electra_heads

    def uniform(logits, draws):
        vocabulary = logits.shape[-1]
        ids = tf.cast(tf.cast(draws, tf.float32) * vocabulary, tf.int32)
        return tf.minimum(ids, vocabulary - 1)

    original = electra_heads.sample_from_softmax
    electra_heads.sample_from_softmax = uniform
    try:
        yield
    finally:
        electra_heads.sample_from_softmax = original


def held_batch(records: str, size) -> dict:
    """Two pretraining batches' worth of the records (64 sequences at the default size)."""
    from keras_bert.pretraining_data import inputs

    row = next(r for r in successors.ROWS if r.name == "electra")
    dataset = inputs.pretraining_dataset(
        records,
        size.seq_length,
        row.max_predictions(size.seq_length),
        2 * size.pretrain_batch,
        is_training=False,
        with_next_sentence=False,
    )
    batch = next(iter(dataset))
    return {name: batch[name] for name in ENCODER_INPUTS + MASKED_INPUTS}


def auc(scores, labels) -> float:
    """The probability that a replaced token outscores an original (ties by rank order)."""
    import numpy as np

    ranks = np.empty(len(scores))
    ranks[np.argsort(scores)] = np.arange(1, len(scores) + 1)
    replaced = labels == 1
    n1, n0 = replaced.sum(), (~replaced).sum()
    return float((ranks[replaced].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def discriminator_auc(export: str, batch: dict) -> dict:
    from keras_bert.models.electra_pretrainer import ElectraPretrainer

    model = ElectraPretrainer.from_pretrained(export)
    outputs = model(batch, training=False)
    real = batch["input_mask"].numpy().ravel() == 1
    labels = outputs["replaced_token_labels"].numpy().ravel()[real]
    logits = outputs["replaced_token_logits"].numpy().ravel()[real]
    return {"auc": auc(logits, labels), "replaced": float(labels.mean())}


def block_cosines(export: str | None, batch: dict, config_of: str) -> list[float]:
    """Mean pairwise cosine of real tokens' vectors after each block; a fresh
    encoder of `config_of`'s size where `export` is None."""
    import keras
    import numpy as np

    import keras_bert
    from keras_bert.config import BertConfig

    if export is None:
        keras.utils.set_random_seed(0)
        encoder = keras_bert.BertEncoder(BertConfig.from_json_file(config_of))
    else:
        encoder = keras_bert.BertEncoder.from_pretrained(export)
    outputs = encoder({name: batch[name] for name in ENCODER_INPUTS}, training=False)
    real = batch["input_mask"].numpy() == 1
    rng = np.random.default_rng(0)
    cosines = []
    for block in outputs["encoder_outputs"]:
        vectors = block.numpy()[real]
        vectors = vectors[rng.choice(len(vectors), min(COSINE_SAMPLE, len(vectors)), False)]
        vectors /= np.linalg.norm(vectors, axis=-1, keepdims=True)
        pairs = (vectors @ vectors.T)[np.triu_indices(len(vectors), 1)]
        cosines.append(float(pairs.mean()))
    return cosines


def control_run(output_dir: str, size, steps: int, records: str, data: dict) -> dict:
    """ELECTRA's row pretrained with uniform replacements for `steps` steps
    (cached in OUTPUT/pretrain/electra_control)."""
    from keras_bert.training import pretraining

    model_dir = os.path.join(output_dir, "pretrain", "electra_control")
    summary_path = os.path.join(model_dir, "control.json")
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            return json.load(f)
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)
    row = next(r for r in successors.ROWS if r.name == "electra")
    fields = successors.pretraining_fields(row, model_dir, size, data, records, steps)
    with uniform_replacements():
        metrics = pretraining.pretrain(pretraining.load_config(**fields))
    summary = {
        "export": os.path.join(model_dir, "export"),
        "steps": steps,
        "metrics": {name: round(float(value), 4) for name, value in metrics.items()},
    }
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1)
    return summary


def random_init_export(output_dir: str, config_file: str) -> str:
    """A randomly initialised encoder (seed 0) in the pretraining export's layout."""
    import keras

    import keras_bert
    from keras_bert.config import BertConfig
    from keras_bert.models.pretrainer import BertPretrainer
    from keras_bert.training import pretraining

    export = os.path.join(output_dir, "pretrain", "random_init", "export")
    if not os.path.exists(os.path.join(export, "bert_config.json")):
        keras.utils.set_random_seed(0)
        encoder = keras_bert.BertEncoder(BertConfig.from_json_file(config_file))
        pretraining.export_tf1(BertPretrainer(encoder, objective="none"), export)
    return export


def diagnose(output_dir: str, size, control_steps: int, seed: int) -> str:
    data = successors.prepare(output_dir, size)
    pretrained = {}
    for name in COMPARED:
        summary_path = os.path.join(output_dir, "pretrain", name, "successor.json")
        if not os.path.exists(summary_path):
            raise SystemExit(
                f"{summary_path} is missing: run successors.py --output-dir {output_dir} first"
            )
        with open(summary_path) as f:
            pretrained[name] = json.load(f)
    electra_dir = os.path.join(output_dir, "pretrain", "electra")
    config_file = os.path.join(electra_dir, "bert_config.json")
    records = os.path.join(output_dir, "records", "masked15.tfrecord")
    batch = held_batch(records, size)

    generator = discriminator_auc(pretrained["electra"]["export"], batch)
    control = control_run(output_dir, size, control_steps, records, data)
    with uniform_replacements():
        controlled = discriminator_auc(control["export"], batch)
    random_init = random_init_export(output_dir, config_file)
    encoders = {
        "fresh (random initialisation)": None,
        "BERT, MLM 15 %": pretrained["bert_mlm15"]["export"],
        f"ELECTRA control, uniform replacements ({control_steps} steps)": control["export"],
        "BERT + ELECTRA RTD (15 %)": pretrained["electra"]["export"],
    }
    cosines = {
        label: block_cosines(export, batch, config_file) for label, export in encoders.items()
    }
    novels = successors.score_novels(random_init, data, size, seed)
    reviews = ablations.score("classify", random_init, data["vocab"], size, seed)

    lines = [
        "**Why ELECTRA's row fine-tunes at chance (miniature)**",
        "",
        "| discriminator | steps | replaced share | AUC (replaced vs original) "
        "| discriminator loss (training mean) |",
        "|---|---|---|---|---|",
        f"| generator's samples | {pretrained['electra']['steps']} | {generator['replaced']:.3f} "
        f"| {generator['auc']:.3f} | {pretrained['electra']['metrics']['discriminator_loss']:.3f} |",
        f"| uniform random ids (control) | {control_steps} | {controlled['replaced']:.3f} "
        f"| {controlled['auc']:.3f} | {control['metrics']['discriminator_loss']:.3f} |",
        "",
        "| encoder | mean token cosine after each block |",
        "|---|---|",
        *[
            f"| {label} | {' / '.join(f'{c:.3f}' for c in values)} |"
            for label, values in cosines.items()
        ],
        "",
        f"Fine-tuned from the random initialisation (no pretraining), seed {seed}: "
        f"rotten_tomatoes **{reviews:.1f}** %, the quickstart task (6 novels) **{novels:.1f}** % "
        "(successors.md has the pretrained rows').",
        "",
    ]
    markdown = "\n".join(lines)
    with open(os.path.join(output_dir, "electra_diagnosis.md"), "w", encoding="utf-8") as f:
        f.write(markdown)
    return markdown


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default="successors_output")
    parser.add_argument("--control-steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--smoke", action="store_true", help="the smoke size (successors.py --smoke)"
    )
    args = parser.parse_args(argv)
    size = ablations.SMOKE if args.smoke else ablations.DEFAULT
    print(diagnose(args.output_dir, size, args.control_steps, args.seed))


if __name__ == "__main__":
    main()
