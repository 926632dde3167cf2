"""HuggingFace transformers' `Trainer` (PyTorch, CPU): the peer of `finetuning.py`,
in a process of its own (`peer_process`: why, and how the two talk).

`finetuning.py` reads the data and sends it here already split into texts /
words and label ids, so both sides train on the same examples; this process
tokenizes with the checkpoint's fast tokenizer, as a HuggingFace user does.

Requests: ("task", name, spec) -> None;
("threads", count) -> None; ("parity", name, head, steps, keep_at, folder) -> the
per-step records of `parity` (the weights go to `folder`);
("time", name, steps, seed) -> seconds of the timed steps; ("train", name,
seed) -> {"predictions": per dev row the label id (classification) or the
label ids of its words (tagging), "seconds", "examples"}; None: exit.
"""

import tempfile
import time

from peer_process import serve

IGNORED = -100  # PyTorch's cross-entropy skips these positions


def first_piece_labels(word_ids, word_labels):
    """A word's label on its first piece, IGNORED on its other pieces and on
    [CLS] / [SEP] / padding (`word_ids` is None there): HuggingFace's
    token-classification recipe with `label_all_tokens=False`, the paper's choice."""
    labels, previous = [], None
    for word in word_ids:
        labels.append(IGNORED if word is None or word == previous else word_labels[word])
        previous = word
    return labels


def first_piece_predictions(word_ids, labels):
    """{word: the label id predicted on its first piece}."""
    found = {}
    for word, label in zip(word_ids, labels):
        if word is not None and word not in found:
            found[word] = int(label)
    return found


class StepClock:
    """Trainer callback: the wall time from the start of step `skip` (the steps
    before it warm up) to the end of the last step, and how many steps that is."""

    def __init__(self, skip):
        from transformers import TrainerCallback

        clock = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                if state.global_step == clock.skip:
                    clock.start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                clock.end, clock.steps = time.perf_counter(), state.global_step - clock.skip

        self.skip, self.start, self.end, self.steps = skip, None, None, 0
        self.callback = Callback()

    @property
    def seconds(self):
        return self.end - self.start


