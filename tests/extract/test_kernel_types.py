"""kernel_type / memory_kind / tc_estimate rules (etl/extract/kernel_types.toml) on the
kernel names of the corpus: V100 (volta_*), A100 (sm80_*, ampere_*), H100 (nvjet, flash),
B200 (fmhaSm100, bmm_), MI250 (Tensile Cijk_*_MI*)."""
from __future__ import annotations

import pytest

from etl.extract.kernel_types import classify, with_kernel_types
from tests.conftest import corpus_path
from tests.oracle.naive_kineto import load_trace

# (kind, name as in the corpus) → (kernel_type, memory_kind, tc_estimate)
CASES = [
    ("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
     ("communication", None, None)),
    ("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     ("communication", None, None)),
    ("kernel", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
     ("communication", None, None)),
    ("kernel", "void (anonymous namespace)::multimem_all_reduce_kernel<16, float>(...)",
     ("communication", None, None)),
    ("kernel", "volta_sgemm_128x32_nt", ("computation", None, False)),           # V100 fp32
    ("kernel", "ampere_sgemm_128x64_nn", ("computation", None, False)),          # A100 fp32
    ("kernel", "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw",
     ("computation", None, True)),                                              # A100 tf32
    ("kernel", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4>"
     "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nt_align4::Params)",
     ("computation", None, True)),
    ("kernel", "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(...)",
     ("computation", None, False)),
    ("kernel", "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32>",
     ("computation", None, True)),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1",
     ("computation", None, True)),                                              # H100
    ("kernel", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", ("computation", None, True)),
    ("kernel", "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits>",
     ("computation", None, True)),
    ("kernel", "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128",
     ("computation", None, True)),                                              # B200
    ("kernel", "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32",
     ("computation", None, True)),
    ("kernel", "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)",
     ("computation", None, False)),                                             # a cache copy
    ("kernel", "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float>",
     ("computation", None, False)),                                             # 'mma' in Gamma
    ("kernel", "void moe::dev::finalize::finalizeKernelVecLoad<KernelParams<cutlass::"
     "bfloat16_t>>", ("computation", None, False)),                             # cutlass types
    ("kernel", "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0",
     ("computation", None, True)),                                              # MI250 MFMA
    ("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor>",
     ("computation", None, False)),
    ("memcpy", "Memcpy HtoD (Pinned -> Device)", ("memory", "HtoD", None)),
    ("memcpy", "Memcpy DtoH (Device -> Pageable)", ("memory", "DtoH", None)),
    ("memcpy", "Memcpy DtoD (Device -> Device)", ("memory", "DtoD", None)),
    ("memcpy", "Memcpy PtoP (Device -> Device)", ("memory", "PtoP", None)),
    ("memcpy", "CopyHostToDevice", ("memory", "HtoD", None)),
    ("memcpy", "Memcpy", ("memory", "unknown", None)),
    ("memset", "Memset (Device)", ("memory", "memset", None)),
    ("kernel", "Memset (Device)", ("memory", "memset", None)),    # a source filing it as kernel
    ("other", "ProfilerStep#1", ("other", None, None)),
]


@pytest.mark.parametrize("kind,name,expected", CASES)
def test_classify(kind: str, name: str, expected: tuple) -> None:
    assert classify(kind, name) == expected


def test_columns_appended_per_row() -> None:
    import pyarrow as pa

    batch = pa.table({"kind": ["kernel", "memcpy", "kernel", None],
                      "name": ["ampere_h16816gemm", "Memcpy DtoH", "ampere_h16816gemm", None]})
    out = with_kernel_types(batch)
    assert out.column_names[-3:] == ["kernel_type", "memory_kind", "tc_estimate"]
    assert out["kernel_type"].to_pylist() == ["computation", "memory", "computation", "other"]
    assert out["memory_kind"].to_pylist() == [None, "DtoH", None, None]
    assert out["tc_estimate"].to_pylist() == [True, None, True, None]



@pytest.mark.parametrize("encoding", ["plain", "dictionary per chunk"])
def test_batched_columns_equal_classify_row_by_row(encoding: str) -> None:
    """Chunks, nulls in both columns and per-chunk dictionaries (what the spills hand over)
    give each row what classify gives its (kind, name)."""
    import random

    import pyarrow as pa

    rng = random.Random(7)
    kinds = ["kernel", "memcpy", "memset", "cuda_runtime", "gpu_user_annotation", None]
    names = ["ampere_h16816gemm", "ncclKernel_AllReduce_RING", "Memcpy HtoD (Pinned -> Device)",
             "Memset (Device)", "elementwise", "ProfilerStep#3", None]
    rows = [(rng.choice(kinds), rng.choice(names)) for _ in range(3000)]
    chunks = [rows[i:i + 700] for i in range(0, len(rows), 700)]
    kind = pa.chunked_array([pa.array([k for k, _ in c], pa.string()) for c in chunks])
    name = pa.chunked_array([pa.array([n for _, n in c], pa.string()) for c in chunks])
    if encoding != "plain":
        name = pa.chunked_array([c.dictionary_encode() for c in name.chunks])
    out = with_kernel_types(pa.table({"kind": kind, "name": name}))
    got = list(zip(out["kernel_type"].to_pylist(), out["memory_kind"].to_pylist(),
                   out["tc_estimate"].to_pylist()))
    assert got == [classify(k, n) for k, n in rows]

CORPUS = {  # traces whose kernel names are checked one by one
    ("hta", "nccl_parser_config", "nccl_data.json.gz"): "nccl",
    ("hta", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"): "mi250",
    ("other", "tracelens", "h100", "gaunernst_bert-small-uncased__1016001.json.gz"): "h100",
    ("other", "tracelens", "b200", "eager_trace.json.gz"): "b200",
}


@pytest.mark.parametrize("parts", sorted(CORPUS))
def test_corpus_names(parts: tuple[str, ...]) -> None:
    """Every kernel name of the trace: NCCL and symmetric-memory all-reduce kernels are
    communication and nothing else is; GEMM names of the tensor-core families are
    tc_estimate, SIMT sgemm ones not."""
    trace = load_trace(corpus_path(*parts))
    names = {e["name"] for e in trace["traceEvents"] if isinstance(e, dict)
             and e.get("cat") == "kernel"}
    assert names
    for name in names:
        kernel_type, _, tc = classify("kernel", name)
        collective = name.startswith("nccl") or "multimem_all_reduce" in name
        assert (kernel_type == "communication") == collective, name
        if "sgemm" in name and "tensorop" not in name:
            assert tc is False, name
        if any(s in name for s in ("tensorop", "xmma", "nvjet", "_MI16x16x1")):
            assert tc is True, name
    assert any(classify("kernel", n)[2] for n in names), "no tensor-core kernel recognised"
