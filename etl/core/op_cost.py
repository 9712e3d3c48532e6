"""FLOPs and bytes of an operator from its input shapes and types (Kineto `Input Dims`,
`Input type`; host_events.input_dims and input_types), per op family.

Definitions [project] (n = elements of the output, s = bytes per element of the op's
floating inputs; a "tensor" is an input with a type and a shape):
- gemm: mm(A[M,K], B[K,N]), addmm(bias, A, B), bmm(A[b,M,K], B[b,K,N]), baddbmm,
  matmul (batch dims broadcast; a 1-D side is a vector), linear(x[..,K], W[N,K], bias);
  `gemm` is (batch, M, N, K), with the left side's batch dims folded into M when the
  right side is one matrix (one GEMM, as PyTorch runs a linear on x[B,S,K]).
  FLOPs = 2·batch·M·K·N (a multiply-add is 2, as PyTorch's own counter); bytes = every
  tensor input read once + the output [batch,M,N] written once.
- conv: convolution and conv1d/2d/3d(x[N,C,*S], W[O,C/g,*k]): FLOPs = 2·N·O·(C/g)·∏k·∏S',
  with S' the output's spatial size; the trace does not keep stride and padding, so S' is
  taken as S (stride 1, same padding): an upper bound, and `note` says so. bytes = x + W
  + the output [N,O,*S]. convolution_backward(grad_out[N,O,*S'], x, W): both gradients,
  2 × the forward FLOPs at S'; bytes = its inputs + grad x + grad W.
- attention: scaled_dot_product_attention and its flash / efficient / cudnn kernels
  (q[B,H,L,D], k[B,H,S,D], v[B,H,S,Dv]; the _flash_attention_forward layout
  [B,L,H,D] too): FLOPs = 2·B·H·L·S·(D+Dv) (QKᵀ and PV, no causal halving: the trace does
  not say); bytes = q + k + v + the output. Their backward: 2.5 × the forward FLOPs
  (five GEMMs for two), bytes = every tensor input + dq + dk + dv.
- norm: layer_norm, native_layer_norm, rms_norm, group_norm, batch_norm (and cudnn /
  native variants): FLOPs = 8·n (mean, variance, normalize, scale and shift: 8 per
  element; rms_norm 4); bytes = every tensor input + the output (the size of x). Backward
  (native_layer_norm_backward, native_batch_norm_backward, ...): FLOPs = 10·n, bytes =
  every tensor input + grad x.
- softmax: softmax, _softmax, log_softmax: FLOPs = 5·n (max, subtract, exp, sum,
  divide); bytes = x + the output. _softmax_backward_data: FLOPs = 4·n, bytes = inputs +
  grad x.
- elementwise (ELEMENTWISE below, and their in-place `_` forms): n = the broadcast shape
  of the tensor inputs; FLOPs = n (one per output element, transcendental or not, as
  NeuSight counts); bytes = every tensor input + the output. fill_/zero_: 0 FLOPs, the
  output written.
- reduction (sum, mean, amax, ...): FLOPs = elements of the input; bytes = the input.
- embedding(W[V,H], idx): 0 FLOPs; bytes = idx + 2·(elements of idx)·H·s (rows read,
  output written). embedding_dense_backward(grad[..,H], idx, ...): bytes = grad + idx +
  grad again (scattered into the weight's gradient).
- copy (copy_, clone, contiguous, _to_copy, cat, index_select, ...): 0 FLOPs; bytes =
  the tensor inputs read and as much written.
- foreach / fused optimizer ops (_foreach_*, _fused_adam*): elementwise over the first
  list: FLOPs = its elements; bytes = every listed tensor + the first list written.
An op of no family, or whose shapes do not fit its family, has NULL FLOPs and bytes and a
`reason`. `precision` is the type of the op's first floating-point tensor input
(fp64, fp32, fp16, bf16, fp8); `matrix` says whether a GEMM-like op runs on the matrix
units its precision has (gemm, conv, attention).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

Shape = tuple[int, ...]
ELEMENT_BYTES = {"double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
                 "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
                 "c10::Float8_e5m2fnuz": 1, "long int": 8, "long": 8, "int64_t": 8,
                 "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
                 "c10::complex<float>": 8, "c10::complex<double>": 16}
PRECISION = {"double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
             "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8",
             "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8"}
ELEMENTWISE = frozenset("""
abs add addcdiv addcmul bitwise_and bitwise_not bitwise_or clamp clamp_min clamp_max cos
div elu elu_backward eq erf exp expm1 fill gelu gelu_backward ge gt hardswish
hardswish_backward hardtanh hardtanh_backward le leaky_relu leaky_relu_backward lerp log
log1p log_sigmoid logical_and logical_not logical_or lt masked_fill maximum minimum mish mul
native_dropout native_dropout_backward ne neg pow reciprocal relu remainder rsqrt rsub
sigmoid sigmoid_backward silu silu_backward sin sqrt square sub tanh tanh_backward
threshold threshold_backward where dropout bernoulli sign floor ceil round trunc
nan_to_num mse_loss
""".split())
REDUCTION = frozenset("sum mean amax amin max min norm var std prod argmax argmin all any "
                      "logsumexp cumsum".split())
COPY = frozenset("copy clone contiguous _to_copy to cat stack index_select gather "
                 "index scatter index_put index_add repeat flip roll constant_pad_nd "
                 "pad".split())
FILL = frozenset({"fill", "zero", "zeros_like", "ones_like", "full_like"})
GEMM_NAMES = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation"})
CONV_NAMES = frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                        "cudnn_convolution", "miopen_convolution", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d", "cudnn_convolution_transpose"})
ATTENTION = frozenset({"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_efficient_attention",
                       "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                       "_efficient_attention_forward"})
NORM = {"layer_norm": 8, "native_layer_norm": 8, "group_norm": 8, "native_group_norm": 8,
        "batch_norm": 8, "native_batch_norm": 8, "_native_batch_norm_legit": 8,
        "cudnn_batch_norm": 8, "miopen_batch_norm": 8, "_batch_norm_impl_index": 8,
        "instance_norm": 8, "rms_norm": 4, "_fused_rms_norm": 4}
SOFTMAX = frozenset({"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"})


@dataclass(frozen=True)
class OpCost:
    family: str | None
    flops: float | None
    bytes: float | None
    precision: str | None
    matrix: bool = False
    gemm: tuple[int, int, int, int] | None = None   # (batch, M, N, K) of a GEMM-like op
    elements: int | None = None                     # output elements (waves of a vector op)
    note: str | None = None                         # an approximation the numbers rest on
    reason: str | None = None                       # why flops or bytes is NULL


@dataclass(frozen=True)
class _Inputs:
    shapes: list[Shape | None]         # per input: a tensor's shape, else None
    lists: list[list[Shape]]           # per TensorList input: its shapes
    types: list[str]
    size: int                          # bytes per element of the first floating input
    precision: str | None

    def tensors(self) -> list[Shape]:
        return [s for s in self.shapes if s is not None]

    def tensor_types(self) -> list[str]:
        return [t for t, s in zip(self.types, self.shapes) if s is not None]

    def tensor_bytes(self) -> float:
        sizes = [ELEMENT_BYTES.get(t, self.size) for t in self.tensor_types()]
        return float(sum(numel(s) * b for s, b in zip(self.tensors(), sizes))
                     + sum(numel(s) for lst in self.lists for s in lst) * self.size)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def op_cost(name: str | None, input_dims: str | None, input_types: Sequence[str] | None
            ) -> OpCost:
    """The op's cost (see the module docstring), or NULLs with the reason."""
    if name is None:
        return _none("no op name")
    return _cached(name, input_dims, tuple(input_types) if input_types is not None else None)


