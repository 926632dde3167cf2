"""`keras-bert predict`: a fine-tuned model's answers for a file of inputs,
one JSON line per input, through the model's own `predict` on text.

Inputs, by task (the fields a `finetune` output was trained on):

- classify / regress: a plain text file (one text per line), or JSON Lines
  with `text` (and `text_pair`);
- tag: a plain text file (one sentence per line, words split at whitespace)
  or JSON Lines with `text`;
- squad: JSON Lines with `question` and `context`, or a SQuAD JSON file
  (each answer line then also carries the question's `id`).

Outputs: `{"label", "probabilities": {name: p}}`, `{"score"}`,
`{"tokens", "tags", "entities"}` or `{"answer", "start", "end", "score"}`
(+ `has_answer`, `null_score_diff` for SQuAD 2.0). The file is written under
a temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from keras_bert import safe_output
from keras_bert.progress import Progress
from keras_bert.training.finetuning import load_finetuned

FIELDS = {"classify": ("text", "text_pair"), "regress": ("text", "text_pair"),
          "tag": ("text",), "squad": ("id", "question", "context")}


def read_inputs(path: str, task: str) -> list[dict[str, Any]]:
    """The input file -> one dict per input, with the task's fields."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"input file not found: {path}")
    with open(path, encoding="utf-8") as f:
        content = f.read()
    if task == "squad" and content.lstrip().startswith("{") and '"data"' in content[:2000]:
        return _squad_questions(json.loads(content)["data"])
    rows = []
    for number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}, line {number}: not valid JSON ({e.msg})") from None
        elif task == "squad":
            raise ValueError(f"{path}, line {number}: question answering reads JSON Lines with "
                             "`question` and `context` (or a SQuAD JSON file)")
        else:
            row = {"text": line}
        required = ("question", "context") if task == "squad" else ("text",)
        missing = [name for name in required if not isinstance(row.get(name), str)]
        if missing:
            raise ValueError(f"{path}, line {number}: field(s) {missing} missing or not text")
        rows.append(row)
    return rows


def _squad_questions(data):
    return [{"id": qa["id"], "question": qa["question"], "context": paragraph["context"]}
            for article in data for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]


def predictions(model: Any, task: str, rows: list[dict[str, Any]], saved: dict[str, Any],
                batch_size: int) -> Iterator[dict[str, Any]]:
    """The model's answers for the rows, in order, as JSON-able dicts."""
    with Progress(len(rows), "inputs", detail="predicting") as bar:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            yield from _answers(model, task, chunk, saved)
            bar.advance(len(chunk))


def _answers(model, task, chunk, saved):
    if task == "squad":
        options = {name: saved[name] for name in (
            "version_2_with_negative", "doc_stride", "max_query_length", "n_best_size",
            "null_score_diff_threshold") if name in saved}
        answers = model.predict_answers({"question": [r["question"] for r in chunk],
                                         "context": [r["context"] for r in chunk]}, **options)
        for row, answer in zip(chunk, answers):
            yield {"id": row["id"], **answer} if "id" in row else answer
        return
    if task == "tag":
        yield from model.tag([r["text"] for r in chunk])
        return
    # Rows with and without a `text_pair` are packed differently: classify
    # each group on its own, answer in the input order.
    paired = [i for i, r in enumerate(chunk) if r.get("text_pair") is not None]
    single = [i for i, r in enumerate(chunk) if r.get("text_pair") is None]
    answers = {}
    for group, inputs in ((single, [chunk[i]["text"] for i in single]),
                          (paired, {"text": [chunk[i]["text"] for i in paired],
                                    "text_pair": [chunk[i]["text_pair"] for i in paired]})):
        if not group:
            continue
        outputs = model.classify(inputs)
        for k, i in enumerate(group):
            if task == "regress":
                answers[i] = {"score": float(outputs["score"][k])}
            else:
                answers[i] = {"label": outputs["label"][k].decode("utf-8"),
                              "probabilities": {name: float(p) for name, p in zip(
                                  model.answer_names(), outputs["probabilities"][k])}}
    yield from (answers[i] for i in range(len(chunk)))


def predict_file(model_dir: str, input_path: str, output_path: str, batch_size: int = 32) -> int:
    """Writes the answers for `input_path` to `output_path` (JSON Lines);
    returns the number of lines written. The output may not be the input (nor
    the model folder), and is written whole or not at all."""
    safe_output.check_not_input(output_path, [input_path, model_dir], "--output")
    model, saved = load_finetuned(model_dir)
    task = saved["task"]
    rows = read_inputs(input_path, task)
    count = 0
    with safe_output.output_lock(output_path), safe_output.open_replacing(output_path) as out:
        for answer in predictions(model, task, rows, saved, batch_size):
            out.write(json.dumps(answer, ensure_ascii=False) + "\n")
            count += 1
    return count
