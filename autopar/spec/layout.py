"""The stage layout: which decoder layers each pipeline rank holds.

One layout, used by the cost model (cost/pipeline.py, cost/memory.py), the schedule picture
(render/schedule.py) and the launch commands (emit/), so that what is launched is what was
estimated.

Stage layout. The layers are cut into pp * vpp chunks in model order, as evenly
as possible, the earlier chunks taking the extra layer (so the last stage,
which also holds the loss, is never the heavier one); rank r holds chunks r,
r + pp, r + 2pp, ... (Megatron-LM's interleaved assignment; one contiguous
stage per rank when vpp = 1). Megatron expresses any such layout with
--pipeline-model-parallel-layout. torchtitan at 9dec370 (December 2024) cuts them
otherwise (split "middle", StackProfile.pipeline_split): generate_split_points gives
the first chunk L // chunks layers, each middle chunk one more while the remainder
lasts, and the last chunk what is left (torchtitan/parallelisms/pipelining_utils.py;
Llama 3.1 405B on pp 8: 15, 16 x 6, 15). On a stack that counts the embedding and the
loss as pipeline layers (`ends`), when L + 2 splits evenly and L does not (L = q
chunks + chunks - 2), the first and the last chunk take the fewer layers instead:
the embedding and the loss fill their slots, Megatron-Core's own split under
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split,
the only one of its split options besides a layout string that cuts such L (Llama
3.1 405B's 126 layers on pp 8: 128 / 8 / vpp; Megatron-Bridge's llama31_405b
recipe sets both; DeepSpeed's partition_method 'type:transformer|embedding' cuts
L + 2 unit weights the same way). Where there are more chunks than layers (one
or two more: stacks that count the embedding and the loss as pipeline layers,
StackProfile.pipeline_counts_embedding), every chunk holds one slot: the last
chunk the loss alone, and with two more the first the embedding alone
(Megatron-Core's --account-for-loss-in-pipeline-split and
--account-for-embedding-in-pipeline-split: the split counts L + 1 or L + 2
layers, and get_num_layers_to_build gives the end chunks one decoder layer
fewer; megatron/core/transformer/transformer_block.py at core_v0.16.1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from autopar.spec.plan import END_SLOTS


def end_slots(layers: int, chunks: int) -> int:
    """Slots the embedding and the loss take in the split: 0 while every chunk can hold a decoder layer,
    else one per chunk too many (the loss first, then the embedding)."""
    return max(0, chunks - layers)


def ends_shared(layers: int, chunks: int, ends: bool = False) -> bool:
    """Whether the embedding and the loss take a layer's slot in the first and the last chunk: on a stack
    that counts them (`ends`), where L + 2 splits evenly over more than two chunks and L does not."""
    return ends and chunks > 2 and layers >= chunks and layers % chunks == chunks - 2


def chunk_sizes(layers: int, chunks: int, *, ends: bool = False, split: str = "front") -> list[int]:
    """Decoder layers per chunk, in model order: as even as possible, the earlier chunks take the extra
    layer, unless the embedding and the loss share the end chunks (ends_shared: those two take one layer
    fewer). With one or two chunks more than layers, the last chunk holds the loss alone and (two more)
    the first the embedding alone; more than that no stack can lay out (ValueError). Split "middle":
    torchtitan 9dec370's generate_split_points (the first chunk q, the middle chunks q + 1 while the
    remainder lasts, the last the rest)."""
    slots = end_slots(layers, chunks)
    if slots > END_SLOTS:
        raise ValueError(f"{chunks} pipeline chunks for {layers} layers: at most {END_SLOTS} more (the embedding and the loss)")
    if slots:
        return [0] * (slots - 1) + [1] * layers + [0]
    q, r = divmod(layers, chunks)
    if split == "middle" and chunks > 1 and not ends:
        middle = [q + 1 if i < r else q for i in range(chunks - 2)]
        return [q, *middle, layers - q - sum(middle)]
    if ends_shared(layers, chunks, ends):
        return [q] + [q + 1] * r + [q]
    return [q + 1] * r + [q] * (chunks - r)


def first_smaller(layers: int, pp: int, vpp: int = 1, *, ends: bool = False, split: str = "front") -> bool:
    """Whether rank 0's first chunk holds fewer decoder layers than rank 1's (the embedding takes a slot of
    it: two end slots, or ends_shared; or the "middle" split gives the extra layers to the middle chunks)."""
    if pp < 2:
        return False
    first, second = stage_layers(layers, pp, vpp, ends=ends, split=split)[:2]
    return first[0] < second[0]


def peak_rank(layers: int, pp: int, vpp: int = 1, *, ends: bool = False, split: str = "front") -> int:
    """The first pipeline rank the memory peak can sit on: rank 0, the one with the most micro-batches in
    flight, unless the embedding takes a slot of its first chunk (two end slots, or ends_shared) and rank
    1 then keeps more layers' activations: the two are compared in layer-micro-batches at the first
    backward (m >= p). Rank r has run 2(p - r - 1) + (v - 1)p + 1 chunk forwards by then (Megatron-Core's
    interleaved warm-up and one steady forward; p - r micro-batches under 1F1B), the surplus over p per
    chunk all of its first chunk (forwards go round the chunks in groups of p); rank 0's first chunk
    holds a layer fewer than rank 1's, whose chunks are even. With pp 2, rank 1 is the last rank, which
    the memory model counts on its own. Under the "middle" split rank 0's first chunk likewise holds a
    layer fewer (first_smaller)."""
    if pp <= 2 or not first_smaller(layers, pp, vpp, ends=ends, split=split):
        return 0
    first, second = stage_layers(layers, pp, vpp, ends=ends, split=split)[:2]
    if vpp == 1:
        return 1 if (pp - 1) * second[0] > pp * first[0] else 0
    rank0 = (2 * pp - 1) * first[0] + pp * sum(first[1:])
    rank1 = (2 * pp - 3) * second[0] + pp * sum(second[1:])
    return 1 if rank1 > rank0 else 0


def chunk_rank(chunk: int, pp: int) -> int:
    """Pipeline rank that holds model chunk `chunk` (0-based, in model order)."""
    return chunk % pp


def virtual_stage(*, rank: int, chunk: int, pp: int) -> int:
    """Position in model order of a rank's `chunk`-th chunk (0-based): chunk * pp + rank."""
    return chunk * pp + rank


