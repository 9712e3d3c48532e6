"""NeuSight's end-to-end labels as Kineto traces of one iteration: the backtest's inputs.

    .venv/bin/python bench/neusight_trace.py OUT [GPU_FOLDER...]

A label (../shared/corpus/neusight/scripts/asplos/label/<GPU>/<model>-<mode>-<seq>-<batch>
.csv + .json, NeuSight commit 6945927, MIT) is the torch.fx graph of ONE layer of the model
with per-node latencies (ms): the CSV's prologue (embeddings), layer 0 and epilogue (final
norm, head), the layer between NeuSight's markers (scripts/asplos/summarize.py
MODEL_LAYERS) repeated `num_layer` times, as NeuSight's aggregator does; the JSON is the
measured time of the whole model (fw_latency + bwall_latency = e2e_latency).

Each node becomes one operator with its input shapes and dtype (`Input Dims`, `Input
type`, the aten op its torch.fx target runs), and one kernel with its measured time; a
training label adds, after the forward pass and in reverse order, each node's backward
operator (the aten ops autograd runs for it, their kernels sharing the node's bw_latency
in proportion to their roofline times on the label's GPU) and its AccumulateGrad ops
(acc_latency).

How the per-node times are reconciled with the end-to-end time: every node was timed
alone (CUDA events around the Python call, fastest 5 of 25), so each holds a timing floor,
the call's dispatch before its kernel starts (~10-16 µs on V100; the fw time of the
kernel-less nodes: view, size, getitem ...). In the real run those dispatches overlap the
GPU's work. The converter takes the floor f of a label as the median fw time of its
kernel-less nodes, and writes each operator as f of host time that launches a kernel of
(node time - f), at least 0; a kernel-less node is host time only; each node's backward
and each accumulated parameter pays one f. The iteration is then what the replay makes of
a host thread dispatching ahead of one stream (about the sum of the kernel times when
the GPU is the bottleneck): `span` gives it, 0.97-1.13 × the JSON on V100, 0.82-1.50 over
all GPUs (BENCHMARKS.md). Last, `calibrate` scales every kernel by one factor so that the
iteration lasts the JSON's time: the per-node times give the mix of ops, the source's
measured end-to-end time the total (as a real trace of the source would).
"""
from __future__ import annotations

import argparse
import ast
import csv
import json
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from etl.analysis.forecast.model import MATRIX_FAMILIES, Work, roofline_seconds  # noqa: E402
from etl.core.gpus import Gpu, trace_name_row  # noqa: E402
from etl.core.op_cost import op_cost  # noqa: E402

LABELS = ROOT.parent / "shared" / "corpus" / "neusight" / "scripts" / "asplos" / "label"
CONFIGS = LABELS.parent / "data" / "DLmodel_configs"
MARKERS = {"bert": ("bert_encoder_layer_0_attention_self_query",
                    "bert_encoder_layer_0_output_layer_norm"),
           "gpt": ("transformer_h_0_ln_1", "add_15"),
           "opt": ("model_decoder_layers_0_self_attn_layer_norm", "view_11")}
LABEL_NAME = re.compile(r"^(?P<model>[a-z0-9_]+)-(?P<mode>inf|train)-(?P<seq>\d+)-(?P<batch>\d+)$")
VIEWS = {"size", "view", "permute", "transpose", "dim", "expand", "unsqueeze", "split",
         "getitem", "getattr", "finfo", "chunk", "squeeze", "flatten", "numel"}
MAYBE_COPY = {"to", "type", "type_as", "reshape", "long", "bool", "float", "contiguous",
              "clone"}
LINEAR = {"dense", "query", "key", "value", "lm_head", "decoder", "q_proj", "k_proj", "v_proj",
          "out_proj", "fc1", "fc2", "classifier", "seq_relationship", "c_attn", "c_proj",
          "c_fc"}
NORM = {"layernorm", "ln_1", "ln_2", "ln_f", "self_attn_layer_norm", "final_layer_norm"}
EMBEDDING = {"wte": "vocab_size", "word_embeddings": "vocab_size",
             "embed_tokens": "vocab_size", "wpe": "n_positions",
             "position_embeddings": "max_position_embeddings",
             "token_type_embeddings": "type_vocab_size"}
