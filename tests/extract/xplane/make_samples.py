"""Writes the xplane_pb files listed in tests/conformance/samples.toml (run from the
checkout: python -m tests.extract.xplane.make_samples)."""
from __future__ import annotations


from tests.extract.xplane.xspace_writer import profile_bytes
from tests.conftest import INPUTS

DATA = INPUTS / "xplane"


def main() -> None:
    (DATA / "broken").mkdir(parents=True, exist_ok=True)
    good = profile_bytes(gpus=2, steps=3, kernels=2, xla=True, orphan=True)
    (DATA / "xla_two_gpus_three_steps.xplane.pb").write_bytes(good)
    (DATA / "broken" / "xplane_pb-truncated.xplane.pb").write_bytes(good[:len(good) // 2 + 3])
    (DATA / "broken" / "xplane_pb-garbage.xplane.pb").write_bytes(
        b"\x0a\xff\xff\xff\x7f/device:GPU:0 not a protobuf" * 8)


if __name__ == "__main__":
    main()
