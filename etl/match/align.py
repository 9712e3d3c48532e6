"""Trace ↔ Nsight Compute kernel matching, offline (Delestrac et al., DATE 2024, §IV).

The framework trace and the ncu export come from two runs of the same program. Both list
kernels in launch order; ncu usually covers a contiguous slice (`--launch-skip/-count`),
sometimes only kernels whose name passes `-k`. Names are printed in other styles, device and
stream numbers differ, durations differ (ncu locks clocks, flushes caches), and cuDNN/cuBLAS
may pick another algorithm in one run (another tile size in the name, another grid).

Rule
----
1. Order. Trace kernels by (source_id, launch_ts_ns when that column exists — give it: with
   several streams the GPU start order is not the launch order ncu sees — else ts_ns, then
   ts_ns, kernel_id); ncu kernels by ncu_id. Correlation ids are never used, so the kernels
   of one CUDA-graph launch are matched one by one.
2. Keys (etl/core/kernel_names.py). An ncu kernel's *token* is the strongest name key its
   style carries
   (full = name + template arguments, when some trace kernel has that full key; else base)
   plus grid and block; its *family* (digits of the base masked) admits algorithm variants.
   Trace kernels whose name no ncu kernel has (filtered by -k, not profiled) are set aside;
   the rest are *known*.
3. Where. Pairs of equal rare tokens vote for the offset between the ncu sequence and the
   known trace kernels, once with shapes and once with names alone (rare shapes are often
   data-dependent grids, which differ between runs). For each best-voted offset (a repeated
   layer or iteration apart, ≤ 8 per vote) a band centre is tracked block by block from the
   nearest equal tokens, so drift from inserted or missing kernels is followed; bands whose
   centres agree with the ncu tokens within 1% of the best are aligned by Needleman–Wunsch
   restricted to ±32 kernels around the centre. Scores: equal token +2, same family +0.25,
   an unpaired kernel −1, a jump over a block of trace kernels −8; the trace before and
   after the slice is free. The best alignment wins; ties go to the earliest.
4. Variants. A same-family pair with another name or shape stands only between exact pairs
   on one diagonal (≤ 8 in a row). Unpaired ncu kernels between two exact pairs (or at the
   export's ends) pair with the unpaired trace kernels of the same families found there when
   the families agree in order; otherwise they stay unmatched (precision first).
5. Leftovers. An unpaired ncu kernel and an unpaired trace kernel with the same token within
   the band pair when each is the only candidate of the other (streams reordered).
6. Ties. Where another alignment scores as well and gives an exactly paired ncu kernel
   another kind of trace kernel (full name or shape differ — e.g. ncu printed only base
   names), or where identical kernels in a row differ in count between the runs, duration
   decides if it clearly can (within 1.5× of the typical ncu/trace ratio and 1.5–2× closer
   than the rest); otherwise the candidates are 'ambiguous' (ncu_id NULL). Alignments that
   give identical kernels (repeated identical iterations) are equivalent: the earliest is
   kept.
7. Score (NULL unless matched) = 0.5·name (1 for an equal key, else 0.8 × word similarity
   of the base names) + 0.3·shape (grid, block equal) + 0.2·order (share of path neighbours
   right beside it in both sequences). Duration never scores; it only breaks ties.

Example: ncu `-k regex:fill|gemm|relu --launch-skip 0 --launch-count 4
--print-kernel-base function` on GPU 0 of a run where cuBLAS chose a 64x64 tile::

    trace (device 1, stream 7)                ncu (device 0, stream 13)
    kernel_id  name                      grid  ncu_id  kernel_name              grid
    10         void k::fill<4>(int, ...)   64  0       fill                       64
    11         ampere_sgemm_128x64_nn      96  1       ampere_sgemm_64x64_nn     192
    12         void k::relu<4>(int, ...)   64  2       relu                       64
    13         void k::copy<4>(int, ...)   64  3       fill                       64
    14         void k::fill<4>(int, ...)   64
    15         ampere_sgemm_128x64_nn      96
    16         void k::relu<4>(int, ...)   64

    → kernel_id  ncu_id  match_status  reason                                          score
      10         0       matched       NULL                                            1.0
      11         1       matched       another variant of this kernel (...) at the     0.68
                                       same position
      12         2       matched       NULL                                            1.0
      13         NULL    unmatched     no ncu kernel with this name (filtered out ...) NULL
      14         3       matched       NULL                                            1.0
      15         NULL    unmatched     outside the ncu range                           NULL
      16         NULL    unmatched     outside the ncu range                           NULL

Cost: O((n + m) log n) for keys and votes, O(m · 65) per aligned band; memory linear in
n + m (no n × m matrix): 10^5 × 10^5 kernels take ~3 s and ~120 MiB (bench/match_bench.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.core import kernel_names as names

if TYPE_CHECKING:
    import pyarrow as pa

EXACT, VARIANT, GAP, RESTART = 2.0, 0.25, 1.0, 8.0
BAND = 32          # half-width of the alignment band, in kernels
MAX_VARIANT_RUN = 8   # variants in a row still confirmed by the exact pairs around them
CANDIDATES = 8     # tied offsets previewed (and aligned in full if their preview ties too)
SHIFTS = 64        # further tied offsets checked as rigid shifts of the best alignment
NEG = -1e9         # impossible; far below any real score, yet exact in float64 arithmetic
DIMS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")

OUTSIDE = "outside the ncu range"
NO_NAME = "no ncu kernel with this name (filtered out or not profiled)"
NO_TOKEN = "no ncu kernel with this name and shape at this position"
VARIANT_OK = "another variant of this kernel (name or shape differs) at the same position"
VARIANT_NO = "only a same-family kernel with another name or shape here, position unconfirmed"
REORDERED = "matched off the aligned order (streams reordered?)"
BY_DURATION = "tie between identical kernels broken by duration"
NO_NCU = "the ncu export has no kernels"


@dataclass
class _Side:
    """One side in launch order: position q holds input row rows[q]."""

    rows: np.ndarray
    keys: list[names.NameKeys]      # per unique name
    name_idx: np.ndarray            # position → unique name (-1: NULL name)
    shape: np.ndarray               # (n, 6), -1 where unknown
    dur: np.ndarray                 # float ns, nan where unknown
    ids: np.ndarray                 # kernel_id / ncu_id


@dataclass
class _Problem:
    """Integer view of both sides. Trace arrays are per launch position; k_* arrays cover
    the 'known' trace kernels only (a name some ncu kernel has), where alignment runs."""

    tok: np.ndarray         # (4, n) token per variant: full/base key × with/without shape
    ident: np.ndarray       # (n,) the trace's own strongest key + shape
    fam: np.ndarray         # (n,) family id, -1 when no ncu kernel has that family
    base: np.ndarray        # (n,) base-name id
    keep: np.ndarray        # positions of the known kernels
    kidx: np.ndarray        # (n,) index into keep, -1 when not known
    n_tok: np.ndarray       # (m,) token, -2 when the name gives no key
    n_var: np.ndarray       # (m,) variant index into tok
    n_fam: np.ndarray
    n_base: np.ndarray
    n_name_tok: np.ndarray  # (m,) token of the name alone (variant n_var | 2)
    k_tok: np.ndarray       # tok[:, keep]
    k_fam: np.ndarray       # fam[keep]


@dataclass
class _Path:
    offset: int
    score: float
    j: np.ndarray           # ncu positions, increasing
    f: np.ndarray           # paired known-kernel index


@dataclass
class _Pairs:
    """Accepted pairs, sorted by ncu position; reason None = clean."""

    j: np.ndarray
    pos: np.ndarray
    reason: np.ndarray


def match_kernels(trace: pa.Table, ncu: pa.Table) -> pa.Table:
    """One row per trace kernel (input order): kernel_id, ncu_id, match_status, reason,
    score. See the module docstring for the rule."""
    t_side = _side(trace, _launch_order(trace), "name", trace["dur_ns"], "kernel_id")
    n_side = _side(ncu, _ncu_order(ncu), "kernel_name", ncu["duration_ns"], "ncu_id")
    outcome = _Outcome.empty(len(t_side.rows), NO_NCU if len(n_side.rows) == 0 else NO_NAME)
    if len(n_side.rows):
        problem = _problem(t_side, n_side)
        outcome.reason[problem.fam >= 0] = NO_TOKEN
        best, rivals, shifts = _align(problem) if len(problem.keep) else (None, [], [])
        if best is not None:
            _settle(problem, t_side, n_side, best, rivals, shifts, outcome)
    return _result(t_side, n_side, outcome)


# ---- the two sides ------------------------------------------------------------------------

def _launch_order(trace: pa.Table) -> np.ndarray:
    n = trace.num_rows
    ts = _ints(trace, "ts_ns", np.iinfo(np.int64).max)
    launch = _ints(trace, "launch_ts_ns", -1) if "launch_ts_ns" in trace.column_names else None
    first = ts if launch is None else np.where(launch >= 0, launch, ts)
    source = _ints(trace, "source_id", 0) if "source_id" in trace.column_names else np.zeros(n)
    return np.lexsort((_ints(trace, "kernel_id", 0), ts, first, source))


def _ncu_order(ncu: pa.Table) -> np.ndarray:
    return np.argsort(_ints(ncu, "ncu_id", 0), kind="stable")


def _ints(table: pa.Table, column: str, fill: int) -> np.ndarray:
    import pyarrow.compute as pc

    values = pc.fill_null(table[column], fill).combine_chunks()
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def _side(table: pa.Table, order: np.ndarray, name_column: str, dur: Any, id_column: str
          ) -> _Side:
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(table[name_column].combine_chunks())
    idx = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False))
    shape = np.stack([_ints(table, c, -1) for c in DIMS], axis=1)
    durations = np.asarray(pc.cast(dur, pa.float64()).to_numpy(zero_copy_only=False))
    return _Side(rows=order, keys=[names.keys_of(u) for u in encoded.dictionary.to_pylist()],
                 name_idx=idx[order].astype(np.int64), shape=shape[order],
                 dur=durations[order].astype(np.float64), ids=_ints(table, id_column, -1)[order])


def _problem(t: _Side, n: _Side) -> _Problem:
    """Joint integer ids for the names, shapes and families of both sides."""
    ids: dict[tuple[str, str], int] = {}
    t_full, t_base = _key_ids(t, "full", ids, True), _key_ids(t, "base", ids, True)
    n_full, n_base = _key_ids(n, "full", ids, False), _key_ids(n, "base", ids, True)
    families: dict[tuple[str, str], int] = {}
    n_fam = _key_ids(n, "family", families, True)
    shape_id, unknown = _shape_ids(t.shape, n.shape)
    t_sid, n_sid = shape_id[:len(t.shape)], shape_id[len(t.shape):]
    # grids are compared only where most trace kernels report one (AMD traces do not)
    n_shaped = (n.shape >= 0).all(axis=1) & (2 * (t.shape[:, 0] >= 0).sum() >= len(t.shape))
    stride, level = unknown + 1, np.where(n_full >= 0, 0, 1)
    tok = np.stack([_token(t_full, t_sid, stride), _token(t_base, t_sid, stride),
                    _token(t_full, unknown, stride), _token(t_base, unknown, stride)])
    n_name = np.where(level == 0, n_full, n_base)
    n_tok = np.where(n_name >= 0, _token(n_name, np.where(n_shaped, n_sid, unknown), stride), -2)
    n_var = level + 2 * ~n_shaped
    known = np.zeros(len(t.shape), dtype=bool)  # some ncu kernel has its name (any shape)
    for lv in np.unique(level).tolist():
        known |= np.isin(tok[2 + lv], _token(n_name[level == lv], unknown, stride))
    keep = np.flatnonzero(known)
    kidx = np.full(len(known), -1, dtype=np.int64)
    kidx[keep] = np.arange(len(keep))
    fam = _key_ids(t, "family", families, False)
    return _Problem(tok=tok, ident=np.where(tok[0] >= 0, tok[0], tok[1]), fam=fam,
                    base=t_base, keep=keep, kidx=kidx, n_tok=n_tok, n_var=n_var, n_fam=n_fam,
                    n_base=n_base, k_tok=tok[:, keep], k_fam=fam[keep],
                    n_name_tok=np.where(n_name >= 0, _token(n_name, unknown, stride), -2))


def _key_ids(side: _Side, kind: str, ids: dict[tuple[str, str], int], add: bool) -> np.ndarray:
    per_unique = np.full(len(side.keys) + 1, -1, dtype=np.int64)  # last slot: NULL name
    for u, keys in enumerate(side.keys):
        key = getattr(keys, kind)
        if key is not None and (add or (kind, key) in ids):
            per_unique[u] = ids.setdefault((kind, key), len(ids))
    return per_unique[side.name_idx]


def _shape_ids(t_shape: np.ndarray, n_shape: np.ndarray) -> tuple[np.ndarray, int]:
    both = np.concatenate([t_shape, n_shape])
    if len(both) == 0:
        return np.zeros(0, dtype=np.int64), 0
    _, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    return inverse, int(inverse.max()) + 1


def _token(name_id: np.ndarray, shape_id: np.ndarray | int, stride: int) -> np.ndarray:
    return np.where(name_id >= 0, name_id * stride + shape_id, -1)


# ---- where: offset votes, band, banded alignment --------------------------------------------

def _align(p: _Problem) -> tuple[_Path | None, list[_Path], list[int]]:
    """Best path (ties: the earliest), the other candidates' paths that score as well, and
    the offsets of further tied places (checked later as rigid shifts of the best path)."""
    keys, stride = _trace_keys(p, p.n_var)
    offsets, starts = _voted_offsets(p, p.n_tok, keys, stride)
    # names alone too: rare name+shape tokens are often data-dependent grids, which another
    # run draws differently, so they may favour a wrong iteration
    name_offsets, name_starts = _voted_offsets(p, p.n_name_tok, *_trace_keys(p, p.n_var | 2))
    bands = []
    for d, start in list(zip(offsets, starts))[:CANDIDATES] + \
            list(zip(name_offsets, name_starts))[:CANDIDATES]:
        centers = _centers(p, keys, stride, d, start)
        bands.append((_agreement(p, centers), d, centers))
    paths: list[_Path] = []
    for agreement, d, centers in bands:
        # a band that agrees clearly less is not aligned; one inside a found path adds nothing
        if agreement >= max(b[0] for b in bands) - 0.01 and not any(_covers(q, d) for q in paths):
            paths.append(_banded_alignment(p, centers, d))
    if not paths:
        return None, [], []
    best = max(paths, key=lambda q: (q.score, -q.offset))
    rivals = [q for q in paths if q is not best and q.score >= best.score - 1e-9]
    return best, rivals, offsets + name_offsets


def _voted_offsets(p: _Problem, n_tok: np.ndarray, keys: np.ndarray, stride: int
                   ) -> tuple[list[int], list[int]]:
    """Tied best offsets and, for each, the median ncu row whose pairs vote for it."""
    exact, smooth, pair_d, pair_j = _offset_votes(p, n_tok, keys, stride)
    offsets = _candidate_offsets((exact, smooth), len(n_tok), CANDIDATES + SHIFTS)
    starts = []
    for d in offsets[:CANDIDATES]:
        support = pair_j[pair_d == d]
        starts.append(int(np.median(support)) if len(support) else 0)
    return offsets, starts


def _agreement(p: _Problem, centers: np.ndarray) -> float:
    """Share of ncu kernels with an equal token within ±2 of the band centre: a cheap
    preview of how well a band will align."""
    n = p.k_tok.shape[1]
    cols = np.clip(centers[:, None] + np.arange(-2, 3)[None, :], 0, n - 1)
    return float((p.k_tok[p.n_var[:, None], cols] == p.n_tok[:, None]).any(axis=1).mean())


def _covers(path: _Path, offset: int) -> bool:
    if len(path.j) == 0:
        return False
    drift = path.f - path.j
    return int(drift.min()) - BAND <= offset <= int(drift.max()) + BAND


def _trace_keys(p: _Problem, variants: np.ndarray) -> tuple[np.ndarray, int]:
    """Sorted (token, position) keys of the known trace kernels, for the variants in use."""
    n = p.k_tok.shape[1]
    parts = []
    for v in np.unique(variants):
        tok = p.k_tok[v]
        ok = tok >= 0
        parts.append(tok[ok] * (n + 1) + np.flatnonzero(ok))
    return np.sort(np.concatenate(parts)), n + 1


def _offset_votes(p: _Problem, n_tok: np.ndarray, keys: np.ndarray, stride: int
                  ) -> tuple[np.ndarray, ...]:
    """Votes per offset d = f − j (index d + m − 1) from pairs of equal rare tokens, each
    ncu kernel spreading one vote over its occurrences: exact, and summed over ±4 (drift);
    then the pairs' offsets and ncu rows (where an offset holds)."""
    t_tok, t_pos = keys // stride, keys % stride
    m, n = len(n_tok), stride - 1
    j_order = np.argsort(n_tok, kind="stable")
    t_cnt, n_cnt, t_start, n_start = _common_tokens(t_tok, n_tok[j_order])
    chosen, n_cnt = _rare_tokens(t_cnt, n_cnt, budget=8 * (n + m) + 1000)
    fi, ji, weight = _pairs(t_start[chosen], t_cnt[chosen], n_start[chosen], n_cnt[chosen])
    d = t_pos[fi] - j_order[ji]
    votes = np.bincount(d + m - 1, weights=weight, minlength=n + m - 1)
    window = np.cumsum(np.concatenate([[0.0], votes]))
    lo = np.clip(np.arange(len(votes)) - 4, 0, len(votes))
    hi = np.clip(np.arange(len(votes)) + 5, 0, len(votes))
    return votes, window[hi] - window[lo], d, j_order[ji]