DROPOUT = {"dropout", "drop", "attn_dropout", "resid_dropout"}
ACTIVATION = {"activation", "activation_fn", "act"}
FUNCTIONS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "pow": "pow",
             "eq": "eq", "ne": "ne", "gt": "gt", "lt": "lt", "ge": "ge", "le": "le",
             "where": "where", "max": "maximum", "tanh": "tanh", "gelu": "gelu",
             "relu": "relu", "masked_fill": "masked_fill", "masked_fill_": "masked_fill",
             "cumsum": "cumsum", "full": "fill_", "ones": "fill_", "zeros": "fill_",
             "arange": "fill_", "tensor": "fill_", "softmax": "softmax", "matmul": "matmul",
             "bmm": "bmm", "addmm": "addmm", "dropout": "dropout", "embedding": "embedding",
             "baddbmm": "baddbmm", "layer_norm": "layer_norm", "linear": "linear"}
F, LONG = "float", "long int"
US = 1000  # ns


@dataclass
class Op:
    """One operator of the converted trace: host time, and kernels with their times."""

    name: str
    dims: list[Any] | None = None
    types: list[str] | None = None
    host_ns: int = 0
    kernels: list[int] = field(default_factory=list)   # ns
    inner: list[Op] = field(default_factory=list)      # ops inside (a backward's aten ops)


@dataclass
class Label:
    gpu: Gpu
    folder: str
    config: str
    model: str
    mode: str
    batch: int
    num_layer: int
    e2e_ms: float
    rows: list[dict[str, str]]


def read_label(csv_path: Path) -> Label:
    match = LABEL_NAME.match(csv_path.stem)
    if match is None:
        raise ValueError(f"{csv_path.name}: not <model>-<mode>-<seq>-<batch>")
    doc = json.loads(csv_path.with_suffix(".json").read_text())
    gpu = trace_name_row(csv_path.parent.name.replace("_", " "))
    if gpu is None:
        raise ValueError(f"{csv_path.parent.name}: no GPU catalog row")
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return Label(gpu, csv_path.parent.name, csv_path.stem, match["model"], match["mode"],
                 int(match["batch"]), int(doc["num_layer"]), float(doc["e2e_latency"]), rows)


def expanded(label: Label) -> list[dict[str, str]]:
    """Prologue + num_layer × layer + epilogue (NeuSight's replicate_layer)."""
    names = [r["Name"] for r in label.rows]
    for key, (first, last) in MARKERS.items():
        if key in label.model:
            start = names.index(first)
            if f"{first}_grad" in names:
                start = names.index(f"{first}_grad")
            end = names.index(last) + 1
            return (label.rows[:start] + label.rows[start:end] * label.num_layer
                    + label.rows[end:])
    raise ValueError(f"{label.model}: no layer markers")


def floor_ns(label: Label) -> int:
    """The label's timing floor: the median fw time of its kernel-less nodes."""
    times = [float(r["fw_latency"]) for r in label.rows
             if _method(r) in VIEWS and float(r["fw_latency"] or 0) > 0]
    return int(round(statistics.median(times) * 1e6)) if times else 10 * US


def _method(row: dict[str, str]) -> str:
    """The node's operation: a method's or function's name, a module's last component."""
    target = row["target"]
    if row["op"] == "call_module":
        return target.split(".")[-1].lower()
    found = re.search(r"(?:function|method) (\w+)|<class 'torch\.(\w+)'>|^(\w+)$", target)
    if found is None:
        return target
    return next(g for g in found.groups() if g)


def _shapes(row: dict[str, str]) -> list[list[int]]:
    try:
        value = ast.literal_eval(row["input_shapes"] or "[]")
    except (ValueError, SyntaxError):
        return []
    return [list(s) for s in value if isinstance(s, (list, tuple))]


def _out(row: dict[str, str]) -> list[int]:
    try:
        value = ast.literal_eval(row["output_shape"] or "()")
    except (ValueError, SyntaxError):
        return []
    return list(value) if isinstance(value, tuple) and all(isinstance(v, int) for v in value) \
        else []


