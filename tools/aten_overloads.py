"""Write batched_grad/_library/aten_overloads.json: torch's overload names of each aten operator (torch.ops.aten),
for the operators batched_grad has a function or Tensor method of. Run with torch installed, after adding ops."""

import json
import pathlib

import torch

import batched_grad


def overloads():
    """{name: torch.ops.aten.<name>.overloads()} for the aten operators batched_grad has under their name."""
    names = {schema.name.partition("::")[2] for schema in torch._C._jit_get_all_schemas()}
    table = {}
    for name in sorted(names):
        if not (hasattr(batched_grad, name) or hasattr(batched_grad.Tensor, name)):
            continue
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None:
            table[name] = packet.overloads()
    return table


if __name__ == "__main__":
    path = pathlib.Path(batched_grad.__file__).parent / "_library" / "aten_overloads.json"
    lines = [f"{json.dumps(name)}: {json.dumps(names)}" for name, names in overloads().items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
