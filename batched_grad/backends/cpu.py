"""torch.backends.cpu: the CPU's vector capability."""


def get_cpu_capability():
    """The SIMD level torch's CPU kernels use: "DEFAULT" here, as XLA compiles for the host itself."""
    return "DEFAULT"
