"""The task families of `keras-bert finetune`: what differs between them,
and nothing else.

Each family says which reader (`keras_bert.datasets.readers`) turns a source
(a file, `tfds:` name or in-memory data) into the (x, y) a Keras script would
pass to the task model's `fit`, which task model trains on it, the figure that
picks the best epoch, and the model's official dev figures (its `score`).
Training itself is the task model's own `fit` (`finetuning_run`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras

from keras_bert.datasets import readers, retrieval
from keras_bert.models import contrastive
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.sentence_encoder import BertSentenceEncoder, sentence_transformer_folder
from keras_bert.models.span_extractor import BertSpanExtractor
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.preprocessing.preprocessor import BertPreprocessor


class TaskFamily:
    """What differs between the families, and nothing else: which reader
    (`keras_bert.datasets.readers`) turns a source into `fit`'s (x, y), which
    task model trains on it, and that model's official dev figures
    (its `score`). Training itself is the task model's own `fit`."""

    label_names = None

    def __init__(self, config: Any) -> None:
        self.config = config

    def read(self, source: Any, limit: int | None = None, training: bool = False) -> Any:
        """A source -> the data `fit_data` / `score` take."""
        raise NotImplementedError

    def read_part(
        self, source: Any, limit: int | None = None, training: bool = False
    ) -> tuple[Any, int, int]:
        """`read`'s data cut to its first `limit` examples, with how many it
        holds and how many the source has: (data, used, total), so that what
        is scored (or trained on) of a file is said, never silently a part."""
        data = self.read(source, None, training)
        total = self.count(data)
        if limit is not None and limit < total:
            return self.head(data, limit), limit, total
        return data, total, total

    def count(self, data: Any) -> int:
        """Examples in `read`'s data (rows, sentences, questions)."""
        return len(data[1])

    def head(self, data: Any, n: int) -> Any:
        """`read`'s data cut to its first `n` examples."""
        x, y = data
        x = tuple(part[:n] for part in x) if isinstance(x, tuple) else x[:n]
        return x, y[:n]

    def fit_data(self, data: Any) -> tuple[Any, Any]:
        """`read`'s data -> (x, y) as the task model's `fit` takes them."""
        return data

    def build_model(self, encoder: BertEncoder, preprocessor: BertPreprocessor) -> keras.Model:
        raise NotImplementedError

    def compile_options(self) -> dict[str, Any]:
        """What the task model's `compile` takes beyond the run's optimizer
        (the loss where the task model has several)."""
        return {}

    def score(self, model: keras.Model, data: Any) -> dict[str, Any]:
        raise NotImplementedError


