"""FLOPs and bytes of ops from their shapes (etl/core/op_cost.py): each family worked out
by hand on a tiny input."""
from __future__ import annotations

import json

import pytest

from etl.core.op_cost import op_cost

F, H, B, L = "float", "c10::Half", "c10::BFloat16", "long int"


def cost(name: str, dims: list, types: list[str]):  # type: ignore[no-untyped-def]
    return op_cost(name, json.dumps(dims), types)


def test_addmm_counts_two_flops_per_multiply_add_and_reads_every_input_once() -> None:
    # bias[8] + A[4,16] @ B[16,8]: 2*4*16*8 = 1024 FLOP; bytes (8 + 64 + 128 + 32 out) * 4
    c = cost("aten::addmm", [[8], [4, 16], [16, 8], [], []], [F, F, F, "Scalar", "Scalar"])
    assert (c.family, c.flops, c.bytes, c.precision, c.matrix) == (
        "gemm", 1024.0, (8 + 64 + 128 + 32) * 4.0, "fp32", True)
    assert c.gemm == (1, 4, 8, 16)


def test_bmm_and_broadcast_matmul() -> None:
    # bmm [3,2,5] @ [3,5,4]: 2*3*2*5*4 = 240 FLOP; (30 + 60 + 24) half = 228 bytes
    c = cost("aten::bmm", [[3, 2, 5], [3, 5, 4]], [H, H])
    assert (c.flops, c.bytes, c.precision) == (240.0, 228.0, "fp16")
    # matmul [2,1,3,5] @ [4,5,6] broadcasts to batch 2*4 = 8: 2*8*3*5*6 = 1440
    m = cost("aten::matmul", [[2, 1, 3, 5], [4, 5, 6]], [B, B])
    assert m.flops == 1440.0 and m.gemm == (8, 3, 6, 5)
    # a vector on the right: [3,5] @ [5] = 2*3*5 = 30 FLOP
    assert cost("aten::matmul", [[3, 5], [5]], [F, F]).flops == 30.0


def test_linear_weight_is_out_by_in() -> None:
    # x[2,3,16] @ W[8,16]^T + b[8]: M = 6, K = 16, N = 8 → 2*6*16*8 = 1536
    c = cost("aten::linear", [[2, 3, 16], [8, 16], [8]], [B, B, B])
    assert (c.flops, c.bytes) == (1536.0, (96 + 128 + 8 + 48) * 2.0)
    # one GEMM: x's batch dim folds into M (2·3 = 6), as it does for a matmul by a matrix
    assert c.gemm == (1, 6, 8, 16)
    assert cost("aten::matmul", [[2, 3, 5], [5, 4]], [F, F]).gemm == (1, 6, 4, 5)


def test_mismatched_gemm_is_null_with_a_reason() -> None:
    c = cost("aten::mm", [[4, 16], [15, 8]], [F, F])
    assert c.flops is None and c.bytes is None and "do not fit gemm" in (c.reason or "")


def test_conv2d_is_an_upper_bound_for_stride_one() -> None:
    # x[2,3,8,8], W[4,3,3,3]: 2 * 2 * 4 * (3*3*3) * 64 = 27648 FLOP; out [2,4,8,8] = 512
    c = cost("aten::conv2d", [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],
             [F, F, F, "ScalarList", "ScalarList", "ScalarList", "Scalar"])
    assert c.flops == 27648.0 and c.bytes == (384 + 108 + 4 + 512) * 4.0
    assert "upper bound" in (c.note or "")
    # backward with grad_out [2,4,4,4]: 2 gradients x 2*2*4*27*16 = 13824
    b = cost("aten::convolution_backward", [[2, 4, 4, 4], [2, 3, 8, 8], [4, 3, 3, 3]], [F, F, F])
    assert b.flops == 13824.0


