"""The serving calibration rows: each measured run as a deployment autopar can estimate.

Each row of benchmarks/data/serving_runs.csv (see serving_runs.SOURCE.md; the
calibration rows) and of serving_runs_newer.csv (newer models, GPUs and engine
versions, held out: no constant is set on them) is turned into a deployment (framework, engine layout, weights dtype, KV dtype and
launch arguments from serving_campaign.py) and a workload (isl, osl,
concurrency; a disaggregated row's concurrency is disagg_concurrency's, and the
rows of a file whose runs cannot hold the clients' first wave are taken as
measured in steady state: warmed_sources). benchmarks/serving_accuracy.py
scores them against autopar's serving model.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from autopar.cost.serve_load import estimate
from autopar.errors import SpecError
from autopar.io.frameworks import load_framework
from autopar.io.models import load_model
from autopar.io.profiles import builtin_names as builtin_profile_names
from autopar.io.profiles import load_hardware as _load_hardware
from autopar.spec.framework import FRAMEWORKS, Framework
from autopar.spec.model import ModelSpec
from autopar.spec.serve import Deployment, Engine, Workload
from benchmarks.serving_campaign import (
    inferencex_dp_attention,
    inferencex_launch,
    inferencex_layout,
    inferencex_recipe,
    kv_dtype,
    launch_args,
)


@functools.cache
def _cli_options() -> dict[str, tuple[str, str | None, bool]]:
    from typer.main import get_command

    from autopar.cli import app
    from autopar.cli.run import options_of

    return options_of(get_command(app))


def cli_words(message: str) -> str:
    """A library message as the CLI prints it: its parameters as flags (autopar/cli/run.py)."""
    from autopar.cli.run import flagged

    return flagged(message, _cli_options())


HERE = Path(__file__).parent

load_hardware = functools.lru_cache(maxsize=None)(_load_hardware)


def profile_for_system(system: str) -> str | None:
    """The built-in hardware profile of a file's system name, or None: the same GPU, the profile
    name may add parts (a100_sxm -> a100-sxm-80g), the system name only the form factor sxm
    (h100_sxm -> h100-sxm, b200_sxm -> b200, gb200 -> gb200, h100_pcie -> h100-pcie, h20 -> h20;
    h20_3e, the 141 GB H20, is h20-3e, not h20)."""

    def parts(name: str) -> list[str]:
        return [p for p in re.split(r"[^a-z0-9]+", name.lower()) if p]

    want = parts(system)
    for name in builtin_profile_names():
        have = parts(name)
        n = min(len(want), len(have))
        if want and want[:n] == have[:n] and all(p == "sxm" for p in want[n:]):
            return name
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One measured run and the deployment it describes."""

    key: tuple[str, str, str]  # framework, GPU, mode
    label: str  # short description
    model: ModelSpec
    model_key: str  # model path as in the file
    source: str = ""  # the measurement file the row comes from (GPU/framework/version/model.csv)
    hw_name: str  # built-in profile
    dep: Deployment
    wl: Workload
    ttft_ms: float  # measured
    tpot_ms: float  # measured
    held_out: bool = False  # from a file no constant is fitted on (serving_runs_newer.csv)
    release: str = ""  # the engine release that ran it (backend_version), not the data file it is priced with


def _int(value: str, default: int = 1) -> int:
    return int(value) if value and int(value) > 0 else default


def _engine(tp: int, moe_tp: int, ep: int, *, dp: int, model: ModelSpec) -> Engine:
    """The file's moe_tp x moe_ep spans tp x attention-DP ranks; a blank attention-DP follows from it."""
    if model.moe is not None and dp == 1 and moe_tp * ep > tp:
        dp = moe_tp * ep // tp
    return Engine(tp=tp, dp=dp, ep=ep if model.moe is not None else 1)


# A row id that names its engine layout: ..._c64_tp4_ep4_1290, ..._c4_tp4_0_ep4_0_569
ID_LAYOUT = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_\d+$")