class Classification(TaskFamily):
    """classify / regress on tables or GLUE: texts (or pairs) and labels."""

    def __init__(self, config):
        super().__init__(config)
        self.regression = config.task == "regress"
        self.multi_label = config.multi_label
        self.glue_name = None
        if config.glue_task:
            from keras_bert.datasets.glue import get_task

            self.glue_name, glue_task = get_task(config.glue_task)
            if glue_task.regression != self.regression:
                raise ValueError(
                    f"GLUE task {self.glue_name} needs --task "
                    f"{'regress' if glue_task.regression else 'classify'}"
                )
            self.metric = glue_task.metric
            if not self.regression:
                self.label_names = list(glue_task.label_names)
        else:
            self.metric = "pearson" if self.regression else "accuracy"
            if self.multi_label:
                self.metric = "f1_micro"
            if not self.regression:
                self.label_names = config.label_names

    @property
    def primary_metric(self):
        return self.metric

    def read(self, source, limit=None, training=False):
        from keras_bert.datasets.text_classification import (
            label_vocabulary,
            several_labels_error,
        )

        separator = self.config.label_separator
        x, labels = readers.read_texts_and_labels(
            source,
            regression=self.regression,
            glue_task=self.glue_name,
            text_columns=self.config.text_columns,
            label_column=self.config.label_column,
            limit=limit,
            label_separator=separator if self.multi_label else None,
        )
        # Each label name once: a multi-label row's names count one by one.
        names = [n for row in labels for n in row] if self.multi_label else labels
        if not self.regression and not self.multi_label and self.glue_name is None:
            for i, label in enumerate(labels):
                error = several_labels_error(
                    f"{readers.source_name(source)}, row {i + 1}", label, separator
                )
                if error:
                    raise ValueError(error)
        if training and self.label_names is None and not self.regression:
            self.label_names = label_vocabulary(names)
            if not self.label_names:
                raise ValueError(
                    f"{readers.source_name(source)}: no row has a label (a multi-label "
                    "classifier learns the labels it sees)"
                )
        if not self.regression:
            unknown = sorted(set(map(str, names)) - set(self.label_names))
            if unknown:
                raise ValueError(
                    f"{readers.source_name(source)}: label(s) {unknown[:5]} not "
                    f"among {self.label_names}"
                )
        self._check_same_text_columns(x, source, training)
        return x, labels

    def _check_same_text_columns(self, x, source, training):
        """Dev must have the training data's text columns: a model trained on
        pairs scored on single texts (or the reverse) answers input it never saw."""
        columns = 2 if isinstance(x, tuple) else 1
        if training:
            self.train_columns = (columns, readers.source_name(source))
            return
        trained = getattr(self, "train_columns", None)
        if trained is not None and trained[0] != columns:

            def says(count):
                return "two text columns (sentence pairs)" if count == 2 else "one text column"

            raise ValueError(
                f"{readers.source_name(source)} has {says(columns)} but the training data "
                f"{trained[1]} has {says(trained[0])}: give both the same text columns "
                "(--text-columns names them)"
            )

    def build_model(self, encoder, preprocessor):
        return BertClassifier(
            encoder,
            1 if self.regression else len(self.label_names),
            dropout=self.config.dropout,
            label_names=self.label_names,
            preprocessor=preprocessor,
            multi_label=self.multi_label,
        )

    def score(self, model, data):
        if self.multi_label:
            return model.score(
                *data, batch_size=self.config.eval_batch_size, threshold=self.config.threshold
            )
        return model.score(*data, glue_task=self.glue_name, batch_size=self.config.eval_batch_size)


class Tagging(TaskFamily):
    """tag: CoNLL files or tfds:conll2003: words and one tag per word."""

    primary_metric = "f1"

    def __init__(self, config):
        super().__init__(config)
        self.label_names = config.label_names

    def read(self, source, limit=None, training=False):
        from keras_bert.datasets.tagging import tag_vocabulary

        words, tags = readers.read_words_and_tags(source, limit)
        if training and self.label_names is None:
            self.label_names = tag_vocabulary(tags)
        return words, tags

    def build_model(self, encoder, preprocessor):
        return BertTokenClassifier(
            encoder,
            len(self.label_names),
            dropout=self.config.dropout,
            label_names=self.label_names,
            preprocessor=preprocessor,
        )

    def score(self, model, data):
        return model.score(*data, batch_size=self.config.eval_batch_size)


class Squad(TaskFamily):
    """squad: SQuAD JSON files or tfds:squad/<version>:<split>."""

    def read(self, source, limit=None, training=False):
        return readers.read_squad_data(source, limit), readers.source_name(source)

    def count(self, data):
        dataset, _ = data
        return sum(len(p["qas"]) for article in dataset for p in article["paragraphs"])

    def head(self, data, n):
        dataset, source = data
        return readers.first_questions(dataset, n), source

    def fit_data(self, data):
        dataset, source = data
        return readers.squad_questions_and_answers(dataset, source)

    @property
    def primary_metric(self):
        return "best_f1" if self.config.version_2_with_negative else "f1"

    def build_model(self, encoder, preprocessor):
        config = self.config
        return BertSpanExtractor(
            encoder,
            max_answer_length=config.max_answer_length,
            max_query_length=config.max_query_length,
            doc_stride=config.doc_stride,
            preprocessor=preprocessor,
        )

    def options(self):
        config = self.config
        return {
            "version_2_with_negative": config.version_2_with_negative,
            "n_best_size": config.n_best_size,
            "null_score_diff_threshold": config.null_score_diff_threshold,
            "batch_size": config.eval_batch_size,
        }

    def score(self, model, data):
        dataset, source = data
        return model.score(dataset, source=source, **self.options())


