"""Count which torch names real code uses: the table behind tests/test_usage_coverage.py.

    python tools/usage_table.py CORPUS_DIR > tests/torch_usage.tsv

CORPUS_DIR holds public PyTorch source files (*.py, any depth), one per file of a project. Each is parsed with `ast`
and yields the set of torch names it uses:
  - torch attribute paths, with imports resolved through their aliases (`import torch.nn as nn`, `from torch
    import optim`, `from torch.autograd import grad`, `from functorch import vmap`, ...), cut after the first
    object that is not a module (`torch.nn.Module.__init__` counts as `torch.nn.Module`); paths torch 2.13 does not
    have are dropped (the code would fail on torch 2.13 too);
  - `Tensor.m` for every attribute `m` read, written or called on any value, when `torch.Tensor` has it (so
    `x.view(...)`, `p.grad`, `x.shape`; a NumPy array's `.sum()` counts too: the parse has no types);
  - `torch.nn.Module.m` and `torch.optim.Optimizer.m` for methods called on any value that those classes have
    and `torch.Tensor` does not (`model.parameters()`, `opt.zero_grad()`).
A file that does not parse as a whole is parsed statement by statement (lines that still fail are skipped), so
excerpts of files count too. The output counts, per name, the distinct files using it; files with the same text
count once.
"""

import ast
import hashlib
import importlib
import pathlib
import sys

import torch
import torch.nn
import torch.optim

# a functorch name is counted under the torch.func name that replaced it, where there is one
_REDIRECTS = {"functorch": "torch.func"}
_OPENERS = {"(": ")", "[": "]", "{": "}"}


def parse_tolerantly(text):
    """The module's AST; for text that does not parse, a Module of the lines that parse one by one (each dedented,
    open brackets closed, a trailing block colon given a body)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        pass
    body = []
    for line in text.splitlines():
        tree = _parse_line(line.strip())
        if tree is not None:
            body.extend(tree.body)
    return ast.Module(body=body, type_ignores=[])


def _parse_line(line):
    if not line or line.startswith("#"):
        return None
    stack = []
    for char in line:
        if char in _OPENERS:
            stack.append(_OPENERS[char])
        elif stack and char == stack[-1]:
            stack.pop()
    candidates = [line, line.rstrip(",") + "".join(reversed(stack)), line.rstrip(":") + ": pass"]
    candidates.append(candidates[1].rstrip(":") + ": pass")
    for candidate in candidates:
        try:
            return ast.parse(candidate)
        except (SyntaxError, ValueError):
            continue
    return None


def import_aliases(tree):
    """{local name: dotted torch path} from the file's imports of torch, its submodules and functorch."""
    aliases = {"torch": "torch"}  # an excerpt may use torch without its import line
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("torch", "functorch"):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in ("torch", "functorch"):
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def dotted_chain(node):
    """['x', 'a', 'b'] for the expression x.a.b, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def resolve_torch_path(parts):
    """The qualified name a torch path denotes in torch 2.13: the prefix up to the first object that is not a module
    (`Tensor.m` for a Tensor member); None for a path torch 2.13 does not have or a bare module."""
    for old, new in _REDIRECTS.items():
        if parts[0] == old and len(parts) > 1 and hasattr(importlib.import_module(new), parts[1]):
            parts = new.split(".") + parts[1:]
    obj = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        child = getattr(obj, part, None)
        if child is None:
            child = _import_submodule(".".join(parts[: index + 1]))
        if child is None:
            return None
        if obj is torch.Tensor:
            return f"Tensor.{part}"
        if not isinstance(child, type(torch)) and not (child is torch.Tensor and index + 1 < len(parts)):
            return ".".join(parts[: index + 1])
        obj = child
    return None


def _import_submodule(name):
    try:
        return importlib.import_module(name)
    except Exception:  # any failure to import means: not a module of this torch
        return None


def _member_name(attr, is_call):
    if attr.startswith("__"):
        return None
    if hasattr(torch.Tensor, attr):
        return f"Tensor.{attr}"
    if is_call and hasattr(torch.nn.Module, attr):
        return f"torch.nn.Module.{attr}"
    if is_call and hasattr(torch.optim.Optimizer, attr):
        return f"torch.optim.Optimizer.{attr}"
    return None


def names_used(text):
    """The set of torch names one file's text uses."""
    tree = parse_tolerantly(text)
    aliases = import_aliases(tree)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or id(node) in inner:
            continue
        chain = dotted_chain(node)
        if chain and chain[0] in aliases:
            resolved = resolve_torch_path(aliases[chain[0]].split(".") + chain[1:])
            if resolved:
                names.add(resolved)
            continue
        if isinstance(node, ast.Attribute):
            names.update(_members_along(node, called))
    return names


def _members_along(node, called):
    """Tensor / Module / Optimizer members named along an attribute chain on a value (x.grad.data.zero_())."""
    found = set()
    while isinstance(node, ast.Attribute):
        on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        name = None if on_self else _member_name(node.attr, id(node) in called)
        if name:
            found.add(name)
        node = node.value
    return found


def usage_counts(corpus):
    """({name: number of distinct files using it}, number of distinct files)."""
    counts, seen = {}, set()
    for path in sorted(pathlib.Path(corpus).rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        for name in names_used(text):
            counts[name] = counts.get(name, 0) + 1
    return counts, len(seen)


def _sources(corpus):
    """The corpus's top-level folders (one per project or package) with their number of .py files."""
    root = pathlib.Path(corpus)
    return [(d.name, sum(1 for _ in d.rglob("*.py"))) for d in sorted(root.iterdir()) if d.is_dir()]


def main(corpus):
    counts, files = usage_counts(corpus)
    print(
        f"# torch names used by {files} public PyTorch source files of autograd-heavy code (higher-order gradients, "
        f"torch.func, per-sample gradients, PINNs, meta-learning, GAN penalties, ...), counted by "
        f"tools/usage_table.py (ast parse, imports resolved, torch {torch.__version__.split('+')[0]})"
    )
    print("# sources (folder: .py files): " + ", ".join(f"{name}: {n}" for name, n in _sources(corpus)))
    print("# name\tfiles")
    for name, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"{name}\t{count}")


if __name__ == "__main__":
    main(sys.argv[1])
