"""Serving launch lines: only flags the frameworks' own parsers define, at pinned versions.

Checked by reading each parser's flag definitions (the frameworks do not
install on a CPU-only machine without their CUDA stacks):
- vLLM 0.12.0 (PyPI wheel): vllm/engine/arg_utils.py EngineArgs.add_cli_args,
  vllm/entrypoints/openai/cli_args.py (--port), vllm/benchmarks/serve.py and
  datasets.py (`vllm bench serve`; --random-range-ratio 0 = fixed lengths).
- SGLang 0.5.6.post2 (PyPI wheel): sglang/srt/server_args.py ServerArgs.add_cli_args,
  sglang/bench_serving.py (--random-range-ratio 1 = fixed lengths: lengths are
  drawn from [ratio x len, len]).
- TensorRT-LLM commit 00209af149e7774406881a37283dce303571eb11:
  tensorrt_llm/commands/serve.py click options (--tp_size is the alias of
  --tensor_parallel_size, --ep_size of --moe_expert_parallel_size,
  --kv_cache_free_gpu_memory_fraction of --free_gpu_memory_fraction).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import shlex
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autopar.cli import app
from autopar.emit import sglang, trtllm, vllm
from autopar.emit.serving import SGLANG_BENCH_FLAGS, VLLM_BENCH_FLAGS, flags_of
from autopar.errors import SpecError
from autopar.io.frameworks import load_framework
from autopar.spec.serve import Deployment, Engine, Workload

runner = CliRunner()
WL = Workload(isl=1000, osl=500, concurrency=64)


# Each set is the flags autopar may print, each read from the pinned parser that defines it (module
# docstring): vLLM 0.12.0 vllm/engine/arg_utils.py EngineArgs.add_cli_args (--port:
# vllm/entrypoints/openai/cli_args.py); TensorRT-LLM 00209af149e7774406881a37283dce303571eb11
# tensorrt_llm/commands/serve.py click options; SGLang 0.5.6.post2 sglang/srt/server_args.py
# ServerArgs.add_cli_args, checked against the wheel itself below where the wheel is at hand.
# A flag added to a set must be read from its parser first: these tests fail until it is listed here.
def test_frozen_flag_sets() -> None:
    assert {
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--data-parallel-size",
        "--enable-expert-parallel",
        "--quantization",
        "--kv-cache-dtype",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--kv-transfer-config",
        "--no-enable-prefix-caching",  # --enable-prefix-caching's BooleanOptionalAction negation
        "--mamba-ssm-cache-dtype",  # vllm/engine/arg_utils.py (CacheConfig.mamba_ssm_cache_dtype)
        "--port",
    } == vllm.VLLM_FLAGS
    assert {
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--dp-size",
        "--enable-dp-attention",
        "--ep-size",
        "--quantization",
        "--kv-cache-dtype",
        "--mem-fraction-static",
        "--max-running-requests",
        "--chunked-prefill-size",
        "--enable-mixed-chunk",
        "--max-prefill-tokens",
        "--scheduler-recv-interval",  # server_args.py (scheduler_recv_interval, default 1), 0.5.6.post2's wheel
        "--disable-radix-cache",  # server_args.py; passed by every InferenceX Qwen3.5 script (v0.5.9, v0.5.10.post1)
        "--mamba-ssm-dtype",  # server_args.py (mamba_ssm_dtype); InferenceX qwen3.5_fp8_h200.sh on v0.5.9
        "--disaggregation-mode",
        "--port",
    } == sglang.SGLANG_FLAGS
    assert {
        "--backend",
        "--tp_size",
        "--pp_size",
        "--ep_size",
        "--max_batch_size",
        "--max_num_tokens",
        "--kv_cache_free_gpu_memory_fraction",
        "--extra_llm_api_options",
        "--port",
    } == trtllm.TRTLLM_FLAGS


# SGLang 0.5.6.post2's wheel (PyPI, pure Python, 3.7 MB; `make test` downloads it to .venv/wheels,
# or pip download --no-deps sglang==0.5.6.post2 -d DIR and set AUTOPAR_WHEELS=DIR)
SGLANG_WHEEL = "sglang-0.5.6.post2-py3-none-any.whl"
SGLANG_WHEEL_SHA256 = "cb542f7adeec56bbb5598443c52d0f347fab74dbb5df09d37cad69eaec780c54"


def _argparse_flags(source: str) -> set[str]:
    """The --names given as literals to every add_argument call of a module."""
    return {
        a.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        for a in node.args
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
    }


def test_argparse_flags_reads_add_argument_literals() -> None:
    source = 'p.add_argument("--tp-size", "--tensor-parallel-size", type=int)\nq.add_argument("name")\nf("--x")\n'
    assert _argparse_flags(source) == {"--tp-size", "--tensor-parallel-size"}


def test_sglang_flags_are_defined_by_the_pinned_wheel() -> None:
    dirs = [Path(d) for d in (os.environ.get("AUTOPAR_WHEELS"), Path(sys.prefix) / "wheels") if d]
    wheel = next((d / SGLANG_WHEEL for d in dirs if (d / SGLANG_WHEEL).is_file()), None)
    if wheel is None:
        pytest.skip(f"{SGLANG_WHEEL} not in {', '.join(map(str, dirs))} (make test downloads it)")
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == SGLANG_WHEEL_SHA256
    with zipfile.ZipFile(wheel) as z:
        server = _argparse_flags(z.read("sglang/srt/server_args.py").decode())
        bench = _argparse_flags(z.read("sglang/bench_serving.py").decode())
    assert len(server) > 200  # the parser was read (300 flags in this version)
    assert not sglang.SGLANG_FLAGS - server, sorted(sglang.SGLANG_FLAGS - server)
    assert not SGLANG_BENCH_FLAGS - bench, sorted(SGLANG_BENCH_FLAGS - bench)


def _servers(launched: object) -> list[str]:
    return [s for s in launched.servers if not s.startswith("#")]  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", [Engine(tp=4), Engine(tp=2, pp=2), Engine(tp=1, dp=8, ep=8), Engine(tp=2, dp=4, ep=8)])
def test_every_emitted_flag_is_defined(engine: Engine) -> None:
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=engine, replicas=1, weights="fp8", kv_dtype="fp8")
    for module, flags, bench in ((vllm, vllm.VLLM_FLAGS, VLLM_BENCH_FLAGS), (sglang, sglang.SGLANG_FLAGS, SGLANG_BENCH_FLAGS)):
        launched = module.launch(dep, WL)  # type: ignore[attr-defined]
        for line in _servers(launched):
            assert set(flags_of(line)) <= flags, line
        assert set(flags_of(launched.benchmark)) <= bench
    if engine.dp > 1 and engine.tp > 1:
        return  # TensorRT-LLM's attention-DP runs one GPU a rank: refused (SpecError), no line
    launched = trtllm.launch(dataclasses.replace(dep, fw=load_framework("trtllm")), WL)
    for line in _servers(launched):
        assert set(flags_of(line)) <= trtllm.TRTLLM_FLAGS, line
    assert set(flags_of(launched.benchmark)) <= VLLM_BENCH_FLAGS  # trtllm's benchmark is `vllm bench serve`


# What MODEL must hold for --weights (emit.serving.weights_note; sources at QUANTIZE_ON_LOAD): vLLM 0.12.0
# and SGLang 0.5.6.post2 quantize bf16 weights to fp8 on load with --quantization fp8 (Fp8Config,
# is_checkpoint_fp8_serialized False) and refuse a --quantization other than the checkpoint's own format
# (vllm/config/model.py, sglang/srt/configs/model_config.py _verify_quantization); trtllm-serve at 00209af
# has no quantization option; int4 (AWQ/GPTQ) and NVFP4 are read from the checkpoint's config.
FP8_ON_LOAD = (
    "# --weights fp8: --quantization fp8 quantizes a bf16 MODEL on load; drop it if MODEL is an fp8 "
    "checkpoint of another format (compressed-tensors, ModelOpt): the server reads that from its config "
    "and refuses a mismatch"
)


def _must_be(weights: str, what: str) -> str:
    return (
        f"# --weights {weights}: MODEL must be {what} checkpoint, whose config the server reads; "
        "this line does not quantize a bf16 one on load"
    )


@pytest.mark.parametrize(
    ("framework", "weights", "note", "flag"),
    [
        ("vllm", "fp8", FP8_ON_LOAD, "--quantization fp8"),
        ("sglang", "fp8", FP8_ON_LOAD, "--quantization fp8"),
        ("trtllm", "fp8", _must_be("fp8", "an fp8"), None),
        ("vllm", "int4", _must_be("int4", "an int4 (AWQ/GPTQ)"), None),
        ("sglang", "int4", _must_be("int4", "an int4 (AWQ/GPTQ)"), None),
        ("trtllm", "int4", _must_be("int4", "an int4 (AWQ/GPTQ)"), None),
        ("vllm", "fp4", _must_be("fp4", "an NVFP4 (ModelOpt)"), None),
        ("sglang", "fp4", _must_be("fp4", "an NVFP4 (ModelOpt)"), None),
        ("trtllm", "fp4", _must_be("fp4", "an NVFP4 (ModelOpt)"), None),
    ],
)
def test_quantized_weights_say_what_the_checkpoint_must_be(framework: str, weights: str, note: str, flag: str | None) -> None:
    module = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}[framework]
    dep = Deployment(fw=load_framework(framework), mode="agg", engine=Engine(tp=2), replicas=2, weights=weights)
    servers = module.launch(dep, WL).servers  # type: ignore[attr-defined]
    assert servers[0] == note and len(servers) == 3  # one note above both replicas' lines
    for line in servers[1:]:
        assert ("--quantization" in line) == (flag is not None) and (flag is None or flag in line)
    disagg = Deployment(
        fw=load_framework(framework),
        mode="disagg",
        engine=Engine(tp=2),
        replicas=1,
        weights=weights,
        prefill=Engine(tp=2),
        prefill_replicas=1,
    )
    assert module.launch(disagg, WL).servers[0] == note  # type: ignore[attr-defined]


def test_bf16_weights_have_no_note() -> None:
    for module in (vllm, sglang, trtllm):
        dep = Deployment(fw=load_framework(module.__name__.rsplit(".", 1)[1]), mode="agg", engine=Engine(tp=2), replicas=1)
        (line,) = module.launch(dep, WL).servers  # type: ignore[attr-defined]
        assert line.startswith("CUDA_VISIBLE_DEVICES=0,1 ") and "--quantization" not in line


@pytest.mark.parametrize("command", ["estimate", "suggest"])
def test_int4_launch_says_what_model_must_be(command: str) -> None:
    layout = ["--tp", "1"] if command == "estimate" else []
    r = runner.invoke(
        app, ["serve", command, "llama3.1-8b", "--gpus", "1", *layout, "--weights", "int4", "--emit", "vllm"], env={"COLUMNS": "80"}
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    at = lines.index("# MODEL=<Hugging Face id or checkpoint path>")
    assert lines[at + 1 : at + 4] == [
        "# --weights int4: MODEL must be an int4 (AWQ/GPTQ) checkpoint, whose config the",
        "# server reads; this line does not quantize a bf16 one on load",
        'CUDA_VISIBLE_DEVICES=0 vllm serve "$MODEL" --tensor-parallel-size 1 \\',
    ]


def test_gb200_launch_lines_stop_at_a_4_gpu_host() -> None:
    """gb200's node is the 72-GPU NVLink domain, a host (one CUDA_VISIBLE_DEVICES numbering) a 4-GPU tray:
    an engine of more than 4 GPUs has no launch line; replicas of up to 4 continue across hosts."""
    r = runner.invoke(
        app, ["serve", "estimate", "llama3.1-405b", "--hardware", "gb200", "--gpus", "72", "--tp", "8", "--pp", "9", "--emit", "trtllm"]
    )
    assert r.exit_code == 2
    assert "an engine of 72 GPUs (tp x pp x attention-dp) spans more than one gb200 host (4 GPUs)" in " ".join(r.output.split())
    assert "CUDA_VISIBLE_DEVICES=" not in r.output
    r = runner.invoke(
        app,
        ["serve", "estimate", "llama3.1-8b", "--hardware", "gb200", "--gpus", "8", "--tp", "4", "--dp", "2", "--emit", "vllm", "--json"],
    )
    assert r.exit_code == 0, r.output
    servers = json.loads(r.output)["launch"]["servers"]
    assert servers[0].startswith("# 2 hosts of 4 GPUs: run each block below on its own host")
    assert [s.split()[0] for s in servers[1:]] == ["#", "CUDA_VISIBLE_DEVICES=0,1,2,3", "#", "CUDA_VISIBLE_DEVICES=0,1,2,3"]


@pytest.mark.parametrize("emitter", [vllm, sglang, trtllm])
def test_disagg_past_one_host_is_one_block_per_host(emitter: object) -> None:
    """3 tp4 prefill engines and 1 tp8 decode engine on hosts of 8 GPUs: packed largest first, the decode
    engine fills host 0, two prefill engines host 1, the third host 2; each host numbers its GPUs from 0,
    and the ports stay each role's (prefill PORT + 100.., decode PORT + 200..)."""
    dep = Deployment(
        fw=load_framework(emitter.__name__.rsplit(".", 1)[-1]),
        mode="disagg",
        engine=Engine(tp=8),
        replicas=1,
        prefill=Engine(tp=4),
        prefill_replicas=3,
    )
    launched = emitter.launch(dep, WL, host_gpus=8)  # type: ignore[attr-defined]
    port = emitter.PORT  # type: ignore[attr-defined]
    blocks = [s for s in launched.servers if s.startswith(("# host", "CUDA_VISIBLE_DEVICES"))]
    assert blocks[0] == "# host 0 of 3, GPUs numbered from 0 there: decode 0"
    assert blocks[1].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 ") and blocks[1].endswith(f"--port {port + 200}")
    assert blocks[2] == "# host 1 of 3, GPUs numbered from 0 there: prefill 0, prefill 1"
    assert blocks[3].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 ") and blocks[3].endswith(f"--port {port + 100}")
    assert blocks[4].startswith("CUDA_VISIBLE_DEVICES=4,5,6,7 ") and blocks[4].endswith(f"--port {port + 101}")
    assert blocks[5] == "# host 2 of 3, GPUs numbered from 0 there: prefill 2"
    assert blocks[6].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 ") and blocks[6].endswith(f"--port {port + 102}")
    allowed = {vllm: vllm.VLLM_FLAGS, sglang: sglang.SGLANG_FLAGS, trtllm: trtllm.TRTLLM_FLAGS}[emitter]  # type: ignore[index]
    for line in (blocks[1], blocks[3], blocks[4], blocks[6]):  # the flags the engines' parsers define
        assert set(flags_of(line)) <= allowed, line
    # one host: the lines of before, GPUs numbered on from the prefill engines
    flat = [s for s in emitter.launch(dep, WL).servers if s.startswith("CUDA")]  # type: ignore[attr-defined]
    assert [s.split()[0] for s in flat] == [
        "CUDA_VISIBLE_DEVICES=0,1,2,3",
        "CUDA_VISIBLE_DEVICES=4,5,6,7",
        "CUDA_VISIBLE_DEVICES=8,9,10,11",
        "CUDA_VISIBLE_DEVICES=12,13,14,15,16,17,18,19",
    ]