class TrainerPeer:
    def __init__(self, checkpoint, threads, bf16=False):
        import torch
        import transformers

        self.torch, self.transformers = torch, transformers
        self.checkpoint, self.bf16 = checkpoint, bf16
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint, use_fast=True)
        torch.set_num_threads(threads)
        self.threads = threads
        self.tasks, self.timing_models = {}, {}
        self.versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
        self.folder = tempfile.mkdtemp(prefix="trainer_peer_")

    # === Data ===

    def add_task(self, name, spec):
        spec = dict(spec)
        spec["train_rows"] = self.encode(spec, spec["train_x"], spec["train_y"])
        spec["dev_rows"] = self.encode(spec, spec["dev_x"], None)
        self.tasks[name] = spec

    def encode(self, spec, x, y):
        tagging = spec["kind"] == "tagging"
        encoded = self.tokenizer(
            x,
            is_split_into_words=tagging,
            truncation=True,
            max_length=spec["seq_length"],
            padding="max_length" if spec["padding"] == "max_length" else False,
        )
        rows = []
        for index in range(len(x)):
            row = {key: encoded[key][index] for key in encoded.keys()}
            if tagging:
                row["word_ids"] = encoded.word_ids(index)
                if y is not None:
                    row["labels"] = first_piece_labels(row["word_ids"], y[index])
            elif y is not None:
                row["labels"] = y[index]
            rows.append(row)
        return rows

    def collator(self, spec):
        transformers = self.transformers
        if spec["kind"] == "tagging":
            return transformers.DataCollatorForTokenClassification(self.tokenizer)
        return transformers.DataCollatorWithPadding(self.tokenizer)

    # === Models and the Trainer ===

    def new_model(self, spec, seed):
        transformers = self.transformers
        transformers.set_seed(seed)  # the new head's initial weights
        auto = (
            transformers.AutoModelForTokenClassification
            if spec["kind"] == "tagging"
            else transformers.AutoModelForSequenceClassification
        )
        return auto.from_pretrained(self.checkpoint, num_labels=spec["num_labels"])

    def trainer(
        self, spec, model, rows, seed, epochs, max_steps=-1, callbacks=(), trainer_class=None
    ):
        transformers = self.transformers
        steps = -(-len(rows) // spec["batch_size"]) * epochs if max_steps < 0 else max_steps
        args = transformers.TrainingArguments(
            output_dir=self.folder,
            per_device_train_batch_size=spec["batch_size"],
            num_train_epochs=epochs,
            max_steps=max_steps,
            learning_rate=spec["learning_rate"],
            # The same warmup as keras_bert's side: a step count, not a ratio
            # (HuggingFace rounds the ratio up, keras_bert's recipes down).
            warmup_steps=int(spec["warmup_ratio"] * steps),
            lr_scheduler_type="linear",
            weight_decay=spec["weight_decay"],
            adam_beta1=0.9,
            adam_beta2=0.999,
            adam_epsilon=spec["epsilon"],
            max_grad_norm=spec["clipnorm"] or 0.0,
            seed=seed,
            use_cpu=True,
            bf16=self.bf16,
            save_strategy="no",
            eval_strategy="no",
            torch_compile=spec.get("torch_compile", False),
            logging_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
        )
        return (trainer_class or transformers.Trainer)(
            model=model,
            args=args,
            train_dataset=rows,
            data_collator=self.collator(spec),
            callbacks=list(callbacks),
        )

    def time(self, name, steps, seed, skip=2):
        """Seconds of `steps` training steps after `skip` warm-up steps, on a
        model kept between calls (speed does not depend on the weights)."""
        spec = self.tasks[name]
        if name not in self.timing_models:
            self.timing_models[name] = self.new_model(spec, seed)
        clock = StepClock(skip)
        rows = spec["train_rows"][: (steps + skip) * spec["batch_size"]]
        self.trainer(
            spec, self.timing_models[name], rows, seed, 1, steps + skip, [clock.callback]
        ).train()
        return clock.seconds * steps / clock.steps

    def train(self, name, seed, skip=2):
        """The full budget from the pretrained weights, then dev predictions."""
        spec = self.tasks[name]
        model = self.new_model(spec, seed)
        clock = StepClock(skip)
        self.trainer(
            spec, model, spec["train_rows"], seed, spec["epochs"], callbacks=[clock.callback]
        ).train()
        examples = spec["epochs"] * len(spec["train_rows"]) - skip * spec["batch_size"]
        return {
            "predictions": self.predict(spec, model),
            "seconds": clock.seconds,
            "examples": examples,
        }

    def predict(self, spec, model):
        """Dev predictions: a label id per row, or for tagging a label id per
        word, read on its first piece; words cut off by the truncation (or
        without pieces) get the outside tag."""
        torch = self.torch
        model.eval()
        collate = self.collator(spec)
        predictions = []
        for start in range(0, len(spec["dev_rows"]), 64):
            rows = spec["dev_rows"][start : start + 64]
            batch = collate(
                [{k: v for k, v in row.items() if k not in ("word_ids", "labels")} for row in rows]
            )
            with torch.inference_mode():
                best = model(**batch).logits.argmax(-1).numpy()
            for row, labels in zip(rows, best):
                if spec["kind"] == "tagging":
                    found = first_piece_predictions(row["word_ids"], labels)
                    words = len(spec["dev_x"][len(predictions)])
                    predictions.append([found.get(w, spec["outside"]) for w in range(words)])
                else:
                    predictions.append(int(labels))
        return predictions

    def parity(self, name, head, steps, keep_at, folder):
        """The first `steps` updates of the full budget's schedule, the rows in
        order, dropout off, the head set to `head` ({"kernel" (H, K), "bias"}, as
        Keras stores it): per step the loss, the learning rate used and the
        gradient's global norm before clipping, as the Trainer computes them;
        the weights before step 1 and after each step in `keep_at`, as
        safetensors files `folder/step_<n>.safetensors`."""
        from safetensors.torch import save_file

        spec, torch = self.tasks[name], self.torch
        auto = (
            self.transformers.AutoModelForTokenClassification
            if spec["kind"] == "tagging"
            else self.transformers.AutoModelForSequenceClassification
        )
        model = auto.from_pretrained(
            self.checkpoint,
            num_labels=spec["num_labels"],
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout=0.0,
        )
        with torch.no_grad():
            model.classifier.weight.copy_(torch.from_numpy(head["kernel"].T))  # (K, H)
            model.classifier.bias.copy_(torch.from_numpy(head["bias"]))
        records = {"loss": [], "learning_rate": [], "grad_norm": []}

        def save(step):
            save_file(
                {key: value.detach().contiguous() for key, value in model.state_dict().items()},
                f"{folder}/step_{step}.safetensors",
            )

        save(0)
        trainer_class = parity_trainer(self.transformers, torch, records)
        stop = stop_after(self.transformers, steps, keep_at, save)
        self.trainer(
            spec,
            model,
            spec["train_rows"],
            0,
            spec["epochs"],
            callbacks=[stop],
            trainer_class=trainer_class,
        ).train()
        records["dropout"] = [
            f"{path} {module.p}"
            for path, module in auto.from_pretrained(
                self.checkpoint, num_labels=spec["num_labels"]
            ).named_modules()
            if isinstance(module, torch.nn.Dropout)
        ]
        return records

    def serve(self, request):
        kind = request[0]
        if kind == "task":
            return self.add_task(request[1], request[2])
        if kind == "threads":
            self.threads = request[1]
            return self.torch.set_num_threads(request[1])
        if kind == "time":
            return self.time(*request[1:])
        if kind == "train":
            return self.train(*request[1:])
        if kind == "parity":
            return self.parity(*request[1:])
        raise ValueError(f"unknown request {kind}")


def parity_trainer(transformers, torch, records):
    """A Trainer that takes its rows in order and records each step's loss,
    learning rate (the one the optimizer steps with) and pre-clipping norm."""

    class InOrderTrainer(transformers.Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return torch.utils.data.SequentialSampler(train_dataset or self.train_dataset)

        def compute_loss(self, *args, **kwargs):
            loss = super().compute_loss(*args, **kwargs)
            records["loss"].append(float((loss[0] if isinstance(loss, tuple) else loss).detach()))
            return loss

        def _get_grad_norm(self, model, grad_norm=None):
            norm = super()._get_grad_norm(model, grad_norm=grad_norm)
            records["grad_norm"].append(float(norm))
            records["learning_rate"].append(float(self.optimizer.param_groups[0]["lr"]))
            return norm

    return InOrderTrainer


def stop_after(transformers, steps, keep_at, save):
    """Callback: `save(step)` after each step in `keep_at`; stop after `steps`."""

    class Stop(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in keep_at:
                save(state.global_step)
            if state.global_step >= steps:
                control.should_training_stop = True

    return Stop()


def main():
    serve(TrainerPeer)


if __name__ == "__main__":
    main()
