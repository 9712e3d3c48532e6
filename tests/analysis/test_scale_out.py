"""The multi-GPU forecast: NCCL's ring model and nccl-tests' factors worked by hand, the
calibration on a run's own collectives, DDP's exposed all-reduce, and a four-rank trace
forecast on eight ranks."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import etl
from etl.analysis.scale_out import (CommModel, ScaleOutError, Topology, bus_factor, calibrate,
                                    exposed_allreduce_ns, forecast_ranks, target_topology)
from etl.core.links import LinkError, link, links, problems, typical_link
from tests.views.test_collectives import four_ranks  # noqa: F401  (the fixture)

NVLINK3 = link("nvlink3")   # 300 GB/s per GPU and direction, 3.4 us per step


def test_the_catalog_keeps_its_rules() -> None:
    assert links() and not problems({"link": [
        {"key": k, "family": v.family, "scope": v.scope, "per_gpu_gbs": v.per_gpu_gbs,
         "step_latency_us": v.step_latency_us, "source": v.source,
         "confidence": v.confidence} for k, v in links().items()]})
    assert problems({"link": [{"key": "x", "family": "nvlink", "scope": "network",
                               "per_gpu_gbs": -1, "step_latency_us": 1}]}) == [
        "x: family must be one of ['infiniband', 'infinity_fabric', 'nvlink', 'pcie', 'roce'] "
        "with its scope", "x: per_gpu_gbs = -1 is not a positive number", "x: needs a source",
        "x: confidence is primary or secondary"]
    with pytest.raises(LinkError, match="no link 'nvlink9'"):
        link("nvlink9")


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA A100-SXM4-40GB", "nvlink3"), ("NVIDIA A100-PCIE-40GB", "pcie4"),
    ("NVIDIA H100 80GB HBM3", "nvlink4"), ("Tesla V100-SXM2-16GB", "nvlink2"),
    ("Tesla V100-PCIE-32GB", "pcie3"), ("NVIDIA B200", "nvlink5"), ("Mystery GPU", None)])
def test_the_usual_link_of_a_device_name(name: str, key: str | None) -> None:
    found = typical_link(name)
    assert (found.key if found else None) == key


def test_nccl_tests_bus_factors() -> None:
    assert bus_factor("allreduce", 8) == 2 * 7 / 8
    assert bus_factor("allgather", 8) == bus_factor("reducescatter", 8) == 7 / 8
    assert bus_factor("broadcast", 8) == bus_factor("send", 8) == 1.0
    assert bus_factor("barrier", 8) is None


def test_ring_latency_inside_a_node_and_across_nodes() -> None:
    one_node = Topology(8, 8, NVLINK3)
    assert one_node.latency_ns("allreduce") == 8_400 + 14 * 3_400       # 2(n-1) steps
    assert one_node.latency_ns("allgather") == 8_400 + 7 * 3_400
    two_nodes = Topology(16, 8, NVLINK3, link("ib_ndr"))
    # 30 steps, 2(nodes-1) = 2 of them over the network (14 us each)
    assert two_nodes.latency_ns("allreduce") == 8_400 + 28 * 3_400 + 2 * 14_000
    assert two_nodes.bottleneck_gbs() == 50.0      # NDR's 400 Gb/s per GPU, not NVLink's


def test_a_collective_time_by_hand() -> None:
    model = CommModel(0.5, "")
    got = model.time_ns("allreduce", 1e9, Topology(8, 8, NVLINK3))
    assert got == pytest.approx(8_400 + 14 * 3_400 + 1e9 * 1.75 / (0.5 * 300))


def test_calibration_is_bytes_moved_over_time_spent() -> None:
    rows = [{"collective": "allreduce", "group_size": 2, "size_bytes": 30e6,
             "transfer_ns": 215_200, "duration_ns": 300_000},
            {"collective": "allreduce", "group_size": 2, "size_bytes": 60e6,
             "transfer_ns": 415_200, "duration_ns": 415_200},
            {"collective": "allreduce", "group_size": 2, "size_bytes": None,
             "transfer_ns": 9, "duration_ns": 9}]
    # latency 8.4 + 2 x 3.4 = 15.2 us each; bus bytes 30e6 and 60e6 (factor 1 at n = 2)
    model = calibrate(rows, Topology(2, 8, NVLINK3))
    assert model.efficiency == pytest.approx(90e6 / (200_000 + 400_000) / 300)
    assert "calibrated on 2 collectives" in model.basis


def test_nothing_to_calibrate_on_takes_neusights_share() -> None:
    assert calibrate([], Topology(2, 8, NVLINK3)).efficiency == 0.72


def test_the_exposed_allreduce_of_two_buckets() -> None:
    model = CommModel(0.72, "")
    bucket = 25 * 2**20
    one = 8_400 + 2 * 3_400 + bucket * 1.0 / (0.72 * 300)   # allreduce over 2 ranks
    # buckets ready at 5 ms and 10 ms: the second ends one bucket's time after the pass
    got = exposed_allreduce_ns(2 * bucket, 10e6, model, Topology(2, 8, NVLINK3))
    assert got == pytest.approx(one)
    # a backward pass too short to hide the first: both show
    assert exposed_allreduce_ns(2 * bucket, 100.0, model, Topology(2, 8, NVLINK3)) == \
        pytest.approx(2 * one - 50.0)
    assert exposed_allreduce_ns(2 * bucket, 1e6, model, Topology(1, 8, NVLINK3)) == 0.0


def test_the_target_is_refused_where_it_cannot_be_read() -> None:
    with pytest.raises(ScaleOutError, match="span machines"):
        target_topology(16, 8, "nvlink3", None, None)
    with pytest.raises(ScaleOutError, match="give it as --network"):
        target_topology(8, 8, "ib_ndr", None, None)
    with pytest.raises(ScaleOutError, match="no usual link known"):
        target_topology(8, 8, None, None, "Mystery GPU")
    assert target_topology(8, 8, None, None, "NVIDIA H100 80GB HBM3").node_link.key == "nvlink4"


def test_four_ranks_forecast_on_eight(four_ranks: tuple[str, Path]) -> None:  # noqa: F811
    """The hand-made trace of tests/views/test_collectives.py (ranks waiting 400 us for rank 3
    in an allreduce of 4 MB, then an allgather of 8 MB, transfers 200 and 100 us) on eight
    ranks of the same link: the transfers grow by the model's ratio, the waits stay."""
    metadata, warehouse = four_ranks
    if metadata == "none":
        pytest.skip("without sizes nothing is scaled")
    con = etl.connect(warehouse)
    result = forecast_ranks(con, "ddp", Topology(8, 8, NVLINK3))
    # calibration by hand: allreduce rows move 4e6 x 1.5 bytes in 200 000 - 28 800 ns,
    # allgather rows 8e6 x 0.75 in 100 000 - 18 600 ns (4 ranks each)
    bus = 4 * (6e6 + 6e6) / (4 * (171_200 + 81_400))        # bytes per ns = GB/s
    allreduce = (56_000 + 4e6 * 1.75 / bus) / (28_800 + 4e6 * 1.5 / bus)
    allgather = (32_200 + 8e6 * 0.875 / bus) / (18_600 + 8e6 * 0.75 / bus)
    longer = 200_000 * (allreduce - 1) + 100_000 * (allgather - 1)
    assert {r["rank"] for r in result.rows} == {0, 1, 2, 3}
    for row in result.rows:
        assert row["method"] == "replay" and row["ranks"] == 8
        assert row["forecast_ns"] - row["replayed_ns"] == pytest.approx(longer, abs=2)
    assert any("calibrated on 8 collectives" in n for n in result.notes)


