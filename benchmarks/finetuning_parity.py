"""Step-by-step parity of the fine-tuning benchmark's two sides: does
keras_bert's Keras `fit` take the same updates as HuggingFace's `Trainer`?

Both sides start from the same weights, the new head included (keras_bert's
seed-0 head is copied into HuggingFace's `classifier`), with dropout off, and
take the same first `--steps` batches in the same order (no shuffling) under
the full budget's schedule (`finetuning.py`'s hyper-parameters: AdamW, 10 %
warmup, clipping at 1.0). Printed per step: the loss, the learning rate the
update used and the gradient's global norm before clipping; after the steps in
`--keep-at`: how far apart the weights are, as the relative difference of the
two sides' updates (||d_kb - d_hf|| / ||d_hf||, d = weights - initial weights),
over the whole model and for a few tensors. Then the dropout layers of each
side (which outputs, at which rate). The sides should agree to ~1e-4.

keras_bert's numbers come from its real `fit` on text: a callback computes the
step's loss and gradient with the weights the step starts from (the same
computation as the train step, dropout off makes it deterministic) and reads
the optimizer's rate; HuggingFace's from its Trainer (`trainer_peer.parity`).

The Trainer runs in the peers' environment (`--peer-python` or
$KERAS_BERT_PEER_PYTHON; benchmarks/README.md builds it):

    python benchmarks/finetuning_parity.py --peer-python .venv-peers/bin/python \\
        [--tasks wnut16,rotten_tomatoes] [--steps 10] [--keep-at 1,2,10]

Writes benchmarks/results/finetuning_parity.{md,json} (`results_file`).
"""

import argparse
import os
import tempfile

import numpy as np

import finetuning as benchmark  # noqa: E402 (sets the CPU settings before TensorFlow loads)
import results_file
from peer_process import PeerProcess, add_peer_python_argument, peer_python

# Tensors shown one by one (canonical names; "head/..." is the new output layer).
SHOWN = (
    "head/kernel",
    "head/bias",
    "bert/embeddings/word_embeddings",
    "bert/encoder/layer_0/attention/self/query/kernel",
    "bert/encoder/layer_5/output/LayerNorm/gamma",
    "bert/pooler/dense/kernel",
)


def relative(a, b):
    return float(
        np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(np.asarray(b)), 1e-30)
    )


# === keras_bert ===


def keras_weights(model, head):
    from keras_bert.checkpoints.load import encoder_variables

    weights = {
        name: variable.numpy() for name, variable in encoder_variables(model.encoder).items()
    }
    weights.update({"head/kernel": head.kernel.numpy(), "head/bias": head.bias.numpy()})
    return weights


def dropout_layers(model):
    """{where: Dropout layer}, in the order the model applies them (a block's
    hidden dropout serves both its residuals)."""
    encoder = model.encoder
    layers = {"embeddings": encoder.embeddings_dropout}
    for block in encoder.transformer_blocks:
        layers[f"{block.name}/attention probabilities"] = block.attention.probs_dropout
        layers[f"{block.name}/attention output and feed-forward output"] = block.hidden_dropout
    head = "tagger_dropout" if hasattr(model, "num_labels") else "classifier_dropout"
    layers[f"{head} (before the output layer)"] = model.get_layer(head)
    return layers


