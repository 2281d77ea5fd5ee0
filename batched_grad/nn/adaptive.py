"""AdaptiveLogSoftmaxWithLoss (Grave et al., 2016, "Efficient softmax approximation for GPUs"): frequent classes in
a head softmax, rarer ones in clusters whose probability is the head's for the cluster times the cluster's own
softmax, each cluster behind a smaller projection (in_features / div_value**(i + 1))."""

import itertools
from collections import namedtuple

from .._ops import argmax
from .._ops.shape import cat
from . import functional as F
from .basic import Linear
from .containers import ModuleList, Sequential
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _check_cutoffs(cutoffs, n_classes):
    if len(cutoffs) == 0:
        raise ValueError("cutoffs should be a sequence of length larger than 0")
    if (
        cutoffs != sorted(cutoffs)
        or min(cutoffs) <= 0
        or max(cutoffs) > n_classes - 1
        or len(set(cutoffs)) != len(cutoffs)
        or any(int(c) != c for c in cutoffs)
    ):
        raise ValueError(
            "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each "
            "value is between 1 and n_classes-1"
        )


class AdaptiveLogSoftmaxWithLoss(Module):
    """The head predicts the shortlist (classes below cutoffs[0]) and one entry per cluster; forward(input, target)
    gives each target's log-probability and their negated mean, log_prob(input) every class's, predict(input) the
    most probable class."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        _check_cutoffs(cutoffs, n_classes)
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i, (start, stop) in enumerate(itertools.pairwise(self.cutoffs)):
            hidden = int(in_features // div_value ** (i + 1))
            self.tail.append(
                Sequential(
                    Linear(in_features, hidden, bias=False, dtype=dtype),
                    Linear(hidden, stop - start, bias=False, dtype=dtype),
                )
            )
        self._made_on(device)

    def reset_parameters(self):
        """Re-draw the head's and the clusters' weights."""
        self.head.reset_parameters()
        for projection, output in self.tail:
            projection.reset_parameters()
            output.reset_parameters()

    def _check(self, input, target):
        if target.ndim == 1:
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input.ndim != 2:
                raise RuntimeError(
                    f"1D target tensor expects 2D input tensors, but found inputs with size {input.size()}"
                )
        elif target.ndim == 0:
            if input.ndim != 1:
                raise RuntimeError(
                    f"0D target tensor expects 1D input tensors, but found inputs with size {input.size()}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")

    def forward(self, input_, target_):
        self._check(input_, target_)
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        output = input.new_zeros(target.shape[0])
        head_columns = target.clone()  # the head's column each row reads: its class, or its cluster's entry
        found = 0
        for i, (low, high) in enumerate(itertools.pairwise([0] + self.cutoffs)):
            rows = ((target >= low) & (target < high)).nonzero().squeeze(1)
            found += rows.numel()
            if i == 0 or rows.numel() == 0:
                continue
            cluster = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            within = cluster.gather(1, (target.index_select(0, rows) - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, within)
            head_columns = head_columns.index_fill(0, rows, self.shortlist_size + i - 1)
        if found != target.shape[0]:
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range [{target.min().item()}, "
                f"{target.max().item()}] were found. "
            )
        head = F.log_softmax(self.head(input), dim=1)
        output = output + head.gather(1, head_columns.unsqueeze(1)).squeeze(1)
        return _ASMoutput(output if batched else output.squeeze(0), (-output).mean())

    def _full_log_prob(self, input, head_output):
        head = F.log_softmax(head_output, dim=1)
        parts = [head[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input):
        """The log-probability of every class, (N, n_classes)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row: from the head alone where it picks a shortlist class."""
        head_output = self.head(input)
        output = argmax(head_output, dim=1)
        outside = output >= self.shortlist_size
        if not outside.any():
            return output
        if outside.all():
            return argmax(self._full_log_prob(input, head_output), dim=1)
        output[outside] = argmax(self._full_log_prob(input[outside], head_output[outside]), dim=1)
        return output