def test_vllm_line() -> None:
    dep = Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=4), replicas=2, weights="fp8")
    launched = vllm.launch(dep, WL)
    assert launched.servers == (
        FP8_ON_LOAD,
        'CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve "$MODEL" --tensor-parallel-size 4 --quantization fp8 '
        "--gpu-memory-utilization 0.9 --max-num-seqs 32 --max-num-batched-tokens 8192 --port 8000",
        'CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve "$MODEL" --tensor-parallel-size 4 --quantization fp8 '
        "--gpu-memory-utilization 0.9 --max-num-seqs 32 --max-num-batched-tokens 8192 --port 8001",
    )
    clients = [shlex.split(line) for line in launched.benchmark.splitlines() if line.startswith("vllm")]
    assert len(clients) == 2  # one client per engine, 64 requests split between them
    for words, port in zip(clients, (8000, 8001), strict=True):
        assert words[:3] == ["vllm", "bench", "serve"] and f"http://localhost:{port}" in words
        assert words[words.index("--max-concurrency") + 1] == "32" and words[words.index("--random-input-len") + 1] == "1000"
    one = vllm.launch(Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=8), replicas=1), WL).benchmark
    assert "\n" not in one and "--max-concurrency 64 --num-prompts 640" in one


def test_attention_dp_spellings() -> None:
    dep = Deployment(fw=load_framework("sglang"), mode="agg", engine=Engine(tp=1, dp=8, ep=8), replicas=1, kv_dtype="fp8")
    line = sglang.launch(dep, WL).servers[0]
    assert "--tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8" in line  # SGLang: tp-size spans the engine
    assert "--kv-cache-dtype fp8_e4m3" in line
    line = vllm.launch(dep, WL).servers[0]
    assert "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel" in line
    t = trtllm.launch(dep, WL)
    assert "--tp_size 8 --ep_size 8" in t.servers[0] and "--extra_llm_api_options extra_llm_api_options.yaml" in t.servers[0]
    assert dict(t.files)["extra_llm_api_options.yaml"] == "enable_attention_dp: true\nkv_cache_config:\n  dtype: fp8\n"
    assert t.text().index("cat > extra_llm_api_options.yaml") < t.text().index("trtllm-serve")


