"""torch.onnx's names that programs touch outside an export: the module imports, is_in_onnx_export() is False
(nothing here ever runs inside an ONNX export), and export itself is refused with torch's exporter error, since a
batched_grad program is a JAX program (export it with JAX's tools)."""


class OnnxExporterError(RuntimeError):
    """torch.onnx's error for a failed export (a RuntimeError, as torch's)."""


def is_in_onnx_export():
    """False: no ONNX export ever runs here, so code guarded by it takes its ordinary path."""
    return False


def export(model, args=(), f=None, **kwargs):
    """Refused: batched_grad cannot write ONNX graphs."""
    raise OnnxExporterError(
        f"torch.onnx.export of {type(model).__name__}: batched_grad programs are JAX programs and cannot be exported "
        "to ONNX here; export them with JAX's tools (jax.export)"
    )
