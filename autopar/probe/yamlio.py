"""YAML output that reads like the built-in profiles: short lists and small
mappings on one line (``[1024, 0.45]``, ``{group_size: 8, latency_us: 25,
bw_gbps: 360}``), everything else in block style, keys in insertion order.
Only plain types are written, so ``yaml.safe_load`` reads it back.
"""

from __future__ import annotations

from typing import Any

import yaml


class Flow(list[Any]):
    """A list written on one line."""


class FlowMap(dict[str, Any]):
    """A mapping written on one line."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the same fits may appear under intra and inter: write them twice, no &anchors


def _flow_list(dumper: yaml.SafeDumper, data: Flow) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", list(data), flow_style=True)


def _flow_map(dumper: yaml.SafeDumper, data: FlowMap) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", dict(data), flow_style=True)


def _block_map(dumper: yaml.SafeDumper, data: dict[Any, Any]) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=False)


_Dumper.add_representer(Flow, _flow_list)
_Dumper.add_representer(FlowMap, _flow_map)
_Dumper.add_representer(dict, _block_map)


def dump_yaml(doc: dict[str, Any]) -> str:
    """``doc`` as YAML text, keys in the order they were inserted."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=160, allow_unicode=True)
