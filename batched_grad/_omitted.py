"""The public names of torch 2.13 that batched_grad leaves out, by namespace, each with the reason.

tests/test_api_coverage.py reads torch's namespaces and checks that every public name either exists in batched_grad's
counterpart or is listed here, and that no listed name exists (so the list stays current). A differentiable op or an
autograd / func name is listed only with what blocks it here."""

# ---- reasons -------------------------------------------------------------------------------------------------------
SPARSE = "sparse layouts other than COO (CSR, CSC, BSR, BSC) and the sparse ops batched_grad.sparse does not provide"
QUANTIZED = "quantized tensors and quantization kernels: no quantized dtypes or qschemes"
NARROW_DTYPES = "dtypes JAX has no arrays of (complex32, float8/float4, sub-byte and unsigned 16-64-bit integers)"
CUDA = (
    "CUDA/accelerator runtime control (streams, events, IPU/XLA autocast, cuDNN/MIOpen/MKLDNN switches): JAX and XLA "
    "place and compile; there is no per-op kernel or precision switch to set"
)
BACKEND_KERNELS = (
    "backend-specific ATen kernels (cuDNN, MIOpen, MKLDNN, FBGEMM) behind torch's public ops; the public ops are here"
)
DISTRIBUTED = (
    "distributed and multiprocessing machinery (DistributedDataParallel, multi-GPU DataParallel, "
    "shared memory): out of scope"
)
JIT = "TorchScript / FX / torch.compile internals (IR, schemas, symbolic shapes, type comments): out of scope"
COMPILE = (
    "torch.compile's control-flow operators (cond, while_loop): bg.compile traces a step's Python once, so a "
    "loop or branch in it runs as traced; a branch on a tensor's value is refused"
)
STRIDES = (
    "explicit strides of new storage (empty_strided, as_strided_scatter, ...): batched_grad tensors are JAX "
    "arrays without strides; views are recorded as chains of view ops"
)
STORAGE = "storage objects and memory placement (storage(), pinning, shared memory, buffers from files)"
COPY_VARIANTS = (
    "the *_copy functions of functionalization (view_copy, t_copy, ...), for torch's compilers: use the "
    "view op, then .clone()"
)
ATEN_INTERNAL = (
    "ATen-internal kernels and backward helpers (native_*, batch_norm_stats, ...): the public ops they "
    "implement are here"
)
CUDNN_FLAG = (
    "ATen-level duplicates taking backend-selection arguments (cudnn_enabled, ...): use "
    "torch.nn.functional's form, which is here"
)
REMOVED = "removed from torch 2 (calling it raises there): use the torch.linalg function"
DEPRECATED_JIT = "deprecated names kept by torch only for TorchScript: use linalg.vector_norm / linalg.matrix_norm"
THREADS = (
    "the thread-local generator of DataLoader's thread workers (thread_safe_generator): batched_grad's DataLoader "
    "runs its workers as processes"
)
NAMED = "named tensors (names, refine_names): experimental in torch, not implemented"
SPECIAL_FUNCTIONS = (
    "special functions torch does not differentiate (Bessel functions of the second kind, modified Bessel functions "
    "K, Airy Ai, the orthogonal polynomials), which JAX has no forms of: not yet implemented"
)
DISPATCH_KEYS = (
    "torch's dispatcher (dispatch keys, __torch_dispatch__ and re-dispatch below autograd): ops here are JAX's"
)
TRITON = (
    "Triton kernels as operators (triton_op, wrap_triton): Triton compiles GPU kernels, which JAX programs do not call"
)
AUTOCAST_KERNELS = (
    "per-operator autocast registrations (register_autocast): custom operators here run their kernel on the dtypes "
    "given; cast the inputs before the call"
)
INTERNAL = "internal helpers of torch itself (type dispatch, tables of its overridable functions, documentation text)"
LAPACK_RAW = (
    "raw LAPACK pieces of QR (geqrf's Householder form, ormqr): linalg.qr and linalg.householder_product are here"
)
LDL = "LDL^T (Bunch-Kaufman) factorization: JAX has no such factorization; use linalg.solve or cholesky"
RNN = (
    "torch's functional recurrent forms (lstm, gru, rnn_tanh, ..., taking flat weight lists; nn.LSTM's internals): "
    "not provided; the modules nn.RNN, LSTM, GRU and their cells are here"
)
EMBEDDING_BAG_ATEN = (
    "torch.embedding_bag, the ATen form of F.embedding_bag returning its CPU kernel's bookkeeping (offset2bag, "
    "bag_size, max_indices) beside the bags: F.embedding_bag and nn.EmbeddingBag are here"
)
FRACTIONAL = (
    "fractional max pooling (random pooling regions): not yet implemented; max_pool*d and adaptive_max_pool*d are here"
)
RARE_LAYERS = "rarely used layers (CrossMapLRN2d, conv_tbc): not yet implemented; LocalResponseNorm and conv1d are here"
FUSED_NEW = (
    "fused or grouped kernels new in torch 2.x (linear_cross_entropy, grouped_mm, scaled_mm with float8 "
    "scales): not yet implemented; compose F.linear with F.cross_entropy"
)
MEMORY_FORMAT = "memory formats (channels_last): batched_grad tensors have no memory-format choice"
ENGINE_THREADS = (
    "the gradient-layout policy of torch's engine (enforce_grad_layout_policy): .grad has no layout to enforce"
)
STREAM_SETTINGS = "CUDA-stream settings of torch's autograd engine and activation-memory budgets of torch.compile"
REARRANGE = "rearrange (einops patterns on first-class dims): needs an einops pattern parser; not yet implemented"
SELECTIVE_CHECKPOINT = (
    "selective activation checkpointing (a policy choosing per ATen op what to save or recompute): needs "
    "torch's dispatch modes; checkpoint and checkpoint_sequential, both variants, are here"
)
CALLGRIND = (
    "Callgrind instruction counts (Timer.collect_callgrind and its stats): torch runs the statement under valgrind "
    "with its own C++ bindings; batched_grad's Timer measures wall time"
)
SPARSE_FUZZER = (
    "torch.utils.benchmark's sparse fuzzer (FuzzedSparseTensor, and numbers.Number, which its module re-exports): "
    "batched_grad tensors are dense JAX arrays; Fuzzer and FuzzedTensor are here"
)
NESTED_IO = "NestedIOFunction: torch's legacy autograd.Function with nested inputs; use autograd.Function"