def forward_op(row: dict[str, str], config: dict[str, Any]) -> tuple[str, list, list] | None:
    """(aten name, Input Dims, Input type) of a node that launches a kernel; None for a
    kernel-less node (views, Python scalars, placeholders)."""
    method, shapes, out = _method(row), _shapes(row), _out(row)
    if row["op"] in ("placeholder", "get_attr", "output") or method in VIEWS:
        return None
    if not row["dtype"] or out in ([], [1]):
        return None  # a Python scalar (sizes, the attention's scale)
    if row["op"] == "call_module":
        return _module_op(method, shapes, out, config)
    if method in MAYBE_COPY:
        return "aten::_to_copy", [shapes[0]], [F]
    name = FUNCTIONS.get(method)
    if name is None:
        return f"aten::{method}", shapes, [F] * len(shapes)
    return _function_op(name, shapes, out)


def _module_op(method: str, shapes: list, out: list, config: dict[str, Any]
               ) -> tuple[str, list, list]:
    x = shapes[0] if shapes else out
    if method in LINEAR:
        k, n = x[-1], out[-1]
        return "aten::linear", [x, [n, k], [n]], [F, F, F]
    if method in NORM:
        h = x[-1]
        return "aten::layer_norm", [x, [], [h], [h], [], []], [F, "ScalarList", F, F,
                                                               "Scalar", "Scalar"]
    if method in EMBEDDING:
        rows = int(config.get(EMBEDDING[method], config.get("max_position_embeddings", 1)))
        return "aten::embedding", [[rows, out[-1]], x, [], [], []], [F, LONG, "Scalar",
                                                                   "Scalar", "Scalar"]
    if method in DROPOUT:
        return "aten::dropout", [x, [], []], [F, "Scalar", "Scalar"]
    return "aten::relu", [x], [F]  # activations (tanh, relu, gelu modules)


def _function_op(name: str, shapes: list, out: list) -> tuple[str, list, list]:
    if name == "fill_":
        return "aten::fill_", [out, []], [F, "Scalar"]
    if name == "addmm":
        return "aten::addmm", shapes + [[], []], [F, F, F, "Scalar", "Scalar"]
    if name == "embedding":  # F.embedding(input, weight)
        return "aten::embedding", [shapes[1], shapes[0]], [F, LONG]
    if name in ("softmax", "dropout", "cumsum"):
        return f"aten::{name}", [shapes[0], [], []], [F, "Scalar", "Scalar"]
    return f"aten::{name}", shapes, [F] * len(shapes)


def backward_ops(name: str, dims: list, out: list) -> list[tuple[str, list, list]]:
    """The aten ops autograd runs for a forward op (their shapes)."""
    if name == "aten::linear":
        x, w = dims[0], dims[1]
        m = 1
        for d in x[:-1]:
            m *= d
        n, k = w
        return [("aten::mm", [[m, n], [n, k]], [F, F]), ("aten::mm", [[n, m], [m, k]], [F, F]),
                ("aten::sum", [[m, n], [], []], [F, "ScalarList", "Scalar"])]
    if name == "aten::addmm":
        x, w = dims[1], dims[2]
        m, k, n = x[0], x[1], w[1]
        return [("aten::mm", [[m, n], [n, k]], [F, F]), ("aten::mm", [[k, m], [m, n]], [F, F]),
                ("aten::sum", [[m, n], [], []], [F, "ScalarList", "Scalar"])]
    if name in ("aten::matmul", "aten::bmm"):
        a, b = dims[0], dims[1]
        return [("aten::matmul", [out, _swap(b)], [F, F]),
                ("aten::matmul", [_swap(a), out], [F, F])]
    if name == "aten::layer_norm":
        x, h = dims[0], dims[0][-1]
        stat = x[:-1] + [1]
        return [("aten::native_layer_norm_backward", [x, x, [], stat, stat, [h], [h]],
                 [F, F, "ScalarList", F, F, F, F])]
    if name == "aten::softmax":
        return [("aten::_softmax_backward_data", [out, out, [], []], [F, F, "Scalar", "Scalar"])]
    if name == "aten::embedding":
        return [("aten::embedding_dense_backward", [out, dims[1], [], [], []],
                 [F, LONG, "Scalar", "Scalar", "Scalar"])]
    tensors = max(1, sum(1 for d in dims if isinstance(d, list) and len(d) > 0 and d != [1]))
    return [("aten::mul", [out, out], [F, F])] * tensors