def test_one_gpu_runs_need_the_gradient_size(demo_warehouse: Path) -> None:
    con = etl.connect(demo_warehouse)
    with pytest.raises(ScaleOutError, match="--grad-bytes"):
        forecast_ranks(con, "resnet_amp_eager", Topology(4, 8, NVLINK3))


def test_one_gpu_run_gains_what_its_backward_pass_cannot_hide(demo_warehouse: Path) -> None:
    con = etl.connect(demo_warehouse)
    grad = 102e6   # ResNet-50's 25.6 M fp32 parameters
    result = forecast_ranks(con, "resnet_amp_eager", Topology(4, 8, NVLINK3), grad_bytes=grad)
    backward = dict(con.execute(
        "SELECT k.iteration, sum(k.dur_ns) FROM kernels AS k JOIN runs USING (run_id) "
        "WHERE run_name = 'resnet_amp_eager' AND k.pass = 'backward' GROUP BY ALL").fetchall())
    assert backward, "the demo's kernels know their pass"
    model = CommModel(0.72, "")
    for row in result.rows:
        exposed = exposed_allreduce_ns(grad, backward[row["iteration"]], model,
                                       Topology(4, 8, NVLINK3))
        assert row["forecast_ns"] == round(row["measured_ns"] + exposed)
        assert row["method"] == "overlap_model"


