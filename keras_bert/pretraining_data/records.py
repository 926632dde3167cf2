"""tf.Example records in the original feature format, encoded directly (no
TensorFlow in the workers).

Legend for shape comments: N = records.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from keras_bert import features
from keras_bert.pretraining_data.options import Instances, MaskedLm, PretrainingOptions

#
# A tf.train.Example is a small protobuf; encoding it here keeps TensorFlow out of
# the worker processes. Example{features=1: Features{feature=1: map<string,
# Feature>}}, Feature{float_list=2 | int64_list=3}, lists are packed field 1.


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_TABLE_LIMIT = 1 << 21  # values below this take at most 3 varint bytes


def _varint_groups(values, groups_needed):
    """Varint bytes of `values` (..., ) as (..., G) uint8 and their sizes (...,)."""
    shifts = 7 * np.arange(groups_needed)
    groups = ((values[..., np.newaxis] >> shifts) & 0x7F).astype(np.uint8)
    size = np.ones(values.shape, np.int64)
    for k in range(1, groups_needed):
        size += values >= (1 << (7 * k))
    groups |= ((np.arange(groups_needed) < size[..., np.newaxis] - 1) * 0x80).astype(np.uint8)
    return groups, size


def varint_rows(
    values: np.ndarray, table: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) non-negative ints -> (uint8 array of all rows' packed varints, (N + 1,) row offsets).

    `table`: optional precomputed (bytes (M, 3), sizes (M,)) for values below M.
    """
    values = np.asarray(values, np.int64)
    num, width = values.shape
    largest = int(values.max(initial=0))
    if values.size and values.min() < 0:
        raise ValueError("varint_rows encodes non-negative integers")
    if largest < 0x80:  # one byte each: masks, segment ids, short positions, labels
        return values.astype(np.uint8).reshape(-1), np.arange(num + 1) * width
    if table is not None and largest < len(table[1]):
        groups, size = table[0][values], table[1][values]  # (N, K, 3), (N, K)
    else:
        groups, size = _varint_groups(values, (largest.bit_length() + 6) // 7)
    used = np.arange(groups.shape[-1]) < size[..., np.newaxis]
    offsets = np.concatenate([[0], np.cumsum(size.sum(axis=1))])
    return groups[used], offsets


class ExampleEncoder:
    """Encodes rows of non-negative ints / floats as serialized tf.train.Examples.

    The varints of whole (N, K) arrays are computed with NumPy at once. Per
    feature, a record holds a header (it depends only on the payload's length,
    so the few distinct ones are cached) and the payload. Features whose
    payloads have one length in every row become one (N, bytes) array with the
    header in each row, and runs of such features one array; a record is then
    a join of a few slices.
    """

    def __init__(self, table_size: int = 1 << 16) -> None:
        self._headers = {}
        self._table = _varint_groups(np.arange(min(table_size, _TABLE_LIMIT)), 3)

    def _header(self, name, kind, payload_length):
        """Bytes of a map entry up to its packed payload of `payload_length` bytes."""
        key = (name, kind, payload_length)
        header = self._headers.get(key)
        if header is None:
            name_field = b"\x0a" + _varint(len(name)) + name.encode()
            value_list = 1 + len(_varint(payload_length)) + payload_length
            feature = 1 + len(_varint(value_list)) + value_list
            entry = len(name_field) + 1 + len(_varint(feature)) + feature
            header = (
                b"\x0a"
                + _varint(entry)
                + name_field
                + b"\x12"
                + _varint(feature)
                + kind
                + _varint(value_list)
                + b"\x0a"
                + _varint(payload_length)
            )
            self._headers[key] = header
        return header

    def encode_rows(self, features: Sequence[tuple[str, np.ndarray]]) -> list[bytes]:
        """features: (name, (N, K) array) pairs; float32 arrays become float lists -> N records."""
        num = len(features[0][1]) if features else 0
        columns = []  # per run of features: N byte strings
        fixed = None  # (N, bytes) uint8: the current run of same-length features
        body = np.zeros(num, np.int64)  # (N,) bytes of each record after its prefix
        for name, values in features:
            values = np.asarray(values)
            if values.dtype == np.float32:
                payload = np.ascontiguousarray(values, "<f4").view(np.uint8).reshape(-1)
                offsets = np.arange(num + 1) * values.shape[1] * 4
                kind = b"\x12"
            else:
                payload, offsets = varint_rows(values, self._table)
                kind = b"\x1a"
            lengths = np.diff(offsets)
            if num and (lengths == lengths[0]).all():
                header = np.frombuffer(self._header(name, kind, int(lengths[0])), np.uint8)
                rows = np.concatenate(
                    [np.broadcast_to(header, (num, len(header))), payload.reshape(num, -1)], axis=1
                )
                fixed = rows if fixed is None else np.concatenate([fixed, rows], axis=1)
                body += rows.shape[1]
                continue
            if fixed is not None:
                columns.append(_rows_as_bytes(fixed))
                fixed = None
            distinct, which = np.unique(lengths, return_inverse=True)
            headers = [self._header(name, kind, int(n)) for n in distinct]
            body += np.array([len(h) for h in headers], np.int64)[which] + lengths
            data, offsets = payload.tobytes(), offsets.tolist()
            columns.append(
                [
                    headers[h] + data[a:b]
                    for h, a, b in zip(which.tolist(), offsets[:-1], offsets[1:])
                ]
            )
        if fixed is not None:
            columns.append(_rows_as_bytes(fixed))
        # Each record: the Example's field 1 tag, the body's length, the body.
        prefixes = {n: b"\x0a" + _varint(n) for n in np.unique(body).tolist()}
        return [b"".join(parts) for parts in zip([prefixes[n] for n in body.tolist()], *columns)]


def _rows_as_bytes(rows):
    """(N, W) uint8 -> N byte strings of W bytes."""
    width = rows.shape[1]
    data = rows.tobytes()
    return [data[i : i + width] for i in range(0, len(data), width)]


def encode_instances(
    instances: Instances,
    masked: MaskedLm | None,
    options: PretrainingOptions,
    encoder: ExampleEncoder,
) -> list[bytes]:
    """Instances (and their masks, unless unmasked output) -> serialized tf.Examples.

    Features in the original writer's order; `masked=None` writes unmasked
    records (no masked_lm_* features) for dynamic masking at read time.
    """
    seq_length = options.max_seq_length
    input_mask = np.arange(seq_length)[np.newaxis] < instances.lengths[:, np.newaxis]
    columns = [
        masked.input_ids if masked is not None else instances.input_ids,
        input_mask,
        instances.segment_ids,
    ]
    if masked is not None:
        columns += [masked.masked_lm_positions, masked.masked_lm_ids, masked.masked_lm_weights]
    names = features.ENCODER_INPUTS + (features.MASKED_LM_FEATURES if masked is not None else ())
    rows = list(zip(names, columns))
    if options.with_next_sentence:
        rows.append((features.NEXT_SENTENCE_LABELS, instances.next_sentence_labels[:, np.newaxis]))
    return encoder.encode_rows(rows)
