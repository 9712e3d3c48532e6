"""TensorFlow / JAX profiler XSpace protobuf (`<host>.xplane.pb`): host events, GPU
activities, steps, devices and allocator events, read without TensorFlow.

wire.py reads the protobuf wire format, decode.py the XSpace messages (their field numbers
are listed there, from xplane.proto), rows.py and read.py turn planes into the run's
tables; fields.toml names the planes, lines and stats. This module stays light: run-folder
scanning imports it to sniff.
"""
from __future__ import annotations

from etl.extract.registry import Format


def looks_like_xspace(head: bytes) -> bool:
    """An XSpace starts with its first plane (field 1, length-delimited: byte 0x0a) and
    names a host or device plane in its first bytes."""
    return head[:1] == b"\x0a" and (b"/host:" in head[:4096] or b"/device:" in head[:4096])


FORMATS = (
    Format(
        name="xplane_pb", family="xplane", role="trace",
        reads="TensorFlow 2.x / JAX profiler XSpace protobuf (<host>.xplane.pb), one file "
              "per host and session; NVIDIA and ROCm GPUs",
        recognised_by="names ending .xplane.pb; or a protobuf whose first plane names "
                      "/host: or /device:",
        fills=("host_events", "kernels", "iterations", "devices", "memory_events",
               "anomalies"),
        sniff=looks_like_xspace, reader="etl.extract.xplane.read:read",
        claims=(".xplane.pb",), layout=("plugins/profile/*/*.xplane.pb",)),
)
