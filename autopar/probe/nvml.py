"""What NVML says about this node's GPUs, beside the timings: name, memory, power limit, links.

Read through ``pynvml`` (the ``nvidia-ml-py`` package) where it is installed and the driver's
library loads; otherwise ``read_nvml`` returns None and the profile says why in its provenance.
Nothing here is measured: these are the device's own reports, for the reader of a profile to
check what it was measured on (a power-capped GPU, a PCIe card where NVLink was expected).

Topology: for GPU 0 against each other GPU, NVLink when NVML reports NVLink peer-to-peer
(``nvmlDeviceGetP2PStatus`` with ``NVML_P2P_CAPS_INDEX_NVLINK``), else the PCIe path from
``nvmlDeviceGetTopologyCommonAncestor`` (nvml.h ``nvmlGpuTopologyLevel_t``). Active NVLink links
are counted per GPU with ``nvmlDeviceGetNvLinkState``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# nvml.h nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs, as nvidia-smi topo -m names it
PCIE_PATHS = {
    0: "same board",
    10: "PCIe switch (PIX)",
    20: "PCIe switches (PXB)",
    30: "PCIe host bridge (PHB)",
    40: "NUMA node (NODE)",
    50: "across sockets (SYS)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuInfo:
    """One GPU as NVML reports it."""

    index: int
    name: str
    memory_bytes: int  # total framebuffer memory
    power_limit_w: float | None  # the enforced power limit; None where NVML does not report it
    nvlinks: int  # active NVLink links


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlInfo:
    """The node's GPUs and how GPU 0 reaches each of the others."""

    driver: str
    gpus: tuple[GpuInfo, ...]
    links: tuple[str, ...]  # links[j - 1]: GPU 0 to GPU j, "NVLink" or a PCIE_PATHS value

    def interconnect(self) -> str:
        """One line: NVLink links per GPU and the paths from GPU 0."""
        if len(self.gpus) < 2:
            return "one GPU"
        paths: dict[str, int] = {}
        for link in self.links:
            paths[link] = paths.get(link, 0) + 1
        said = ", ".join(f"{link} to {n} GPU{'s' if n > 1 else ''}" for link, n in paths.items())
        lanes = sorted({g.nvlinks for g in self.gpus})
        nvlinks = f"; {'/'.join(map(str, lanes))} active NVLink links per GPU" if lanes != [0] else ""
        return f"GPU 0: {said}{nvlinks}"

    def as_provenance(self) -> dict[str, str]:
        """Entries for the profile's provenance (text values, as its schema reads them)."""
        first = self.gpus[0]
        limits = sorted({g.power_limit_w for g in self.gpus if g.power_limit_w is not None})
        return {
            "nvml_driver": self.driver,
            "nvml_gpus": f"{len(self.gpus)} x {first.name}",
            "nvml_memory_gib": f"{first.memory_bytes / 2**30:.1f}",
            "nvml_power_limit_w": "/".join(f"{w:.0f}" for w in limits) or "not reported",
            "nvml_topology": self.interconnect(),
        }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _power_w(nvml: Any, handle: Any) -> float | None:
    try:
        return float(nvml.nvmlDeviceGetEnforcedPowerLimit(handle)) / 1000  # milliwatts
    except nvml.NVMLError:
        return None


def _nvlinks(nvml: Any, handle: Any) -> int:
    active = 0
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            active += nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED
        except nvml.NVMLError:  # not supported (PCIe), or past this GPU's last link
            break
    return active


def _link(nvml: Any, a: Any, b: Any) -> str:
    try:
        if nvml.nvmlDeviceGetP2PStatus(a, b, nvml.NVML_P2P_CAPS_INDEX_NVLINK) == nvml.NVML_P2P_STATUS_OK:
            return "NVLink"
    except nvml.NVMLError:
        pass
    try:
        level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
    except nvml.NVMLError:
        return "unknown path"
    return PCIE_PATHS.get(level, f"topology level {level}")


def read_nvml(module: ModuleType | None = None) -> tuple[NvmlInfo | None, str]:
    """(what NVML reports, or None; and a line saying where it came from or why it is absent)."""
    try:
        nvml: Any = module if module is not None else importlib.import_module("pynvml")
    except ImportError:
        return None, "not read: pynvml is not installed (pip install nvidia-ml-py)"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return None, f"not read: NVML did not start ({exc})"
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        if not handles:
            return None, "not read: NVML reports no GPU"
        gpus = tuple(
            GpuInfo(
                index=i,
                name=_text(nvml.nvmlDeviceGetName(h)),
                memory_bytes=int(nvml.nvmlDeviceGetMemoryInfo(h).total),
                power_limit_w=_power_w(nvml, h),
                nvlinks=_nvlinks(nvml, h),
            )
            for i, h in enumerate(handles)
        )
        links = tuple(_link(nvml, handles[0], h) for h in handles[1:])
        info = NvmlInfo(driver=_text(nvml.nvmlSystemGetDriverVersion()), gpus=gpus, links=links)
    except nvml.NVMLError as exc:
        return None, f"not read: NVML failed ({exc})"
    finally:
        nvml.nvmlShutdown()
    return info, "read from NVML"