def _swap(shape: list[int]) -> list[int]:
    return shape[:-2] + [shape[-1], shape[-2]] if len(shape) >= 2 else shape


def accumulate_ops(name: str, dims: list) -> list[tuple[str, list, list]]:
    """AccumulateGrad's adds for the parameters of a forward op."""
    params = {"aten::linear": (1, 2), "aten::addmm": (2, 0), "aten::layer_norm": (2, 3),
              "aten::embedding": (0,)}.get(name, (0,))
    return [("aten::add_", [dims[i], dims[i]], [F, F]) for i in params]


def convert(label: Label) -> list[Op]:
    """The iteration's operators in order (forward, then backward in reverse)."""
    config = _model_config(label.model)
    floor = floor_ns(label)
    forward: list[Op] = []
    backward: list[Op] = []
    for row in expanded(label):
        fw, bw, acc = (int(round(float(row[k] or 0) * 1e6)) for k in
                       ("fw_latency", "bw_latency", "acc_latency"))
        signature = forward_op(row, config)
        if signature is None:
            if fw > 0:
                forward.append(Op(f"fx::{_method(row)}", host_ns=fw))
            continue
        name, dims, types = signature
        forward.append(Op(name, dims, types, floor, [max(fw - floor, 0)]))
        if label.mode == "train" and bw + acc > 0:
            backward.append(_backward(label.gpu, name, dims, _out(row), bw, acc, floor))
    return forward + backward[::-1]


def _backward(gpu: Gpu, name: str, dims: list, out: list, bw: int, acc: int, floor: int) -> Op:
    op = Op(f"autograd::engine::evaluate_function: {name.split('::')[-1]}Backward",
            host_ns=floor)
    if bw > 0:
        op.inner += _shared(gpu, backward_ops(name, dims, out or dims[0]), bw - floor, floor)
    if acc > 0:
        params = accumulate_ops(name, dims)
        op.inner += _shared(gpu, params, acc - floor * len(params), floor)
    return op


