"""autopar.probe writer and report on synthetic measurements: the profile loads with
the same reader as the built-in ones, fallbacks are named, writes are atomic,
bad profile files give one-line errors. No torch needed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from autopar.errors import OutputError, ProfileError
from autopar.io.profiles import load_hardware, parse_profile
from autopar.probe import peaks, writer
from autopar.probe.command import profile_name
from autopar.probe.fit import bus_factor
from autopar.probe.report import compare_rows, print_compare, print_summary
from autopar.probe.results import (
    AttnPoint,
    CollPoint,
    ComputeResult,
    DeviceInfo,
    GemmPoint,
    Measurements,
    OverlapResult,
    Topology,
)
from autopar.probe.yamlio import dump_yaml
from autopar.spec.hardware import COLLECTIVES
from tests.conftest import toy_profile_dict

ALPHA, BW = 20e-6, 300e9  # the synthetic fabric: 20 us, 300 GB/s bus bandwidth


def measurements(*, kind: str = "cuda", name: str = "NVIDIA H100 80GB HBM3", world: int = 8, per_node: int = 8) -> Measurements:
    gemm = [
        GemmPoint(dtype=d, m=s, n=s, k=s, seconds=2 * s**3 / (rate * min(1.0, s / 8192)))
        for d, rate in (("bf16", 800e12), ("fp32", 50e12))
        for s in (1024, 4096, 8192)
    ]
    attn = [AttnPoint(dtype="bf16", seq_len=s, head_dim=128, heads=16, batch=16384 // s, seconds=1e-3 * s / 1024) for s in (1024, 4096)]
    device = DeviceInfo(
        kind=kind, name=name, memory_bytes=80 * 2**30, copy_bytes_per_s=3.0e12, driver="550.54", cuda="12.4", torch="2.13.0", nccl="2.21.5"
    )
    topo = Topology(rank=0, world_size=world, local_rank=0, local_world_size=per_node, launcher="spawn")
    colls = []
    if world > 1:
        for tier, n in (("intra", per_node), ("inter", world // per_node)):
            if n < 2:
                continue
            for c in COLLECTIVES:
                for b in (4096, 1 << 20, 1 << 28):
                    colls.append(CollPoint(tier=tier, collective=c, group_size=n, nbytes=b, seconds=ALPHA + bus_factor(c, n) * b / BW))
    overlap = OverlapResult(compute_alone_s=1.0, compute_overlapped_s=1.1, comm_alone_s=1.0, comm_overlapped_s=0.98, method="test")
    return Measurements(
        topology=topo,
        compute=ComputeResult(device=device, gemm=tuple(gemm), attention=tuple(attn), notes=("fp8: skipped (test)",)),
        collectives=tuple(colls),
        overlap=overlap if world > 1 else None,
        duration_s=12.5,
        quick=True,
    )


@pytest.fixture(autouse=True)
def _no_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fallbacks must not depend on which built-in profiles happen to ship."""
    monkeypatch.setattr(peaks, "builtin_for", lambda sheet: None)


def build(meas: Measurements, name: str = "m") -> dict[str, Any]:
    return writer.build_profile(meas, name=name, hostname="node01", date="2026-01-01T00:00:00+00:00")


def test_measured_profile_uses_datasheet_peaks_and_fits(tmp_path: Path) -> None:
    path = tmp_path / "h100.yaml"
    writer.write_profile(path, build(measurements()))
    hw = load_hardware(str(path))
    assert hw.source == "measured" and hw.gpus_per_node == 8
    assert hw.peak("bf16") == pytest.approx(989.4e12)  # datasheet, not the measured 800
    assert hw.gemm_efficiency("bf16", 2 * 8192**3) == pytest.approx(800 / 989.4, rel=1e-3)
    assert hw.memory_efficiency == pytest.approx(3000 / 3350, rel=1e-2)
    fit = hw.intra["all_reduce"][0]
    assert fit.group_size == 8 and fit.latency_s == pytest.approx(ALPHA, rel=1e-3) and fit.bw_bytes_per_s == pytest.approx(BW, rel=1e-3)
    assert hw.compute_slowdown == pytest.approx(1.1) and hw.comm_slowdown == 1.0  # floored
    for key in ("date", "hostname", "gpu_name", "driver", "torch", "nccl", "tool_version"):
        assert hw.provenance[key]
    assert "not measured (one node)" in hw.provenance["inter"]
    assert "fp8: skipped" in hw.provenance["notes"]
    raw = yaml.safe_load(path.read_text())["raw"]
    assert len(raw["collectives"]["intra"]["all_reduce"][8]) == 3
    assert "{group_size: 8, latency_us: 20.0, bw_gbps: 300.0}" in path.read_text()  # one line per fit


def test_two_nodes_measure_both_tiers() -> None:
    hw = parse_profile(build(measurements(world=16, per_node=8)), where="m.yaml")
    assert hw.inter["all_gather"][0].group_size == 2 and "inter" not in hw.provenance


def test_one_gpu_per_node_copies_inter_into_intra() -> None:
    hw = parse_profile(build(measurements(world=4, per_node=1)), where="m.yaml")
    assert hw.intra["send_recv"] == hw.inter["send_recv"] and "one GPU per node" in hw.provenance["intra"]