class Embedding(TaskFamily):
    """embed: rows of texts, (anchor, positive[, negative]) or scored pairs,
    training a `BertSentenceEncoder` contrastively; dev scores retrieval
    (each anchor queries every positive: MRR@10 picks the best epoch) or, for
    scored pairs, the Spearman correlation of cosines and scores."""

    def __init__(self, config):
        super().__init__(config)
        self.train_scored = self.dev_scored = None

    def read(self, source, limit=None, training=False):
        config = self.config
        # label_column is "label" unless given; a numeric `score` / `label` column is found anyway.
        score_column = None if config.label_column == "label" else config.label_column
        rows = readers.read_text_rows(source, config.text_columns, score_column, limit)
        scored = rows.scores is not None
        if training:
            self.train_scored = scored
            self._check_loss(rows, readers.source_name(source))
        else:
            self.dev_scored = scored
        return rows

    def count(self, rows):
        return len(rows)

    def head(self, rows, n):
        return dataclasses.replace(
            rows,
            columns=[column[:n] for column in rows.columns],
            scores=None if rows.scores is None else rows.scores[:n],
        )

    def _check_loss(self, rows, source):
        loss = self.loss_name()
        if (loss == "cosent") != (rows.scores is not None):
            raise ValueError(
                f"{source}: embedding_loss {loss} trains on "
                f"{'scored pairs (text, text, score)' if loss == 'cosent' else 'rows of texts'}"
                f", but the rows are {'scored pairs' if rows.scores is not None else 'not scored'}"
                f" (columns {rows.names}); set embedding_loss to "
                f"{'cosent' if rows.scores is not None else 'multiple_negatives_ranking'} "
                "or auto"
            )

    def loss_name(self):
        if self.config.embedding_loss != "auto":
            return self.config.embedding_loss
        return "cosent" if self.train_scored else "multiple_negatives_ranking"

    @property
    def primary_metric(self):
        scored = self.dev_scored if self.dev_scored is not None else self.train_scored
        return "spearman_cosine" if scored else "mrr@10"

    def fit_data(self, rows):
        return rows.fit_inputs()

    def build_model(self, encoder, preprocessor):
        settings = {
            name: value
            for name, value in (
                ("pooling", self.config.pooling),
                ("normalize", self.config.normalize),
            )
            if value is not None
        }
        folder = sentence_transformer_folder(self.config.init_checkpoint)
        return BertSentenceEncoder.from_encoder(encoder, preprocessor, folder, **settings)

    def compile_options(self):
        config = self.config
        name = self.loss_name()
        if name == "cosent":
            loss = contrastive.CoSENTLoss(config.loss_scale, config.mini_batch_size)
        else:
            loss = contrastive.MultipleNegativesRankingLoss(
                config.loss_scale,
                symmetric=name == "multiple_negatives_symmetric_ranking",
                mini_batch_size=config.mini_batch_size,
            )
        return {"loss": loss}

    def score(self, model, rows):
        return retrieval.evaluate_text_rows(
            lambda texts: model.encode(texts, batch_size=self.config.eval_batch_size), rows
        )


def make_task(config: Any) -> TaskFamily:
    """The family of `config.task` (a `FinetuneConfig`)."""
    if config.task in ("classify", "regress"):
        return Classification(config)
    if config.task == "tag":
        return Tagging(config)
    if config.task == "embed":
        return Embedding(config)
    return Squad(config)
