"""`keras-bert predict`: a fine-tuned model's answers for a file of inputs,
one JSON line per input, through the model's own `predict` on text.

Inputs, by task (the fields a `finetune` output was trained on), in a format
chosen by `--input-format` or else by the file's extension, never guessed
line by line (a text line may begin with `{`):

- text (any extension but .jsonl / .json): one input per line: a text
  (classify, regress, embed) or a sentence, words split at whitespace (tag);
- jsonl (.jsonl): JSON Lines with `text` (and `text_pair`), or `question`
  and `context` (squad);
- squad (.json, question answering only): a SQuAD JSON file.

Outputs, in input order: `{"label", "probabilities": {name: p}}` (a
multi-label classifier: `{"labels": [names above the threshold, most
probable first], "probabilities": {name: p}}`), `{"score"}`,
`{"tokens", "tags", "entities"}`, `{"answer", "start", "end", "score"}` (+
`has_answer`, `null_score_diff` for SQuAD 2.0) or `{"embedding": [D floats]}`.
Every answer starts with `line`, its input line number (a SQuAD file's answers carry the question's
`id` instead), so answers and inputs line up: a blank input line is
answered `{"line": N, "blank": true}`, never skipped. `--include-input`
copies the input's fields into its answer. The file is written under a
temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from keras_bert import safe_output, text_files
from keras_bert.progress import Progress
from keras_bert.training.finetuning import load_finetuned

FIELDS = {
    "classify": ("text", "text_pair"),
    "regress": ("text", "text_pair"),
    "tag": ("text",),
    "squad": ("id", "question", "context"),
    "embed": ("text",),
}
INPUT_FORMATS = ("text", "jsonl", "squad")


def input_format_of(path: str, task: str, input_format: str | None = None) -> str:
    """The input's format: `input_format` if given, else by the file's extension."""
    if input_format is None:
        extension = os.path.splitext(path)[1].lower()
        input_format = {".jsonl": "jsonl", ".json": "squad"}.get(extension, "text")
        if input_format == "squad" and task != "squad":
            raise ValueError(
                f"{path}: a .json file is read as a SQuAD file, for question "
                "answering; give JSON Lines a .jsonl name or --input-format jsonl"
            )
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if task == "squad" and input_format == "text":
        raise ValueError(
            f"{path}: question answering reads JSON Lines with `question` and "
            "`context` (a .jsonl file, or --input-format jsonl) or a SQuAD JSON "
            "file (.json, or --input-format squad)"
        )
    if input_format == "squad" and task != "squad":
        raise ValueError(
            f"--input-format squad is for question answering; this model's task is {task}"
        )
    return input_format


def read_inputs(path: str, task: str, input_format: str | None = None) -> list[dict[str, Any]]:
    """The input file -> one dict per input, with the task's fields and `line`
    (the input line number; a SQuAD file's questions have their `id`). A blank
    line is `{"line": N, "blank": True}`."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"input file not found: {path}")
    input_format = input_format_of(path, task, input_format)
    content = text_files.read_text(path, missing="input file not found")
    if input_format == "squad":
        try:
            return _squad_questions(json.loads(content)["data"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a SQuAD JSON file ({type(e).__name__}: {e})") from None
    rows = []
    required = ("question", "context") if task == "squad" else ("text",)
    for number, line in enumerate(text_files.text_lines(content), start=1):
        if not line.strip():
            rows.append({"line": number, "blank": True})
            continue
        if input_format == "text":
            rows.append({"line": number, "text": line})
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {number}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(
                f"{path}, line {number}: expected a JSON object with "
                f"{list(required)}, got {type(row).__name__}"
            )
        missing = [name for name in required if not isinstance(row.get(name), str)]
        if missing:
            raise ValueError(f"{path}, line {number}: field(s) {missing} missing or not text")
        rows.append({"line": number, **{k: v for k, v in row.items() if k in FIELDS[task]}})
    return rows


def _squad_questions(data):
    return [
        {"id": qa["id"], "question": qa["question"], "context": paragraph["context"]}
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def predictions(
    model: Any,
    task: str,
    rows: list[dict[str, Any]],
    saved: dict[str, Any],
    batch_size: int,
    include_input: bool = False,
) -> Iterator[dict[str, Any]]:
    """The model's answers for the rows, in order, as JSON-able dicts; blank
    rows are answered as blank, in their place. `saved`: the model folder's
    finetune_config.json (a SQuAD model's options, a multi-label classifier's
    `threshold`)."""
    with Progress(len(rows), "inputs", detail="predicting") as bar:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            asked = [row for row in chunk if not row.get("blank")]
            answers = iter(_answers(model, task, asked, saved) if asked else ())
            for row in chunk:
                yield _labelled(row, None if row.get("blank") else next(answers), include_input)
            bar.advance(len(chunk))


def _labelled(row, answer, include_input):
    """`answer` after the row's place (`line`, or a SQuAD question's `id`)."""
    place = {key: row[key] for key in ("line", "id") if key in row}
    if answer is None:
        return {**place, "blank": True}
    answer = {k: v for k, v in answer.items() if k != "id"}
    fields = {k: v for k, v in row.items() if k not in ("line", "id")} if include_input else {}
    return {**place, **fields, **answer}


def _answers(model, task, chunk, saved):
    if task == "squad":
        options = {
            name: saved[name]
            for name in (
                "version_2_with_negative",
                "doc_stride",
                "max_query_length",
                "n_best_size",
                "null_score_diff_threshold",
            )
            if name in saved
        }
        answers = model.predict_answers(
            {"question": [r["question"] for r in chunk], "context": [r["context"] for r in chunk]},
            **options,
        )
        yield from answers
        return
    if task == "tag":
        yield from model.tag([r["text"] for r in chunk])
        return
    if task == "embed":
        embeddings = model.encode([r["text"] for r in chunk], batch_size=len(chunk))
        yield from ({"embedding": [float(x) for x in row]} for row in embeddings)
        return
    # Rows with and without a `text_pair` are packed differently: classify
    # each group on its own, answer in the input order.
    paired = [i for i, r in enumerate(chunk) if r.get("text_pair") is not None]
    single = [i for i, r in enumerate(chunk) if r.get("text_pair") is None]
    answers = {}
    for group, inputs in (
        (single, [chunk[i]["text"] for i in single]),
        (
            paired,
            {
                "text": [chunk[i]["text"] for i in paired],
                "text_pair": [chunk[i]["text_pair"] for i in paired],
            },
        ),
    ):
        if not group:
            continue
        multi_label = getattr(model, "multi_label", False)
        outputs = model.classify(
            inputs, threshold=saved.get("threshold", 0.5) if multi_label else None
        )
        for k, i in enumerate(group):
            if task == "regress":
                answers[i] = {"score": float(outputs["score"][k])}
            else:
                chosen = (
                    {"labels": outputs["labels"][k]}
                    if multi_label
                    else {"label": outputs["label"][k].decode("utf-8")}
                )
                answers[i] = {
                    **chosen,
                    "probabilities": {
                        name: float(p)
                        for name, p in zip(model.answer_names(), outputs["probabilities"][k])
                    },
                }
    yield from (answers[i] for i in range(len(chunk)))


def predict_file(
    model_dir: str,
    input_path: str,
    output_path: str,
    batch_size: int = 32,
    input_format: str | None = None,
    include_input: bool = False,
    threshold: float | None = None,
) -> int:
    """Writes the answers for `input_path` to `output_path` (JSON Lines, one
    per input line, blank lines included); returns the number of lines
    written. The output may not be the input (nor the model folder), and is
    written whole or not at all."""
    safe_output.check_not_input(output_path, [input_path, model_dir], "--output")
    model, saved = load_finetuned(model_dir)
    task = saved["task"]
    if threshold is not None:
        if not saved.get("multi_label"):
            raise ValueError(
                f"--threshold: the model in {model_dir} answers one label per text; "
                "a threshold is for multi-label classifiers (finetune --multi-label)"
            )
        saved = {**saved, "threshold": threshold}
    rows = read_inputs(input_path, task, input_format)
    count = 0
    with safe_output.output_lock(output_path), safe_output.open_replacing(output_path) as out:
        for answer in predictions(model, task, rows, saved, batch_size, include_input):
            out.write(json.dumps(answer, ensure_ascii=False) + "\n")
            count += 1
    return count
