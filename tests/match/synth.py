"""The Nsight Compute export a second run of the same program would give, written from the
kernels of a real corpus trace, with the truth kept (ncu_id → kernel_id).

What differs from the trace, as between two real runs:
  * a contiguous slice of the launch sequence (`--launch-skip/--launch-count`): one
    ProfilerStep iteration plus a few kernels when the trace has steps, else a random
    stretch; with `name_filter`, only kernels whose base name passes a `-k` filter (ncu
    counts skip/count among matching kernels);
  * the name style ncu prints: `base` (function name), `demangled` (template-dependent
    parameter types generic, `void gemm_v0<float>(T1 *, int)`, nested `>>`), `mangled`
    (Itanium symbols derived here only for plain C-style functions; extern "C" names stay
    as they are; the export is then `-k`-filtered to such kernels);
  * ≥ 2% of kernels replaced by another algorithm: another tile size in the name (or
    another leading numeric template argument, e.g. a vector width) and another grid;
  * data-dependent grids: a kernel whose grid varies over the trace's iterations gets the
    grid of the same step position in another iteration (another run sees other data);
  * device 0, other stream numbers, durations ×1.1 (locked clocks) ×U(0.7, 1.3).

The derivations of ncu name styles below are written independently of etl/core/kernel_names.py
(bracket deletion, not backward scanning) so that the tests do not check code by itself.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import build

MATCH_COLUMNS = ("kernel_id", "source_id", "device_id", "stream_id", "name", "ts_ns", "dur_ns",
                 "correlation_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                 "block_z", "launch_ts_ns")
BUILTIN_CODES = {"void": "v", "bool": "b", "char": "c", "signed char": "a",
                 "unsigned char": "h", "short": "s", "unsigned short": "t", "int": "i",
                 "unsigned int": "j", "long": "l", "unsigned long": "m", "long long": "x",
                 "unsigned long long": "y", "float": "f", "double": "d"}
# Stems people pass to `ncu -k regex:...`.
K_STEMS = ("gemm", "elementwise", "nccl", "reduce", "cudnn", "conv", "triton", "norm",
           "softmax", "index", "copy", "Kernel", "kernel_", "xmma", "fft", "scan", "sort")
_PLAIN = re.compile(r"[A-Za-z_]\w*")
_C_FUNCTION = re.compile(r"([A-Za-z_]\w*)\(([^()<>:]*)\)")
_TILE = re.compile(r"(\d+)x(\d+)")
_LEAD_NUMBER = re.compile(r"<(\d+), ")


@dataclass(frozen=True)
class TraceKernels:
    """A corpus trace's kernels (kind = kernel): the matcher's input and launch order."""

    table: pa.Table          # MATCH_COLUMNS, launch_ts_ns from the launching runtime call
    order: np.ndarray        # row indices in launch order
    iteration: np.ndarray    # per row, -1 outside ProfilerSteps
    step_index: np.ndarray   # per row, index within its iteration in launch order


@dataclass(frozen=True)
class NcuExport:
    table: pa.Table          # the matcher's ncu input
    truth: np.ndarray        # kernel_id of each ncu kernel (by ncu_id)
    swapped: np.ndarray      # bool per ncu kernel: another algorithm than in the trace
    sequence: np.ndarray     # rows (launch order, after -k) the slice was cut from
    start: int               # the slice is sequence[start:stop]
    stop: int


@cache
def load(path: str) -> TraceKernels:
    tables = build(read_trace(Path(path)), 0, None)
    kernels = tables.kernels.filter(pc.equal(tables.kernels["kind"], "kernel"))
    host = tables.host_events
    at = pc.index_in(kernels["launch_event_id"], host["event_id"])
    launch_ts = pc.take(host["ts_ns"], at)
    table = kernels.append_column("launch_ts_ns", launch_ts).select(list(MATCH_COLUMNS))
    first = np.asarray(pc.fill_null(pc.coalesce(launch_ts, kernels["ts_ns"]), 0))
    order = np.lexsort((np.asarray(kernels["kernel_id"]), np.asarray(pc.fill_null(
        kernels["ts_ns"], 0)), first))
    iteration = np.asarray(pc.fill_null(kernels["iteration"], -1))
    return TraceKernels(table, order, iteration, _step_index(order, iteration))


def _step_index(order: np.ndarray, iteration: np.ndarray) -> np.ndarray:
    index = np.zeros(len(order), dtype=np.int64)
    seen: dict[int, int] = {}
    for row in order.tolist():
        index[row] = seen.get(int(iteration[row]), 0)
        seen[int(iteration[row])] = index[row] + 1
    return index


# ---- ncu name styles ------------------------------------------------------------------------

def base_name(name: str) -> str:
    """ncu's function base: delete bracket groups innermost first, keep the last word. A
    trace name left mangled by the profiler gives the last name of its nested prefix."""
    if name.startswith("_Z"):
        return _mangled_function(name)
    text = name
    for pattern in (r"\([^()]*\)", r"<[^<>]*>", r"\{[^{}]*\}"):
        previous = None
        while previous != text:
            previous, text = text, re.sub(pattern, "", text)
    return re.split(r"::| ", text.strip())[-1]


def _mangled_function(symbol: str) -> str:
    names, at = [], 3 if symbol.startswith("_ZN") else 2
    while (length := re.match(r"\d+", symbol[at:])) is not None:
        start = at + length.end()
        names.append(symbol[start:start + int(length[0])])
        at = start + int(length[0])
    return names[-1] if names else symbol


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        depth += (ch in "<({") - (ch in ">)}")
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    tail = "".join(current).strip()
    return parts + [tail] if tail or parts else []


def _signature(name: str) -> tuple[str, list[str], list[str]] | None:
    """(head, template arguments, parameters) by a forward scan; None without parameters."""
    depth, params_at, template_at = 0, -1, -1
    for i, ch in enumerate(name):
        if ch in "(<{" and depth == 0:
            if ch == "(":
                params_at = i
            elif ch == "<":
                template_at = i
        depth += (ch in "(<{") - (ch in ")>}")
    if params_at < 0 or not name.endswith(")"):
        return None
    head = name[:params_at]
    if not (template_at >= 0 and head.endswith(">") and template_at < params_at):
        return head, [], _split_top(name[params_at + 1:-1])
    return name[:template_at], _split_top(head[template_at + 1:-1]), \
        _split_top(name[params_at + 1:-1])


def demangled_generic(name: str) -> str:
    """ncu's demangled style: parameters whose type is a template argument become T1, T2..."""
    parts = _signature(name)
    if parts is None:
        return name
    head, args, params = parts
    generic = [_generic_param(p, args) for p in params]
    template = f"<{', '.join(args)}>" if args else ""
    return f"{head}{template}({', '.join(generic)})".replace("> >", ">>").replace("> >", ">>")


