"""collectives, collective_skew and stragglers_v4 on a four-rank trace worked by hand.

Every rank runs one step: a compute kernel, then an allreduce of 1 000 000 floats, then an
allgather whose output is 4 000 000 bfloat16 elements. Rank 3 computes 700 us where the
others compute 300 us, so ranks 0-2 start their allreduce 400 us before rank 3 and wait
for it; the transfer takes 200 us everywhere and all ranks end together. Each rank writes
its trace on its own clock (CLOCK_SHIFT_NS added to every time), which the views undo.

By hand (nccl-tests' formulas, n = 4):
- allreduce S = 4 000 000 B; transfer 200 000 ns: algbw 20 GB/s, busbw 20 x 2(n-1)/n = 30;
  ranks 0-2 wait 400 000 ns, rank 3 0; over the whole 600 us kernel of rank 0 the bus
  bandwidth is 4e6 / 6e5 x 1.5 = 10 GB/s.
- allgather S = output bytes = 8 000 000 B; 100 000 ns, nobody waits: algbw 80 GB/s,
  busbw 80 x (n-1)/n = 60.
- collective_skew: the allreduce's last rank is 3, skew 400 000 ns, waited 1 200 000 ns.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, event, kernel, launch, query_json, step, write_trace

CLOCK_SHIFT_NS = {0: 0, 1: 2_000_000_050_000, 2: -30_000, 3: 10_000}  # rank 1: 2 s ahead
COMPUTE_NS = {0: 300_000, 1: 300_000, 2: 300_000, 3: 700_000}
ALLREDUCE_END = 1_060_000
ALLGATHER = (1_100_000, 100_000)
ALLREDUCE_KERNEL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
ALLGATHER_KERNEL = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def comm_args(metadata: str, name: str, nelems_in: int, nelems_out: int, dtype: str,
              seq: int) -> dict[str, Any]:
    """record_param_comms' args as torch writes them: 2.12 (seq), 2.4 (no seq), older (none)."""
    if metadata == "none":
        return {}
    args: dict[str, Any] = {"Collective name": name, "dtype": dtype,
                            "In msg nelems": nelems_in, "Out msg nelems": nelems_out,
                            "Group size": 4, "Process Group Name": "0",
                            "Process Group Description": "default_pg",
                            "Process Group Ranks": "[0, 1, 2, 3]"}
    if metadata == "seq":
        args["Seq"] = seq
    return args


def rank_events(rank: int, metadata: str) -> list[dict[str, Any]]:
    """One rank's step, every time written on the rank's own clock: the host enqueues the
    compute kernel and both collectives on one stream at once, then synchronizes the device
    (so the step ends when the GPU does)."""
    def at(ns: int) -> int:
        return ns + CLOCK_SHIFT_NS[rank]

    allreduce_start = 100_000 + COMPUTE_NS[rank] + 60_000
    gather_start, gather_dur = ALLGATHER
    gpu_end = gather_start + gather_dur
    return [
        step(1, at(0), gpu_end + 20_000),
        launch(1, at(50_000)),
        kernel(1, at(100_000), COMPUTE_NS[rank], device=rank, stream=20, name="gemm"),
        event(name="record_param_comms", ts=at(55_000), dur=10_000,
              **comm_args(metadata, "allreduce", 1_000_000, 1_000_000, "Float", 1)),
        launch(2, at(58_000), dur=2_000),
        kernel(2, at(allreduce_start), ALLREDUCE_END - allreduce_start, device=rank, stream=20,
               name=ALLREDUCE_KERNEL),
        event(name="record_param_comms", ts=at(70_000), dur=10_000,
              **comm_args(metadata, "_allgather_base", 1_000_000, 4_000_000, "BFloat16", 2)),
        launch(3, at(73_000), dur=2_000),
        kernel(3, at(gather_start), gather_dur, device=rank, stream=20, name=ALLGATHER_KERNEL),
        event(cat="cuda_runtime", name="cudaDeviceSynchronize", ts=at(90_000),
              dur=gpu_end + 10_000 - 90_000),
    ]


@pytest.fixture(scope="module", params=["seq", "group", "none"])
def four_ranks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp(f"ranks-{request.param}")
    for rank in CLOCK_SHIFT_NS:
        write_trace(root / "runs" / "ddp" / f"rank{rank}.json", rank_events(rank, request.param),
                    distributedInfo={"rank": rank, "world_size": 4})
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return request.param, root / "wh"


