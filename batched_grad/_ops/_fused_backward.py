"""Op.fused: how torch's backward of an op is one node that reads the op's inputs for every gradient.

torch records a first-order gradient taken with create_graph=True as the node of the op's backward kernel
(native_layer_norm_backward, convolution_backward, threshold_backward, ...), which reads every input it was given
and the cotangent: each gradient requires grad when any of them does, whatever its math reads (a bias's gradient,
the sum of the cotangent, still requires grad through the input). Where torch's derivative is instead a
composition of differentiable ops, a gradient links only to what it reads, as the jaxpr walk finds (_reads.py)."""

from collections.abc import Callable
from typing import NamedTuple


class Fused(NamedTuple):
    """torch's backward node of an op. `bias`: a function of the op's Signature giving the index of its bias operand
    (None where it has none): its gradient, the cotangent summed, depends on nothing else. `reads_bias`: whether the
    node reads the bias (convolution_backward and native_batch_norm_backward take only its size, so a gradient
    links to the bias only where its math reads it). `apart`: a function of the Signature giving the operands
    whose gradients torch computes apart from the node, by differentiable ops, so that each links only to what it
    reads (group_norm's twice-differentiable backward sums the cotangent for the bias; copysign's `other` gets
    zeros). `zeros`: the node's own derivative gives zeros, not None, for an input a gradient does not depend on
    (as nll_loss_backward's `self: zeros_like(grad)`), so a second-order gradient is defined wherever the first
    links."""

    bias: Callable | None = None
    reads_bias: bool = True
    apart: Callable | None = None
    zeros: bool = False

    def bias_of(self, sig):
        return None if self.bias is None else self.bias(sig)

    def links(self, sig):
        """Per operand of the op, a bitmask of the operands its gradient links to besides those it reads."""
        n, bias = len(sig.avals), self.bias_of(sig)
        read = (1 << n) - 1
        if bias is not None and not self.reads_bias:
            read &= ~(1 << bias)
        apart = () if self.apart is None else self.apart(sig)
        return tuple([0 if i in apart else read for i in range(n)])


FUSED, FUSED_ZEROS = Fused(), Fused(zeros=True)


def last_operand_if(has_bias):
    """A Fused.bias for an op whose bias, when `has_bias(sig)`, is its last operand."""
    return lambda sig: len(sig.avals) - 1 if has_bias(sig) else None
