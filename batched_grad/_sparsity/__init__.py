"""Sparse Jacobians and Hessians: patterns detected from the recorded graph (index sets propagated through each
op's jaxpr), colored, computed with one batched call of one seed per color, and returned as SparseMatrix records."""

from ._matrix import SparseMatrix
from ._pattern import Sparsity

__all__ = ["SparseMatrix", "Sparsity"]
