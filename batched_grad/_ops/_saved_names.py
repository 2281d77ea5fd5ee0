"""What a recorded op's node shows of the values it saved, by the names torch's node of the same op gives them
(`grad_fn._saved_<name>`, `grad_fn._raw_saved_<name>`; _saved.exposed reads them)."""

import numpy as np

from .._saved import SavedValue


def torch_saved(node):
    """{name: SavedValue, None or a number} for an OpNode: the operands its op's `saved_names` name (the first only
    where torch's formula reads the input), the static parameters of `saved_static`, and the results torch saves, as
    `result` (`result<k>` among several) and `indices`."""
    op = node.sig.op
    entries = {}
    for i, name in enumerate(op.saved_names):
        if name is not None and (i > 0 or "input" in op.torch_saves):
            entries[name] = _exposed_operand(node.saved[i])
    static = dict(node.sig.static)
    for name in op.saved_static:
        entries[name] = static[name]
    differentiable = [s for s in node.saved_results if s.requires_grad]
    for s in node.saved_results:
        if not s.requires_grad:
            entries["indices"] = s
        else:
            entries["result" if len(differentiable) == 1 else f"result{s.output_nr}"] = s
    return entries


def _exposed_operand(saved):
    """An operand as torch's node shows it: a saved tensor, None where nothing is saved, or the number of a Scalar
    argument (an operand that is no tensor to torch)."""
    if saved is None or type(saved) is SavedValue:
        return saved
    value = np.asarray(saved)
    return value.item() if value.ndim == 0 else value.tolist()
