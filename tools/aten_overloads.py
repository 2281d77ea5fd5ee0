"""Write batched_grad/_library/aten_overloads.json: torch's overload names of each aten operator (torch.ops.aten).
batched_grad.ops.aten offers those batched_grad has a function or Tensor method of (decided when looked up), so
the table follows torch's version only: run this with the torch version batched_grad follows installed."""

import json
import pathlib

import torch

import batched_grad


def overloads():
    """{name: torch.ops.aten.<name>.overloads()} for every public aten operator."""
    names = {schema.name.partition("::")[2] for schema in torch._C._jit_get_all_schemas()}
    table = {}
    for name in sorted(names):
        if name.startswith("_"):
            continue
        packet = getattr(torch.ops.aten, name, None)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            table[name] = packet.overloads()
    return table


if __name__ == "__main__":
    path = pathlib.Path(batched_grad.__file__).parent / "_library" / "aten_overloads.json"
    lines = [f"{json.dumps(name)}: {json.dumps(names)}" for name, names in overloads().items()]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
