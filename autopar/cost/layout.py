"""Which layers each pipeline rank holds.

The layers are cut into pp * vpp chunks as evenly as possible (earlier chunks
take the extra layer, so the last stage, which also holds the loss, is never
the heavier one); rank r holds chunks r, r + pp, r + 2pp, ... (Megatron's
interleaved assignment; with vpp = 1 one contiguous stage per rank).
"""

from __future__ import annotations

from collections import Counter

from autopar.spec.model import ModelSpec


def chunk_sizes(layers: int, chunks: int) -> list[int]:
    """Layers per chunk: as even as possible, the later chunks take fewer."""
    q, r = divmod(layers, chunks)
    return [q + 1] * r + [q] * (chunks - r)


def rank_kinds(model: ModelSpec, pp: int, vpp: int) -> tuple[Counter[str], ...]:
    """Per pipeline rank: how many layers of each kind it holds."""
    kinds = model.layer_kinds()
    ranks: list[Counter[str]] = [Counter() for _ in range(pp)]
    start = 0
    for i, size in enumerate(chunk_sizes(len(kinds), pp * vpp)):
        ranks[i % pp].update(kinds[start:start + size])
        start += size
    return tuple(ranks)