def stage_layers(layers: int, pp: int, vpp: int = 1, *, ends: bool = False, split: str = "front") -> tuple[tuple[int, ...], ...]:
    """Per pipeline rank, the layer counts of its chunks (in its own order)."""
    sizes = chunk_sizes(layers, pp * vpp, ends=ends, split=split)
    return tuple(tuple(sizes[virtual_stage(rank=r, chunk=c, pp=pp)] for c in range(vpp)) for r in range(pp))


def rank_kinds(kinds: Sequence[str], pp: int, vpp: int = 1, *, ends: bool = False, split: str = "front") -> tuple[Counter[str], ...]:
    """Per pipeline rank: how many layers of each kind it holds, for layer kinds `kinds` in model order."""
    ranks: list[Counter[str]] = [Counter() for _ in range(pp)]
    start = 0
    for chunk, size in enumerate(chunk_sizes(len(kinds), pp * vpp, ends=ends, split=split)):
        ranks[chunk_rank(chunk, pp)].update(kinds[start : start + size])
        start += size
    return tuple(ranks)


def rank_groups(
    kinds: Sequence[str], pp: int, vpp: int = 1, *, ends: bool = False, split: str = "front"
) -> tuple[tuple[Counter[str], int], ...]:
    """rank_kinds with equal ranks merged: (kinds, how many ranks), in order of first rank; the last
    rank (which also holds the loss) is always its own group, the last one."""
    ranks = rank_kinds(kinds, pp, vpp, ends=ends, split=split)
    groups: list[tuple[Counter[str], int]] = []
    for r in ranks[:-1]:
        for i, (c, n) in enumerate(groups):
            if c == r:
                groups[i] = (c, n + 1)
                break
        else:
            groups.append((r, 1))
    return (*groups, (ranks[-1], 1))