@lru_cache(maxsize=1 << 16)
def _cached(name: str, input_dims: str | None, input_types: tuple[str, ...] | None) -> OpCost:
    base = _base_name(name)
    family = family_of(base)
    if family is None:
        return _none(f"no FLOP/byte formula for {name}")
    if input_dims is None or input_types is None:
        return OpCost(family, None, None, None, reason="input shapes not recorded "
                      "(profile with record_shapes=True)")
    inputs = _parse(input_dims, input_types)
    if inputs is None:
        return OpCost(family, None, None, None, reason=f"input shapes of {name} not readable")
    try:
        return FORMULAS[family](base, inputs)
    except (ValueError, IndexError, TypeError) as exc:
        return OpCost(family, None, None, inputs.precision,
                      reason=f"input shapes do not fit {family} ({exc})")


def _base_name(name: str) -> str:
    """aten::add_ → add; autograd and other namespaces kept out by family_of."""
    bare = name.split("::", 1)[1] if name.startswith("aten::") else name
    return bare[:-1] if bare.endswith("_") and not bare.startswith("_foreach") else bare


def family_of(base: str) -> str | None:
    if base in GEMM_NAMES:
        return "gemm"
    if base in CONV_NAMES or base == "convolution_backward":
        return "conv"
    if base in ATTENTION or (base.startswith("_scaled_dot_product") and base.endswith("backward")) \
            or base in ("_flash_attention_backward", "_efficient_attention_backward"):
        return "attention"
    if base in NORM or (base.removesuffix("_backward") in NORM and base.endswith("_backward")):
        return "norm"
    if base in SOFTMAX or base in ("_softmax_backward_data", "_log_softmax_backward_data"):
        return "softmax"
    if base.startswith("_foreach_") or base.startswith("_fused_adam"):
        return "foreach"
    if base in ELEMENTWISE or base in FILL:
        return "elementwise"
    if base in REDUCTION:
        return "reduction"
    if base in ("embedding", "embedding_dense_backward", "embedding_backward"):
        return "embedding"
    if base in COPY:
        return "copy"
    return None