def _generic_param(param: str, args: list[str]) -> str:
    for k, arg in enumerate(args, start=1):
        for suffix, spelled in (("", ""), ("*", " *"), (" const*", " const *")):
            if param == arg + suffix:
                return f"T{k}{spelled}"
    return re.sub(r"(\w)\*", r"\1 *", param)


def mangled(name: str) -> str | None:
    """Itanium symbol of an extern "C" name (itself) or a plain C-style function whose
    parameters are builtin, struct or pointer types; None when not derivable here."""
    if _PLAIN.fullmatch(name):
        return name
    match = _C_FUNCTION.fullmatch(name)
    if match is None:
        return None
    substitutions: list[str] = []
    params = [p.strip() for p in match[2].split(",") if p.strip()]
    encoded = [_mangle_type(p, substitutions) for p in params]
    if any(e is None for e in encoded):
        return None
    return f"_Z{len(match[1])}{match[1]}{''.join(e for e in encoded if e) or 'v'}"


def _mangle_type(param: str, substitutions: list[str]) -> str | None:
    words = param.replace("*", " * ").split()
    leading_const = words[:1] == ["const"]
    words = words[leading_const:]
    n_base = next((i for i, w in enumerate(words) if w in ("*", "const")), len(words))
    text = " ".join(words[:n_base])
    if text in BUILTIN_CODES:
        code = BUILTIN_CODES[text]
    elif _PLAIN.fullmatch(text):
        code = _substituted(f"{len(text)}{text}", substitutions)
    else:
        return None
    for word in ["const"] * leading_const + words[n_base:]:
        code = _substituted(("K" if word == "const" else "P") + code, substitutions)
    return code


