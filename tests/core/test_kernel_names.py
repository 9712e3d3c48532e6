"""Kernel-name keys on real names: trace names from ../shared/corpus traces, ncu names from
../shared/corpus/ncu exports (copied here as short strings, not files)."""
from __future__ import annotations

import glob

import pytest

from etl.core.kernel_names import keys_of, mangled_base, name_similarity, strip_parameters
from tests.conftest import CORPUS
from tests.match import synth

# (name as a profiler printed it, base, full key)
REAL_NAMES = [
    # ncu details page, a100_details_cmdline-metrics_gardenia_gemm.csv (generic parameters)
    ("void gemm_v0<float>(T1 *, T1 *, T1 *, int, int, int)", "gemm_v0", "gemm_v0<float>"),
    ("void randomInit<float>(T1 *, int, int, unsigned int)", "randomInit", "randomInit<float>"),
    # trace: hta/trace_diff/control
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1>)", "vectorized_elementwise_kernel",
     "at::native::vectorized_elementwise_kernel<4,at::native::FillFunctor<float>,"
     "at::detail::Array<char*,1>>"),
    # trace: other/tracelens/b200 (a '>' comparison inside the return type's parentheses)
    ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
     "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
     "c10::BFloat16 const*, float, int, int)", "fused_add_rms_norm_kernel", None),
    # trace: hta/ns_resolution_trace (cuBLAS, enable_if return type)
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
     "float, float, false, true, false, false, 7, cublasGemvParams<cublasGemvTensorStrided"
     "Batched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensor"
     "StridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float "
     "const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched"
     "<float>, float>)", "kernel", None),
    ("cask_cudnn_infer::computeBOffsetsKernel(cask_cudnn_infer::ComputeBOffsetsParams)",
     "computeBOffsetsKernel", "cask_cudnn_infer::computeBOffsetsKernel"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, "
     "128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, "
     "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned "
     "int, 4u>, int, unsigned int)", "CatArrayBatchedCopy",
     "at::native::(anonymousnamespace)::CatArrayBatchedCopy<float,unsignedint,2,128,1>"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
     "ncclKernel_AllReduce_RING_LL_Sum_float", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("triton__0d1d2d3d", "triton__0d1d2d3d", "triton__0d1d2d3d"),
    # trace names Kineto left mangled (hta/nccl_parser_config)
    ("_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11thread"
     "block22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEEEEEEEvNT_6ParamsE",
     "Kernel", None),
    # ncu old details page, v100 tf1.15 deeplab (TensorFlow / Eigen)
    ("void tensorflow::functor::SwapDimension1And2InTensor3UsingTiles<Eigen::half, 256, 32, "
     "32, false>(Eigen::half const*, tensorflow::functor::Dimension<3>, Eigen::half*)",
     "SwapDimension1And2InTensor3UsingTiles",
     "tensorflow::functor::SwapDimension1And2InTensor3UsingTiles<Eigen::half,256,32,32,false>"),
    ("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_interior_nhwc_tn_v1",
     "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_interior_nhwc_tn_v1",
     "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_interior_nhwc_tn_v1"),
]


@pytest.mark.parametrize(("name", "base", "full"), REAL_NAMES)
def test_keys_of_real_names(name: str, base: str, full: str | None) -> None:
    keys = keys_of(name)
    assert keys.base == base
    if full is not None:
        assert keys.full == full


def test_generic_demangled_ncu_name_meets_the_trace_name_at_full_strength() -> None:
    trace = "void gemm_v0<float>(float*, float*, float*, int, int, int)"
    ncu = "void gemm_v0<float>(T1 *, T1 *, T1 *, int, int, int)"
    assert keys_of(ncu).full == keys_of(trace).full == "gemm_v0<float>"
    spaced = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,"
              " at::detail::Array<char *, 1>>(int, T2, T3)")
    assert keys_of(spaced).full == keys_of(REAL_NAMES[2][0]).full