def _parse(input_dims: str, input_types: Sequence[str]) -> _Inputs | None:
    try:
        dims = json.loads(input_dims)
    except ValueError:
        return None
    if not isinstance(dims, list):
        return None
    types = list(input_types) + [""] * max(0, len(dims) - len(input_types))
    shapes: list[Shape | None] = []
    lists: list[list[Shape]] = []
    for dim, kind in zip(dims, types):
        if kind == "TensorList" and isinstance(dim, list):
            lists.append([tuple(int(x) for x in s) for s in dim if isinstance(s, list)])
            shapes.append(None)
        elif kind in ELEMENT_BYTES and isinstance(dim, list) and all(
                isinstance(x, int) for x in dim):
            shapes.append(tuple(dim))
        else:
            shapes.append(None)
    floating = [t for t, s in zip(types, shapes) if s is not None and t in PRECISION]
    first = floating[0] if floating else next((t for t, s in zip(types, shapes)
                                               if s is not None), "float")
    size = ELEMENT_BYTES.get(first, 4)
    if not floating and lists:  # a TensorList's type is not written: fp32 unless known
        first, size = "float", 4
    return _Inputs(shapes, lists, types, size, PRECISION.get(first))


def _none(reason: str) -> OpCost:
    return OpCost(None, None, None, None, reason=reason)


# ---- the families ----------------------------------------------------------------------

def _gemm(base: str, x: _Inputs) -> OpCost:
    t = x.tensors()
    if base in ("addmm", "baddbmm", "_addmm_activation"):
        a, b = t[1], t[2]
    elif base == "linear":
        a, w = t[0], t[1]
        b = (w[1], w[0]) if len(w) == 2 else (w[0], 1)
    else:
        a, b = t[0], t[1]
    batch, m, k, n = _matmul_dims(a, b)
    out = batch * m * n
    flops = 2.0 * batch * m * k * n
    return OpCost("gemm", flops, x.tensor_bytes() + out * x.size, x.precision, True,
                  (batch, m, n, k), out)


def _matmul_dims(a: Shape, b: Shape) -> tuple[int, int, int, int]:
    """(batch, M, K, N) of a @ b, batch dims broadcast; ValueError when K disagrees."""
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if len(a2) < 2 or len(b2) < 2 or a2[-1] != b2[-2]:
        raise ValueError(f"{list(a)} @ {list(b)}")
    lead_a, lead_b = a2[:-2], b2[:-2]
    width = max(len(lead_a), len(lead_b))
    pa = (1,) * (width - len(lead_a)) + lead_a
    pb = (1,) * (width - len(lead_b)) + lead_b
    batch = math.prod(max(p, q) for p, q in zip(pa, pb))
    if math.prod(pb) == 1:   # one matrix on the right: a's batch dims are rows of one GEMM
        return 1, batch * a2[-2], a2[-1], b2[-1]
    return batch, a2[-2], a2[-1], b2[-1]


def _conv(base: str, x: _Inputs) -> OpCost:
    t = x.tensors()
    note = None
    if base == "convolution_backward":
        grad, inp, w = t[0], t[1], t[2]
        per = 2.0 * grad[0] * w[0] * numel(w[1:]) * numel(grad[2:])
        return OpCost("conv", 2 * per, x.tensor_bytes() + (numel(inp) + numel(w)) * x.size,
                      x.precision, True, None, numel(inp))
    inp, w = t[0], t[1]
    if len(inp) != len(w) or len(inp) < 3:
        raise ValueError(f"input {list(inp)} and weight {list(w)}")
    spatial = inp[2:]
    note = "stride and padding not recorded: output taken as the input's size (an upper bound)"
    out = inp[0] * w[0] * numel(spatial)
    flops = 2.0 * inp[0] * w[0] * numel(w[1:]) * numel(spatial)
    batch_m = inp[0] * numel(spatial)
    return OpCost("conv", flops, x.tensor_bytes() + out * x.size, x.precision, True,
                  (1, batch_m, w[0], numel(w[1:])), out, note=note)