def rows(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    return query_json(warehouse, sql)


def test_each_rank_waits_for_the_last_and_moves_the_same_bytes(four_ranks: tuple[str, Path]
                                                               ) -> None:
    metadata, warehouse = four_ranks
    got = rows(warehouse, "SELECT rank, collective, pairing, rank_count, bytes_in, bytes_out, "
               "duration_ns, wait_ns, transfer_ns, algbw_gb_per_s, busbw_gb_per_s, "
               "kernel_busbw_gb_per_s FROM collectives ORDER BY collective DESC, rank")
    assert [r["collective"] for r in got] == ["allreduce"] * 4 + ["allgather"] * 4
    assert {r["pairing"] for r in got} == {
        {"seq": "seq", "group": "group_order", "none": "stream_order"}[metadata]}
    assert {r["rank_count"] for r in got} == {4}
    allreduce, allgather = got[:4], got[4:]
    assert [r["wait_ns"] for r in allreduce] == [400_000, 400_000, 400_000, 0]
    assert {r["transfer_ns"] for r in allreduce} == {200_000}
    assert [r["wait_ns"] for r in allgather] == [0, 0, 0, 0]
    if metadata == "none":  # nothing says the sizes
        assert {(r["bytes_in"], r["busbw_gb_per_s"]) for r in got} == {(None, None)}
        return
    assert {(r["bytes_in"], r["bytes_out"]) for r in allreduce} == {(4_000_000, 4_000_000)}
    assert {(r["bytes_in"], r["bytes_out"]) for r in allgather} == {(2_000_000, 8_000_000)}
    assert [r["algbw_gb_per_s"] for r in allreduce] == pytest.approx([20.0] * 4)
    assert [r["busbw_gb_per_s"] for r in allreduce] == pytest.approx([30.0] * 4)
    assert allreduce[0]["kernel_busbw_gb_per_s"] == pytest.approx(10.0)
    assert [r["algbw_gb_per_s"] for r in allgather] == pytest.approx([80.0] * 4)
    assert [r["busbw_gb_per_s"] for r in allgather] == pytest.approx([60.0] * 4)


def test_the_skew_names_the_late_rank(four_ranks: tuple[str, Path]) -> None:
    _, warehouse = four_ranks
    got = rows(warehouse, "SELECT collective, iteration, rank_count, last_rank, skew_ns, "
               "waited_ns, min_transfer_ns FROM collective_skew ORDER BY collective DESC")
    assert got[0] == {"collective": "allreduce", "iteration": 1, "rank_count": 4,
                      "last_rank": 3, "skew_ns": 400_000, "waited_ns": 1_200_000,
                      "min_transfer_ns": 200_000}
    assert (got[1]["skew_ns"], got[1]["waited_ns"]) == (0, 0)


def test_the_straggler_is_who_made_the_others_wait(four_ranks: tuple[str, Path]) -> None:
    _, warehouse = four_ranks
    got = rows(warehouse, "SELECT rank, collective_wait_ns, made_others_wait_ns, "
               "waited_for_most, straggler FROM stragglers_v4 ORDER BY rank")
    assert [r["collective_wait_ns"] for r in got] == [400_000, 400_000, 400_000, 0]
    assert [r["made_others_wait_ns"] for r in got] == [0, 0, 0, 1_200_000]
    assert [r["waited_for_most"] for r in got] == [False, False, False, True]
    assert [r["straggler"] for r in got] == [False, False, False, True]


def test_ranks_whose_ends_disagree_are_not_paired(tmp_path: Path) -> None:
    """Rank 1 ran an extra allreduce nobody else ran: ordering pairs it with rank 0's next
    one, whose ends are 1 ms apart, so the views refuse to call any of it waiting."""
    for rank in (0, 1):
        starts = [20_000, 500_000, 1_000_000] + ([2_000_000] if rank else []) + [3_000_000]
        events = [step(1, 0, 5_000_000)]
        for corr, start in enumerate(starts, 1):
            events += [launch(corr, start - 10_000),
                       kernel(corr, start, 100_000, device=rank, stream=20,
                              name=ALLREDUCE_KERNEL)]
        write_trace(tmp_path / "runs" / "ddp" / f"rank{rank}.json", events,
                    distributedInfo={"rank": rank, "world_size": 2})
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse",
               str(tmp_path / "wh")).returncode == 0
    got = rows(tmp_path / "wh", "SELECT instance, rank, wait_ns, end_spread_ns "
               "FROM collectives ORDER BY instance, rank")
    by_instance: dict[str, list[tuple[int, int | None, int]]] = {}
    for r in got:
        by_instance.setdefault(r["instance"], []).append(
            (r["rank"], r["wait_ns"], r["end_spread_ns"]))
    assert list(by_instance.values()) == [
        [(0, 0, 0), (1, 0, 0)]] * 3 + [
        [(0, None, 1_000_000), (1, None, 1_000_000)],  # rank 0's 3 ms one, rank 1's 2 ms one
        [(1, None, 0)]]                                 # rank 1's 3 ms one: nobody to pair


def test_whatif_answers_if_the_late_rank_were_not_late(four_ranks: tuple[str, Path]) -> None:
    """Rank 3's compute at the others' 300 us: it reaches the allreduce 400 us sooner, the
    others no longer wait for it, and every rank's step ends 400 us sooner."""
    import etl

    _, warehouse = four_ranks
    on_time = etl.api.whatif("ddp", ["rank=3,kernel_type=computation:%r" % (3 / 7)], warehouse)
    saved = {r["rank"]: r["replayed_ns"] - r["whatif_ns"] for r in on_time.rows}
    assert saved == {0: 400_000, 1: 400_000, 2: 400_000, 3: 400_000}


def test_whatif_faster_communication_halves_transfers_not_waits(four_ranks: tuple[str, Path]
                                                                ) -> None:
    """Communication 2x faster: the allreduce's 200 us transfer and the allgather's 100 us
    become 100 and 50 (150 us sooner everywhere); the wait for rank 3 stays."""
    import etl

    _, warehouse = four_ranks
    faster = etl.api.whatif("ddp", ["kernel_type=communication:0.5"], warehouse)
    saved = {r["rank"]: r["replayed_ns"] - r["whatif_ns"] for r in faster.rows}
    assert saved == {0: 150_000, 1: 150_000, 2: 150_000, 3: 150_000}