def _names(reason, names):
    return dict.fromkeys(names.split(), reason)


DATAPIPES = (
    "torchdata's DataPipes (IterDataPipe, MapDataPipe and their decorators and type validation), frozen in torch "
    "and superseded by Dataset + DataLoader, which are here"
)

OMITTED = {
    "torch": {
        **_names(
            SPARSE,
            """sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor
            sparse_compressed_tensor resize_as_sparse_ smm dsmm hsmm hspmm sspaddmm saddmm ccol_indices_copy
            col_indices_copy crow_indices_copy row_indices_copy indices_copy values_copy segment_reduce""",
        ),
        **_names(
            QUANTIZED,
            """quantize_per_tensor quantize_per_tensor_dynamic quantize_per_channel dequantize int_repr
            q_scale q_zero_point q_per_channel_scales q_per_channel_zero_points q_per_channel_axis quantized_batch_norm
            quantized_gru quantized_gru_cell quantized_lstm quantized_lstm_cell quantized_max_pool1d
            quantized_max_pool2d quantized_max_pool3d quantized_rnn_relu_cell quantized_rnn_tanh_cell
            fused_moving_avg_obs_fake_quant
            choose_qparams_optimized empty_quantized qint8 qint32 quint8 quint4x2 quint2x4""",
        ),
        **_names(
            NARROW_DTYPES,
            """complex32 chalf float8_e4m3fn float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz
            float8_e8m0fnu float4_e2m1fn_x2 bits1x8 bits2x4 bits4x2 bits8 bits16 bit uint1 uint2 uint3 uint4 uint5
            uint6 uint7 uint16 uint32 uint64 int1 int2 int3 int4 int5 int6 int7""",
        ),
        **_names(
            CUDA,
            """get_autocast_ipu_dtype get_autocast_xla_dtype is_autocast_ipu_enabled is_autocast_xla_enabled
            set_autocast_ipu_dtype set_autocast_ipu_enabled set_autocast_xla_dtype set_autocast_xla_enabled
            cudnn_is_acceptable is_vulkan_available get_device_module
            profiler_allow_cudagraph_cupti_lazy_reinit_cuda12""",
        ),
        **_names(
            BACKEND_KERNELS,
            """cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution
            cudnn_convolution_add_relu cudnn_convolution_relu cudnn_convolution_transpose cudnn_grid_sampler
            miopen_batch_norm miopen_convolution miopen_convolution_add_relu miopen_convolution_relu
            miopen_convolution_transpose miopen_ctc_loss miopen_depthwise_convolution miopen_rnn
            mkldnn_adaptive_avg_pool2d mkldnn_convolution mkldnn_linear_backward_weights mkldnn_max_pool2d
            mkldnn_max_pool3d mkldnn_rnn_layer fbgemm_linear_fp16_weight fbgemm_linear_fp16_weight_fp32_activation
            fbgemm_linear_int8_weight fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight
            fbgemm_pack_gemm_matrix_fp16 fbgemm_pack_quantized_matrix""",
        ),
        **_names(DISTRIBUTED, "is_distributed prepare_multiprocessing_environment"),
        **_names(
            JIT,
            """fork wait import_ir_module import_ir_module_from_buffer parse_ir parse_schema
            parse_type_comment merge_type_from_type_comment unify_type_list sym_constrain_range
            sym_constrain_range_for_size sym_float sym_fresh_size sym_int sym_ite sym_max sym_min sym_not sym_sqrt
            sym_sum compiled_with_cxx11_abi""",
        ),
        **_names(COMPILE, "cond while_loop"),
        **_names(STRIDES, "as_strided_scatter empty_strided empty_permuted"),
        **_names(STORAGE, "is_storage from_file frombuffer get_file_path"),
        **_names(
            COPY_VARIANTS,
            """alias_copy as_strided_copy detach_copy diagonal_copy expand_copy narrow_copy
            permute_copy select_copy slice_copy split_copy split_with_sizes_copy squeeze_copy t_copy transpose_copy
            unbind_copy unfold_copy unsqueeze_copy view_as_complex_copy view_as_real_copy view_copy slice_inverse""",
        ),
        **_names(
            ATEN_INTERNAL,
            """batch_norm_backward_elemt batch_norm_backward_reduce batch_norm_elemt
            batch_norm_gather_stats batch_norm_gather_stats_with_counts batch_norm_stats batch_norm_update_stats
            native_batch_norm native_channel_shuffle native_dropout native_group_norm native_layer_norm native_norm
            norm_except_dim""",
        ),
        **_names(CUDNN_FLAG, "batch_norm group_norm instance_norm"),
        **_names(REMOVED, "eig lstsq matrix_rank solve symeig"),
        **_names(DEPRECATED_JIT, "frobenius_norm nuclear_norm"),
        **_names(THREADS, "thread_safe_generator"),
        **_names(INTERNAL, "classproperty hash_tensor"),
        **_names(LAPACK_RAW, "geqrf ormqr"),
        **_names(RNN, "lstm lstm_cell gru gru_cell rnn_relu rnn_relu_cell rnn_tanh rnn_tanh_cell"),
        **_names(EMBEDDING_BAG_ATEN, "embedding_bag"),
        **_names(RARE_LAYERS, "conv_tbc"),
    },
    "torch.Tensor": {
        **_names(
            SPARSE,
            """crow_indices col_indices ccol_indices row_indices
            sparse_resize_ sparse_resize_and_clear_ resize_as_sparse_
            to_sparse_csr to_sparse_csc to_sparse_bsr to_sparse_bsc smm sspaddmm""",
        ),
        **_names(
            QUANTIZED,
            """dequantize int_repr q_scale q_zero_point q_per_channel_scales q_per_channel_zero_points
            q_per_channel_axis qscheme""",
        ),
        **_names(NARROW_DTYPES, "chalf"),
        **_names(CUDA, "xpu ipu mtia record_stream to_mkldnn"),
        **_names(DISTRIBUTED, "is_distributed share_memory_ is_shared"),
        **_names(
            STRIDES,
            "as_strided_scatter new_empty_strided",
        ),
        **_names(STORAGE, "storage untyped_storage storage_type pin_memory is_pinned module_load"),
        **_names(COPY_VARIANTS, "narrow_copy slice_inverse"),
        **_names(REMOVED, "eig lstsq solve symeig"),
        **_names(NAMED, "name"),
        **_names(INTERNAL, "index hash_tensor to_padded_tensor"),
        **_names(LAPACK_RAW, "geqrf ormqr"),
    },
    "torch.nn": {
        **_names(FRACTIONAL, "FractionalMaxPool2d FractionalMaxPool3d"),
        **_names(RARE_LAYERS, "CrossMapLRN2d"),
        **_names(FUSED_NEW, "LinearCrossEntropyLoss LinearCrossEntropyOptions"),
    },
    "torch.nn.functional": {
        **_names(
            FRACTIONAL,
            """fractional_max_pool2d fractional_max_pool2d_with_indices fractional_max_pool3d
            fractional_max_pool3d_with_indices""",
        ),
        **_names(RARE_LAYERS, "conv_tbc"),
        **_names(FUSED_NEW, "linear_cross_entropy grouped_mm scaled_mm scaled_grouped_mm"),
        **_names(ATEN_INTERNAL, "native_channel_shuffle"),
        **_names(
            INTERNAL,
            """handle_torch_function has_torch_function has_torch_function_unary
            has_torch_function_variadic boolean_dispatch assert_int_or_pair""",
        ),
    },
    "torch.nn.init": {},
    "torch.nn.utils": {
        **_names(MEMORY_FORMAT, "convert_conv2d_weight_memory_format convert_conv3d_weight_memory_format"),
    },
    "torch.nn.utils.parametrize": {},
    "torch.nn.utils.parametrizations": {},
    "torch.fft": {},
    "torch.special": {
        **_names(
            SPECIAL_FUNCTIONS,
            """airy_ai bessel_y0 bessel_y1 modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0
            scaled_modified_bessel_k1 chebyshev_polynomial_t chebyshev_polynomial_u chebyshev_polynomial_v
            chebyshev_polynomial_w shifted_chebyshev_polynomial_t shifted_chebyshev_polynomial_u
            shifted_chebyshev_polynomial_v shifted_chebyshev_polynomial_w hermite_polynomial_h hermite_polynomial_he
            laguerre_polynomial_l legendre_polynomial_p""",
        ),
    },
    "torch.linalg": {
        **_names(LDL, "ldl_factor ldl_factor_ex ldl_solve"),
        **_names(INTERNAL, "common_notes"),
    },
    "torch.optim": {},
    "torch.optim.lr_scheduler": {},
    "torch.optim.swa_utils": {},
    "torch.autograd": {
        **_names(ENGINE_THREADS, "enforce_grad_layout_policy"),
        **_names(NESTED_IO, "NestedIOFunction"),
    },
    "torch.autograd.functional": {},
    "torch.autograd.graph": {
        **_names(
            STREAM_SETTINGS,
            """region_activation_memory_budget set_override_stale_capture_stream
            set_warn_on_accumulate_grad_stream_mismatch""",
        ),
    },
    "torch.utils.data": {
        **_names(
            DATAPIPES,
            """DFIterDataPipe DataChunk IterDataPipe MapDataPipe functional_datapipe guaranteed_datapipes_determinism
            non_deterministic runtime_validation runtime_validation_disabled argument_validation""",
        ),
    },
    "torch.amp": {},
    "torch.utils.checkpoint": {
        **_names(
            SELECTIVE_CHECKPOINT,
            "CheckpointPolicy SelectiveCheckpointContext create_selective_checkpoint_contexts SAC_IGNORED_OPS",
        ),
    },
    "torch.func": {
        **_names(REARRANGE, "rearrange"),
    },
    "torch.nn.utils.prune": {},
    "torch.nn.utils.stateless": {},
    "torch.nn.utils.init": {},
    "torch.utils.dlpack": {},
    "torch.utils.benchmark": {
        **_names(CALLGRIND, "CallgrindStats CopyIfCallgrind FunctionCount FunctionCounts"),
        **_names(SPARSE_FUZZER, "FuzzedSparseTensor Number"),
    },
    "torch.nn.parallel": {
        **_names(DISTRIBUTED, "replicate scatter gather parallel_apply"),
    },
    "torch.distributions": {},
    "torch.library": {
        **_names(DISPATCH_KEYS, "fallthrough_kernel get_kernel register_torch_dispatch"),
        **_names(TRITON, "triton_op wrap_triton"),
        **_names(AUTOCAST_KERNELS, "register_autocast"),
    },
    "torch.overrides": {
        **_names(INTERNAL, "get_ignored_functions get_overridable_functions get_testing_overrides resolve_name"),
        **_names(DISPATCH_KEYS, "enable_reentrant_dispatch redispatch_function"),
    },
}


# ---- whole torch submodules out of scope --------------------------------------------------------------------------
# tests/test_usage_coverage.py counts a used torch name under one of these prefixes as accounted for (a user would
# accept it as out of scope for an autograd front end on JAX/XLA).
ONNX = "torch.onnx export: batched_grad programs are JAX programs; export them with JAX's tools"
PRIVATE = "torch's private internals (torch._C, _cast_*): not an API, replaced by public ones"
OUT_OF_SCOPE_MODULES = {
    "torch._C": PRIVATE,
    "torch._cast_Long": PRIVATE,
    "torch.cuda.Stream": CUDA,
    "torch.cuda.Event": CUDA,
    "torch.cuda.stream": CUDA,
    "torch.ao": QUANTIZED,
    "torch.quantization": QUANTIZED,
    "torch.distributed": DISTRIBUTED,
    "torch.multiprocessing": DISTRIBUTED,
    "torch.jit": JIT,
    "torch.fx": JIT,
    "torch.onnx": ONNX,
}