def _substituted(component: str, substitutions: list[str]) -> str:
    """A component seen before is written S_, S0_, S1_…; a new one is remembered."""
    if component in substitutions:
        k = substitutions.index(component)
        return "S_" if k == 0 else f"S{np.base_repr(k - 1, 36)}_"
    substitutions.append(component)
    return component


def ncu_name(name: str, style: str) -> str | None:
    if style == "base":
        return base_name(name)
    if style == "demangled":
        return demangled_generic(name)
    return mangled(name)


# ---- another algorithm ------------------------------------------------------------------------

def swapped_variant(name: str, grid_x: int) -> tuple[str, int] | None:
    """Another algorithm for the same call: another tile (128x64 → 64x128) or another leading
    numeric template argument (vector width 4 → 2), and a grid scaled to match."""
    tile = _TILE.search(name)
    if tile:
        a, b = int(tile[1]), int(tile[2])
        new_a, new_b = (b, a) if a != b else (2 * a, b)
        ratio = a / new_a
        new_name = name.replace(tile[0], f"{new_a}x{new_b}")
    elif lead := _LEAD_NUMBER.search(name):
        old = int(lead[1])
        new = old // 2 if old > 1 else 2
        ratio = old / new
        new_name = name.replace(lead[0], f"<{new}, ", 1)
    else:
        return None
    new_grid = max(1, round(grid_x * ratio))
    return new_name, new_grid if new_grid != grid_x else grid_x + 1


# ---- the export -------------------------------------------------------------------------------

def make_export(kernels: TraceKernels, style: str, seed: int, name_filter: bool = False,
                swap_share: float = 0.02, data_grids: bool = True) -> NcuExport:
    rng = np.random.default_rng(seed)
    names = kernels.table["name"].to_pylist()
    sequence = _filtered(kernels.order, names, style, name_filter, rng)
    start, stop = _slice(kernels, sequence, rng)
    rows = sequence[start:stop]
    grid = np.stack([np.asarray(pc.fill_null(kernels.table[c], 0))
                     for c in ("grid_x", "grid_y", "grid_z")], axis=1)[rows]
    if data_grids:
        grid = _other_iteration_grids(kernels, rows, grid, rng)
    chosen_names = [names[r] for r in rows.tolist()]
    swapped = _swap(chosen_names, grid, swap_share, rng)
    table = _ncu_table(kernels, rows, chosen_names, grid, style, rng)
    truth = np.asarray(kernels.table["kernel_id"])[rows]
    return NcuExport(table, truth, swapped, sequence, start, stop)


def _filtered(order: np.ndarray, names: list[str], style: str, name_filter: bool,
              rng: np.random.Generator) -> np.ndarray:
    """Launch-order rows passing the -k filter (matched against the base name, as ncu does
    by default): in mangled style, the base names all of whose kernels have a derivable
    symbol (`-k regex:^(a|b|...)$`); else one or two of the usual stems that each select
    ≥ 5% of the kernels (`-k regex:gemm|nccl`)."""
    if style == "mangled":
        return order[_mangleable_bases(order, names)]
    if not name_filter:
        return order
    bases = np.array([base_name(names[r]) for r in order.tolist()])
    usable = [s for s in K_STEMS if np.char.find(bases, s).__ge__(0).mean() >= 0.05]
    chosen = rng.choice(usable, size=min(len(usable), int(rng.integers(1, 3))), replace=False)
    pattern = re.compile("|".join(chosen))
    return order[[pattern.search(b) is not None for b in bases.tolist()]]


def _mangleable_bases(order: np.ndarray, names: list[str]) -> np.ndarray:
    bases = [base_name(names[r]) for r in order.tolist()]
    derivable = [mangled(names[r]) is not None for r in order.tolist()]
    blocked = {b for b, ok in zip(bases, derivable) if not ok}
    return np.array([b not in blocked for b in bases], dtype=bool)