def keras_side(task, checkpoint, steps, keep_at, seed):
    """fit on the first `steps` batches in order, dropout off: the per-step
    records, the weights before step 1 and after each of `keep_at`."""
    import keras
    import tensorflow as tf

    from keras_bert.training.optimization import global_norm

    side = benchmark.KerasBertSide(checkpoint, "fast")
    model = side.new_model(task, seed, benchmark.total_steps(task))
    listing = [f"{where} {layer.rate}" for where, layer in dropout_layers(model).items()]
    for layer in dropout_layers(model).values():
        layer.rate = 0.0  # read when fit traces its step
    head = model.get_layer("tagger_output" if task["kind"] == "tagging" else "classifier_output")
    names, size = task["label_names"], task["batch_size"]
    x = task["train_x"][: steps * size]
    y = task["train_y"][: steps * size]
    y = (
        [[names[i] for i in row] for row in y]
        if task["kind"] == "tagging"
        else [names[i] for i in y]
    )
    features, targets, weights = model.encode_text(x, y)
    records = {"loss": [], "learning_rate": [], "grad_norm": []}
    kept = {0: keras_weights(model, head)}

    class Record(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            rows = slice(batch * size, (batch + 1) * size)
            inputs = {key: value[rows] for key, value in features.items()}
            with tf.GradientTape() as tape:
                outputs = model(inputs, training=True)
                loss = model.compute_loss(
                    x=inputs,
                    y=targets[rows],
                    y_pred=outputs,
                    sample_weight=None if weights is None else weights[rows],
                    training=True,
                )
            grads = tape.gradient(loss, model.trainable_variables)
            norm = global_norm(grads)
            records["loss"].append(float(loss))
            records["grad_norm"].append(float(norm))
            records["learning_rate"].append(float(model.optimizer.learning_rate))

        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 in keep_at:
                kept[batch + 1] = keras_weights(model, head)

    model.fit(x, y, batch_size=size, epochs=1, shuffle=False, verbose=0, callbacks=[Record()])
    records["dropout"] = listing
    return records, kept, {"kernel": kept[0]["head/kernel"], "bias": kept[0]["head/bias"]}


def huggingface_weights(path):
    from keras_bert.checkpoints.load import read_huggingface_tensors

    tensors = read_huggingface_tensors(path)
    tensors["head/kernel"] = tensors.pop("classifier.weight").T  # (K, H) -> (H, K)
    tensors["head/bias"] = tensors.pop("classifier.bias")
    return tensors


# === Report ===


def report(name, kb, hf, kb_weights, hf_weights):
    """Prints the comparison; returns its figures (the results file's)."""
    figures = {"keras_bert": kb, "huggingface": hf, "updates_relative_difference": {}}
    print(f"\n== {name}: per step (keras_bert | HuggingFace Trainer | relative difference) ==")
    print(f"{'step':>4}  {'learning rate':^38}  {'loss':^38}  {'grad global norm':^38}")
    for step in range(len(kb["loss"])):
        cells = []
        for key in ("learning_rate", "loss", "grad_norm"):
            a, b = kb[key][step], hf[key][step]
            cells.append(f"{a:11.6g} {b:11.6g} {abs(a - b) / max(abs(b), 1e-30):9.2e}")
        print(f"{step + 1:>4}  " + "    ".join(cells))
    # HuggingFace's tagger has no pooler (keras_bert's is there, without gradient).
    shared = sorted(set(kb_weights[0]) & set(hf_weights[0]))
    start_kb = {n: kb_weights[0][n] for n in shared}
    start_hf = {n: hf_weights[0][n] for n in shared}
    print(
        f"\ntensors compared: {len(shared)}; only keras_bert's: "
        f"{sorted(set(kb_weights[0]) - set(shared))}; only HuggingFace's: "
        f"{sorted(set(hf_weights[0]) - set(shared))}"
    )
    worst_start = max(relative(start_kb[n], start_hf[n]) for n in start_kb)
    print(f"initial weights: largest relative difference {worst_start:.1e}")
    for step in sorted(kb_weights):
        if step == 0:
            continue
        moved = {
            n: (kb_weights[step][n] - start_kb[n], hf_weights[step][n] - start_hf[n])
            for n in start_kb
        }
        total = np.sqrt(
            sum(np.sum((a - b) ** 2) for a, b in moved.values())
            / max(sum(np.sum(b**2) for _, b in moved.values()), 1e-30)
        )
        worst = max(moved, key=lambda n: relative(*moved[n]) if np.any(moved[n][1]) else 0.0)
        # Attention key biases have no true gradient (softmax ignores a shift
        # per query): both sides move them by rounding noise alone.
        figures["updates_relative_difference"][step] = float(total)
        print(
            f"after step {step}: updates' relative difference {total:.2e} over the model; "
            f"worst tensor {worst} {relative(*moved[worst]):.2e} "
            f"(|d_hf| {np.linalg.norm(moved[worst][1]):.1e})"
        )
        for n in SHOWN:
            if n in moved:
                a, b = moved[n]
                print(
                    f"    {n:<52} |d_hf| {np.linalg.norm(b):9.3e}  rel. diff {relative(a, b):.2e}"
                )
    print(
        f"\ndropout, keras_bert ({len(kb['dropout'])} layers; each block's hidden dropout "
        "serves both residuals):"
    )
    print("    " + "\n    ".join(kb["dropout"]))
    print(f"dropout, HuggingFace ({len(hf['dropout'])} modules):")
    print("    " + "\n    ".join(hf["dropout"]))
    figures["initial_weights_relative_difference"] = float(worst_start)
    return figures


def write_results(args, argv, measured, versions):
    lines = [
        "| task | step | learning rate: kb / hf | loss: kb / hf | grad norm: kb / hf |",
        "|---|---|---|---|---|",
    ]
    for name, figures in measured.items():
        kb, hf = figures["keras_bert"], figures["huggingface"]
        for step in range(len(kb["loss"])):
            lines.append(
                f"| {name} | {step + 1} | "
                + " | ".join(
                    f"{kb[key][step]:.6g} / {hf[key][step]:.6g}"
                    for key in ("learning_rate", "loss", "grad_norm")
                )
                + " |"
            )
    lines += [
        "",
        "| task | after step | updates' relative difference over the model |",
        "|---|---|---|",
    ] + [
        f"| {name} | {step} | {difference:.2e} |"
        for name, figures in measured.items()
        for step, difference in figures["updates_relative_difference"].items()
    ]
    results_file.write(
        args.results_name,
        "Fine-tuning parity: keras_bert's fit against the Trainer, step by step",
        table="\n".join(lines),
        argv=argv,
        figures=measured,
        method="The same initial weights, dropout off, the same first batches in order.",
        peer_versions=versions,
        directory=args.results_dir,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=None, help="a HuggingFace folder (default MiniLM)")
    parser.add_argument("--tasks", default="wnut16,rotten_tomatoes")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--keep-at", default="1,2,10", help="steps after which weights compare")
    parser.add_argument(
        "--warmup-ratio",
        type=float,
        default=None,
        help="both sides' warmup (default the benchmark's 0.1; 0: none, so step 1 updates)",
    )
    parser.add_argument("--seed", type=int, default=0, help="keras_bert's head initialisation")
    parser.add_argument("--torch-threads", type=int, default=os.cpu_count() or 1)
    add_peer_python_argument(parser)
    results_file.add_arguments(parser, "finetuning_parity")
    args = parser.parse_args(argv)
    python = peer_python(args.peer_python)
    checkpoint = args.checkpoint or benchmark.default_checkpoint()
    keep_at = [int(s) for s in args.keep_at.split(",")]
    worker = PeerProcess(
        os.path.join(benchmark.HERE, "trainer_peer.py"),
        {"checkpoint": checkpoint, "threads": args.torch_threads},
        python,
    )
    if "missing" in worker.facts:
        raise SystemExit(
            f"{python}: the peers' environment lacks a package "
            f"({worker.facts['missing']}); install benchmarks/requirements-peers.txt"
        )
    measured = {}
    print(f"{checkpoint}; {worker.facts['versions']}", flush=True)
    for name in args.tasks.split(","):
        task = benchmark.load_task(name)
        if args.warmup_ratio is not None:
            task["warmup_ratio"] = args.warmup_ratio
        print(
            f"\n{name}: batch {task['batch_size']}, the first {args.steps} of "
            f"{benchmark.total_steps(task)} steps, warmup "
            f"{int(task['warmup_ratio'] * benchmark.total_steps(task))} steps",
            flush=True,
        )
        kb, kb_weights, head = keras_side(task, checkpoint, args.steps, keep_at, args.seed)
        worker.ask(("task", name, {**task, "padding": "max_length"}))
        with tempfile.TemporaryDirectory(prefix="parity_") as folder:
            hf = worker.ask(("parity", name, head, args.steps, keep_at, folder))
            hf_weights = {
                step: huggingface_weights(f"{folder}/step_{step}.safetensors")
                for step in [0] + keep_at
            }
        measured[name] = report(name, kb, hf, kb_weights, hf_weights)
    worker.close()
    if not args.no_results:
        write_results(args, argv, measured, {"peers": worker.facts["versions"]})


if __name__ == "__main__":
    main()