def test_generic_template_argument_gives_no_full_key() -> None:
    keys = keys_of("void at::native::vectorized_elementwise_kernel<4, T1, T2>(int, T1, T2)")
    assert keys.full is None
    assert keys.base == "vectorized_elementwise_kernel"


def test_tile_sizes_stay_in_the_strong_keys_and_share_a_family() -> None:
    a, b = keys_of("ampere_sgemm_128x64_nn"), keys_of("ampere_sgemm_64x64_nn")
    assert a.base != b.base and a.full != b.full
    assert a.family == b.family == "ampere_sgemm_#x#_nn"
    xmma = ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize{}_stage5_"
            "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer")
    big, small = keys_of(xmma.format("128x128x32")), keys_of(xmma.format("64x64x64"))
    assert big.base != small.base and big.family == small.family
    assert keys_of("ampere_sgemm_128x64_nn").family != keys_of("ampere_sgemm_128x64_tn").family


def test_anonymous_namespace_spellings_agree() -> None:
    gnu = "void at::native::(anonymous namespace)::k<float>(float*)"
    other = "void at::native::<unnamed>::k<float>(float*)"
    assert keys_of(gnu).full == keys_of(other).full


@pytest.mark.parametrize(("symbol", "base"), [
    ("_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevCommmP8ncclWork",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_",
     "vectorized_elementwise_kernel"),
    ("_ZN12_GLOBAL__N_112softmax_warpIfEEvPf", "softmax_warp"),
    ("_ZNSt6vectorIiE4sizeEv", "size"),
    ("_Z7gemm_v0IfEvPT_S1_S1_iii", "gemm_v0"),
])
def test_mangled_base(symbol: str, base: str) -> None:
    assert mangled_base(symbol) == base
    assert keys_of(symbol).full is None


def test_empty_and_missing_names_have_no_keys() -> None:
    for name in (None, "", "   "):
        keys = keys_of(name)
        assert (keys.full, keys.base, keys.family) == (None, None, None)


def test_strip_parameters_keeps_template_arguments_with_parentheses() -> None:
    name = ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
            "(cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, "
            "float*)")
    assert strip_parameters(name).endswith("(cudnnKernelDataType_t)0>")


def test_name_similarity_ranks_variants_above_strangers() -> None:
    variant = name_similarity("ampere_sgemm_128x64_nn", "ampere_sgemm_64x64_nn")
    stranger = name_similarity("ampere_sgemm_128x64_nn", "vectorized_elementwise_kernel")
    assert name_similarity("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn") == 1.0
    assert variant == pytest.approx(5 / 6)  # ampere sgemm 128 x 64 nn vs ampere sgemm 64 x nn
    assert stranger == 0.0


# ---- every kernel name of the corpus: two independent derivations agree --------------------

def _corpus_names() -> list[str]:
    paths = sorted(glob.glob(str(CORPUS / "hta" / "**" / "*.json.gz"), recursive=True)
                   + glob.glob(str(CORPUS / "other" / "**" / "*.json.gz"), recursive=True))
    if not paths:
        pytest.skip(f"corpus not available at {CORPUS}")
    return sorted({n for p in paths for n in synth.load(p).table["name"].to_pylist() if n})


def test_base_agrees_with_bracket_deletion_on_every_corpus_name() -> None:
    """names.py scans brackets backwards; synth.base_name deletes bracket groups: they must
    give the same base for every kernel name in the corpus."""
    names = _corpus_names()
    assert len(names) > 400
    differ = [(n, keys_of(n).base, synth.base_name(n)) for n in names
              if keys_of(n).base != synth.base_name(n)]
    assert differ == []


def test_ncu_styles_of_every_corpus_name_meet_the_trace_keys() -> None:
    """The keys of each name as ncu would print it equal the trace name's keys at the
    strength that style carries."""
    for name in _corpus_names():
        trace = keys_of(name)
        generic = keys_of(synth.demangled_generic(name))
        assert generic.base == trace.base, name
        assert generic.full in (trace.full, None), name
        symbol = synth.mangled(name)
        if symbol is not None:
            assert keys_of(symbol).base == trace.base, name