def _attention(base: str, x: _Inputs) -> OpCost:
    t = x.tensors()
    q, k, v = (t[1], t[2], t[3]) if base.endswith("backward") else (t[0], t[1], t[2])
    if base.startswith(("_flash_attention", "_efficient_attention")):  # [B, L, H, D]
        q, k, v = _bhld(q), _bhld(k), _bhld(v)
    b, h, length, d = q
    s, dv = k[-2], v[-1]
    forward = 2.0 * b * h * length * s * (d + dv)
    out = b * h * length * dv
    if base.endswith("backward"):
        return OpCost("attention", 2.5 * forward,
                      x.tensor_bytes() + (numel(q) + numel(k) + numel(v)) * x.size,
                      x.precision, True, (b * h, length, s, d), out,
                      note="no causal masking assumed (the trace does not say)")
    return OpCost("attention", forward, x.tensor_bytes() + out * x.size, x.precision, True,
                  (b * h, length, s, d), out, note="no causal masking assumed "
                  "(the trace does not say)")


def _bhld(shape: Shape) -> Shape:
    """[B, L, H, D] → [B, H, L, D]."""
    return (shape[0], shape[2], shape[1], shape[3])


def _norm(base: str, x: _Inputs) -> OpCost:
    backward = base.endswith("_backward")
    n = numel(x.tensors()[1 if backward else 0])
    per = 10 if backward else NORM[base]
    return OpCost("norm", float(per * n), x.tensor_bytes() + n * x.size, x.precision,
                  elements=n)


def _softmax(base: str, x: _Inputs) -> OpCost:
    n = numel(x.tensors()[0])
    per = 4 if base.endswith("_data") else 5
    return OpCost("softmax", float(per * n), x.tensor_bytes() + n * x.size, x.precision,
                  elements=n)


def _elementwise(base: str, x: _Inputs) -> OpCost:
    shapes = x.tensors()
    if not shapes:
        raise ValueError("no tensor input")
    n = numel(_broadcast(shapes))
    if base in FILL:
        return OpCost("elementwise", 0.0, float(n * x.size), x.precision, elements=n)
    return OpCost("elementwise", float(n), x.tensor_bytes() + n * x.size, x.precision,
                  elements=n)


def _broadcast(shapes: list[Shape]) -> Shape:
    width = max(len(s) for s in shapes)
    padded = [(1,) * (width - len(s)) + s for s in shapes]
    return tuple(max(d) for d in zip(*padded))


def _reduction(base: str, x: _Inputs) -> OpCost:
    n = numel(x.tensors()[0])
    return OpCost("reduction", float(n), float(n * x.size), x.precision, elements=n)


def _embedding(base: str, x: _Inputs) -> OpCost:
    t = x.tensors()
    if base == "embedding":
        weight, idx = t[0], t[1]
        rows = numel(idx) * weight[-1]
        idx_size = ELEMENT_BYTES.get(x.tensor_types()[1], 8)
        return OpCost("embedding", 0.0, numel(idx) * idx_size + 2.0 * rows * x.size,
                      x.precision, elements=rows)
    grad = t[0]
    return OpCost("embedding", 0.0, x.tensor_bytes() + numel(grad) * x.size, x.precision,
                  elements=numel(grad))


def _copy(base: str, x: _Inputs) -> OpCost:
    moved = x.tensor_bytes()
    if base in ("copy", "index_select", "gather", "index"):
        # copy_(dst, src) reads src, writes dst; index ops read what they select
        moved = float(numel(x.tensors()[-1] if base == "copy" else x.tensors()[0]) * x.size)
    return OpCost("copy", 0.0, 2.0 * moved, x.precision,
                  elements=int(moved // max(x.size, 1)))


def _foreach(base: str, x: _Inputs) -> OpCost:
    if not x.lists:
        raise ValueError("no TensorList input")
    first = sum(numel(s) for s in x.lists[0])
    return OpCost("foreach", float(first), x.tensor_bytes() + first * x.size, x.precision,
                  elements=first)


FORMULAS: dict[str, Callable[[str, _Inputs], OpCost]] = {
    "gemm": _gemm, "conv": _conv, "attention": _attention, "norm": _norm,
    "softmax": _softmax, "elementwise": _elementwise, "reduction": _reduction,
    "embedding": _embedding, "copy": _copy, "foreach": _foreach}