def test_etl_forecast_ranks_prints_the_scale_out(demo_warehouse: Path) -> None:
    """`etl forecast RUN --ranks N` (README, etl links) runs etl.api.scale_out; with --gpu
    too, etl.api.forecast with the ranks; each mode refuses the other's options."""
    from tests.conftest import cli

    done = cli("forecast", "resnet_amp_eager", "--ranks", "4", "--link", "nvlink3",
               "--grad-bytes", "102e6", "--format", "json", "--warehouse", demo_warehouse)
    assert done.returncode == 0, done.stderr
    expected = etl.api.scale_out("resnet_amp_eager", 4, demo_warehouse, link="nvlink3",
                                 grad_bytes=102e6).rows
    assert json.loads(done.stdout) == expected
    table = cli("forecast", "resnet_amp_eager", "--ranks", "4", "--link", "nvlink3",
                "--grad-bytes", "102e6", "--warehouse", demo_warehouse)
    assert table.returncode == 0 and "note: target: 4 " in table.stdout, table.stderr
    both = cli("forecast", "resnet_amp_eager", "--gpu", "L4", "--ranks", "4", "--link",
               "nvlink3", "--grad-bytes", "102e6", "--source-gpu", "A100-SXM4-40GB",
               "--format", "json", "--warehouse", demo_warehouse)
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout) == etl.api.forecast(
        "resnet_amp_eager", "L4", warehouse=demo_warehouse, source_gpu="A100-SXM4-40GB",
        ranks=4, link="nvlink3", grad_bytes=102e6).rows
    for args, said in [((), "--gpu NAME"),
                       (("--gpu", "L4", "--ranks", "2", "--by", "op"), "--by op with --ranks"),
                       (("--ranks", "2", "--by", "op"), "--by go with --gpu"),
                       (("--gpu", "L4", "--link", "nvlink3"), "--link go with --ranks")]:
        refused = cli("forecast", "resnet_amp_eager", *args, "--warehouse", demo_warehouse)
        assert refused.returncode == 1 and said in refused.stderr, refused.stderr


def test_another_gpu_on_more_ranks_adds_the_collectives_to_its_forecast(
        four_ranks: tuple[str, Path]) -> None:  # noqa: F811
    """`--gpu L4 --ranks 8`: the L4 forecast (communication kept as measured), then each
    collective's transfer times the model's ratio: the same hand-computed lengthening as on
    the run's own GPU, since the transfers end every rank's window in both."""
    from etl.analysis.forecast.run import forecast as gpu_forecast
    from etl.analysis.scale_out import forecast_gpu_ranks

    metadata, warehouse = four_ranks
    if metadata == "none":
        pytest.skip("without sizes nothing is scaled")
    con = etl.connect(warehouse)
    alone = gpu_forecast(con, "ddp", "L4", source_gpu="A100-SXM4-40GB").rows
    both = forecast_gpu_ranks(con, "ddp", "L4", 8, link_key="nvlink3",
                              source_gpu="A100-SXM4-40GB")
    bus = 4 * (6e6 + 6e6) / (4 * (171_200 + 81_400))
    allreduce = (56_000 + 4e6 * 1.75 / bus) / (28_800 + 4e6 * 1.5 / bus)
    allgather = (32_200 + 8e6 * 0.875 / bus) / (18_600 + 8e6 * 0.75 / bus)
    longer = 200_000 * (allreduce - 1) + 100_000 * (allgather - 1)
    assert len(both.rows) == len(alone) == 4
    for row, base in zip(both.rows, alone):
        assert row["ranks"] == 8 and row["target_gpu"] == "L4"
        assert row["predicted_ns"] - base["predicted_ns"] == pytest.approx(longer, abs=2)
    assert any("calibrated on 8 collectives" in n for n in both.notes)
    assert not any("communication kernels keep" in n for n in both.notes)


def test_a_one_gpu_run_on_more_gpus_of_another_kind(demo_warehouse: Path) -> None:
    """A one-GPU run, --gpu H100 --ranks 4 --grad-bytes: the H100 forecast plus the
    all-reduce its backward pass (measured x predicted / measured window) leaves exposed."""
    from etl.analysis.forecast.run import forecast as gpu_forecast
    from etl.analysis.scale_out import forecast_gpu_ranks

    con = etl.connect(demo_warehouse)
    grad, h100 = 102e6, "H100-SXM5-80GB"
    alone = gpu_forecast(con, "resnet_amp_eager", h100, source_gpu="A100-SXM4-40GB").rows
    both = forecast_gpu_ranks(con, "resnet_amp_eager", h100, 4, link_key="nvlink3",
                              grad_bytes=grad, source_gpu="A100-SXM4-40GB").rows
    backward = dict(con.execute(
        "SELECT k.iteration, sum(k.dur_ns) FROM kernels AS k JOIN runs USING (run_id) "
        "WHERE run_name = 'resnet_amp_eager' AND k.pass = 'backward' GROUP BY ALL").fetchall())
    model = CommModel(0.72, "")
    for row, base in zip(both, alone, strict=True):
        shrink = base["predicted_ns"] / base["measured_ns"]
        exposed = round(exposed_allreduce_ns(grad, backward[row["iteration"]] * shrink, model,
                                             Topology(4, 8, NVLINK3)))
        assert exposed > 0, "the test needs an all-reduce the backward pass cannot hide"
        for column in ("predicted_ns", "low_ns", "high_ns"):
            assert row[column] == base[column] + exposed