def test_disagg_roles() -> None:
    dep = Deployment(fw=load_framework("sglang"), mode="disagg", engine=Engine(tp=4), replicas=1, prefill=Engine(tp=2), prefill_replicas=2)
    servers = _servers(sglang.launch(dep, WL))
    assert len(servers) == 3
    assert servers[0].startswith("CUDA_VISIBLE_DEVICES=0,1 ") and "--disaggregation-mode prefill" in servers[0]
    assert servers[2].startswith("CUDA_VISIBLE_DEVICES=4,5,6,7 ") and "--disaggregation-mode decode" in servers[2]
    v = _servers(vllm.launch(dep, WL))
    assert all(json.loads(shlex.split(s)[shlex.split(s).index("--kv-transfer-config") + 1])["kv_connector"] == "NixlConnector" for s in v)


def test_trtllm_disagg() -> None:
    # TensorRT-LLM examples/disaggregated/README.md: one trtllm-serve per context and generation
    # engine with --extra_llm_api_options, then `trtllm-serve disaggregated -c` with their URLs
    # (read at commit 013971245ed5ddb230f1917dd8ccce711a17280f); cache_transceiver_config backend
    # UCX and max_tokens_in_buffer >= the input length, disable_overlap_scheduler on context
    # servers (the same README at commit af3ea37176a035e3dee0aff52028c63db8f51c12, 2025-09-19)
    dep = Deployment(
        fw=load_framework("trtllm"),
        mode="disagg",
        engine=Engine(tp=4),
        replicas=1,
        prefill=Engine(tp=2),
        prefill_replicas=2,
        kv_dtype="fp8",
    )
    t = trtllm.launch(dep, WL)
    servers = _servers(t)
    assert len(servers) == 4 and servers[-1] == "trtllm-serve disaggregated -c disagg_config.yaml"
    assert servers[0].startswith("CUDA_VISIBLE_DEVICES=0,1 ") and servers[0].endswith("--port 8100")
    assert servers[1].startswith("CUDA_VISIBLE_DEVICES=2,3 ") and servers[1].endswith("--port 8101")
    assert servers[2].startswith("CUDA_VISIBLE_DEVICES=4,5,6,7 ") and servers[2].endswith("--port 8200")
    assert "--tp_size 2 " in servers[0] and "--extra_llm_api_options ctx_extra_llm_api_options.yaml" in servers[0]
    assert "--tp_size 4 " in servers[2] and "--extra_llm_api_options gen_extra_llm_api_options.yaml" in servers[2]
    for line in servers[:3]:
        assert set(flags_of(line)) <= trtllm.TRTLLM_FLAGS, line
    files = dict(t.files)
    assert files["ctx_extra_llm_api_options.yaml"] == (
        "kv_cache_config:\n  dtype: fp8\ndisable_overlap_scheduler: true\n"
        "cache_transceiver_config:\n  backend: UCX\n"
        "  max_tokens_in_buffer: 1000\n"
    )
    assert files["gen_extra_llm_api_options.yaml"] == (
        "kv_cache_config:\n  dtype: fp8\ncache_transceiver_config:\n  backend: UCX\n  max_tokens_in_buffer: 1000\n"
    )
    assert files["disagg_config.yaml"] == (
        "hostname: localhost\nport: 8000\nbackend: pytorch\n"
        "context_servers:\n  num_instances: 2\n  urls:\n"
        '    - "localhost:8100"\n    - "localhost:8101"\n'
        'generation_servers:\n  num_instances: 1\n  urls:\n    - "localhost:8200"\n'
    )
    text = t.text()
    assert text.index("cat > disagg_config.yaml") < text.index("trtllm-serve")
    assert "--base-url http://localhost:8000 " in t.benchmark and "--max-concurrency 64 " in t.benchmark