def test_attention_counts_both_gemms_and_backward_is_two_and_a_half() -> None:
    # q,k,v [1,2,4,8]: 2*1*2*4*4*(8+8) = 1024 FLOP; bytes (3*64 + 64 out) * 2
    dims = [[1, 2, 4, 8]] * 3
    c = cost("aten::_scaled_dot_product_flash_attention", dims + [[]], [B, B, B, "Scalar"])
    assert (c.flops, c.bytes) == (1024.0, 256 * 2.0)
    # the flash kernel's own layout [B, L, H, D] gives the same count
    f = cost("aten::_flash_attention_forward", [[1, 4, 2, 8]] * 3, [B, B, B])
    assert f.flops == 1024.0
    bw = cost("aten::_scaled_dot_product_flash_attention_backward",
              [[1, 2, 4, 8]] * 5, [B] * 5)
    assert bw.flops == 2560.0


def test_layer_norm_softmax_and_their_backwards() -> None:
    ln = cost("aten::layer_norm", [[2, 3, 4], [], [4], [4], [], []],
              [F, "ScalarList", F, F, "Scalar", "Scalar"])
    assert (ln.family, ln.flops, ln.bytes) == ("norm", 8 * 24.0, (24 + 4 + 4 + 24) * 4.0)
    lnb = cost("aten::native_layer_norm_backward", [[2, 3, 4], [2, 3, 4], [], [2, 3, 1],
                                                     [2, 3, 1], [4], [4], []],
               [F, F, "ScalarList", F, F, F, F, "ScalarList"])
    assert lnb.flops == 240.0 and lnb.bytes == (24 + 24 + 6 + 6 + 4 + 4 + 24) * 4.0
    sm = cost("aten::_softmax", [[2, 5], [], []], [H, "Scalar", "Scalar"])
    assert (sm.flops, sm.bytes) == (50.0, 20 * 2.0)
    smb = cost("aten::_softmax_backward_data", [[2, 5], [2, 5], [], []], [H, H, "", ""])
    assert (smb.flops, smb.bytes) == (40.0, 30 * 2.0)


def test_elementwise_broadcasts_and_inplace_reads_the_same() -> None:
    # [4,1] + [3]: output [4,3] = 12 elements; reads 4 + 3, writes 12 floats
    c = cost("aten::add", [[4, 1], [3], []], [F, F, "Scalar"])
    assert (c.family, c.flops, c.bytes) == ("elementwise", 12.0, (4 + 3 + 12) * 4.0)
    assert cost("aten::mul_", [[4, 3], [4, 3]], [F, F]).bytes == 36 * 4.0
    assert cost("aten::zero_", [[4, 3]], [H]).bytes == 12 * 2.0
    assert cost("aten::zero_", [[4, 3]], [H]).flops == 0.0


def test_embedding_reads_the_rows_it_gathers() -> None:
    # W[100, 16] bf16, idx [2, 3] long: 6*8 idx bytes + 2 * 6*16 * 2 (rows read, out written)
    c = cost("aten::embedding", [[100, 16], [2, 3], [], [], []], [B, L, "Scalar", "Scalar",
                                                                   "Scalar"])
    assert (c.flops, c.bytes) == (0.0, 48 + 384.0)


def test_foreach_reads_every_list_and_writes_the_first() -> None:
    c = cost("aten::_foreach_add_", [[[2, 3], [4]], [[2, 3], [4]], []],
             ["TensorList", "TensorList", "Scalar"])
    assert (c.family, c.flops, c.bytes) == ("foreach", 10.0, (20 + 10) * 4.0)


@pytest.mark.parametrize(("name", "dims", "types", "reason"), [
    ("aten::view", [[2, 3], []], [F, "ScalarList"], "no FLOP/byte formula for aten::view"),
    ("aten::mm", None, None, "input shapes not recorded"),
    ("aten::mm", "not json", [F], "not readable"),
])
def test_no_formula_or_no_shapes_is_null_with_a_reason(name: str, dims: object,
                                                       types: list[str] | None,
                                                       reason: str) -> None:
    text = dims if dims is None or isinstance(dims, str) else json.dumps(dims)
    c = op_cost(name, text, types)  # type: ignore[arg-type]
    assert c.flops is None and c.bytes is None and reason in (c.reason or "")
