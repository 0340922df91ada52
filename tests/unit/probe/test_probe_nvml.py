"""autopar.probe.nvml: what NVML reports, read through a fake ``pynvml`` (no GPU here), into the profile."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from autopar.io.profiles import parse_profile
from autopar.probe import peaks, writer
from autopar.probe.nvml import read_nvml
from tests.unit.probe.test_probe_writer import measurements


class NVMLError(Exception):
    pass


def fake_nvml(
    *,
    gpus: int = 8,
    name: Any = "NVIDIA H100 80GB HBM3",
    nvlinks: int = 18,
    p2p_nvlink: bool = True,
    level: int = 30,
    power_mw: int | None = 700_000,
    init_fails: bool = False,
) -> ModuleType:
    """A pynvml with nvidia-ml-py's names and constants (nvml.h) and a node of ``gpus`` GPUs."""
    m = ModuleType("pynvml")
    state = {"up": False}

    def init() -> None:
        if init_fails:
            raise NVMLError("NVML Shared Library Not Found")
        state["up"] = True

    def nvlink_state(handle: int, link: int) -> int:
        if nvlinks == 0:
            raise NVMLError("Not Supported")
        if link >= 18:
            raise NVMLError("Invalid Argument")
        return 1 if link < nvlinks else 0

    def power(handle: int) -> int:
        if power_mw is None:
            raise NVMLError("Not Supported")
        return power_mw

    m.__dict__.update(
        NVMLError=NVMLError,
        NVML_NVLINK_MAX_LINKS=36,
        NVML_FEATURE_ENABLED=1,
        NVML_P2P_CAPS_INDEX_NVLINK=2,
        NVML_P2P_STATUS_OK=0,
        nvmlInit=init,
        nvmlShutdown=lambda: state.update(up=False),
        nvmlDeviceGetCount=lambda: gpus,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: name,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=81559 * 2**20),
        nvmlDeviceGetEnforcedPowerLimit=power,
        nvmlDeviceGetNvLinkState=nvlink_state,
        nvmlDeviceGetP2PStatus=lambda a, b, cap: 0 if p2p_nvlink else 4,
        nvmlDeviceGetTopologyCommonAncestor=lambda a, b: level if b < 4 else 50,
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
    )
    m.state = state
    return m


def test_an_nvlink_node() -> None:
    nvml = fake_nvml()
    info, how = read_nvml(nvml)
    assert how == "read from NVML" and info is not None
    assert info.as_provenance() == {
        "nvml_driver": "550.54.15",
        "nvml_gpus": "8 x NVIDIA H100 80GB HBM3",
        "nvml_memory_gib": "79.6",  # 81,559 MiB
        "nvml_power_limit_w": "700",
        "nvml_topology": "GPU 0: NVLink to 7 GPUs; 18 active NVLink links per GPU",
    }
    assert nvml.state == {"up": False}  # shut down again


def test_a_pcie_node_names_the_paths() -> None:
    info, _ = read_nvml(fake_nvml(gpus=8, name=b"NVIDIA L40S", nvlinks=0, p2p_nvlink=False, level=30, power_mw=350_000))
    assert info is not None
    said = info.as_provenance()
    assert said["nvml_gpus"] == "8 x NVIDIA L40S"  # bytes names (older pynvml) decoded
    # GPUs 1-3 behind the same host bridge, 4-7 on the other socket
    assert said["nvml_topology"] == "GPU 0: PCIe host bridge (PHB) to 3 GPUs, across sockets (SYS) to 4 GPUs"
    assert said["nvml_power_limit_w"] == "350"


def test_missing_power_limit_and_one_gpu() -> None:
    info, _ = read_nvml(fake_nvml(gpus=1, power_mw=None))
    assert info is not None
    assert info.as_provenance()["nvml_power_limit_w"] == "not reported"
    assert info.as_provenance()["nvml_topology"] == "one GPU"


def test_without_pynvml_or_a_driver_it_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    assert read_nvml() == (None, "not read: pynvml is not installed (pip install nvidia-ml-py)")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(init_fails=True))
    assert read_nvml() == (None, "not read: NVML did not start (NVML Shared Library Not Found)")


def test_the_profile_carries_it_beside_the_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peaks, "builtin_for", lambda sheet: None)  # as test_probe_writer: no built-in fallbacks
    doc = writer.build_profile(measurements(), name="m", hostname="node01", date="2026-01-01T00:00:00+00:00", nvml=read_nvml(fake_nvml()))
    prov = doc["provenance"]
    assert prov["nvml"] == "read from NVML" and prov["nvml_gpus"] == "8 x NVIDIA H100 80GB HBM3"
    assert prov["nvml_topology"].startswith("GPU 0: NVLink to 7 GPUs")
    assert prov["gpu_name"] == "NVIDIA H100 80GB HBM3"  # the timings' own device name stays
    parse_profile(doc, where="test")  # still a valid profile
    plain = writer.build_profile(
        measurements(), name="m", hostname="node01", date="2026-01-01T00:00:00+00:00", nvml=(None, "not read: a cpu run")
    )
    assert plain["provenance"]["nvml"] == "not read: a cpu run" and "nvml_gpus" not in plain["provenance"]