def test_refusals() -> None:
    with pytest.raises(SpecError, match="expert-parallel over all"):
        vllm.launch(Deployment(fw=load_framework("vllm"), mode="agg", engine=Engine(tp=4, dp=2, ep=2), replicas=1), WL)
    with pytest.raises(SpecError, match="one GPU per rank"):
        trtllm.launch(Deployment(fw=load_framework("trtllm"), mode="agg", engine=Engine(tp=2, dp=4, ep=8), replicas=1), WL)


def test_cli_emit() -> None:
    base = [
        "serve",
        "estimate",
        "llama3.1-8b",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "2",
        "--tp",
        "1",
        "--dp",
        "2",
        "--concurrency",
        "16",
        "--isl",
        "512",
        "--osl",
        "128",
    ]
    r = runner.invoke(app, [*base, "--emit", "sglang", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["framework"] == "sglang" and len(doc["launch"]["servers"]) == 2
    assert "sglang.bench_serving" in doc["launch"]["benchmark"]
    r = runner.invoke(app, [*base, "--emit", "sglang", "--framework", "vllm"])
    assert r.exit_code == 2 and "--emit sglang with --framework vllm" in r.stderr
    r = runner.invoke(app, [*base, "--emit", "tgi"])
    assert r.exit_code == 2 and "--emit" in r.stderr
    r = runner.invoke(
        app, ["serve", "suggest", "llama3.1-8b", "--hardware", "h100-sxm", "--gpus", "2", "--emit", "trtllm", "--modes", "agg"]
    )
    assert r.exit_code == 0, r.output
    assert "trtllm-serve" in r.stdout and "vllm bench serve" in r.stdout


def test_suggest_emit_launches_the_best_deployment_it_can_start() -> None:
    """Llama-3.1-70B on 8 GB200 at TPOT <= 12 ms: the recommendation is one tp8 engine, which spans two
    4-GPU hosts; --emit launches the best deployment whose engines fit on a host (two tp4 engines,
    one block per host) and says first, in one line, which one it skipped and why."""
    base = ["serve", "suggest", "llama3.1-70b", "--hardware", "gb200", "--gpus", "8", "--tpot-ms", "12", "--modes", "agg"]
    r = runner.invoke(app, [*base, "--emit", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["recommended"]["tp"] == 8
    servers = doc["recommended"]["launch"]["servers"]
    note = servers[0]
    assert note.startswith("# --emit vllm: skipped the recommended agg 1 x tp8 pp1 dp1 ep1 at concurrency 32")
    assert "an engine of 8 GPUs (tp x pp x attention-dp) spans more than one gb200 host (4 GPUs)" in note
    assert "launching the best one vllm can start, agg 2 x tp4 pp1 dp1 ep1" in note
    assert [s.split()[0] for s in servers if s.startswith("CUDA")] == ["CUDA_VISIBLE_DEVICES=0,1,2,3"] * 2
    # none of the deployments that meet the targets can be launched: exit 2, one line naming --emit
    r = runner.invoke(
        app,
        ["serve", "suggest", "llama3.1-70b", "--hardware", "gb200", "--gpus", "16", "--tpot-ms", "10", "--modes", "agg", "--emit", "vllm"],
    )
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.count("\n") == 1 and "--emit vllm: the recommended deployment has no launch line" in r.stderr