def _shared(gpu: Gpu, ops: list[tuple[str, list, list]], total: int, floor: int) -> list[Op]:
    """Ops sharing `total` ns of kernel time in proportion to their roofline times."""
    weights = [_roofline(gpu, *op) for op in ops]
    whole = sum(weights) or 1.0
    return [Op(name, dims, types, floor // len(ops) or 1, [max(int(total * w / whole), 0)])
            for (name, dims, types), w in zip(ops, weights)]


def _roofline(gpu: Gpu, name: str, dims: list, types: list) -> float:
    cost = op_cost(name, json.dumps(dims), types)
    if cost.flops is None:
        return 1e-6
    work = Work(cost.family or "elementwise", cost.family in MATRIX_FAMILIES, "fp32",
                cost.flops, cost.bytes)
    return roofline_seconds(gpu, work)


def _model_config(model: str) -> dict[str, Any]:
    path = CONFIGS / f"{model}.json"
    return json.loads(path.read_text()) if path.exists() else {}


# ---- the trace ---------------------------------------------------------------------------

def calibrate(ops: list[Op], e2e_ns: int, rounds: int = 4) -> float:
    """Scale every kernel so that the iteration lasts the label's measured end-to-end time
    (the host's dispatch time stays): the per-node times give the mix, the JSON the total.
    Returns the factor applied."""
    applied = 1.0
    for _ in range(rounds):
        length = span(ops)
        gpu = sum(k for op in _all(ops) for k in op.kernels)
        if length <= 0 or gpu <= 0:
            break
        scale = max(0.0, 1.0 + (e2e_ns - length) / gpu)
        for op in _all(ops):
            op.kernels = [int(round(k * scale)) for k in op.kernels]
        applied *= scale
    return applied


def span(ops: list[Op]) -> int:
    """The iteration's length in ns as the trace of these ops lays it out."""
    return _timeline(ops, [])[1] - START


def _all(ops: list[Op]) -> list[Op]:
    return [x for op in ops for x in [op, *_all(op.inner)]]


START = 1000 * US


def _timeline(ops: list[Op], events: list[dict[str, Any]]) -> tuple[list[int], int]:
    clock = [START, START]   # host, stream free at (ns)
    corr = [0]
    for op in ops:
        _emit(events, op, clock, corr)
    return clock, max(clock)


def trace(label: Label, ops: list[Op]) -> dict[str, Any]:
    """A Kineto trace of one iteration: a host thread dispatching ahead of one stream."""
    events: list[dict[str, Any]] = []
    clock, end = _timeline(ops, events)
    events.append(_x("cuda_runtime", "cudaDeviceSynchronize", clock[0], end - clock[0] + US))
    start = START - US
    events.insert(0, _x("user_annotation", "ProfilerStep#1", start, end + 2 * US - start))
    device = {"id": 0, "name": _driver_name(label.gpu),
              "totalGlobalMem": int((label.gpu.memory_gb or 0) * 1e9),
              "numSms": label.gpu.sm_count or 0}
    return {"schemaVersion": 1, "deviceProperties": [device], "traceEvents": events}


def _driver_name(gpu: Gpu) -> str:
    return gpu.names[0]


def _emit(events: list[dict[str, Any]], op: Op, clock: list[int], corr: list[int]) -> None:
    start = clock[0]
    args: dict[str, Any] = {}
    if op.dims is not None:
        args = {"Input Dims": op.dims, "Input type": op.types}
    body = [op.host_ns]
    span = _x("cpu_op", op.name, start, 0, args)
    events.append(span)
    for kernel_ns in op.kernels:
        corr[0] += 1
        launch_at = start + max(op.host_ns // 2, 1)
        events.append(_x("cuda_runtime", "cudaLaunchKernel", launch_at, US // 2,
                         {"correlation": corr[0]}))
        begin = max(launch_at + US, clock[1])
        events.append(_x("kernel", f"{op.name.split('::')[-1]}_kernel", begin, kernel_ns,
                         {"correlation": corr[0], "device": 0, "stream": 7}, pid=0, tid=7))
        clock[1] = begin + kernel_ns
    clock[0] = start + op.host_ns
    for inner in op.inner:
        _emit(events, inner, clock, corr)
    span["dur"] = _us(max(clock[0] - start, body[0]))
    clock[0] = start + max(clock[0] - start, body[0])


def _x(cat: str, name: str, ts: int, dur: int, args: dict[str, Any] | None = None,
       pid: int = 1, tid: int = 1) -> dict[str, Any]:
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": _us(ts),
             "dur": _us(dur)}
    if args:
        event["args"] = args
    return event


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def write_run(label: Label, out: Path) -> Path:
    """The label as a run folder OUT/<GPU folder>/<config>/ (trace.json, run.toml)."""
    folder = out / label.folder / label.config
    folder.mkdir(parents=True, exist_ok=True)
    ops = convert(label)
    calibrate(ops, int(round(label.e2e_ms * 1e6)))
    (folder / "trace.json").write_text(json.dumps(trace(label, ops)))
    (folder / "run.toml").write_text(
        f'model = "{label.model}"\nprecision = "fp32"\nbatch_size = {label.batch}\n'
        f'exec_mode = "{"training" if label.mode == "train" else "inference"}"\n'
        f'gpu = "{label.gpu.key}"\n# NeuSight label {label.folder}/{label.config}: '
        f'e2e_latency {label.e2e_ms} ms\n')
    return folder


def labels(folders: list[str] | None = None) -> list[Path]:
    """Every single-GPU label with a per-node CSV (no Switch, fusion or distributed run)."""
    found = []
    for path in sorted(LABELS.glob("*/*.csv")):
        if folders and path.parent.name not in folders:
            continue
        if LABEL_NAME.match(path.stem) and "switch" not in path.stem:
            found.append(path)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("folders", nargs="*", help="label GPU folders (default: all)")
    args = parser.parse_args()
    for path in labels(args.folders or None):
        print(write_run(read_label(path), args.out))


if __name__ == "__main__":
    main()
