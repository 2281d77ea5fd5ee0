"""Coverage of real code: how much of the torch API that public autograd-heavy PyTorch code uses batched_grad has.

tests/torch_usage.tsv counts, for each torch name, the public source files using it (made by tools/usage_table.py;
its header says from how many files). A name counts as covered when batched_grad has it (`torch.X.Y` ->
`batched_grad.X.Y`, `Tensor.m` -> `batched_grad.Tensor.m`, `functorch.X` -> `batched_grad.func.X`, importing
submodules as needed), or when batched_grad/_omitted.py lists it with a reason (by namespace, or a whole torch
submodule in OUT_OF_SCOPE_MODULES). The figure is weighted by use: the file counts of covered names over the file
counts of all names used in at least MIN_FILES files. `python tests/test_usage_coverage.py` prints it and the
missing names."""

import importlib
import pathlib

from batched_grad._omitted import OMITTED, OUT_OF_SCOPE_MODULES

TABLE = pathlib.Path(__file__).with_name("torch_usage.tsv")
MIN_FILES = 2
# the weighted coverage measured when the table was made, rounded down; raise it as names are added
THRESHOLD = 0.99


def read_usage():
    """{qualified torch name: number of files using it} from the table."""
    usage = {}
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, files = line.split("\t")
            usage[name] = int(files)
    return usage


def our_path(name):
    """batched_grad's dotted path for a torch name."""
    if name.startswith("Tensor."):
        return "batched_grad." + name
    if name.startswith("functorch."):
        return "batched_grad.func." + name.split(".", 1)[1]
    return "batched_grad" + name[len("torch") :]


def resolves(path):
    """Whether a dotted path names an attribute of an importable module, importing submodules on the way."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: index + 1]))
        except ImportError:
            return False
    return True


def omitted_reason(name):
    """The reason _omitted.py gives for leaving the torch name out, or None."""
    for prefix, reason in OUT_OF_SCOPE_MODULES.items():
        if name == prefix or name.startswith(prefix + "."):
            return reason
    namespace, _, leaf = ("torch." + name if name.startswith("Tensor.") else name).rpartition(".")
    return OMITTED.get(namespace, {}).get(leaf)


def is_covered(name):
    return resolves(our_path(name)) or omitted_reason(name) is not None


def weighted_coverage(usage):
    """(covered file counts / all file counts over names used in MIN_FILES files or more, missing names by use)."""
    counted = {name: files for name, files in usage.items() if files >= MIN_FILES}
    missing = {name: files for name, files in counted.items() if not is_covered(name)}
    total = sum(counted.values())
    ratio = (total - sum(missing.values())) / total
    return ratio, sorted(missing.items(), key=lambda item: (-item[1], item[0]))


def test_table_is_present_and_counts_files():
    usage = read_usage()
    assert "torch.autograd.grad" in usage and all(files >= 1 for files in usage.values())


def test_the_usage_weighted_coverage_reaches_the_threshold():
    ratio, missing = weighted_coverage(read_usage())
    listing = ", ".join(f"{name} ({files})" for name, files in missing)
    assert ratio >= THRESHOLD, (
        f"coverage of real code {ratio:.1%} < {THRESHOLD:.0%}; missing, most used first: {listing}"
    )


def test_resolution_and_omissions_are_consulted():
    assert is_covered("torch.autograd.grad") and is_covered("Tensor.detach")
    assert omitted_reason("torch.distributed.all_reduce") is not None
    assert omitted_reason("torch.sparse_csr_tensor") is not None
    assert not resolves("batched_grad.no_such_name")


if __name__ == "__main__":
    ratio, missing = weighted_coverage(read_usage())
    print(f"usage-weighted coverage: {ratio:.1%}")
    for name, files in missing:
        print(f"{files}\t{name}")
