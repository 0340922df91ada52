"""A serving framework at a version: the engine behaviour and constants the serving cost model takes.

The values are data, one file per engine version (``autopar/data/frameworks/<name>-<version>.yaml``,
read by autopar/io/frameworks.py, schema autopar/io/schema/framework.py FrameworkFile): each value there
names its mechanism and source, and a fitted one the rows and the command that set it. This
module holds the frozen value and the rules on framework references (``NAME[@VERSION]``) and
on which version's data a version uses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from autopar.errors import SpecError

FRAMEWORKS = ("vllm", "sglang", "trtllm")  # the engines autopar prices and launches
POLICIES = ("decode_first", "prefill_first")  # scheduler policies cost/serve_sim.py runs
MEMORY_RULES = ("total", "free")
MOE_DECODE_READS = ("touched", "local")
# How an engine with attention-DP ranks moves a MoE layer's tokens to the experts and back (cost/serve_experts.py
# _Exchange): all-gather and reduce-scatter over the DP group (vLLM) or over the engine's tp x dp ranks
# (SGLang), an all-to-all over the EP group, or that all-to-all only on a multi-node NVLink domain (TensorRT-LLM)
MOE_EXCHANGES = ("gather_dp", "gather_tp", "all_to_all", "all_to_all_mnnvl")
# KV admission when the pool cannot hold every request at full length (cost/serve_sim.py, serve_load.py;
# docs/serving.md "How each engine admits requests")
ADMISSIONS = ("reserve_full", "blocks_now_preempt", "reserve_ratio")
# How a disaggregated prefill engine's prompts are priced (cost/serve_load.py prefill_server): at
# prefill_slowdown x the profile's curves, or as the engine's own steps (every attention-DP rank's prompt
# in the MoE layer of a busy step, no slowdown)
DISAGG_PREFILLS = ("slowdown", "engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class Framework:
    """Defaults and fitted constants of one serving framework at one version: every field comes from its
    data file (autopar/io/frameworks.py), none has a default here."""

    name: str  # vllm | sglang | trtllm
    version: str  # the framework version the values describe (the data file's)
    label: str  # display name with that version
    description: str  # what it is, one line
    source: str  # the framework release and files the defaults were read from
    memory_fraction: float  # share of GPU memory (total or free, see memory_rule) the engine may take
    memory_rule: str  # total: fraction of total memory holds weights + KV; free: KV gets the fraction of what weights leave
    chunk_tokens: int  # tokens one prefill step takes at most (chunked prefill budget)
    graph_reserve_bytes: float  # CUDA graphs, NCCL and workspace memory outside the KV pool
    step_overhead_s: float  # fitted: host time per decode step
    ttft_overhead_s: float  # fitted: per-request time outside the engine steps
    prefill_slowdown: float  # fitted: serving prefill over the profile's curves
    policy: str  # scheduler: decode_first | prefill_first (cost/serve_sim.py)
    chunked: bool  # a prompt may be cut across steps (chunked prefill)
    max_seqs: int  # requests running at once (--max-num-seqs, --max-running-requests, max_batch_size)
    admission: str  # ADMISSIONS: reserve the whole request | the blocks needed now, preempt | reserve at a ratio, retract
    retract_steps: int  # decode steps of room a preemption leaves the kept requests (SGLANG_RETRACT_DECODE_STEPS)
    graph_sizes: tuple[int, ...]  # decode batch sizes with a captured CUDA graph, no padding (() = not modelled)
    eager_layer_s: float  # fitted: host seconds per layer of a step run without a CUDA graph
    overlap: bool  # overlap scheduler: a step's tokens are returned after the next step is launched
    dp_padding: bool  # attention-DP ranks step at the largest rank's token count; the MoE computes them all
    moe_decode_reads: str  # decode steps read the experts the tokens touch | every local expert ("local")
    host_request_s: float  # fitted: host seconds per running request a step, run beside the GPU (overlap)
    mixed_chunk: bool  # SGLang --enable-mixed-chunk: a prefill step also holds the running decodes
    max_prefill_tokens: int  # SGLang --max-prefill-tokens: new prompt tokens a step admits (0: chunk_tokens only)
    host_token_s: float  # read off the rows: serving-process seconds per streamed token, per engine (0: keeps up)
    host_prompt_token_s: float  # read off the rows: serving-process seconds per prompt token it tokenizes (0: none)
    moe_decode_slowdown: float  # fitted: a decode step's expert read over the profile's memory time (fused-MoE kernel)
    kv_decode_slowdown: float  # fitted: a decode step's KV-cache read over the profile's memory time (paged attention)
    moe_exchange: str  # MOE_EXCHANGES: how attention-DP ranks send a MoE layer's tokens to the experts and back
    disagg_prefill: str  # DISAGG_PREFILLS: a disaggregated prefill engine at prefill_slowdown, or at its own steps' cost
    hybrid_overlap: bool  # the overlap scheduler stays on for a model with Mamba (linear-attention) layers
    recv_interval: int  # decode steps between the scheduler's takes of new requests (SGLang --scheduler-recv-interval)

    def __hash__(self) -> int:
        """The name, version and the values launch settings change (Deployment.framework_for): equal
        frameworks hash alike, and a cost cache's key (cost/serve_memo.py), hashed at each of a sweep's
        ~10^5 calls, does not hash every fitted constant and CUDA-graph size of its framework."""
        launch = (self.chunk_tokens, self.max_seqs, self.memory_fraction, self.mixed_chunk, self.max_prefill_tokens, self.recv_interval)
        return hash((self.name, self.version, *launch))


IDENTITY = ("name", "version", "label", "description", "source")  # Framework fields that are not engine values

# PEP 440's shape as the engines tag their releases: 0.12.0, 0.5.6.post2, 1.0.0rc3, 1.2.0rc6.post1
# PEP 440's spellings: a separator (. - _) may precede a, b, rc, post and dev and their numbers, as image tags
# write them (TensorRT-LLM 1.1.0-dev.2 is 1.1.0.dev2)
_VERSION = re.compile(r"v?(\d+(?:\.\d+){0,3})(?:[-_.]?(a|b|rc)[-_.]?(\d+))?(?:[-_.]?post[-_.]?(\d+))?(?:[-_.]?dev[-_.]?(\d+))?")
_PRE = {"a": 0, "b": 1, "rc": 2}


@dataclass(frozen=True, slots=True)
class VersionKey:
    """A parsed version: its release numbers and an order key (pre-releases before the release)."""

    release: tuple[int, ...]
    order: tuple[tuple[int, ...], tuple[int, int], int, int]


def version_key(version: str, *, what: str = "`framework`") -> VersionKey:
    """`version` parsed, or a SpecError naming `what` when it is not a version."""
    m = _VERSION.fullmatch(version)
    if m is None:
        raise SpecError(
            f"{what}: malformed version {version!r}: expected numbers and dots such as 0.5.6, "
            "optionally with a suffix such as rc3 or .post1"
        )
    release = tuple(int(x) for x in m.group(1).split("."))
    post, dev = int(m.group(4) or -1), 0 if m.group(5) is None else -1
    pre = (_PRE[m.group(2)], int(m.group(3))) if m.group(2) else (-1, 0) if dev and post < 0 else (3, 0)
    return VersionKey(release=release, order=(release + (0,) * (4 - len(release)), pre, post, dev))


def parse_ref(ref: str, *, what: str = "`framework`") -> tuple[str, str]:
    """``NAME[@VERSION]`` -> (name, version); version "" when not given."""
    name, at, version = ref.strip().partition("@")
    if name not in FRAMEWORKS:
        raise SpecError(f"{what} must be one of {', '.join(FRAMEWORKS)}, got {name!r} (NAME or NAME@VERSION, or a framework .yaml)")
    if at:
        version_key(version, what=f"{what} {ref.strip()!r}")
    return name, version


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """Which known version's data a requested version uses, and the line that says so (empty when its own)."""

    version: str
    note: str = ""


def choose_version(name: str, version: str, known: Sequence[str], *, what: str = "`framework`") -> Choice:
    """The data a version of `name` uses, from the `known` versions (those with a data file):

    - no version: the newest known;
    - a known version, or one it is the release prefix of (0.5.1 for 0.5.1.post1, 1.0 for 1.0.0rc3): its own;
    - any other: the newest known version older than it (an engine's behaviour carries forward until
      a newer file says otherwise), else the oldest known; the note says which.
    """
    if not known:
        raise SpecError(f"{what}: no data file for {name}")
    keys = {v: version_key(v, what=f"data file version of {name}") for v in known}
    if not version:
        return Choice(version=max(known, key=lambda v: keys[v].order))
    asked = version_key(version, what=f"{what} {name}@{version}")
    own = [v for v in known if asked.release[: len(keys[v].release)] == keys[v].release]
    if own:
        return Choice(version=max(own, key=lambda v: len(keys[v].release)))
    older = [v for v in known if keys[v].order < asked.order]
    chosen = max(older, key=lambda v: keys[v].order) if older else min(known, key=lambda v: keys[v].order)
    how = "the newest before it" if older else "the oldest known"
    return Choice(version=chosen, note=f"no data file for {name} {version}: using {chosen}, {how}")
