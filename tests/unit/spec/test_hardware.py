"""Hardware profiles: schema checks, curves, fit lookup, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autopar.errors import ProfileError
from autopar.io.profiles import load_hardware, parse_profile, resolve_hardware
from autopar.spec.hardware import CollectiveFit, Curve, fit_for
from tests.conftest import toy_profile_dict


def test_curve_log_interpolation() -> None:
    c = Curve(xs=(1e9, 1e11), ys=(0.2, 0.8))
    assert c(1e10) == pytest.approx(0.5)  # halfway in log10
    assert c(1e12) == 0.8  # flat above the last point
    assert c(1e8) == pytest.approx(0.02)  # proportional below the first


def test_fit_for_nearest_group_in_log_scale() -> None:
    fits = tuple(CollectiveFit(group_size=g, latency_s=1e-5, bw_bytes_per_s=1e9) for g in (2, 8, 64))
    assert fit_for(fits, 4).group_size == 2  # equidistant in log: the smaller one
    assert fit_for(fits, 6).group_size == 8
    assert fit_for(fits, 4096).group_size == 64


def write(tmp_path: Path, data: object) -> str:
    p = tmp_path / "hw.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def test_roundtrip_units(tmp_path: Path) -> None:
    hw = load_hardware(write(tmp_path, toy_profile_dict()))
    assert hw.memory_bytes == 80 * 2**30 and hw.peak("bf16") == 1e15 and hw.hbm_bytes_per_s == 2e12
    assert hw.intra["all_reduce"][0].latency_s == pytest.approx(10e-6)
    assert hw.inter["all_reduce"][0].bw_bytes_per_s == 10e9


def broken(**changes: object) -> dict:
    d = toy_profile_dict()
    for path, value in changes.items():
        node = d
        *parents, leaf = path.split("__")
        for k in parents:
            node = node[k]
        if value is None:
            del node[leaf]
        else:
            node[leaf] = value
    return d


BAD = [
    (broken(schema_version=2), "schema_version: profile is from a newer autopar (schema 2"),
    (broken(gpu__memory_gib=None), "gpu.memory_gib: missing required field"),
    (broken(gpu__memory_gib=-1), "gpu.memory_gib: must be >= 0.001, got -1"),
    (broken(gpu__hbm_bw_gbsp=5), "gpu.hbm_bw_gbsp: unknown field (did you mean 'hbm_bw_gbps'?)"),
    (broken(gpu__peak_tflops={"fp8": 1}), "gpu.peak_tflops: must give bf16"),
    (broken(gpu__memory_efficiency=1.5), "gpu.memory_efficiency: must be at most 1, got 1.5"),
    (broken(gpu__gemm_efficiency={"bf16": [[1, 2]]}), "gpu.gemm_efficiency.bf16[0][1]: must be at most 1, got 2"),
    (broken(node__intra__all_to_all=None), "node.intra.all_to_all: missing required field"),
    (broken(node__intra__all_reduce=[{"group_size": 8, "latency_us": 1}]), "node.intra.all_reduce[0].bw_gbps: missing required"),
    (broken(overlap__compute_slowdown=0.5), "overlap.compute_slowdown: must be >= 1"),
    (broken(source="guessed"), "source: must be one of datasheet, measured"),
]


@pytest.mark.parametrize(("data", "message"), BAD)
def test_bad_profiles(tmp_path: Path, data: dict, message: str) -> None:
    with pytest.raises(ProfileError) as err:
        load_hardware(write(tmp_path, data))
    assert message in str(err.value)


def test_corrupt_profile_file(tmp_path: Path) -> None:
    p = tmp_path / "hw.yaml"
    p.write_bytes(b"\x00\xff garbage")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_hardware(str(p))
    p.write_text("gpu: [1, 2\n")
    with pytest.raises(ProfileError, match="malformed YAML"):
        load_hardware(str(p))


def test_datasheet_profiles_need_citations() -> None:
    d = toy_profile_dict()
    d["node"]["gpus_per_host"] = 3  # the toy node has 8 GPUs
    with pytest.raises(ProfileError, match=r"node.gpus_per_host: must divide gpus_per_node \(8\), got 3"):
        parse_profile(d, where="x.yaml")
    d["node"]["gpus_per_host"] = 4
    assert parse_profile(d, where="x.yaml").host_gpus == 4
    d = toy_profile_dict(source="datasheet")
    with pytest.raises(ProfileError, match="citations: missing required field"):
        parse_profile(d, where="x.yaml")


def test_resolve_prefers_flag_then_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, toy_profile_dict())
    hw, why = resolve_hardware(path)
    assert hw.name == "toy" and why == f"--hardware {path}"
    monkeypatch.setenv("AUTOPAR_HOME", str(tmp_path))
    (tmp_path / "profile.yaml").write_text(Path(path).read_text())
    hw, why = resolve_hardware(None)
    assert hw.name == "toy" and "saved by `autopar profile`" in why


def test_gemm_time_never_falls_as_the_work_grows():
    # Efficiency 0.1 at 1 GFLOP and 0.5 at 10 GFLOP: at 2 GFLOP the log-linear efficiency is
    # 0.1 + 0.4 * log(2)/log(10) = 0.2204, so 2e9 / 0.2204 = 9.07e9 would undercut the measured
    # 1 GFLOP point (1e9 / 0.1 = 1e10); the floor keeps 1e10. At 10 GFLOP: 1e10 / 0.5 = 2e10.
    curve = Curve(xs=(1e9, 1e10), ys=(0.1, 0.5))
    assert 2e9 / curve(2e9) == pytest.approx(9.07e9, rel=1e-3)
    assert curve.size_per_efficiency_floor(2e9) == pytest.approx(1e10)
    assert curve.size_per_efficiency_floor(5e8) == 0.0
    assert curve.size_per_efficiency_floor(1e10) == pytest.approx(2e10)


def test_curve_points_are_pairs(tmp_path: Path) -> None:
    for points, message in (
        ([1e9], "gpu.gemm_efficiency.bf16[0]: expected a pair [size, value], got 1000000000.0"),
        ([[1e9, 0.5, 3]], "gpu.gemm_efficiency.bf16[0]: expected at most 2 item(s)"),
        ([[1e9, 1e-7]], "gpu.gemm_efficiency.bf16[0][1]: must be >= 1e-06, got 1e-07"),
    ):
        with pytest.raises(ProfileError) as err:
            load_hardware(write(tmp_path, broken(gpu__gemm_efficiency={"bf16": points})))
        assert message in str(err.value)


def test_a_derived_profile_does_not_keep_its_base_gpus_name(tmp_path: Path) -> None:
    # issue 25: a 64 GiB variant of h100-sxm still said "on 8 x NVIDIA H100 80GB HBM3"
    path = tmp_path / "my-h100.yaml"
    path.write_text(
        "schema_version: 1\nname: my-h100\nbase: h100-sxm\noverrides:\n  gpu:\n    memory_gib: 64\n"
        "citations:\n  schema_version: format number\n  overrides.gpu.memory_gib: test\n"
    )
    hw = load_hardware(str(path))
    assert hw.gpu_name == "NVIDIA H100 80GB HBM3 (my-h100)" and hw.memory_bytes == 64 * 2**30
    assert load_hardware("h100-96g-500w").gpu_name == "NVIDIA H100 96GB HBM2e (500 W)"  # a name it gives is kept