def test_single_process_uses_placeholders_and_says_so() -> None:
    hw = parse_profile(build(measurements(world=1, per_node=1)), where="m.yaml")
    assert "placeholders" in hw.provenance["collectives"]
    assert hw.intra["all_reduce"][0].bw_bytes_per_s == 20e9 and hw.compute_slowdown == 1.0


def test_single_process_copies_the_builtin_of_the_same_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump(toy_profile_dict(name="h100-ref")))
    monkeypatch.setattr(peaks, "builtin_for", lambda sheet: str(ref))
    hw = parse_profile(build(measurements(world=1, per_node=1)), where="m.yaml")
    assert "copied from built-in profile 'h100-ref'" in hw.provenance["collectives"]
    assert hw.inter["all_reduce"][0].group_size == 16


def test_cpu_profile_uses_best_measured_peaks_and_no_overlap_slowdown() -> None:
    hw = parse_profile(build(measurements(kind="cpu", name="AMD EPYC", world=2, per_node=2)), where="m.yaml")
    assert hw.peak("bf16") == pytest.approx(800e12, rel=1e-3)
    assert "best measured" in hw.provenance["peak_tflops"] and hw.memory_efficiency == 1.0
    assert hw.compute_slowdown == 1.0 and "CPU run" in hw.provenance["overlap"]


def test_atomic_write_keeps_the_earlier_file_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("earlier: profile\n")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OutputError, match=r"cannot write: No space left on device; any earlier file is unchanged"):
        writer.write_profile(path, build(measurements()))
    assert path.read_text() == "earlier: profile\n"
    assert os.listdir(tmp_path) == ["profile.yaml"]  # no temporary file left behind


def test_interrupted_write_keeps_the_earlier_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("earlier: profile\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.write_profile(path, build(measurements()))
    assert path.read_text() == "earlier: profile\n" and os.listdir(tmp_path) == ["profile.yaml"]


def test_an_invalid_document_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("earlier: profile\n")
    doc = build(measurements())
    doc["gpu"]["memory_efficiency"] = 1.5
    with pytest.raises(ProfileError, match="memory_efficiency"):
        writer.write_profile(path, doc)
    assert path.read_text() == "earlier: profile\n"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version=2), "newer autopar"),
        (lambda d: d["node"]["intra"].pop("all_to_all"), "node.intra.all_to_all: missing required field"),
        (lambda d: d["gpu"].pop("hbm_bw_gbps"), "gpu.hbm_bw_gbps: missing required field"),
        (lambda d: d["cluster"]["inter"]["all_reduce"][0].pop("bw_gbps"), r"inter.all_reduce\[0\].bw_gbps: missing"),
        (lambda d: d["overlap"].update(comm_slowdown=0.5), "comm_slowdown: must be >= 1"),
        (lambda d: d["gpu"]["gemm_efficiency"].update(bf16=[[1e9, 2.0]]), "gemm_efficiency.bf16\\[0\\]\\[1\\]: must be at most 1"),
    ],
)
def test_bad_measured_profiles_name_file_and_field(tmp_path: Path, mutate: Any, message: str) -> None:
    doc = yaml.safe_load(dump_yaml(build(measurements())))  # plain dicts and lists, as read from a file
    mutate(doc)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ProfileError, match=message) as err:
        load_hardware(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu: [unclosed\n", "malformed YAML at line"),
        ("", "file is empty"),
        ("- a list\n", "expected a mapping"),
        ("schema_version: 1\nname: x\nsource: !!python/object:os.system {}\n", "tags that construct objects"),
    ],
)
def test_corrupt_profile_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "corrupt.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError, match=message):
        load_hardware(str(path))


def test_compare_rows_and_tables(tmp_path: Path) -> None:
    path = tmp_path / "h100.yaml"
    writer.write_profile(path, build(measurements()))
    measured = load_hardware(str(path))
    reference = parse_profile(toy_profile_dict(), where="toy.yaml")
    rows = {r.label: r for r in compare_rows(measured, reference)}
    gemm = next(r for label, r in rows.items() if label.startswith("GEMM bf16"))
    assert (
        gemm.measured == pytest.approx(800, rel=1e-3)
        and gemm.reference == pytest.approx(500)
        and gemm.ratio == pytest.approx(1.6, rel=1e-3)
    )
    hbm = rows["HBM bandwidth (achieved)"]
    assert hbm.measured == pytest.approx(3000, rel=1e-2) and hbm.reference == pytest.approx(1000)
    ar = rows["all_reduce intra n=8 bus bw"]
    assert ar.measured == pytest.approx(300, rel=1e-3) and ar.reference == 100
    assert any(label.startswith("all_to_all inter n=8 (ref n=16)") for label in rows)
    console = Console(width=160, record=True)
    print_summary(console, measured, str(path))
    print_compare(console, measured, reference)
    text = console.export_text()
    assert "all_reduce" in text and "ratio" in text and "1.60" in text


def test_profile_name_from_the_file() -> None:
    assert profile_name(Path("profiles/measured/h200-1gpu.yaml"), "gpu-node-7.cluster") == "h200-1gpu"
    assert profile_name(Path("/home/u/.config/autopar/profile.yaml"), "gpu-node-7.cluster") == "measured-gpu-node-7"
