"""The reference fine-tune of a BERT classifier with HuggingFace transformers
(PyTorch, CPU), saved so every serving form reads the same weights.

Why: `cpu_serving.py` compares keras_bert's exports with ONNX Runtime on one
classifier. Fine-tuned here, as a HuggingFace user would (a plain PyTorch loop:
AdamW, linear decay after 10 % warm-up, dense on the pooled `[CLS]`; the
settings of shared/datasets' reference: 2 epochs, length 64, batch 32, lr 5e-5),
and saved as a bare `BertModel` folder (what `BertEncoder.from_pretrained`
reads) plus the head, keras_bert's model holds exactly the weights ONNX
Runtime's file holds (`onnx_peer.py` exports it with `torch.onnx.export`).

Runs in the peers' environment (benchmarks/requirements-peers.txt):

    .venv-peers/bin/python benchmarks/hf_reference_classifier.py \\
        --checkpoint MINILM_FOLDER --data data/rotten_tomatoes --output OUT

Writes OUT/encoder/ (config.json, model.safetensors, vocab.txt), OUT/head.npz
(`kernel` (H, C), `bias` (C,)), OUT/labels.txt and OUT/classifier/ (the whole
`BertForSequenceClassification`, for the ONNX export).
"""

import argparse
import csv
import os
import shutil
import time


def read_tsv(path):
    """(sentences, labels) of a `label<TAB>sentence` file with a header row."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [row["sentence"] for row in rows], [row["label"] for row in rows]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a HuggingFace BERT folder")
    parser.add_argument("--data", required=True, help="folder with train.tsv and dev.tsv")
    parser.add_argument("--output", required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--train-examples",
        type=int,
        default=None,
        help="the first N training rows only (a smaller budget on a busy machine)",
    )
    parser.add_argument("--seq-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    import transformers

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    texts, labels = read_tsv(os.path.join(args.data, "train.tsv"))
    texts, labels = texts[: args.train_examples], labels[: args.train_examples]
    names = sorted(set(labels))
    targets = torch.tensor([names.index(label) for label in labels])
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.checkpoint, use_fast=True)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        args.checkpoint, num_labels=len(names)
    )
    steps_per_epoch = -(-len(texts) // args.batch_size)
    total = steps_per_epoch * args.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, total // 10, total)
    generator = torch.Generator().manual_seed(args.seed)
    model.train()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(texts), generator=generator).tolist()
        for step in range(steps_per_epoch):
            rows = order[step * args.batch_size : (step + 1) * args.batch_size]
            batch = tokenizer(
                [texts[i] for i in rows],
                truncation=True,
                max_length=args.seq_length,
                padding=True,
                return_tensors="pt",
            )
            loss = model(**batch, labels=targets[rows]).loss
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                print(
                    f"epoch {epoch + 1} step {step}/{steps_per_epoch} loss {loss.item():.3f} "
                    f"({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
    model.eval()
    dev_texts, dev_labels = read_tsv(os.path.join(args.data, "dev.tsv"))
    correct = 0
    with torch.inference_mode():
        for begin in range(0, len(dev_texts), 64):
            batch = tokenizer(
                dev_texts[begin : begin + 64],
                truncation=True,
                max_length=args.seq_length,
                padding=True,
                return_tensors="pt",
            )
            predicted = model(**batch).logits.argmax(-1).tolist()
            correct += sum(
                names[p] == gold for p, gold in zip(predicted, dev_labels[begin : begin + 64])
            )
    print(f"dev accuracy {correct / len(dev_texts):.4f} (PyTorch, length {args.seq_length})")

    os.makedirs(args.output, exist_ok=True)
    model.save_pretrained(os.path.join(args.output, "classifier"))
    tokenizer.save_pretrained(os.path.join(args.output, "classifier"))
    model.bert.save_pretrained(os.path.join(args.output, "encoder"))
    shutil.copy(
        os.path.join(args.checkpoint, "vocab.txt"),
        os.path.join(args.output, "encoder", "vocab.txt"),
    )
    head = model.classifier
    np.savez(
        os.path.join(args.output, "head.npz"),
        kernel=head.weight.detach().numpy().T,  # torch (C, H) -> Keras (H, C)
        bias=head.bias.detach().numpy(),
    )
    with open(os.path.join(args.output, "labels.txt"), "w", encoding="utf-8") as f:
        f.write("".join(f"{name}\n" for name in names))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
