"""torch.library's operators on batched_grad: schemas (schema.py), the operators and their dispatch
(operator.py), opcheck (opcheck.py) and the torch.ops namespaces (namespaces.py)."""
