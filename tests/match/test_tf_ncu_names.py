"""TensorFlow's kernel names meet Nsight Compute's: the corpus's ncu export of a TF 1.15
DeepLabv3+ forward pass on a V100, against an xplane of the same kernel sequence written
with the names TF's profiler gives them.

TF's xplane names a GPU event by CUPTI's kernel name demangled with abi::__cxa_demangle,
parameters and all (the corpus xplane, TF 2.4: `void Eigen::internal::EigenMetaKernel<...>
(Eigen::TensorEvaluator<...>, long)`), as ncu's demangler prints most of them. Where they
part: ncu 2020.1 left three symbols of kernels in nvcc's anonymous namespaces
(`_GLOBAL__N__72_tmpxft_...`) mangled, which __cxa_demangle turns into `(anonymous
namespace)`; Eigen's kernels share one function name (EigenMetaKernel) and differ only in
their template arguments, several kilobytes long.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
import pytest

from etl.load.ingest import ingest_all
from etl.core.kernel_names import keys_of
from etl.warehouse.store import Warehouse
from tests.conftest import corpus_path
from tests.extract.xplane.test_xplane import run_folder
from tests.extract.xplane.xspace_writer import Event, Line, Plane, Ref, xspace

# The corpus's two one-metric exports of this model come from two runs of it: their kernel
# sequences differ at 18 IDs (TF ran independent ops in another order), so they are two
# exports. The xplane is written from the first; the second is another run's order.
NCU = "v100_details_old-format_tf1.15_deeplab_fp16_fw_amp__"
SAME_RUN, OTHER_RUN = (f"{NCU}sm__cycles_elapsed.avg.txt",
                       f"{NCU}sm__inst_executed_pipe_tensor.sum.txt")
# The symbols ncu printed mangled, as __cxa_demangle (GNU c++filt) spells them: TF's names.
TF_DEMANGLED = {
    "_ZN10tensorflow96_GLOBAL__N__72_tmpxft_00003e63_00000000_11_resize_bilinear_op_gpu_cu_"
    "compute_70_cpp1_ii_6424738726LegacyResizeBilinearKernelIfEEviPKT_ffiiiiiiPf":
        "void tensorflow::(anonymous namespace)::LegacyResizeBilinearKernel<float>(int, float "
        "const*, float, float, int, int, int, int, int, int, float*)",
    "_ZN10tensorflow7functor15RowReduceKernelIN3cub22TransformInputIteratorIfNS_88_GLOBAL__"
    "N__64_tmpxft_000032c4_00000000_11_softmax_op_gpu_cu_compute_70_cpp1_ii_201bafc921Subtr"
    "actAndExpFunctorIffEENS2_21CountingInputIteratorIilEElEEPfNS2_3SumEEEvT_T0_iiT1_NSt15i"
    "terator_traitsISC_E10value_typeE":
        "void tensorflow::functor::RowReduceKernel<cub::TransformInputIterator<float, "
        "tensorflow::(anonymous namespace)::SubtractAndExpFunctor<float, float>, "
        "cub::CountingInputIterator<int, long>, long>, float*, cub::Sum>(cub::Transform"
        "InputIterator<float, tensorflow::(anonymous namespace)::SubtractAndExpFunctor<float,"
        " float>, cub::CountingInputIterator<int, long>, long>, float*, int, int, cub::Sum, "
        "std::iterator_traits<cub::TransformInputIterator<float, tensorflow::(anonymous "
        "namespace)::SubtractAndExpFunctor<float, float>, cub::CountingInputIterator<int, "
        "long>, long> >::value_type)",
    "_ZN10tensorflow88_GLOBAL__N__64_tmpxft_000032c4_00000000_11_softmax_op_gpu_cu_compute_"
    "70_cpp1_ii_201bafc922GenerateNormalizedProbIffEEvPKT_PKT0_S4_PS2_iib":
        "void tensorflow::(anonymous namespace)::GenerateNormalizedProb<float, float>(float "
        "const*, float const*, float const*, float*, int, int, bool)",
}


def ncu_kernel_names(file: str) -> list[tuple[int, str]]:
    """(ID, Kernel Name) of an export, read with the csv module."""
    lines = corpus_path("ncu", file).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    return [(int(r["ID"]), r["Kernel Name"]) for r in csv.DictReader(lines[start:])]


def tf_xplane(names: list[str]) -> bytes:
    """One step of a TF 2.x profile launching `names` in order on one V100 stream, a host
    to device copy before every 50th kernel on the copy stream."""
    base, step = 1_000_000_000, Line(1, "python3", 1_000_000_000)
    thread = Line(2, "tf_Compute/2", base)
    compute, copies = Line(10, "Stream #134(Compute)", base), Line(11, "Stream #135(MemcpyH2D)",
                                                                   base)
    for k, name in enumerate(names):
        at_ps = (k + 1) * 20_000_000             # a launch every 20 µs
        correlation = 2 * k + 1
        if k % 50 == 0:
            thread.events.append(Event("cuMemcpyHtoDAsync", at_ps - 5_000_000, 1_000_000,
                                       {"correlation_id": correlation + 1}))
            copies.events.append(Event("MemcpyH2D", at_ps - 4_000_000, 2_000_000, {
                "correlation_id": correlation + 1, "memcpy_details": "size:1024 dest:1"}))
        thread.events.append(Event("cuLaunchKernel", at_ps, 2_000_000,
                                   {"correlation_id": correlation}))
        compute.events.append(Event(name, at_ps + 3_000_000, 10_000_000, {
            "correlation_id": correlation, "level 0": Ref(f"model/layer_{k}/op:Op"),
            "kernel_details": Ref("regs:32 shm:0 grid:80,1,1 block:256,1,1")}))
    step.events.append(Event("train", 1_000, (len(names) + 2) * 20_000_000,
                             {"step_num": 0}))
    device = Plane(2, "/device:GPU:0", [compute, copies], {
        "core_count": 80, "compute_cap_major": 7, "compute_cap_minor": 0})
    return xspace([Plane(1, "/host:CPU", [step, thread]), device])


@dataclass
class Ingested:
    names: list[str]                    # the trace's kernels in launch order, TF's spelling
    kernel_ids: list[int]               # in the same order
    pairs: dict[str, dict[int, dict[str, Any]]]   # export file → kernel_id → kernel_match
    ncu_names: dict[str, dict[int, str]]          # export file → ncu_id → kernel_name


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    root = tmp_path_factory.mktemp("tf_ncu")
    names = [TF_DEMANGLED.get(name, name) for _, name in ncu_kernel_names(SAME_RUN)]
    folder = run_folder(root / "runs", {"h": tf_xplane(names)}, name="tf_deeplab")
    for file in (SAME_RUN, OTHER_RUN):
        (folder / file).symlink_to(corpus_path("ncu", file))
    warehouse = Warehouse.at(root / "wh")
    [result] = ingest_all([folder], warehouse)
    assert result.status == "ingested", result.error
    [published] = [p for p in warehouse.data.iterdir() if not p.name.startswith("_")]
    kernels = pq.read_table(published / "kernels.parquet").to_pylist()
    launched = sorted((k["ts_ns"], k["kernel_id"], k["name"]) for k in kernels
                      if k["kind"] == "kernel")
    runs = pq.read_table(published / "runs.parquet").to_pylist()
    export_of = {s["ncu_source_id"]: s["path"] for s in runs[0]["sources"]
                 if s["ncu_source_id"] is not None}
    pairs: dict[str, dict[int, dict[str, Any]]] = {f: {} for f in export_of.values()}
    for m in pq.read_table(published / "kernel_match.parquet").to_pylist():
        pairs[export_of[m["ncu_source_id"]]][m["kernel_id"]] = m
    ncu_names: dict[str, dict[int, str]] = {f: {} for f in export_of.values()}
    for k in pq.read_table(published / "ncu_kernels.parquet").to_pylist():
        ncu_names[export_of[k["ncu_source_id"]]][k["ncu_id"]] = k["kernel_name"]
    return Ingested([n for _, _, n in launched], [i for _, i, _ in launched], pairs, ncu_names)


def test_tf_kernel_names_pair_with_the_ncu_export_of_a_tf_run(ingested: Ingested) -> None:
    exported = ncu_kernel_names(SAME_RUN)
    assert len(exported) == 559 and sum(n.startswith("_Z") for _, n in exported) == 3
    assert ingested.names == [TF_DEMANGLED.get(n, n) for _, n in exported]
    assert not any(n.startswith("_Z") for n in ingested.names)
    matches = ingested.pairs[SAME_RUN]
    # in launch order, the k-th kernel of the trace is the export's kernel ID k
    paired = [(matches[k]["ncu_id"], matches[k]["match_status"], matches[k]["reason"])
              for k in ingested.kernel_ids]
    assert paired == [(i, "matched", None) for i, _ in exported]


def test_another_runs_order_pairs_kernels_of_the_same_name(ingested: Ingested) -> None:
    """The other export ran 18 kernels in another order: each trace kernel still pairs with
    an ncu kernel of its own name (which of two identical kernels is not knowable), and
    those taken off the aligned order say so."""
    matches, ncu = ingested.pairs[OTHER_RUN], ingested.ncu_names[OTHER_RUN]
    other = ncu_kernel_names(OTHER_RUN)
    moved = [i for (i, a), (_, b) in zip(ncu_kernel_names(SAME_RUN), other) if a != b]
    assert len(moved) == 18 and [ncu[i] for i, _ in other] == [n for _, n in other]
    found = [matches[k] for k in ingested.kernel_ids]
    assert {m["match_status"] for m in found} == {"matched"}
    assert sorted(m["ncu_id"] for m in found) == list(range(559))
    assert all(TF_DEMANGLED.get(ncu[m["ncu_id"]], ncu[m["ncu_id"]]) == name
               for m, name in zip(found, ingested.names))
    # the 18 IDs lie in 1..121; past them both runs launch alike, and pair ID for ID
    assert (moved[0], moved[-1]) == (1, 121)
    assert [m["ncu_id"] for m in found[122:]] == list(range(122, 559))
    off_order = [q for q, m in enumerate(found) if m["reason"] is not None]
    assert off_order and all(1 <= q <= 121 for q in off_order)
    assert {found[q]["reason"] for q in off_order} == {
        "matched off the aligned order (streams reordered?)"}


def test_tf_spelling_and_ncu_mangled_symbol_share_their_base_key() -> None:
    # by hand: the function's own name in each symbol; TF's demangled spelling has a full
    # key too (the anonymous namespace written one way), the mangled symbol none
    bases = {keys_of(mangled).base: keys_of(tf).base for mangled, tf in TF_DEMANGLED.items()}
    assert bases == {"LegacyResizeBilinearKernel": "LegacyResizeBilinearKernel",
                     "RowReduceKernel": "RowReduceKernel",
                     "GenerateNormalizedProb": "GenerateNormalizedProb"}
    assert keys_of(TF_DEMANGLED[next(iter(TF_DEMANGLED))]).full == (
        "tensorflow::(anonymousnamespace)::LegacyResizeBilinearKernel<float>")
