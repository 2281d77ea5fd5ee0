"""torch's CPU rule for a normalization whose parameters (weight, bias, running statistics) have another dtype than
its input (ATen's mixed_type.h): a bfloat16 or float16 input may take float32 parameters, computed in float32 and
returned in the input's dtype; any other mixture is refused with torch's messages. And the half-float dtypes whose
CPU kernels compute in float32 and round once (halves_in_float32)."""

import numpy as np

from .. import _dtypes

REDUCED_FLOATS = (_dtypes.bfloat16, _dtypes.float16)
HALF_ARRAY_DTYPES = (np.dtype("bfloat16"), np.dtype("float16"))  # the arrays' dtypes of REDUCED_FLOATS


def check_norm_parameters(input, *parameters):
    """Refuse what torch refuses; `parameters` in torch's order, None where absent. Mixed is decided by the first
    parameter given: when its dtype is the input's, every other must be too (the kernel reads them as the input's)."""
    given = [p for p in parameters if p is not None]
    if not given:
        return
    if given[0].dtype == input.dtype:
        for p in given[1:]:
            if p.dtype != input.dtype:
                raise RuntimeError(f"expected scalar type {input.dtype.type_name} but found {p.dtype.type_name}")
        return
    if any(p.dtype != _dtypes.float32 for p in given):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if input.dtype not in REDUCED_FLOATS:
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def compute_dtype(x, params):
    """The JAX dtype a normalization computes in: float32 for a reduced-float input with float32 parameters (the
    result is cast back to the input's dtype), else the input's."""
    return params[0].dtype if params and params[0].dtype != x.dtype else x.dtype


def _runs_onednn(input, weight, groups):
    """Whether torch's CPU convolution takes its oneDNN kernel (ATen's use_mkldnn): a bfloat16 input always; a
    float32 one unless the native kernel is faster (one small sample, one group, a small kernel)."""
    if input.dtype == _dtypes.bfloat16:
        return True
    big_kernel = weight.ndim > 3 and weight.shape[-1] > 3 and weight.shape[-2] > 3
    big_input = input.ndim <= 4 and input.numel() > 20480
    return input.dtype == _dtypes.float32 and (groups > 1 or big_kernel or input.shape[0] > 1 or big_input)


def _onednn_refusal(input, what, other):
    def legacy(t):
        return "CPUBFloat16Type" if t.dtype == _dtypes.bfloat16 else t.type()

    return RuntimeError(
        f"Input type ({legacy(input)}) and {what} type ({legacy(other)}) should be the same or input should be a "
        f"MKLDNN tensor and {what} is a dense tensor"
    )


def conv_bias_of_input_dtype(input, weight, bias, groups=1, transposed_dims=0):
    """torch's CPU convolutions given operands of different dtypes, refused in the words of the kernel torch picks;
    a 1-D or 2-D transposed convolution off oneDNN casts a bias of another dtype to the input's instead. Returns
    the bias to use."""
    onednn = _runs_onednn(input, weight, groups)
    bias_differs = bias is not None and bias.dtype != input.dtype
    if bias_differs and not transposed_dims:
        raise RuntimeError(
            f"Input type ({input.dtype.cpp_name}) and bias type ({bias.dtype.cpp_name}) should be the same"
        )
    if weight.dtype != input.dtype:
        if onednn:
            raise _onednn_refusal(input, "weight", weight)
        raise RuntimeError(f"expected scalar type {input.dtype.type_name} but found {weight.dtype.type_name}")
    if bias_differs:
        if onednn:
            raise _onednn_refusal(input, "bias", bias)
        if transposed_dims == 3:
            raise RuntimeError(f"expected scalar type {input.dtype.type_name} but found {bias.dtype.type_name}")
        bias = bias.to(input.dtype)
    return bias


def halves_in_float32(f):
    """The elementwise kernel `f` (of an array and number operands) as torch's CPU kernels run a bfloat16 or float16
    input: in float32, the numbers as float32 values, the result rounded once to the input's dtype."""

    def kernel(a, *numbers, **static):
        if a.dtype not in HALF_ARRAY_DTYPES:
            return f(a, *numbers, **static)
        wide = [x.astype("float32") for x in (a, *numbers)]
        return f(*wide, **static).astype(a.dtype)

    return kernel