def id_layout(r: dict[str, str]) -> tuple[int, int] | None:
    """(tp, ep) the row's id names, None where it names none."""
    m = ID_LAYOUT.search(r["id"])
    return (int(m.group(1)), int(m.group(2))) if m else None


def _same_run(r: dict[str, str]) -> tuple[str, ...]:
    """What two rows of one run share: the columns that describe it and both measurements, every digit."""
    return tuple(v for k, v in r.items() if k not in ("id", "silicon_data_source"))


def named_layouts(rows: list[dict[str, str]]) -> dict[tuple[str, ...], tuple[int, int]]:
    """The layout each run's id names (id_layout), by _same_run: a database dump's copy of a campaign row
    (kimik2_5_b200_vllm_fp4_agg_8192x1024_c4_cfg635 of ..._c4_tp4_ep4_1301) names none itself."""
    return {_same_run(r): named for r in rows if (named := id_layout(r)) is not None}


def agg_engine(r: dict[str, str], model: ModelSpec, named: tuple[int, int] | None = None) -> Engine:
    """An aggregated row's engine: its columns, or the layout its id (or `named`, its run's) names where
    they contradict it.

    71 rows of serving_runs_newer.csv (its 2026-04-06 file) list tp x ep or attention-DP x ep in their
    columns where the id names tpN_epM (tp4 ep4 as tp4 attention-DP 4 ep16 or tp16 ep4, tp8 ep8 as
    tp64 ep8, tp2 ep2 as tp2 attention-DP 2 ep4); they measure as the id's layout (the same model, GPU
    and version run as tp4 ep4 in the 2026-03-25 file: within 10% at every concurrency, where 4x the
    GPUs and attention ranks would not be). Read as the id's: tp N, the experts over ep M, one rank. An
    InferenceX SGLang row whose entry ran another layout than listed runs the entry's
    (serving_campaign.inferencex_layout)."""
    cols = (_int(r["tp_size"]), _int(r["moe_tp_size"]), _int(r["moe_ep_size"]), _int(r["attention_dp_size"]))
    named = id_layout(r) or named or vllm_ep_as_dp(r) or inferencex_layout(r)
    if named is not None and inferencex_dp_attention(r):  # tp 1, an attention-DP rank a GPU (serving_campaign)
        return _engine(1, 1, named[1], dp=named[0], model=model)
    if named is not None and named != (cols[0], cols[2]):
        tp, ep = named
        return _engine(tp, max(1, tp // ep), ep, dp=1, model=model)
    return _engine(cols[0], cols[1], cols[2], dp=cols[3], model=model)


def vllm_ep_as_dp(r: dict[str, str]) -> tuple[int, int] | None:
    """(N, N) where a vLLM row's columns read tp N, attention-DP N and the experts over N x N ranks (expert-TP
    1), the way the 71 rows above record a tpN_epN run; None otherwise.

    Every vLLM row of serving_runs_newer.csv with attention-DP ranks has these columns (tp2 attention-DP 2
    ep4, tp4 attention-DP 4 ep16; 97 rows), and each of the 65 whose id (or twin, named_layouts) names a
    layout names tpN_epN, none attention-DP. The 32 others (database dumps: configs 691-735, 827) measure as
    tpN runs on N GPUs, not as N x N GPUs: MiniMax-M2.5 fp8 on B300 at 1024/1024 c512, "tp4 attention-DP 4
    ep16" 728 ms / 31.7 ms against the tp4 run's 764 / 36.3 (on 16 GPUs each rank would run 128 requests,
    the tp4 run's c128 TPOT 17.8 ms); "tp2 attention-DP 2 ep4" 960 / 45.5 against tp2's 1066 / 53.2 and
    tp4's 764 / 36.3; fp4 8192/1024 c256 1533 / 59.3 against tp2's 1552 / 60.1."""
    tp, moe_tp, ep, dp = (_int(r[k]) for k in ("tp_size", "moe_tp_size", "moe_ep_size", "attention_dp_size"))
    return (tp, tp) if r["backend"] == "vllm" and tp > 1 and dp == tp and moe_tp == 1 and ep == tp * dp else None


def recipe_engines(r: dict[str, str], pre: Engine, dec: Engine) -> tuple[Engine, Engine]:
    """A disaggregated row's engines as its InferenceX recipe launched them (serving_campaign.inferencex_recipe),
    else as its columns read. The GB200 vLLM rows list the prefill engine as tp4 ep4 and the one-engine decode
    pool as tp16 ep16 (the config's `tp` and `ep`, its `dp-attn: true` dropped); the recipes run them
    tensor-parallel-size 1, data-parallel-size 4 (16) with expert parallelism: tp 1, an attention-DP rank a
    GPU. A decode pool of 4 engines (tep4) is tp4 ep4 as listed."""
    recipe = inferencex_recipe(r)
    if recipe is None:
        return pre, dec
    pre = Engine(tp=1, dp=pre.tp * pre.dp, ep=pre.ep)
    if recipe.decode_dp:
        dec = Engine(tp=1, dp=dec.tp * dec.dp, ep=dec.ep)
    return pre, dec


@functools.cache
def framework_of(name: str, version: str) -> Framework:
    """The data a row's framework version uses: its own file, else the nearest (spec/framework.py choose_version);
    the newest where the file's version is not one."""
    try:
        return load_framework(f"{name}@{version}")
    except SpecError:
        return load_framework(name)


# An engine release as --framework NAME@VERSION names one: numbers, then an optional post/rc/dev tag
# (0.5.10.post1, 1.2.0rc6.post1, 1.1.0-dev.2). Nightly builds, blank versions and branch names
# (nightly-dev-20260216-d3bae71e, glm5-hopper) name no release the CLI can be given.
RELEASE = re.compile(r"\d+(\.\d+)+([.-]?(post|rc|dev)[.\d]*)*")
WEIGHTS = {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4", "int4": "int4"}  # the file's precision -> --weights


def _weights(r: dict[str, str]) -> str | None:
    """--weights of a row: its precision (fp4 = NVFP4, int4 = weight-only); a blank precision is fp8 when
    the GEMMs are quantised, else bf16 (the calibration file's older rows); None: not expressible."""
    if not r.get("precision"):
        return "fp8" if r["gemm_quant_mode"] else "bf16"
    return WEIGHTS.get(r["precision"])


def _why_not(r: dict[str, str], hw_name: str | None) -> str:
    """Why autopar cannot describe a row as a user would give it, or ''."""
    if r["backend"] not in FRAMEWORKS:
        return f"framework {r['backend']!r} is not modelled"
    if hw_name is None:
        return f"no built-in profile for system {r['system']!r}"
    if not RELEASE.fullmatch(r.get("backend_version") or ""):
        return f"{r['backend']} version {r.get('backend_version') or '(blank)'!r} is not a release"
    if _weights(r) is None:
        return f"precision {r['precision']!r} is not a --weights dtype"
    launch = inferencex_launch(r)
    if launch is not None and launch.mtp:
        return "ran MTP speculative decoding, which serve estimate does not price"
    return ""


# The digits a run's measurements keep in every file that holds it (the gap-analysis file rounds to 0.01 ms).
_TWIN_DIGITS = 2
_TWIN_COLUMNS = ("model_path", "system", "precision", "mode", "isl", "osl", "batch_size")


def _twin_key(r: dict[str, str]) -> tuple[str, ...]:
    ms = (f"{float(r[k]):.{_TWIN_DIGITS}f}" for k in ("silicon_ttft_ms", "silicon_tpot_ms"))
    return (*(r[k] for k in _TWIN_COLUMNS), *ms)


def with_twin_launch(table: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, each whose source names no image given the image and measured date of a row of the same run.

    serving_runs_newer.csv's qwen3.5-397b-gap-analysis.csv rows (SGLang, no image) repeat InferenceX rows of
    the 2026-03-25 and 2026-04-06 files: the same model, GPU, precision, shape and concurrency and both
    measurements to 0.01 ms (the gap file's digits; the 2026-04-06 file lists some layouts otherwise), e.g. B200
    fp8 tp4 1024/1024 c4 338.34 ms / 6.33 ms, the v0.5.9-cu130 run of 2026-03-20. A copy ran that run's launch
    (serving_campaign.inferencex_launch)."""
    twins = {_twin_key(r): r for r in table if "sglang:" in r.get("silicon_data_source", "")}
    out = []
    for r in table:
        src = r.get("silicon_data_source", "")
        twin = twins.get(_twin_key(r)) if r.get("backend") == "sglang" and "sglang:" not in src else None
        if twin is not None:
            tsrc = twin["silicon_data_source"]
            image = re.search(r"lmsysorg/sglang:\S+?(?=;|$)", tsrc)
            day = re.search(r"measured=[^;]+", tsrc)
            extra = "".join(f"; {m.group(0)}" for m in (day, image) if m is not None)
            r = {**r, "silicon_data_source": src + extra}
        out.append(r)
    return out


def _source(text: str) -> str:
    """The measurement a row comes from: its file (GPU/framework/version/model.csv), or in a database dump
    (serving_runs_newer.csv: db-dump/DATE; config_id=N; ...; workflow_run_id=M) its config and workflow run."""
    fields = dict(f.strip().split("=", 1) for f in text.split(";") if "=" in f)
    if "workflow_run_id" in fields:
        return f"config {fields.get('config_id', '?')} run {fields['workflow_run_id']}"
    return text.split(";")[0].rsplit("/data/", 1)[-1]


def disagg_concurrency(r: dict[str, str]) -> int:
    """The concurrency a disaggregated row stands for, as aiconfigurator reads its own rows.

    The file does not record the concurrency the benchmark client held (the row ids leave it
    blank, silicon_data_source names only the job). decode_batch_size is the requests one
    attention rank of one decode engine runs: the decode engines were launched with it as their
    max batch (serving_campaign.py _disagg). aiconfigurator predicts such a row
    (tools/accuracy_regression_testing/predict_silicon_sample.py passes decode_batch_size and
    decode_num_workers to cli_estimate) at the concurrency its disaggregated summary reports:
    the decode worker's, batch x attention-DP ranks (sdk/backends/base_backend.py: global_bs = bs x
    attention_dp_size; concurrency = global_bs), times the decode workers
    (sdk/inference_session.py: "concurrency": decode concurrency x decode_num_worker, "not exact
    matching. You can use this concurrency to benchmark the system"), both at commit 5e0243eb1;
    its benchmark script later runs that product x 0.95, 1 and 1.05 among others
    (generator/rule_plugin/benchmark/*.rule BenchConfig.estimated_concurrency = decode workers x
    decode max_batch_size, bench_run.sh.j2, commit f90534bc2). So: decode_batch_size x
    decode_attention_dp_size x decode_num_workers (SGLang 5P 11D: 48 x 1 x 11 = 528; vLLM
    Qwen3-235B 1D tp1 x dp8: 7 x 8 x 1 = 56). not_reached tests whether the run could hold it."""
    return _int(r["decode_batch_size"]) * _int(r["decode_attention_dp_size"]) * _int(r["decode_num_workers"])


def agg_concurrency(r: dict[str, str]) -> int:
    """The concurrency an aggregated row stands for: batch_size is the requests one attention-DP rank
    runs, so batch_size x attention_dp_size, aiconfigurator's global_bs (sdk/backends/base_backend.py,
    as disagg_concurrency). The rows that record it say so: silicon_concurrency in
    silicon_data_source is that product on every aggregated row (97 with attention-DP ranks)."""
    return _int(r["batch_size"]) * _int(r["attention_dp_size"])


def load_rows(path: Path, skipped: list[str] | None = None, *, held_out: bool = False, priced: dict[str, int] | None = None) -> list[Row]:
    """The file's rows that autopar can describe; the others' reasons go to `skipped` (one line per reason).
    `held_out`: the file's rows are for validation only (Row.held_out); `priced` counts the rows of an engine
    version without its own constants, by version (they use the default version's, as `--framework NAME`)."""
    rows = []
    models: dict[str, ModelSpec] = {}
    reasons: dict[str, int] = {}
    with path.open() as f:
        table = with_twin_launch(list(csv.DictReader(f)))
        layouts = named_layouts(table)
        for r in table:
            hw_name = profile_for_system(r["system"])
            why = _why_not(r, hw_name)
            if not why and r["model_path"] not in models:
                try:
                    models[r["model_path"]] = load_model(r["model_path"])
                except SpecError:
                    why = f"no built-in preset for model {r['model_path']!r}"
            if why:
                reasons[why] = reasons.get(why, 0) + 1
                continue
            assert hw_name is not None
            model = models[r["model_path"]]
            weights = _weights(r) or "bf16"
            fw = framework_of(r["backend"], r["backend_version"])
            version = fw.version
            if r["mode"] == "disagg":
                pre = _engine(
                    _int(r["prefill_tp_size"]),
                    _int(r["prefill_moe_tp_size"]),
                    _int(r["prefill_moe_ep_size"]),
                    dp=_int(r["prefill_attention_dp_size"]),
                    model=model,
                )
                dec = _engine(
                    _int(r["decode_tp_size"]),
                    _int(r["decode_moe_tp_size"]),
                    _int(r["decode_moe_ep_size"]),
                    dp=_int(r["decode_attention_dp_size"]),
                    model=model,
                )
                pre, dec = recipe_engines(r, pre, dec)
                dep = Deployment(
                    fw=fw,
                    mode="disagg",
                    engine=dec,
                    replicas=_int(r["decode_num_workers"]),
                    prefill=pre,
                    prefill_replicas=_int(r["prefill_num_workers"]),
                    weights=weights,
                    kv_dtype=kv_dtype(r),
                    args=launch_args(r),
                    prefill_args=launch_args(r, "prefill"),
                )
                conc = disagg_concurrency(r)
                layout = f"{dep.prefill_replicas}P(tp{pre.tp}) {dep.replicas}D(tp{dec.tp}x{dec.dp})"
            else:
                eng = agg_engine(r, model, layouts.get(_same_run(r)))
                dep = Deployment(fw=fw, mode="agg", engine=eng, replicas=1, weights=weights, kv_dtype=kv_dtype(r), args=launch_args(r))
                conc = agg_concurrency(r)
                layout = f"tp{eng.tp} dp{eng.dp} ep{eng.ep}"
            try:
                for pool, prefix in ((dep.engine, ""), (dep.prefill, "prefill_")):
                    if pool is not None:
                        pool.check(model, prefix=prefix)
                        pool.check_framework(dep.framework, prefix=prefix)
            except SpecError as exc:  # as `serve estimate` would refuse it, in its flags
                why = f"a layout serve estimate refuses (e.g. {cli_words(str(exc))})"
                if why.split(" (e.g.")[0] not in {k.split(" (e.g.")[0] for k in reasons}:
                    reasons[why] = 0
                key = next(k for k in reasons if k.startswith(why.split(" (e.g.")[0]))
                reasons[key] += 1
                continue
            if priced is not None and not r["backend_version"].startswith(version):
                key = f"{r['backend']} {r['backend_version']} priced at {r['backend']} {version}'s constants"
                priced[key] = priced.get(key, 0) + 1
            wl = Workload(isl=int(r["isl"]), osl=int(r["osl"]), concurrency=conc, random_range_ratio=client_range_ratio(r))
            label = f"{model.name} {weights} {layout} {wl.isl}/{wl.osl} c{conc}"
            rows.append(
                Row(
                    key=(r["backend"], r["system"], r["mode"]),
                    label=label,
                    model=model,
                    source=_source(r.get("silicon_data_source") or ""),
                    model_key=r["model_path"],
                    hw_name=hw_name,
                    dep=dep,
                    wl=wl,
                    ttft_ms=float(r["silicon_ttft_ms"]),
                    tpot_ms=float(r["silicon_tpot_ms"]),
                    held_out=held_out,
                    release=r["backend_version"],
                )
            )
    if skipped is not None:
        skipped.extend(f"{why} ({n} rows)" for why, n in sorted(reasons.items()))
    warm = warmed_sources(rows)
    return [dataclasses.replace(r, wl=dataclasses.replace(r.wl, warmed=True)) if r.source in warm else r for r in rows]


def first_wave_share_s(row: Row) -> float:
    """What the clients' first wave adds to a run's mean TTFT: the simulated run with it (all `concurrency`
    requests sent at once, one in PROMPTS_PER_REQUEST of the run) less the same run in steady state
    (Workload.warmed). The per-request constants cancel; what is left is the loop's queueing at the
    profile's own prefill rate."""
    hw = load_hardware(row.hw_name)
    cold = estimate(row.model, hw, row.dep, dataclasses.replace(row.wl, warmed=False)).ttft_s
    warm = estimate(row.model, hw, row.dep, dataclasses.replace(row.wl, warmed=True)).ttft_s
    return cold - warm


def warmed_sources(rows: list[Row]) -> set[str]:
    """Source files whose runs cannot hold the clients' first wave: some aggregated row's measured TTFT is
    below what that wave alone adds to a run's mean (first_wave_share_s). Their rows are taken as measured
    in steady state (a warm-up run first); the others as runs of PROMPTS_PER_REQUEST x concurrency requests
    that start together, like the command autopar prints. (The vLLM 0.12 H100 qwen3_32b.csv and
    H200 Llama-3.1-8B-FP8 files and TensorRT-LLM 1.2's qwen3_32b.csv are; their measured TTFT is at
    most 0.45, 0.24 and 0.996 x that share.) A row whose requests the KV pool cannot all hold at full
    length does not decide it: its first wave is what the engine's admission (Framework.admission) does."""
    return {r.source for r in rows if r.dep.mode == "agg" and _held_whole(r) and r.ttft_ms / 1e3 < first_wave_share_s(r)}


def _held_whole(row: Row) -> bool:
    """The model's KV pool holds every request of the row at its full length (prompt + output)."""
    est = estimate(row.model, load_hardware(row.hw_name), row.dep, row.wl)
    return row.wl.concurrency <= est.pools[-1].max_concurrency


# InferenceX's client draws each request's prompt and output lengths uniformly from the integers of
# [int(0.8 L), L] (RANDOM_RANGE_RATIO 0.8 in .github/workflows/benchmark-tmpl.yml at 2e9cecf91, passed
# by every benchmarks/single_node script to run_benchmark_serving --random-range-ratio;
# utils/bench_serving/benchmark_serving.py sample_random_requests at 626932a11)
INFERENCEX_RANGE_RATIO = 0.8


def client_range_ratio(r: dict[str, str]) -> float:
    """The --random-range-ratio of the row's client: InferenceX's for its runs (the db-dump rows and those of an
    InferenceX script, serving_campaign.inferencex_launch), 1 (every request at the row's osl) otherwise."""
    inferencex = r.get("silicon_data_source", "").startswith("db-dump") or inferencex_launch(r) is not None
    return INFERENCEX_RANGE_RATIO if inferencex else 1.0