def _slice(kernels: TraceKernels, sequence: np.ndarray, rng: np.random.Generator
           ) -> tuple[int, int]:
    """One iteration plus a few kernels (a few before it too), or a random stretch."""
    steps = kernels.iteration[sequence]
    numbers = sorted(set(steps.tolist()) - {-1})
    if len(numbers) >= 2:
        step = numbers[int(rng.integers(len(numbers)))]
        inside = np.flatnonzero(steps == step)
        start = max(0, int(inside[0]) - int(rng.integers(0, 4)))
        return start, min(len(sequence), int(inside[-1]) + 1 + int(rng.integers(1, 12)))
    if len(sequence) < 2:
        return 0, len(sequence)
    count = int(rng.integers(max(1, len(sequence) // 3), len(sequence) + 1))
    start = int(rng.integers(0, len(sequence) - count + 1))
    return start, start + count


def _other_iteration_grids(kernels: TraceKernels, rows: np.ndarray, grid: np.ndarray,
                           rng: np.random.Generator) -> np.ndarray:
    """Grid of the same name at the same step index in a random iteration."""
    names = kernels.table["name"].to_pylist()
    all_grid = np.stack([np.asarray(pc.fill_null(kernels.table[c], 0))
                         for c in ("grid_x", "grid_y", "grid_z")], axis=1)
    at: dict[tuple[int, str], list[int]] = {}
    for row in np.flatnonzero(kernels.iteration >= 0).tolist():
        at.setdefault((int(kernels.step_index[row]), names[row]), []).append(row)
    out = grid.copy()
    for k, row in enumerate(rows.tolist()):
        peers = at.get((int(kernels.step_index[row]), names[row]), []) \
            if kernels.iteration[row] >= 0 else []
        if peers:
            out[k] = all_grid[peers[int(rng.integers(len(peers)))]]
    return out


def _swap(names: list[str], grid: np.ndarray, share: float, rng: np.random.Generator
          ) -> np.ndarray:
    """Replace ceil(share·n) kernels (where a variant can be written) by another algorithm,
    in place; returns the mask of replaced kernels."""
    variants = {k: v for k, name in enumerate(names)
                if (v := swapped_variant(name, int(grid[k, 0]))) is not None}
    wanted = min(len(variants), math.ceil(share * len(names)))
    chosen = rng.choice(sorted(variants), size=wanted, replace=False) if wanted else []
    swapped = np.zeros(len(names), dtype=bool)
    for k in chosen:
        names[k], grid[k, 0] = variants[int(k)]
        swapped[k] = True
    return swapped


def _ncu_table(kernels: TraceKernels, rows: np.ndarray, names: list[str], grid: np.ndarray,
               style: str, rng: np.random.Generator) -> pa.Table:
    table = kernels.table
    block = {c: np.asarray(pc.fill_null(table[c], 0))[rows] for c in ("block_x", "block_y",
                                                                        "block_z")}
    dur = np.asarray(pc.fill_null(table["dur_ns"], 0))[rows].astype(np.float64)
    noisy = np.rint(dur * 1.1 * rng.uniform(0.7, 1.3, len(rows))).astype(np.int64)
    stream = np.asarray(pc.fill_null(table["stream_id"], 0))[rows]
    return pa.table({
        "ncu_id": pa.array(np.arange(len(rows)), pa.int64()),
        "kernel_name": pa.array([ncu_name(n, style) for n in names], pa.string()),
        "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2], **block,
        "duration_ns": pa.array(noisy, pa.int64()),
        "device": pa.array(np.zeros(len(rows), dtype=np.int64)),
        "stream": pa.array(stream * 3 + 13),
    })


# ---- scoring against the truth ----------------------------------------------------------------

@dataclass(frozen=True)
class Quality:
    precision: float
    recall: float
    matched: int
    correct: int
    ncu: int


def quality(kernels: TraceKernels, export: NcuExport, result: pa.Table) -> Quality:
    """Precision and recall of the 'matched' rows of a match_kernels result (see
    correct_pairs for what counts as correct)."""
    correct = int(correct_pairs(kernels, export, result).sum())
    matched = int(pc.sum(pc.equal(result["match_status"], "matched")).as_py() or 0)
    precision = correct / matched if matched else 1.0  # nothing claimed, nothing wrong
    return Quality(precision, correct / max(1, len(export.truth)), matched, correct,
                   len(export.truth))


def correct_pairs(kernels: TraceKernels, export: NcuExport, result: pa.Table) -> np.ndarray:
    """Per 'matched' row (in result order): is it the true kernel or an equivalent one?
      * same index within its ProfilerStep iteration, the two iterations having the same
        kernel names and block sizes in the same order (grids may differ: data-dependent);
      * or at the same place of an identical stretch: shifting the whole true slice by the
        same δ along the launch sequence gives the same names and blocks everywhere.
    Positions are taken in the sequence the slice was cut from (after the -k filter)."""
    matched = result.filter(pc.equal(result["match_status"], "matched"))
    row_of = {int(k): r for r, k in enumerate(np.asarray(kernels.table["kernel_id"]).tolist())}
    where = {r: p for p, r in enumerate(export.sequence.tolist())}
    judge = _Equivalence(kernels, export)
    verdicts = []
    for ncu_id, kernel_id in zip(np.asarray(matched["ncu_id"]).tolist(),
                                 np.asarray(matched["kernel_id"]).tolist()):
        predicted = where.get(row_of[kernel_id])
        verdicts.append(predicted is not None and judge(export.start + ncu_id, predicted))
    return np.array(verdicts, dtype=bool)


class _Equivalence:
    def __init__(self, kernels: TraceKernels, export: NcuExport) -> None:
        identity = _identity(kernels)[export.sequence]
        self.identity, self.start, self.stop = identity, export.start, export.stop
        self.step = kernels.iteration[export.sequence]
        self.index = np.zeros(len(identity), dtype=np.int64)
        content: dict[int, list[int]] = {}
        for p, (step, ident) in enumerate(zip(self.step.tolist(), identity.tolist())):
            self.index[p] = len(content.setdefault(step, []))
            content[step].append(ident)
        self.content = {step: tuple(seq) for step, seq in content.items()}
        self.shifts: dict[int, bool] = {}

    def __call__(self, truth: int, predicted: int) -> bool:
        if truth == predicted:
            return True
        a, b = int(self.step[truth]), int(self.step[predicted])
        if a >= 0 and b >= 0 and self.index[truth] == self.index[predicted] \
                and self.content[a] == self.content[b]:
            return True
        delta = predicted - truth
        if delta not in self.shifts:
            self.shifts[delta] = _same_when_shifted(self.identity, self.start, self.stop, delta)
        return self.shifts[delta]


def _identity(kernels: TraceKernels) -> np.ndarray:
    """An integer per (name, block) of each row."""
    keys = list(zip(kernels.table["name"].to_pylist(),
                    *(kernels.table[c].to_pylist() for c in ("block_x", "block_y", "block_z"))))
    ids: dict[tuple[object, ...], int] = {}
    return np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)


def _same_when_shifted(identity: np.ndarray, start: int, stop: int, delta: int) -> bool:
    if start + delta < 0 or stop + delta > len(identity):
        return False
    return bool((identity[start:stop] == identity[start + delta:stop + delta]).all())


def identifiable(kernels: TraceKernels, export: NcuExport, style: str) -> bool:
    """False when another place of the (filtered) sequence looks the same as the true slice
    in everything the ncu export shows (name as printed in this style, grid, block) but
    holds other kernels: no matcher can know which place is meant, so 'ambiguous' is the
    right answer there and recall cannot be asked for."""
    names = kernels.table["name"].to_pylist()
    dims = [kernels.table[c].to_pylist() for c in ("grid_x", "grid_y", "grid_z", "block_x",
                                                   "block_y", "block_z")]
    rows = export.sequence.tolist()
    shown = _ids([(_shown_name(names[r], style), *(d[r] for d in dims)) for r in rows])
    true = _ids([(names[r], *(d[r] for d in dims[3:])) for r in rows])
    needle = shown[export.start:export.stop].tobytes()
    haystack = shown.tobytes()
    at = haystack.find(needle)
    while at >= 0:
        start = at // 4
        if at % 4 == 0 and start != export.start and not np.array_equal(
                true[start:start + export.stop - export.start],
                true[export.start:export.stop]):
            return False
        at = haystack.find(needle, at + 1)
    return True


def _shown_name(name: str, style: str) -> str:
    """What of a name survives in the ncu export's style: the base name in base style and
    for mangled symbols (no demangler here), the name without parameters otherwise."""
    printed = ncu_name(name, style) or name
    if style == "base" or printed.startswith("_Z"):
        return base_name(name)
    parts = _signature(printed)
    return printed if parts is None else parts[0] + ("<" + ", ".join(parts[1]) + ">"
                                                     if parts[1] else "")


def _ids(keys: list[tuple[object, ...]]) -> np.ndarray:
    seen: dict[tuple[object, ...], int] = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.int32)