def _rare_tokens(t_cnt: np.ndarray, n_cnt: np.ndarray, budget: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (rarest pairs first) whose pairs fit the budget, so memory stays linear; when
    even the rarest does not fit (a sequence of two alternating kernels), the rarest with
    only as many of its ncu occurrences as fit. Returns (chosen, usable ncu counts)."""
    chosen = np.argsort(t_cnt * n_cnt, kind="stable")
    fits = chosen[np.cumsum((t_cnt * n_cnt)[chosen]) <= budget]
    if len(fits) or len(chosen) == 0:
        return fits, n_cnt
    n_cnt = n_cnt.copy()
    n_cnt[chosen[0]] = max(1, min(int(n_cnt[chosen[0]]), budget // int(t_cnt[chosen[0]])))
    return chosen[:1], n_cnt


def _common_tokens(t_tok: np.ndarray, n_sorted: np.ndarray) -> tuple[np.ndarray, ...]:
    """(count in trace, count in ncu, first index in each sorted array) of shared tokens."""
    t_vals, t_start, t_cnt = np.unique(t_tok, return_index=True, return_counts=True)
    n_vals, n_start, n_cnt = np.unique(n_sorted, return_index=True, return_counts=True)
    _, ti, ni = np.intersect1d(t_vals, n_vals, assume_unique=True, return_indices=True)
    return t_cnt[ti], n_cnt[ni], t_start[ti], n_start[ni]


def _pairs(t_start: np.ndarray, t_cnt: np.ndarray, n_start: np.ndarray,
           n_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (trace, ncu) index pairs of the chosen tokens, without a Python loop."""
    sizes = t_cnt * n_cnt
    group = np.repeat(np.arange(len(sizes)), sizes)
    local = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    fi = t_start[group] + local // n_cnt[group]
    ji = n_start[group] + local % n_cnt[group]
    return fi, ji, 1.0 / t_cnt[group]


def _candidate_offsets(votes: tuple[np.ndarray, np.ndarray], m: int, most: int) -> list[int]:
    """Offsets whose exact votes are within 1% of the best (then by smoothed votes, then the
    earliest), at least BAND/2 apart: a shift by a repeated layer or iteration is a separate
    candidate, a smaller one is inside the band."""
    exact, smooth = votes
    if len(exact) == 0 or exact.max() <= 0:
        return []
    best = exact.max()
    near = np.flatnonzero(exact >= best - max(1e-9, 0.01 * best))
    ranked = near[np.lexsort((near, -smooth[near], -exact[near]))]
    chosen: list[int] = []
    for index in ranked[:10_000].tolist():
        if all(abs(index - c) >= BAND // 2 for c in chosen):
            chosen.append(index)
        if len(chosen) == most:
            break
    return [c - (m - 1) for c in chosen]


def _centers(p: _Problem, keys: np.ndarray, stride: int, offset: int, start: int
             ) -> np.ndarray:
    """Band centre per ncu kernel. From the row where the voted offset holds, block by block
    forwards and then backwards, the offset is re-read as the median offset to the nearest
    occurrence of each token around the current diagonal: insertions and deletions between
    the runs make it drift, and the band follows."""
    m, n, block = len(p.n_tok), stride - 1, 128
    count = (m + block - 1) // block
    offsets = np.zeros(count)
    first = min(start // block, count - 1)
    for blocks in (range(first, count), range(first - 1, -1, -1)):
        current = float(offset if blocks.start == first else offsets[first])
        for b in blocks:
            rows = np.arange(b * block, min(m, (b + 1) * block))
            target = np.clip(rows + int(round(current)), 0, n - 1)
            near = _nearest(keys, stride, p.n_tok[rows], target)
            ok = (near >= 0) & (np.abs(near - target) <= BAND)
            if ok.sum() >= 3:
                current = float(np.median(near[ok] - rows[ok]))
            offsets[b] = current
    middles = np.arange(count) * block + block / 2
    centre = np.rint(np.arange(m) + np.interp(np.arange(m), middles, offsets))
    return np.maximum.accumulate(np.clip(centre, 0, n - 1).astype(np.int64))


def _nearest(keys: np.ndarray, stride: int, tok: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Kept-trace index of the occurrence of tok nearest to target; -1 when none."""
    if len(keys) == 0:
        return np.full(len(tok), -1, dtype=np.int64)
    at = np.searchsorted(keys, tok * stride + target)
    after = keys[np.minimum(at, len(keys) - 1)]
    before = keys[np.maximum(at - 1, 0)]
    after_ok = (at < len(keys)) & (after // stride == tok)
    before_ok = (at > 0) & (before // stride == tok)
    a, b = after % stride, before % stride
    pick_after = after_ok & (~before_ok | (a - target < target - b))
    return np.where(pick_after, a, np.where(before_ok, b, -1))


def _band_scores(p: _Problem, centers: np.ndarray, j0: int, j1: int) -> np.ndarray:
    """Pair scores of ncu kernels j0..j1 against their band of known trace kernels."""
    n = p.k_tok.shape[1]
    cols = centers[j0:j1, None] + np.arange(-BAND, BAND + 1)[None, :]
    inside = (cols >= 0) & (cols < n)
    cols = np.clip(cols, 0, n - 1)
    exact = p.k_tok[p.n_var[j0:j1, None], cols] == p.n_tok[j0:j1, None]
    family = p.k_fam[cols] == p.n_fam[j0:j1, None]
    scores = np.where(exact, EXACT, np.where(family, VARIANT, NEG))
    return np.where(inside, scores, NEG)


def _banded_alignment(p: _Problem, centers: np.ndarray, offset: int) -> _Path:
    """Semi-global Needleman–Wunsch in a band: the trace before and after the slice is free,
    every unpaired ncu kernel costs GAP, an unpaired known trace kernel inside costs GAP, and
    a jump over a block of trace kernels costs RESTART (steps: 0 pair, 1 ncu only, 2 trace
    only, 3 jump then pair)."""
    m = len(p.n_tok)
    row = _BandRow(m)
    for j0 in range(0, m, 2048):
        scores = _band_scores(p, centers, j0, min(m, j0 + 2048))
        for j in range(j0, min(m, j0 + 2048)):
            row.advance(j, int(centers[j] - centers[j - 1]) if j else 0,
                        int(centers[j]) - BAND, scores[j - j0])
    end = int(np.argmax(row.current))
    pj, pf = _traceback(row.steps, centers, row.best_col, end)
    return _Path(offset, float(row.current[end]), pj, pf)


class _BandRow:
    """One DP row at a time in preallocated buffers: the previous row sits in the middle
    of a NEG-padded array so that its shifted views are slices (no copies per row)."""

    def __init__(self, m: int) -> None:
        width = 2 * BAND + 1
        self.width, self.steps = width, np.zeros((m, width), dtype=np.int8)
        self.best_col = np.zeros(m, dtype=np.int64)
        self.padded = np.zeros(3 * width)  # the virtual row before the first: 0 everywhere
        self.ramp = np.arange(width) * GAP
        self.diag, self.up, self.here = np.empty(width), np.empty(width), np.empty(width)
        self.best = NEG

    @property
    def current(self) -> np.ndarray:
        return self.padded[self.width:2 * self.width]

    def advance(self, j: int, shift: int, first: int, scores: np.ndarray) -> None:
        w, padded = self.width, self.padded
        if -w < shift - 1 and shift < w:
            np.add(padded[w + shift - 1:2 * w + shift - 1], scores, out=self.diag)
            np.subtract(padded[w + shift:2 * w + shift], GAP, out=self.up)
        else:
            self.diag.fill(NEG)
            self.up.fill(NEG)
        here = np.maximum(self.diag, self.up, out=self.here)
        jump_from = max(int(self.best_col[j - 1]) - first + 1, 0) if j else w
        if jump_from < w:
            np.maximum(here[jump_from:], self.best - RESTART + scores[jump_from:],
                       out=here[jump_from:])
        row = np.maximum.accumulate(here + self.ramp) - self.ramp
        step = (here != self.diag) * (1 + 2 * (here != self.up))
        self.steps[j] = np.where(row > here + 1e-6, 2, step)
        col = int(np.argmax(row))
        self.best, self.best_col[j] = float(row[col]), first + col
        if j == 0:
            padded[:w] = NEG
            padded[2 * w:] = NEG
        padded[w:2 * w] = row


def _traceback(steps: np.ndarray, centers: np.ndarray, best_col: np.ndarray,
               end: int) -> tuple[np.ndarray, np.ndarray]:
    pairs_j: list[int] = []
    pairs_f: list[int] = []
    j, f = len(steps) - 1, int(centers[-1]) - BAND + end
    while j >= 0:
        step = steps[j, f - centers[j] + BAND]
        if step == 2:
            f -= 1
            continue
        if step != 1:
            pairs_j.append(j)
            pairs_f.append(f)
        f = int(best_col[j - 1]) if step == 3 and j > 0 else (f - 1 if step != 1 else f)
        j -= 1
    return np.array(pairs_j[::-1], dtype=np.int64), np.array(pairs_f[::-1], dtype=np.int64)




# ---- settling: variants, leftovers, ties, scores -----------------------------------------

@dataclass
class _Outcome:
    """Per launch position: ncu position (-1 none), status, reason, score."""

    ncu: np.ndarray
    status: np.ndarray
    reason: np.ndarray
    score: np.ndarray

    @classmethod
    def empty(cls, n: int, reason: str) -> _Outcome:
        return cls(np.full(n, -1, dtype=np.int64), np.full(n, "unmatched", dtype=object),
                   np.full(n, reason, dtype=object), np.zeros(n))


def _settle(p: _Problem, t: _Side, n: _Side, best: _Path, rivals: list[_Path],
            shifts: list[int], out: _Outcome) -> None:
    alternatives = rivals + _rigid_shifts(p, best, shifts)
    best, alternatives = _prefer_by_duration(p, t, n, best, alternatives)
    exact = p.k_tok[p.n_var[best.j], best.f] == p.n_tok[best.j]
    confirmed = _confirmed_variants(best.j, best.f, exact)
    reasons = np.full(len(exact), VARIANT_OK, dtype=object)
    reasons[exact] = None
    pairs = _Pairs(best.j[confirmed], p.keep[best.f[confirmed]], reasons[confirmed])
    rejected = list(p.keep[best.f[~confirmed]].tolist())
    pairs = _pair_leftovers(p, _gap_variants(p, pairs, rejected))
    pairs, ambiguous = _Ties(p, t, n, pairs).resolve()
    pairs = _drop_rivals(p, n, best, alternatives, pairs, ambiguous)
    _fill_outcome(p, t, n, pairs, rejected, ambiguous, out)


def _diagonal_links(j: np.ndarray, f: np.ndarray) -> np.ndarray:
    """links[k]: pair k+1 is right after pair k in both sequences."""
    return (np.diff(j) == 1) & (np.diff(f) == 1)


def _confirmed_variants(j: np.ndarray, f: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Keep mask: exact pairs, and runs of ≤ MAX_VARIANT_RUN variant pairs that sit on one
    diagonal between two exact pairs."""
    keep = exact.copy()
    links = _diagonal_links(j, f)
    k, total = 0, len(exact)
    while k < total:
        if exact[k]:
            k += 1
            continue
        end = k
        while end + 1 < total and not exact[end + 1] and links[end]:
            end += 1
        inside = 0 < k and end + 1 < total and bool(exact[k - 1] and exact[end + 1])
        keep[k:end + 1] = inside and links[k - 1] and links[end] and end - k < MAX_VARIANT_RUN
        k = end + 1
    return keep


def _gap_variants(p: _Problem, pairs: _Pairs, rejected: list[int]) -> _Pairs:
    """Unpaired ncu kernels between two clean pairs (or between a clean pair and the end of
    the export) and the unpaired trace kernels of the ncu families right there pair up when
    their families agree in order (another algorithm, whose name and shape no ncu kernel
    has); extra or missing candidates leave them unmatched."""
    if len(pairs.j) == 0:
        return pairs
    paired = np.zeros(len(p.fam), dtype=bool)
    paired[pairs.pos] = True
    eligible = ~paired & (p.fam >= 0)
    clean, width = _clean(pairs), np.diff(pairs.j) - 1
    gaps = np.flatnonzero((width >= 1) & (width <= MAX_VARIANT_RUN) & clean[:-1] & clean[1:])
    jobs = [(np.arange(pairs.j[k] + 1, pairs.j[k + 1]),
             np.arange(pairs.pos[k] + 1, pairs.pos[k + 1])) for k in gaps.tolist()]
    first, last = int(pairs.j[0]), len(p.n_tok) - 1 - int(pairs.j[-1])
    if 0 < first <= MAX_VARIANT_RUN and clean[0]:
        before = np.flatnonzero(eligible[:pairs.pos[0]])[-first:]
        jobs.append((np.arange(first), before))
    if 0 < last <= MAX_VARIANT_RUN and clean[-1]:
        after = np.flatnonzero(eligible[pairs.pos[-1] + 1:])[:last] + pairs.pos[-1] + 1
        jobs.append((np.arange(pairs.j[-1] + 1, len(p.n_tok)), after))
    extra_j: list[int] = []
    extra_pos: list[int] = []
    for rows, between in jobs:
        between = between[eligible[between] & np.isin(p.fam[between], p.n_fam[rows])]
        if len(between) == len(rows) and (p.fam[between] == p.n_fam[rows]).all():
            extra_j += rows.tolist()
            extra_pos += between.tolist()
        else:
            rejected += between.tolist()
    return _merged(pairs, extra_j, extra_pos, VARIANT_OK)


def _clean(pairs: _Pairs) -> np.ndarray:
    return np.array([r is None for r in pairs.reason.tolist()], dtype=bool)


def _merged(pairs: _Pairs, js: list[int], positions: list[int], reason: str) -> _Pairs:
    j = np.concatenate([pairs.j, np.array(js, dtype=np.int64)])
    order = np.argsort(j, kind="stable")
    pos = np.concatenate([pairs.pos, np.array(positions, dtype=np.int64)])
    reasons = np.concatenate([pairs.reason, np.full(len(js), reason, dtype=object)])
    return _Pairs(j[order], pos[order], reasons[order])


def _pair_leftovers(p: _Problem, pairs: _Pairs) -> _Pairs:
    """An unpaired ncu kernel and an unpaired known trace kernel with the same token near the
    aligned place, each the only candidate of the other, pair up (another stream ran them in
    another order)."""
    in_k = p.kidx[pairs.pos] >= 0
    if not in_k.any():
        return pairs
    kj, kf = pairs.j[in_k], p.kidx[pairs.pos[in_k]]
    taken = np.zeros(len(p.keep), dtype=bool)
    taken[kf] = True
    lo, hi = int(kf.min()), int(kf.max())
    open_tokens = p.k_tok[:, lo:hi + 1][:, ~taken[lo:hi + 1]]
    free_j = np.setdiff1d(np.flatnonzero(np.isin(p.n_tok, open_tokens)), pairs.j)
    predicted = np.rint(np.interp(free_j, kj, kf)).astype(np.int64)
    edges: list[tuple[int, int]] = []
    for j, centre in zip(free_j.tolist(), predicted.tolist()):
        a, b = max(lo, centre - BAND), min(hi, centre + BAND) + 1
        window = np.flatnonzero(~taken[a:b] & (p.k_tok[p.n_var[j], a:b] == p.n_tok[j])) + a
        edges.extend((j, int(f)) for f in window)
    if not edges:
        return pairs
    ej, ef = np.array(edges).T
    unique = (np.bincount(ej)[ej] == 1) & (np.bincount(ef)[ef] == 1)
    return _merged(pairs, ej[unique].tolist(), p.keep[ef[unique]].tolist(), REORDERED)


def _mixed_runs(tokens: np.ndarray, paired: np.ndarray, lo: int, hi: int) -> list[list[int]]:
    """Members (within lo..hi) of runs of identical kernels that are only partly paired."""
    inside = np.zeros(len(tokens), dtype=bool)
    inside[lo:hi + 1] = True
    change = np.ones(len(tokens), dtype=bool)
    change[1:] = tokens[1:] != tokens[:-1]
    run, starts = np.cumsum(change) - 1, np.flatnonzero(change)
    with_pair = np.bincount(run, weights=paired & inside, minlength=len(starts))
    without = np.bincount(run, weights=~paired & inside & (tokens >= 0), minlength=len(starts))
    ends = np.append(starts[1:], len(tokens))
    return [list(range(max(int(starts[r]), lo), min(int(ends[r]), hi + 1)))
            for r in np.flatnonzero((with_pair > 0) & (without > 0)).tolist()]


class _Ties:
    """Runs of identical kernels whose counts differ between the runs: which of them pair is
    unknowable from order. Duration decides when it clearly can, else they are ambiguous."""

    def __init__(self, p: _Problem, t: _Side, n: _Side, pairs: _Pairs) -> None:
        self.p, self.t, self.n = p, t, n
        self.by_pos = {q: (j, r) for j, q, r in zip(pairs.j.tolist(), pairs.pos.tolist(),
                                                    pairs.reason.tolist())}
        self.ambiguous: dict[int, str] = {}
        clean = _clean(pairs)
        self.median = _median_log_ratio(t.dur[pairs.pos[clean]], n.dur[pairs.j[clean]])

    def resolve(self) -> tuple[_Pairs, dict[int, str]]:
        if any(self.p.kidx[q] >= 0 for q in self.by_pos):
            self._trace_side()
        if self.by_pos:
            self._ncu_side()
        return _pairs_of(self.by_pos), self.ambiguous

    def _trace_side(self) -> None:
        p = self.p
        tokens = p.k_tok[int(np.bincount(p.n_var).argmax())]
        in_k = [int(p.kidx[q]) for q in self.by_pos if p.kidx[q] >= 0]
        paired = np.zeros(len(tokens), dtype=bool)
        paired[in_k] = True
        for members in _mixed_runs(tokens, paired, min(in_k), max(in_k)):
            positions = p.keep[members].tolist()
            js = [self.by_pos[q][0] for q in positions if q in self.by_pos]
            devs = self._devs(self.t.dur[positions], self.n.dur[js[0]], -1.0)
            pick = _decisive(devs) if len(js) == 1 else None
            if pick is not None:
                self._repair(positions, {positions[pick]: js[0]})
            else:
                self._give_up(positions, js)

    def _ncu_side(self) -> None:
        by_j = {j: q for q, (j, _) in self.by_pos.items()}
        paired = np.zeros(len(self.p.n_tok), dtype=bool)
        paired[list(by_j)] = True
        for members in _mixed_runs(self.p.n_tok, paired, min(by_j), max(by_j)):
            positions = [by_j[j] for j in members if j in by_j]
            devs = self._devs(self.n.dur[members], self.t.dur[positions[0]], 1.0)
            pick = _decisive(devs) if len(positions) == 1 else None
            if pick is not None:
                self._repair(positions, {positions[0]: members[pick]})
            else:
                self._give_up(positions, members)

    def _devs(self, durations: np.ndarray, other: float, sign: float) -> np.ndarray:
        """|log(ncu / trace) − typical|, for each candidate."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(sign * (np.log(other) - np.log(durations)) - self.median)

    def _repair(self, released: list[int], pairs: dict[int, int]) -> None:
        for q in released:
            self.by_pos.pop(q, None)
        for q, j in pairs.items():
            self.by_pos[q] = (j, BY_DURATION)

    def _give_up(self, positions: list[int], js: list[int]) -> None:
        ids = ", ".join(str(self.n.ids[j]) for j in sorted(js)[:8])
        for q in positions:
            self.by_pos.pop(q, None)
            self.ambiguous[q] = f"equally good ncu candidates among identical kernels: ncu_id {ids}"


def _median_log_ratio(trace_dur: np.ndarray, ncu_dur: np.ndarray) -> float:
    """Typical log(ncu / trace) duration ratio: ncu's clock control shifts every kernel."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(ncu_dur) - np.log(trace_dur)
    ratio = ratio[np.isfinite(ratio)]
    return float(np.median(ratio)) if len(ratio) else 0.0


def _decisive(devs: np.ndarray) -> int | None:
    """The candidate whose duration agrees within 1.5× while every other is off by 2× more;
    None when durations do not separate them (they are noisy by ±30%)."""
    devs = np.where(np.isfinite(devs), devs, np.inf)
    if len(devs) < 2:
        return None
    order = np.argsort(devs, kind="stable")
    best, second = devs[order[0]], devs[order[1]]
    return int(order[0]) if best <= np.log(1.5) and second - best >= np.log(2.0) else None


def _pairs_of(by_pos: dict[int, tuple[int, str | None]]) -> _Pairs:
    items = sorted((j, q, r) for q, (j, r) in by_pos.items())
    return _Pairs(np.array([i[0] for i in items], dtype=np.int64),
                  np.array([i[1] for i in items], dtype=np.int64),
                  np.array([i[2] for i in items], dtype=object))


def _rigid_shifts(p: _Problem, best: _Path, offsets: list[int]) -> list[_Path]:
    """The best path moved by δ, for small δ and for the other tied offsets, where it stays
    inside the trace and every exact pair stays exact: an alignment as good."""
    exact = p.k_tok[p.n_var[best.j], best.f] == p.n_tok[best.j]
    deltas = set(range(-BAND, BAND + 1)) | {d - best.offset for d in offsets}
    found = []
    for delta in sorted(deltas - {0}):
        moved = best.f + delta
        if len(moved) and moved.min() >= 0 and moved.max() < len(p.keep) and (
                p.k_tok[p.n_var[best.j[exact]], moved[exact]] == p.n_tok[best.j[exact]]).all():
            found.append(_Path(best.offset + delta, best.score, best.j, moved))
    return found


def _prefer_by_duration(p: _Problem, t: _Side, n: _Side, best: _Path,
                        alternatives: list[_Path]) -> tuple[_Path, list[_Path]]:
    """Among alignments that score as well and pair some ncu kernel with another kind of
    trace kernel, durations pick one when they clearly agree better with it (mean deviation
    from the typical ncu/trace ratio ≤ 1.5× and 1.5× better than every other); the others
    stay as rivals. Alternatives pairing only identical kernels are dropped: equivalent."""
    differing = [a for a in alternatives if _reads_differently(p, best, a)]
    if not differing:
        return best, []
    exact = p.k_tok[p.n_var[best.j], best.f] == p.n_tok[best.j]
    median = _median_log_ratio(t.dur[p.keep[best.f[exact]]], n.dur[best.j[exact]])
    paths = [best] + differing
    devs = np.array([_duration_deviation(p, t, n, q, median) for q in paths])
    order = np.argsort(devs, kind="stable")
    margin = np.log(1.5)
    if devs[order[0]] <= margin and devs[order[1]] - devs[order[0]] >= margin:
        return paths[int(order[0])], []
    return best, [q for q in differing if _duration_deviation(p, t, n, q, median)
                  - devs[0] < margin]


def _duration_deviation(p: _Problem, t: _Side, n: _Side, path: _Path, median: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = np.abs(np.log(n.dur[path.j]) - np.log(t.dur[p.keep[path.f]]) - median)
    dev = dev[np.isfinite(dev)]
    return float(dev.mean()) if len(dev) else float("inf")


def _drop_rivals(p: _Problem, n: _Side, best: _Path, rivals: list[_Path], pairs: _Pairs,
                 ambiguous: dict[int, str]) -> _Pairs:
    """Where an alignment as good (and not beaten on durations) gives some ncu kernel another
    kind of trace kernel (e.g. same base name, other template arguments, while ncu printed
    only the base), it is a different reading of the export: every ncu kernel it pairs
    elsewhere makes both candidates ambiguous."""
    m = len(p.n_tok)
    partner = _partners(m, best.j, best.f)
    flagged: set[int] = set()
    for rival in (r for r in rivals if _reads_differently(p, best, r)):
        other = _partners(m, rival.j, rival.f)
        for j in np.flatnonzero(partner != other).tolist():
            for f in (int(partner[j]), int(other[j])):
                if f >= 0:
                    q = int(p.keep[f])
                    flagged.add(q)
                    ambiguous[q] = ("an equally good alignment elsewhere in the trace pairs "
                                    f"ncu_id {n.ids[j]} with another kind of kernel")
    keep = ~np.isin(pairs.pos, list(flagged))
    return _Pairs(pairs.j[keep], pairs.pos[keep], pairs.reason[keep])


def _partners(m: int, j: np.ndarray, f: np.ndarray) -> np.ndarray:
    partner = np.full(m, -1, dtype=np.int64)
    partner[j] = f
    return partner


def _reads_differently(p: _Problem, a: _Path, b: _Path) -> bool:
    """Whether two alignments give some ncu kernel, paired exactly in both, trace kernels of
    another kind (full name or shape). Pairs that are variants in either are left out: the
    export pins down neither candidate there (e.g. data-dependent grids of an iteration)."""
    m = len(p.n_tok)
    pa_, pb = _partners(m, a.j, a.f), _partners(m, b.j, b.f)
    both = (pa_ >= 0) & (pb >= 0)
    both[both] &= (p.k_tok[p.n_var[both], pa_[both]] == p.n_tok[both]) & \
        (p.k_tok[p.n_var[both], pb[both]] == p.n_tok[both])
    return bool((_identities(p, pa_)[both] != _identities(p, pb)[both]).any())


def _identities(p: _Problem, partner: np.ndarray) -> np.ndarray:
    return np.where(partner >= 0, p.ident[p.keep[np.maximum(partner, 0)]], -1)


def _scores(p: _Problem, t: _Side, n: _Side, pairs: _Pairs) -> np.ndarray:
    """0.5·name + 0.3·shape + 0.2·order, per accepted pair."""
    exact = p.tok[p.n_var[pairs.j], pairs.pos] == p.n_tok[pairs.j]
    name = np.ones(len(exact))
    for k in np.flatnonzero(~exact).tolist():  # variants only: few
        name[k] = 0.8 * names.name_similarity(t.keys[t.name_idx[pairs.pos[k]]].base,
                                              n.keys[n.name_idx[pairs.j[k]]].base)
    grid = (t.shape[pairs.pos, :3] == n.shape[pairs.j, :3]).all(axis=1).astype(np.float64)
    block = (t.shape[pairs.pos, 3:] == n.shape[pairs.j, 3:]).all(axis=1)
    return 0.5 * name + 0.15 * (grid + block) + 0.2 * _order_support(p, pairs)


def _order_support(p: _Problem, pairs: _Pairs) -> np.ndarray:
    """Share of a pair's path neighbours that sit right beside it in both sequences (among
    the trace kernels that could pair at all)."""
    relevant = np.union1d(p.keep, pairs.pos)
    links = _diagonal_links(pairs.j, np.searchsorted(relevant, pairs.pos)).astype(np.float64)
    both = np.stack([np.concatenate([[np.nan], links]), np.concatenate([links, [np.nan]])])
    counted = np.isfinite(both).sum(axis=0)
    return np.where(counted > 0, np.nansum(both, axis=0) / np.maximum(counted, 1), 0.5)


def _fill_outcome(p: _Problem, t: _Side, n: _Side, pairs: _Pairs, rejected: list[int],
                  ambiguous: dict[int, str], out: _Outcome) -> None:
    out.reason[rejected] = VARIANT_NO
    for q, reason in ambiguous.items():
        out.status[q], out.reason[q] = "ambiguous", reason
    out.ncu[pairs.pos], out.status[pairs.pos], out.reason[pairs.pos] = \
        pairs.j, "matched", pairs.reason
    out.score[pairs.pos] = _scores(p, t, n, pairs)
    if len(pairs.pos):
        outside = np.ones(len(out.ncu), dtype=bool)
        outside[pairs.pos.min():pairs.pos.max() + 1] = False
        out.reason[outside & (out.status == "unmatched")] = OUTSIDE


def _result(t: _Side, n: _Side, out: _Outcome) -> pa.Table:
    """Back to the trace's input row order."""
    import pyarrow as pa

    rows = len(t.rows)

    def in_input_order(values: np.ndarray) -> np.ndarray:
        ordered = np.empty(rows, dtype=values.dtype)
        ordered[t.rows] = values
        return ordered

    ncu_pos = in_input_order(out.ncu)
    ncu_ids = n.ids[np.maximum(ncu_pos, 0)] if len(n.ids) else np.zeros(rows, dtype=np.int64)
    return pa.table({
        "kernel_id": pa.array(in_input_order(t.ids), pa.int64()),
        "ncu_id": pa.array(ncu_ids, pa.int64(), mask=ncu_pos < 0),
        "match_status": pa.array(in_input_order(out.status).tolist(), pa.string()),
        "reason": pa.array(in_input_order(out.reason).tolist(), pa.string()),
        "score": pa.array(in_input_order(out.score), pa.float64(),
                          mask=in_input_order(out.status) != "matched"),
    })
