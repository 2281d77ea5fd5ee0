"""torch.nn.utils.rnn: sequences of different lengths padded into one tensor (pad_sequence, unpad_sequence) or
packed time step by time step (PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
unpack_sequence). Everything is made of recorded ops, so gradients flow back to the sequences; the recurrent
modules take a PackedSequence as torch's do."""

from collections import namedtuple

import numpy as np

from ... import _ops
from ..._dtypes import float32, float64
from ..._factories import full, tensor
from ..._tensor import Tensor

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]

NOT_SORTED = (
    "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
    "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do not "
    "need ONNX exportability."
)


def _inverse_permutation(permutation):
    if permutation is None:
        return None
    order = np.asarray(permutation.tolist())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return tensor(inverse)


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Sequences packed by time step: `data` holds step 0 of every sequence, then step 1 of those that long, ...;
    `batch_sizes[t]` is how many sequences have a step t; `sorted_indices` orders the batch by decreasing length
    (None when it was sorted already) and `unsorted_indices` undoes that."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = _inverse_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes, ...)): torch accepts the fields as a tuple
            data, batch_sizes, *rest = data
            sorted_indices = rest[0] if rest else sorted_indices
            unsorted_indices = rest[1] if len(rest) > 1 else _inverse_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The same packing with `data` converted as Tensor.to converts it (the index tensors stay as they are)."""
        data = self.data.to(*args, **kwargs)
        return (
            self
            if data is self.data
            else type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)
        )

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=float64)

    def float(self):
        return self.to(dtype=float32)

    @property
    def is_cuda(self):
        return self.data.is_cuda


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """The sequences (tensors of shape (L_i, *)) padded with `padding_value` to the longest's length and stacked:
    (L, B, *), or (B, L, *) with batch_first; padding goes after each sequence, or before it with "left"."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype)
            s = _ops.cat([s, fill] if padding_side == "right" else [fill, s])
        padded.append(s)
    return _ops.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences that pad_sequence padded: sequence b is its first lengths[b] steps."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[: int(n)] for seq, n in zip(padded_sequences, _lengths_list(lengths))]


def _lengths_list(lengths):
    return [int(n) for n in (lengths.tolist() if isinstance(lengths, Tensor) else lengths)]


def _batch_sizes(lengths):
    """batch_sizes[t]: how many of the (decreasing) lengths exceed t."""
    return [sum(1 for n in lengths if n > t) for t in range(lengths[0])]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ((T, B, *), or (B, T, *) with batch_first) whose sequence b has lengths[b] steps.
    With enforce_sorted the lengths must decrease; else the batch is sorted first (sorted_indices)."""
    lengths = _lengths_list(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(NOT_SORTED)
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda b: -lengths[b])  # stable, as torch's sort
        sorted_indices = tensor(order)
        lengths = [lengths[b] for b in order]
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if any(n <= 0 for n in lengths):
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if batch_first:
        input = input.transpose(0, 1)
    batch_sizes = _batch_sizes(lengths)
    data = _ops.cat([input[t, :size] for t, size in enumerate(batch_sizes)])
    return PackedSequence(data, tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo pack_padded_sequence: (padded batch, lengths), the batch in its original order, padded with
    `padding_value` to the longest length (or `total_length`)."""
    data, batch_sizes = sequence.data, sequence.batch_sizes.tolist()
    longest, n_sequences = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < longest:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {longest}"
            )
        longest = total_length
    steps, offset = [], 0
    for size in batch_sizes:
        step = data[offset : offset + size]
        if size < n_sequences:
            step = _ops.cat([step, full((n_sequences - size, *data.shape[1:]), padding_value, dtype=data.dtype)])
        steps.append(step)
        offset += size
    steps += [full((n_sequences, *data.shape[1:]), padding_value, dtype=data.dtype)] * (longest - len(batch_sizes))
    padded = _ops.stack(steps, 0)
    lengths = tensor([sum(1 for size in batch_sizes if size > b) for b in range(n_sequences)])
    padded = padded.transpose(0, 1) if batch_first else padded
    if sequence.unsorted_indices is not None:  # after the transpose, as torch: the batch-first result is row-major
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices]
    return padded, lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences of shape (L_i, *): pad_sequence then pack_padded_sequence."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences that pack_sequence packed."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
