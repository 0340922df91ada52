"""The hostile-input table of issue 13: one row per input, grouped by cause.

Each row gives what is run, the exit code and a fragment of the one line the
CLI must print, and a time bound. A row's ``setup`` writes its files into a
fresh folder and returns the command line (``{A}`` is the autopar command; a
row with ``shell=True`` runs through bash, for pipes and redirections).
tests/cli/test_hostile.py runs the table; the causes are numbered as in the issue.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from tests.conftest import toy_profile_dict

TINY = """name: tiny
layers: 2
hidden_size: 256
num_attention_heads: 8
num_kv_heads: 2
ffn_hidden_size: 512
vocab_size: 1000
seq_len: 512
max_seq_len: 2048
"""
HF = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
}
# an error model file edited by hand: a band whose p10 exceeds its p90
BAD_ERROR_MODEL = """schema_version: 1
command: python benchmarks/error_model.py --write
min_rows: 8
sources: {tokens_per_s: x, memory: x, ttft: x, tpot: x}
classes:
  tokens_per_s:
  - {class: all, rows: 40, p10: 1.2, p90: 0.9}
  memory: []
  ttft: []
  tpot: []
"""
# 10 levels of 10 aliases each: 10^10 values once expanded
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))


@dataclass(frozen=True)
class Case:
    cause: str  # the cause, e.g. "3 special input"
    name: str
    setup: Callable[[Path], str]  # writes files, returns the command ({A} is autopar)
    code: int  # expected exit code
    fragment: str  # expected in stderr (code != 0) or stdout (code 0)
    seconds: float = 10.0  # time bound
    shell: bool = False  # run through bash (pipes, redirections, closed stdout)
    env: dict[str, str] = field(default_factory=dict)
    torch: bool = False  # needs torch (autopar profile)
    absent: str = ""  # must not appear in stdout or stderr (a raw control sequence)


def files(tmp: Path, **contents: str | bytes) -> dict[str, str]:
    """Write files (name=content; `__` in a name is a dot) and return their paths by name."""
    out = {}
    for key, content in contents.items():
        path = tmp / key.replace("__", ".")
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        out[key] = str(path)
    return out


def hw(tmp: Path, **overrides: object) -> str:
    """The toy profile, with dotted-path overrides (gpu.peak_tflops.bf16=...)."""
    data = toy_profile_dict()
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split("__")
        for k in parents:
            node = node[k]
        node[leaf] = value
    path = tmp / "hw.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


# `autopar serve` commands the serve rows add one flag to
SERVE = {
    "suggest": "suggest llama3.1-8b --hardware h100-sxm --gpus 2 --modes agg",
    "estimate": "estimate llama3.1-8b --hardware h100-sxm --gpus 2 --tp 2",
    "model": "suggest llama-9b --hardware h100-sxm",
    "too big": "estimate llama3.1-405b --hardware h100-sxm --gpus 1 --tp 1",
    "moe": "estimate qwen3-30b-a3b --hardware h100-sxm --gpus 4",
    "disagg": "estimate qwen3-30b-a3b --hardware h100-sxm --gpus 4 --tp 2 --mode disagg --prefill-workers 1 "
    "--prefill-tp 2 --decode-workers 1",
}


def fifo(tmp: Path, name: str) -> str:
    path = tmp / name
    os.mkfifo(path)
    return str(path)


def job(tmp: Path, model: str | None = None, *, extra: str = "") -> str:
    """suggest on the tiny model and the toy profile."""
    model = model or files(tmp, tiny__yaml=TINY)["tiny__yaml"]
    return f"{{A}} suggest '{model}' --hardware '{hw(tmp)}' --gpus 8 {extra}"


def dist(tmp: Path, name: str, content: str | bytes, *, extra: str = "") -> str:
    path = files(tmp, **{name.replace(".", "__"): content})[name.replace(".", "__")]
    return job(tmp, extra=f"--seq-len-dist '{path}' {extra}")


def model_with(text: str) -> Callable[[Path], str]:
    return lambda tmp: job(tmp, files(tmp, m__yaml=text)["m__yaml"])


def hf_with(text: str) -> Callable[[Path], str]:
    return lambda tmp: job(tmp, files(tmp, config__json=text)["config__json"])


def profile_with(**overrides: object) -> Callable[[Path], str]:
    return lambda tmp: f"{{A}} suggest '{files(tmp, t__yaml=TINY)['t__yaml']}' --hardware '{hw(tmp, **overrides)}' --gpus 8"


def _deep_yaml_map(depth: int) -> str:
    return "a: " + "{a: " * depth + "1" + "}" * depth + "\n"


def _symlink(tmp: Path, name: str, target: str) -> str:
    path = tmp / name
    path.symlink_to(target)
    return str(path)


def _npy(tmp: Path, arr: np.ndarray) -> str:
    path = tmp / "lens.npy"
    np.save(path, arr)
    return job(tmp, extra=f"--seq-len-dist '{path}'")


def _sparse(tmp: Path, name: str, size: int) -> str:
    path = tmp / name
    with open(path, "wb") as f:
        f.write(b"name: x\n")
        f.truncate(size)
    return str(path)


def _saved_fifo(tmp: Path) -> str:
    (tmp / "home").mkdir(exist_ok=True)
    fifo(tmp, "home/profile.yaml")
    return f"{{A}} suggest '{files(tmp, t__yaml=TINY)['t__yaml']}' --gpus 8"


STACK = Path(__file__).resolve().parents[2] / "autopar" / "data" / "stacks" / "megatron-0.16.yaml"


def stack_with(old: str, new: str) -> Callable[[Path], str]:
    """suggest with the built-in megatron stack, one line of it replaced."""

    def setup(tmp: Path) -> str:
        text = STACK.read_text(encoding="utf-8")
        assert old in text, old
        return job(tmp, extra=f"--stack '{files(tmp, st__yaml=text.replace(old, new, 1))['st__yaml']}'")

    return setup


def _npy_header(tmp: Path, count: int) -> str:
    """A .npy file whose header claims `count` int64 elements, followed by 32 bytes."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<i8", "fortran_order": False, "shape": (count,)})
    path = tmp / "lens.npy"
    path.write_bytes(head.getvalue() + bytes(32))
    return job(tmp, extra=f"--seq-len-dist '{path}'")


# issue 26, the third round: helpers of its rows (at the end of CASES)
ESC = "\x1b"
TITLE = ESC + "]0;pwned" + "\x07"  # OSC 0: sets the terminal's window title
CLEAR = ESC + "[2J"  # CSI: clears the screen
# Runs autopar with no HOME and a uid that has no passwd entry (a container's random uid): Path.home() raises.
NO_HOME = (
    f"env -u HOME -u XDG_CONFIG_HOME -u AUTOPAR_HOME '{sys.executable}' -c 'import pwd, runpy\n"
    "def nobody(uid): raise KeyError(uid)\n"
    "pwd.getpwuid = nobody\n"
    'runpy.run_module("autopar", run_name="__main__")\''
)
# Runs autopar as if Ctrl-C were pressed while it reads the model (SIGINT to itself, then a second to wait in).
# Python's own SIGINT handler first: a job started in the background (`cmd &`) inherits SIGINT ignored.
CTRL_C = (
    f"'{sys.executable}' -c 'import os, runpy, signal, time\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "import autopar.io.models as m\n"
    "load = m.load_model\n"
    "def slow(*a, **k):\n"
    "    os.kill(os.getpid(), signal.SIGINT)\n"
    "    time.sleep(5)\n"
    "    return load(*a, **k)\n"
    "m.load_model = slow\n"
    'runpy.run_module("autopar", run_name="__main__")\''
)


def _long_base(tmp: Path) -> str:
    variant = files(tmp, v__yaml="schema_version: 1\nname: v\nbase: " + "b" * 300)["v__yaml"]
    return f"{{A}} suggest '{files(tmp, t__yaml=TINY)['t__yaml']}' --hardware '{variant}' --gpus 8"


def _yaml_name(name: str) -> str:
    return json.dumps(name)  # a JSON string is a YAML double-quoted scalar, escapes included


def _big(tmp: Path, name: str, size: int, line: bytes) -> str:
    path = tmp / name
    path.write_bytes(line * (size // len(line) + 1))
    return str(path)


def _linked(tmp: Path, command: str, target: str, link: str, *, symbolic: bool = False) -> str:
    """`command`, once `link` in `tmp` names the file `target` (a hard link, or a symlink)."""
    (os.symlink if symbolic else os.link)(tmp / target, tmp / link)
    return command


EMIT = "--emit megatron --emit-out"
LOGN = "lognormal: {median: %s, sigma: %s, max: 1024}\n"
CASES = [
    # 1. outputs never replace special files
    Case("1 special outputs", "emit-out /dev/full", lambda t: job(t, extra=f"{EMIT} /dev/full"), 2, "is a character device"),
    Case("1 special outputs", "emit-out /dev/null", lambda t: job(t, extra=f"{EMIT} /dev/null"), 2, "is a character device"),
    Case(
        "1 special outputs",
        "emit-out symlink to stdout",
        lambda t: job(t, extra=f"{EMIT} '{_symlink(t, 'out.sh', '/proc/self/fd/1')}'"),
        2,
        "(through a symlink)",
    ),
    Case("1 special outputs", "emit-out FIFO", lambda t: job(t, extra=f"{EMIT} '{fifo(t, 'out.sh')}'"), 2, "is a FIFO"),
    Case("1 special outputs", "emit-out folder", lambda t: job(t, extra=f"{EMIT} '{t}'"), 2, "is a directory"),
    Case(
        "1 special outputs",
        "plot symlink to /dev/null",
        lambda t: job(t, extra=f"--plot '{_symlink(t, 'p.svg', '/dev/null')}'"),
        2,
        "is a character device",
    ),
    Case(
        "1 special outputs",
        "profile --out /dev/null",
        lambda t: "{A} profile --device cpu --out /dev/null",
        2,
        "is a character device",
        seconds=60,
        torch=True,
    ),
    # 2. alias bombs are refused, never expanded
    Case("2 alias bombs", "model", model_with(BOMB), 2, "alias bomb", seconds=5),
    Case(
        "2 alias bombs",
        "profile provenance",
        lambda t: (
            f"{{A}} suggest '{files(t, t__yaml=TINY)['t__yaml']}' --gpus 8 "
            f"--hardware '{files(t, hw__yaml=Path(hw(t)).read_text() + BOMB + 'provenance: {notes: *a9}')['hw__yaml']}'"
        ),
        2,
        "alias bomb",
        seconds=5,
    ),
    Case("2 alias bombs", "distribution", lambda t: dist(t, "d.yaml", BOMB), 2, "alias bomb", seconds=5),
    Case(
        "2 alias bombs",
        "message value bounded",
        model_with(TINY.replace("layers: 2", "layers: &big [" + ", ".join(["xxxxxxxx"] * 5000) + "]")),
        2,
        "layers: expected an integer, got ['xxxxxxxx',",
    ),
    # 3. special files as input
    Case("3 special inputs", "FIFO model", lambda t: job(t, fifo(t, "m.yaml")), 2, "is a FIFO"),
    Case(
        "3 special inputs",
        "FIFO profile",
        lambda t: f"{{A}} suggest '{files(t, t__yaml=TINY)['t__yaml']}' --hardware '{fifo(t, 'h.yaml')}' --gpus 8",
        2,
        "is a FIFO",
    ),
    Case("3 special inputs", "FIFO lengths", lambda t: job(t, extra=f"--seq-len-dist '{fifo(t, 'l.txt')}'"), 2, "is a FIFO"),
    Case("3 special inputs", "FIFO npy", lambda t: job(t, extra=f"--seq-len-dist '{fifo(t, 'l.npy')}'"), 2, "is a FIFO"),
    Case("3 special inputs", "FIFO histogram", lambda t: job(t, extra=f"--seq-len-dist '{fifo(t, 'h.yaml')}'"), 2, "is a FIFO"),
    Case("3 special inputs", "FIFO saved profile", _saved_fifo, 2, "is a FIFO", env={"AUTOPAR_HOME": "{T}/home"}),
    Case("3 special inputs", "/dev/zero model", lambda t: job(t, "/dev/zero"), 2, "is a character device"),
    Case("3 special inputs", "/dev/urandom lengths", lambda t: job(t, extra="--seq-len-dist /dev/urandom"), 2, "is a character device"),
    # a name no file can have (ENAMETOOLONG from exists()/is_dir()): read as a built-in name and refused as one
    Case("3 special inputs", "300-character model name", lambda t: "{A} suggest " + "m" * 300 + " --gpus 8", 2, "unknown model 'mmm"),
    Case(
        "3 special inputs",
        "300-character hardware name",
        lambda t: job(t).replace(f"--hardware '{hw(t)}'", "--hardware " + "h" * 300),
        2,
        "unknown hardware 'hhh",
    ),
    Case("3 special inputs", "300-character base profile", lambda t: _long_base(t), 2, "base: unknown base profile 'bbb"),
    # 4. deep nesting
    Case(
        "4 deep nesting", "YAML list 20,000 deep", model_with("a: " + "[" * 20000 + "]" * 20000 + "\n"), 2, "nested deeper than 32 levels"
    ),
    Case("4 deep nesting", "YAML map 20,000 deep", model_with(_deep_yaml_map(20000)), 2, "nested deeper than 32 levels"),
    Case("4 deep nesting", "JSON 100,000 deep", hf_with('{"a": ' + "[" * 100000 + "]" * 100000 + "}"), 2, "nested deeper than 32 levels"),
    # 5. huge sizes
    Case("5 huge sizes", "layers 1e12", model_with(TINY.replace("layers: 2", "layers: 1.0e+12")), 2, "layers: must be at most 4,096"),
    Case(
        "5 huge sizes",
        "hidden_size 10**400",
        model_with(TINY.replace("hidden_size: 256", f"hidden_size: {10**400}")),
        2,
        "hidden_size: must be at most 1,048,576",
    ),
    Case(
        "5 huge sizes",
        "HF 10^9 layers",
        hf_with(json.dumps({**HF, "num_hidden_layers": 10**9})),
        2,
        "num_hidden_layers: must be at most 4,096",
    ),
    Case("5 huge sizes", "--gpus 10^9", lambda t: job(t).replace("--gpus 8", "--gpus 1000000000"), 2, "--gpus must be at most 1,048,576"),
    Case(
        "5 huge sizes",
        "serve --gpus 10^9",
        lambda t: job(t).replace("suggest", "serve suggest").replace("--gpus 8", "--gpus 1000000000"),
        2,
        "--gpus must be at most 1,024 for serve",
    ),
    Case(
        "5 huge sizes",
        "estimate --gpus 10^30",
        lambda t: job(t).replace("suggest", "estimate").replace("--gpus 8", f"--gpus {10**30}"),
        2,
        "--gpus must be at most 1,048,576",
    ),
    Case(
        "5 huge sizes",
        "--gpus at the limit",
        lambda t: job(t).replace("--gpus 8", "--gpus 1048576") + " --json",
        0,
        '"tokens_per_s"',
        seconds=30,
    ),
    Case(
        "5 huge sizes",
        "--global-batch 10^12 with lengths",
        lambda t: dist(t, "l.txt", "100\n", extra="--global-batch " + str(10**12)),
        2,
        "--global-batch must be at most 16,777,216",
    ),
    Case(
        "5 huge sizes",
        "--global-batch 10^6 with lengths",
        lambda t: dist(t, "l.txt", "100\n", extra="--global-batch 100000"),
        2,
        "at most 65,536 sequences per step",
    ),
    # 6. length distributions
    Case(
        "6 distributions",
        "longest 64 tokens",
        lambda t: dist(t, "l.txt", "10\n20\n64\n", extra="--json --global-batch 256"),
        0,
        '"tokens_per_s"',
        seconds=60,
    ),
    Case(
        "6 distributions",
        "length above 2^63",
        lambda t: dist(t, "l.txt", "100\n99999999999999999999\n"),
        2,
        "l.txt:2: lengths must be at most 33,554,432",
    ),
    Case("6 distributions", "lognormal sigma 40", lambda t: dist(t, "d.yaml", LOGN % (100, 40)), 2, "lognormal.sigma: must be at most 10"),
    Case(
        "6 distributions",
        "lognormal median 1e-300",
        lambda t: dist(t, "d.yaml", LOGN % ("1.0e-300", 1)),
        2,
        "lognormal.median: must be >= 1, got 1e-300",
    ),
    Case(
        "6 distributions",
        "counts 1e308",
        lambda t: dist(t, "d.yaml", "bin_edges: [1, 10, 20]\ncounts: [1.0e+308, 1.0e+308]\n"),
        2,
        "counts[0]: must be at most 1e+15, got 1e+308",
    ),
    Case(
        "6 distributions",
        "mixture weights inf",
        lambda t: dist(t, "d.yaml", "mixture:\n" + "".join(f"  - {{weight: .inf, {LOGN.strip() % (100, 1)}}}\n" for _ in range(2))),
        2,
        "mixture[0].weight: must be a finite number, got inf",
    ),
    Case(
        "6 distributions",
        "mixture weights 1e308",
        lambda t: dist(t, "d.yaml", "mixture:\n" + "".join(f"  - {{weight: 1.0e+308, {LOGN.strip() % (100, 1)}}}\n" for _ in range(2))),
        2,
        "weight: must be at most 1e+15",
    ),
    Case(
        "6 distributions",
        "uint64 npy",
        lambda t: _npy(t, np.array([100, 2**64 - 1], dtype=np.uint64)),
        2,
        "element 1 is 18446744073709551615",
    ),
    Case(
        "6 distributions",
        "default batch absurd",
        lambda t: dist(t, "d.yaml", "lognormal: {median: 1, sigma: 0.1, max: 2}\n"),
        2,
        "give --global-batch",
    ),
    # 7. profile values that passed validation, then crashed
    Case(
        "7 profile values",
        "bf16 nan",
        profile_with(gpu__peak_tflops={"bf16": float("nan")}),
        2,
        "gpu.peak_tflops.bf16: must be a finite number, got nan",
    ),
    Case(
        "7 profile values",
        "bf16 inf",
        profile_with(gpu__peak_tflops={"bf16": float("inf")}),
        2,
        "gpu.peak_tflops.bf16: must be a finite number, got inf",
    ),
    Case(
        "7 profile values",
        "compute_slowdown 1e308",
        profile_with(overlap__compute_slowdown=1e308),
        2,
        "overlap.compute_slowdown: must be at most 100",
    ),
    Case(
        "7 profile values",
        "bandwidth 1e308",
        profile_with(node__intra__all_reduce=[{"group_size": 8, "latency_us": 1, "bw_gbps": 1e308}]),
        2,
        "node.intra.all_reduce[0].bw_gbps: must be at most 100000",
    ),
    Case(
        "7 profile values",
        "provenance nested",
        profile_with(provenance={"notes": {"a": [1, 2]}}),
        2,
        "provenance: notes: expected a text, got a dict",
    ),
    # issue 26.1: every number of every file format has a physical range, checked when read
    Case(
        "26.1 file bounds",
        "stack layer_overhead_us -1e9",
        stack_with("layer_overhead_us: 0", "layer_overhead_us: -1.0e+9"),
        2,
        "kernels.layer_overhead_us: must be >= 0, got -1000000000.0",
    ),
    Case(
        "26.1 file bounds",
        "stack logit_bytes 1e308",
        stack_with("logit_bytes: 6", "logit_bytes: 1.0e+308"),
        2,
        "kernels.logit_bytes: must be at most 64, got 1e+308",
    ),
    Case(
        "26.1 file bounds",
        "stack fixed_overhead_gib inf",
        stack_with("fixed_overhead_gib: 2.0", "fixed_overhead_gib: .inf"),
        2,
        "memory.fixed_overhead_gib: must be a finite number, got inf",
    ),
    Case(
        "26.1 file bounds",
        "stack pp_stage_buffers 10^12",
        stack_with("pp_stage_buffers: 0", "pp_stage_buffers: 1000000000000"),
        2,
        "memory.pp_stage_buffers: must be at most 1,024",
    ),
    Case(
        "26.1 file bounds",
        "stack attention ratio nan",
        stack_with("[[512, 1.0],", "[[512, .nan],"),
        2,
        "kernels.attention_vs_fa3[0][1]: must be a finite number, got nan",
    ),
    Case(
        "26.1 file bounds",
        "profile HBM 1e-300 GB/s",
        profile_with(gpu__hbm_bw_gbps=1e-300),
        2,
        "gpu.hbm_bw_gbps: must be >= 0.001, got 1e-300",
    ),
    # issue 26.2: no answer prints a non-finite number; rates have floors, so the slowest profile stays finite
    Case(
        "26.2 finite answers",
        "GEMM efficiency 1e-300",
        profile_with(gpu__gemm_efficiency={"bf16": [[1e9, 1e-300]]}),
        2,
        "gpu.gemm_efficiency.bf16[0][1]: must be >= 1e-06, got 1e-300",
    ),
    Case(
        "26.2 finite answers",
        "every rate at its floor",
        lambda t: job(t, extra="--json").replace(
            f"'{t}/hw.yaml'", f"'{hw(t, gpu__peak_tflops={'bf16': 1e-6}, gpu__hbm_bw_gbps=1e-3, gpu__memory_efficiency=1e-6)}'"
        ),
        0,
        '"step_time_s": ',
    ),
    # issue 26.3 (numbers): no traceback from a value at the edge
    Case(
        "26.3 tracebacks",
        "power tdp 1e300 limit 1e-300",
        lambda t: job(t).replace(
            f"'{t}/hw.yaml'",
            "'"
            + files(t, v__yaml="schema_version: 1\nname: v\nbase: h100-sxm\npower: {tdp_w: 1.0e+300, limit_w: 1.0e-300}\n")["v__yaml"]
            + "'",
        ),
        2,
        "power.tdp_w: must be at most 100000, got 1e+300",
    ),
    Case(
        "26.3 tracebacks",
        "npy header claims 1e12 elements",
        lambda t: _npy_header(t, 10**12),
        2,
        "the header claims 1,000,000,000,000 elements (8,000,000,000,000 bytes) but the file holds 32 bytes",
    ),
    # issue 26.5: config.json has the bounds of the YAML format
    Case(
        "26.5 config.json",
        "rope_scaling.factor 1e308",
        hf_with(json.dumps({**HF, "rope_scaling": {"rope_type": "llama3", "factor": 1e308}})),
        2,
        "rope_scaling.factor: must be at most 1e+06",
    ),
    Case(
        "26.5 config.json",
        "rope_parameters.rope_theta 1e300",
        hf_with(json.dumps({**HF, "rope_parameters": {"rope_theta": 1e300}})),
        2,
        "rope_parameters.rope_theta: must be at most 1e+12",
    ),
    Case(
        "26.5 config.json",
        "mamba_ssm head_dim 0",
        hf_with(
            json.dumps(
                {
                    "d_model": 256,
                    "n_layer": 4,
                    "vocab_size": 1000,
                    "ssm_cfg": {"layer": "Mamba2"},
                    "attn_layer_idx": [1],
                    "attn_cfg": {"num_heads": 512},
                }
            )
        ),
        2,
        "no attn_cfg.head_dim is given",
    ),
    Case(
        "26.5 config.json",
        "lone surrogate in _name_or_path",
        hf_with(json.dumps({**HF, "_name_or_path": "\udc80x"})),
        2,
        "_name_or_path: text is not valid Unicode",
    ),
    # 8. output side: one line on stderr, exit 3
    Case("8 output side", "ascii stdout", lambda t: job(t), 3, "set PYTHONIOENCODING=utf-8", env={"PYTHONIOENCODING": "ascii"}),
    Case("8 output side", "--json > /dev/full", lambda t: job(t, extra="--json > /dev/full"), 3, "No space left on device", shell=True),
    Case(
        "8 output side", "broken pipe", lambda t: job(t, extra="| head -n 0; exit ${PIPESTATUS[0]}"), 0, "", shell=True
    ),  # the reader stopped early: no error line, exit 0 (issue 25)
    Case("8 output side", "stdout closed", lambda t: job(t, extra=">&-"), 3, "stdout is closed", shell=True),
    # 10. contract deviations
    Case("10 contract", "usage error", lambda t: job(t, extra="--gpu 8"), 2, "No such option: --gpu"),
    Case("10 contract", "bad integer", lambda t: job(t, extra="--top many"), 2, "Invalid value for '--top'"),
    Case("10 contract", "newline in a path", lambda t: job(t, str(t / "a\nb.yaml")), 2, "a\\nb.yaml: file not found"),
    Case(
        "10 contract",
        "newline in a name",
        model_with(TINY.replace("name: tiny", 'name: "x\\ny"').replace("num_kv_heads: 2", "num_kv_heads: 3")),
        2,
        "x\\ny: num_attention_heads (8) must be divisible",
    ),
    Case("10 contract", "duplicate YAML key", model_with(TINY + "layers: 80\n"), 2, "duplicate key 'layers' (at line 10)"),
    Case(
        "10 contract",
        "duplicate JSON key",
        hf_with(json.dumps(HF)[:-1] + ', "num_hidden_layers": 80}'),
        2,
        "duplicate key 'num_hidden_layers'",
    ),
    Case(
        "10 contract",
        "--emit with estimate --seq-len-dist",
        lambda t: dist(t, "l.txt", "100\n300\n", extra=("--emit megatron --json --global-batch 64 --tp 2 --pp 2 --cp 2")).replace(
            "suggest", "estimate"
        ),
        0,
        '"launch_kind": "megatron"',
        seconds=60,
    ),
    Case(
        "10 contract",
        "200 MB model file",
        lambda t: job(t, _sparse(t, "big.yaml", 200 * 2**20)),
        2,
        "the limit is 4,194,304 bytes",
        seconds=3,
    ),
    Case(
        "10 contract",
        "timeout inf",
        lambda t: "{A} profile --device cpu --out '{T}/p.yaml'",
        2,
        "AUTOPAR_PROBE_TIMEOUT_S: must be a number of seconds from 1 to 86400",
        env={"AUTOPAR_PROBE_TIMEOUT_S": "inf"},
        seconds=60,
        torch=True,
    ),
    Case(
        "10 contract",
        "timeout nan",
        lambda t: "{A} profile --device cpu --out '{T}/p.yaml'",
        2,
        "AUTOPAR_PROBE_TIMEOUT_S: must be a number",
        env={"AUTOPAR_PROBE_TIMEOUT_S": "nan"},
        seconds=60,
        torch=True,
    ),
    Case(
        "10 contract",
        "timeout 0.001",
        lambda t: "{A} profile --device cpu --out '{T}/p.yaml'",
        2,
        "AUTOPAR_PROBE_TIMEOUT_S: must be a number",
        env={"AUTOPAR_PROBE_TIMEOUT_S": "0.001"},
        seconds=60,
        torch=True,
    ),
    Case("10 contract", "empty model name", lambda t: job(t).replace(f"'{t}/tiny.yaml'", "''"), 2, "empty model name"),
    Case(
        "10 contract",
        "--slurm-time abc",
        lambda t: job(t, extra="--emit slurm --slurm-time 4h"),
        2,
        "--slurm-time '4h': sbatch reads minutes, MM:SS, HH:MM:SS",
    ),
    Case(
        "10 contract",
        "calibrate --nproc 0",
        lambda t: "{A} calibrate llama3.1-8b --plan dp1,tp2,pp1 --device cpu --nproc 0",
        2,
        "--nproc: must be >= 1, got 0",
        torch=True,
    ),
    Case("10 contract", "empty --stack", lambda t: job(t, extra="--stack ''"), 2, "--stack is empty"),
    Case(
        "10 contract",
        "--varlen-strategy without lengths",
        lambda t: job(t, extra="--varlen-strategy hdp"),
        2,
        "--varlen-strategy needs --seq-len-dist",
    ),
    Case(
        "10 contract", "estimate --tp 0", lambda t: job(t, extra="--tp 0").replace(" suggest ", " estimate "), 2, "--tp must be >= 1, got 0"
    ),
    Case(
        "10 contract",
        "estimate --pp -1",
        lambda t: job(t, extra="--pp -1").replace(" suggest ", " estimate "),
        2,
        "--pp must be >= 1, got -1",
    ),
    Case("10 contract", "BOM in JSON", hf_with("\ufeff" + json.dumps(HF)), 0, "tokens/s"),
    Case(
        "10 contract",
        "BOM in lengths",
        lambda t: dist(t, "l.txt", "\ufeff100\n300\n", extra="--json --global-batch 64"),
        0,
        '"tokens_per_s"',
        seconds=60,
    ),
    Case("10 contract", "BOM in YAML", model_with("\ufeff" + TINY), 0, "tokens/s"),
    Case(
        "10 contract",
        "hand-edited error model",
        lambda t: (files(t, em__yaml=BAD_ERROR_MODEL), job(t, extra="--json"))[1],
        2,
        "em.yaml: classes.tokens_per_s[0].p10: (1.2) exceeds p90 (0.9)",
        env={"AUTOPAR_ERROR_MODEL": "{T}/em.yaml"},
    ),
    Case(
        "10 contract",
        "error model not YAML",
        lambda t: (files(t, em__yaml="classes: [\n"), f"{{A}} serve {SERVE['estimate']}")[1],
        2,
        "em.yaml: malformed YAML",
        env={"AUTOPAR_ERROR_MODEL": "{T}/em.yaml"},
    ),
    # 11. `autopar serve` flags: each refused on one line that names the flag
    *(
        Case("11 serve flags", f"{cmd} {flags}", lambda t, c=cmd, f=flags: f"{{A}} serve {SERVE[c]} {f}", code, fragment)
        for cmd, flags, code, fragment in (
            ("suggest", "--gpus 0", 2, "--gpus must be at least 1, got 0"),
            ("suggest", "--gpus -8", 2, "--gpus must be at least 1, got -8"),
            ("suggest", f"--gpus {10**30}", 2, "--gpus must be at most 1,024 for serve"),
            ("suggest", "--isl 0", 2, "--isl must be at least 1, got 0"),
            ("suggest", f"--isl {10**11}", 2, "--isl must be at most 33,554,432"),
            ("suggest", "--isl 200000", 2, "--isl + --osl (200,000 + 1,024) exceeds llama3.1-8b's context window"),
            ("suggest", "--osl -1", 2, "--osl must be at least 2 (TPOT is measured between output tokens), got -1"),
            ("suggest", "--osl 1", 2, "--osl must be at least 2"),
            ("suggest", "--ttft-ms 0", 2, "--ttft-ms must be a positive number of milliseconds, got 0.0"),
            ("suggest", "--ttft-ms nan", 2, "--ttft-ms must be a positive number of milliseconds, got nan"),
            ("suggest", "--tpot-ms 1e400", 2, "--tpot-ms must be a positive number of milliseconds, got inf"),
            ("suggest", "--tpot-ms -30", 2, "--tpot-ms must be a positive number of milliseconds, got -30.0"),
            ("suggest", "--framework tgi", 2, "--framework must be one of vllm, sglang, trtllm, got 'tgi'"),
            ("suggest", "--framework vllm@9.x", 2, "--framework 'vllm@9.x': malformed version '9.x'"),
            ("suggest", "--framework vllm@", 2, "--framework 'vllm@': malformed version ''"),
            ("suggest", "--hardware h200", 2, "unknown hardware 'h200' (did you mean 'h200-sxm'?)"),
            ("suggest", "--modes agg,disag", 2, "--modes: unknown mode 'disag'"),
            ("suggest", "--modes ,", 2, "--modes is empty"),
            ("suggest", "--emit tgi", 2, "--emit must be one of vllm, sglang, trtllm, got 'tgi'"),
            ("suggest", "--tpot-ms 0.1 --emit vllm", 1, "no deployment of 2 GPUs meets the targets"),
            ("model", "--gpus 2", 2, "unknown model 'llama-9b'"),
            ("estimate", "--concurrency 0", 2, "--concurrency must be at least 1, got 0"),
            ("estimate", f"--concurrency {10**12}", 2, "--concurrency must be at most 16,777,216"),
            ("estimate", "--tp 0", 2, "--tp must be at least 1, got 0"),
            ("estimate", "--ep 3", 2, "--ep (3) exceeds --tp (2)"),
            (
                "estimate",
                "--mode disagg --prefill-workers 1 --decode-workers 1 --prefill-tp 0",
                2,
                "--prefill-tp must be at least 1, got 0",
            ),
            ("estimate", "--weights int3", 2, "--weights must be one of bf16, fp8, fp4, int4, got 'int3'"),
            ("estimate", "--max-num-tokens 0", 2, "--max-num-tokens must be between 1 and 16,777,216, got 0"),
            ("estimate", "--max-batch-size -4", 2, "--max-batch-size must be between 1 and 16,777,216, got -4"),
            ("estimate", "--memory-fraction nan", 2, "--memory-fraction must be between 0.05 and 1.0, got nan"),
            ("suggest", "--memory-fraction 1.5", 2, "--memory-fraction must be between 0.05 and 1.0, got 1.5"),
            ("estimate", "--framework sglang --max-prefill-tokens 0", 2, "--max-prefill-tokens must be between 1 and 16,777,216, got 0"),
            ("estimate", "--mixed-chunk", 2, "--mixed-chunk is an SGLang setting (--framework sglang), got --framework vllm"),
            ("too big", "--emit vllm", 2, "--emit vllm: the deployment does not fit"),
            (
                "estimate",
                "--framework trtllm --max-num-tokens 1000",
                2,
                "--isl (1,024) exceeds the 1,000 tokens one "
                "TensorRT-LLM 1.0 step holds (--max-num-tokens): without chunked context it refuses a longer prompt",
            ),
            (
                "suggest",
                "--framework trtllm --isl 9000",
                2,
                "--isl (9,000) exceeds the 8,192 tokens one TensorRT-LLM 1.0 step holds (--max-num-tokens, its default)",
            ),
            (
                "moe",
                "--tp 4 --ep 2",
                2,
                "vLLM runs MoE experts either tensor-parallel (--ep 1) or expert-parallel over all tp x dp = 4 GPUs; --ep 2 is neither",
            ),
            (
                "moe",
                "--tp 2 --dp 2 --attention-dp --ep 4 --framework trtllm",
                2,
                "TensorRT-LLM's attention-DP runs attention on one GPU per rank: --tp must be 1 with --attention-dp, got 2",
            ),
            (
                "estimate",
                "--gpus 16 --tp 16 --emit vllm",
                2,
                "--emit vllm: an engine of 16 GPUs (tp x pp x attention-dp) spans more than one h100-sxm node (8 GPUs)",
            ),
            # empty names are refused, not taken as the default
            ("estimate", "--framework ''", 2, "--framework must be one of vllm, sglang, trtllm, got ''"),
            ("suggest", "--kv-dtype ''", 2, "--kv-dtype must be one of auto, bf16, fp8, got ''"),
            ("suggest", "--hardware ''", 2, "--hardware is empty"),
            # a pool flag of the other mode is refused, not ignored; a pool's flags are named with its prefix
            ("estimate", "--prefill-tp 2", 2, "--prefill-tp needs --mode disagg"),
            ("estimate", "--decode-attention-dp", 2, "--decode-attention-dp needs --mode disagg"),
            ("disagg", "--pp 2", 2, "--pp sets aggregated engines; with --mode disagg give --prefill-pp and --decode-pp"),
            ("disagg", "--decode-tp 0", 2, "--decode-tp must be at least 1, got 0"),
            ("disagg", "--decode-workers 0", 2, "--decode-workers must be at least 1, got 0"),
            ("disagg", "--prefill-dp 2", 2, "--prefill-dp counts attention-DP ranks inside one engine and needs --prefill-attention-dp"),
            ("disagg", "--decode-tp 3 --gpus 5", 2, "num_attention_heads (32) must be divisible by --decode-tp (3)"),
            (
                "disagg",
                "--decode-attention-dp --decode-dp 2 --decode-ep 3 --gpus 6",
                2,
                "--decode-ep (3) must divide --decode-tp x --decode-dp (2 x 2)",
            ),
        )
    ),
    # --- issue 26 -------------------------------------------------------------------------------------
    # 3. no HOME and a uid without a passwd entry: only saving needs a folder, and then the message says how
    Case("26.3 no home", "suggest runs", lambda t: job(t).replace("{A}", NO_HOME), 0, "recommended:"),
    Case(
        "26.3 no home",
        "default hardware",
        lambda t: f"{NO_HOME} suggest llama3-8b --gpus 8",
        0,
        "built-in default h100-sxm (no --hardware, no saved profile)",
    ),
    Case(
        "26.3 no home",
        "profile has nowhere to save",
        lambda t: f"{NO_HOME} profile --device cpu",
        2,
        "no folder for the saved profile: HOME is not set and uid",
    ),
    Case(
        "26.3 no home",
        "calibrate --save has nowhere to save",
        lambda t: f"{NO_HOME} calibrate llama3.1-8b --plan dp1 --save",
        2,
        "no folder for the saved profile",
        seconds=5,
    ),
    Case(
        "26.3 no home",
        "--install-completion",
        lambda t: f"{NO_HOME} --install-completion bash",
        2,
        "no home folder (HOME is not set",
        env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
    ),  # bash as given
    Case(
        "26.3 no home",
        "XDG_CONFIG_HOME is enough",
        lambda t: f"XDG_CONFIG_HOME='{t}/xdg' {NO_HOME} serve suggest llama3.1-8b --gpus 2 --modes agg",
        0,
        "TTFT",
    ),
    # 4. a terminal 0 or 1 column wide: laid out 40 wide (TTY_COMPATIBLE makes rich take the pipe for a terminal)
    *(
        Case(
            "26.4 narrow terminal",
            f"COLUMNS={c} {what}",
            lambda t, w=what: job(t, extra=w),
            0,
            "recommended:",
            env={"COLUMNS": c, "TTY_COMPATIBLE": "1"},
        )
        for c in ("0", "1")
        for what in ("", "--emit megatron")
    ),
    Case(
        "26.4 narrow terminal",
        "COLUMNS=1 serve",
        lambda t: f"{{A}} serve {SERVE['suggest']}",
        0,
        "TTFT",
        env={"COLUMNS": "1", "TTY_COMPATIBLE": "1"},
    ),
    Case(
        "26.4 narrow terminal",
        "COLUMNS=0 estimate",
        lambda t: job(t, extra="--tp 2").replace(" suggest ", " estimate "),
        0,
        "step",
        env={"COLUMNS": "0", "TTY_COMPATIBLE": "1"},
    ),
    # 6. terminal control sequences in names are printed escaped, in tables, notes and errors alike
    Case(
        "26.6 control sequences",
        "model name in the table",
        model_with(TINY.replace("name: tiny", "name: " + _yaml_name(f"t{TITLE}{CLEAR}"))),
        0,
        "t\\x1b]0;pwned\\x07\\x1b[2J",
        absent=ESC,
    ),
    Case(
        "26.6 control sequences",
        "model name in an error",
        model_with(TINY.replace("name: tiny", "name: " + _yaml_name(f"t{TITLE}")).replace("num_kv_heads: 2", "num_kv_heads: 3")),
        2,
        "t\\x1b]0;pwned\\x07: num_attention_heads (8) must be divisible",
        absent=ESC,
    ),
    Case(
        "26.6 control sequences",
        "_name_or_path",
        hf_with(json.dumps({**HF, "_name_or_path": f"m{TITLE}"})),
        0,
        "m\\x1b]0;pwned\\x07",
        absent=ESC,
    ),
    Case("26.6 control sequences", "GPU name", profile_with(gpu__name=f"G{CLEAR}\x9b2J\u202e"), 0, "G\\x1b[2J\\x9b2J\\u202e", absent=ESC),
    Case(
        "26.6 control sequences",
        "unknown option",
        lambda t: job(t, extra=f"'--x{TITLE}'"),
        2,
        "No such option: --x\\x1b]0;pwned\\x07",
        absent=ESC,
    ),
    Case(
        "26.6 control sequences", "file name", lambda t: job(t, str(t / f"m{CLEAR}.yaml")), 2, "m\\x1b[2J.yaml: file not found", absent=ESC
    ),
    # 7. what a node can run is bounded, and checked before any work (no worker starts, no file is parsed)
    Case("26.7 bounded work", "profile --nproc 100000", lambda t: "{A} profile --nproc 100000", 2, "--nproc must be at most", seconds=5),
    Case(
        "26.7 bounded work",
        "profile --device cpu --nproc 100000",
        lambda t: "{A} profile --device cpu --nproc 100000",
        2,
        "CPU cores here: one gloo process per core), got 100,000",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "calibrate dp1024 --nproc 1024",
        lambda t: "{A} calibrate llama3.1-8b --plan dp1024 --device cpu --nproc 1024",
        2,
        "--nproc must be at most",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "calibrate --steps 10^9",
        lambda t: "{A} calibrate llama3.1-8b --plan dp1 --steps 1000000000",
        2,
        "--steps must be from 1 to 1,000 and --warmup from 0 to 100, got 1,000,000,000",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "calibrate --warmup 10^6",
        lambda t: "{A} calibrate llama3.1-8b --plan dp1 --warmup 1000000",
        2,
        "--warmup from 0 to 100",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "serve --max-num-tokens 1 (vLLM)",
        lambda t: f"{{A}} serve {SERVE['suggest']} --max-num-tokens 1",
        2,
        "--max-num-tokens (1) must be at least --max-batch-size",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "serve --max-num-tokens 1 (SGLang)",
        lambda t: f"{{A}} serve {SERVE['suggest']} --framework sglang --max-num-tokens 1",
        2,
        "--max-num-tokens (1) must be at least 128 with SGLang",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "serve estimate --max-num-tokens 64 (vLLM, --max-batch-size 64)",
        lambda t: f"{{A}} serve {SERVE['estimate']} --max-num-tokens 64 --max-batch-size 64",
        2,
        "--max-num-tokens (64) must be at least 128 with vLLM",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "64 MiB of .jsonl lengths",
        lambda t: job(t, extra="--seq-len-dist '" + _big(t, "l.jsonl", 64 * 2**20, b'{"length": 1000}\n') + "'"),
        2,
        "the limit is 8,388,608 bytes",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "9 MiB of .txt lengths",
        lambda t: job(t, extra="--seq-len-dist '" + _big(t, "l.txt", 9 * 2**20, b"1000\n") + "'"),
        2,
        "the limit is 8,388,608 bytes",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "200,001 YAML values",
        model_with("a: [" + ", ".join(["1"] * 200_001) + "]\n"),
        2,
        "more than 200,000 values",
        seconds=5,
    ),
    Case(
        "26.7 bounded work",
        "varlen past its sequences",
        lambda t: dist(t, "l.txt", "100\n", extra="--global-batch 65537"),
        2,
        "at most 65,536 sequences per step",
        seconds=5,
    ),
    # 8. every check before the work: no run, no note, then a refusal
    Case(
        "26.8 checks first",
        "calibrate --hardware typo",
        lambda t: "{A} calibrate llama3.1-8b --plan dp1 --device cpu --nproc 1 --scale-to-fit --hardware h100x",
        2,
        "unknown hardware 'h100x'",
        seconds=8,
    ),
    Case(
        "26.8 checks first",
        "calibrate --save of a broken profile",
        lambda t: (
            f"mkdir -p '{t}/home' && printf 'name: x\\n' > '{t}/home/profile.yaml' && {{A}} calibrate llama3.1-8b "
            "--plan dp1 --device cpu --nproc 1 --scale-to-fit --save"
        ),
        2,
        "profile.yaml",
        seconds=8,
        shell=True,
    ),
    Case(
        "26.8 checks first", "calibrate --top 0", lambda t: "{A} calibrate llama3.1-8b --top 0", 2, "--top must be >= 1, got 0", seconds=5
    ),
    Case(
        "26.8 checks first",
        "calibrate --top then --steps 0",
        lambda t: "{A} calibrate llama3.1-8b --top 2 --steps 0",
        2,
        "--steps must be from 1 to 1,000",
        seconds=5,
    ),
    # 9. messages name what was given; exit codes are the documented ones
    Case(
        "26.9 messages",
        "--nodes past its bound",
        lambda t: job(t).replace("--gpus 8", "--nodes 1000000"),
        2,
        "--nodes must be at most 131,072 (8 GPUs per node; autopar's limit is 1,048,576 GPUs), got 1,000,000",
    ),
    Case(
        "26.9 messages",
        "estimate --nodes past its bound",
        lambda t: job(t).replace("--gpus 8", "--nodes 200000").replace(" suggest ", " estimate "),
        2,
        "--nodes must be at most 131,072",
    ),
    Case(
        "26.9 messages",
        "calibrate --nproc 100000 --top",
        lambda t: "{A} calibrate llama3.1-8b --nproc 100000 --top 2",
        2,
        "--nproc must be at most",
        seconds=5,
    ),
    Case("26.9 messages", "profile --compare ''", lambda t: "{A} profile --compare ''", 2, "--compare is empty", seconds=5),
    Case(
        "26.9 messages",
        "stderr on /dev/full keeps exit 2",
        lambda t: job(t, extra="--stack nope 2>/dev/full; echo exit $?"),
        0,
        "exit 2",
        shell=True,
    ),
    Case(
        "26.9 messages",
        "usage error, stderr on /dev/full",
        lambda t: job(t, extra="--gpu 8 2>/dev/full; echo exit $?"),
        0,
        "exit 2",
        shell=True,
    ),
    Case("26.9 messages", "help, stderr on /dev/full", lambda t: "{A} 2>/dev/full >/dev/null; echo exit $?", 0, "exit 2", shell=True),
    Case("26.9 messages", "success, stderr on /dev/full", lambda t: job(t, extra="2>/dev/full; echo exit $?"), 0, "exit 0", shell=True),
    Case(
        "26.9 messages",
        "broken pipe under --gpus auto, quiet",
        lambda t: job(t, extra="| true; exit ${PIPESTATUS[0]}").replace("--gpus 8", "--gpus auto"),
        0,
        "",
        shell=True,
        absent="broken pipe",
    ),
    Case("26.9 messages", "Ctrl-C", lambda t: job(t).replace("{A}", CTRL_C), 130, "autopar: interrupted"),
    Case(
        "26.9 messages", "--emit-out is the model", lambda t: job(t, extra=f"{EMIT} '{t}/tiny.yaml'"), 2, "this command reads that file (as"
    ),
    Case(
        "26.9 messages",
        "--emit-out is a hard link to the profile",
        lambda t: _linked(t, job(t, extra=f"{EMIT} '{t}/link.sh'"), "hw.yaml", "link.sh"),
        2,
        "this command reads that file (as",
    ),
    Case(
        "26.9 messages",
        "--emit-out through a symlink to the lengths",
        lambda t: _linked(t, dist(t, "l.txt", "100\n", extra=f"{EMIT} '{t}/l.sh' --global-batch 8"), "l.txt", "l.sh", symbolic=True),
        2,
        "this command reads that file (as",
    ),
    Case(
        "26.9 messages",
        "profile --out is the --compare profile",
        lambda t: f"{{A}} profile --device cpu --quick --compare '{hw(t)}' --out '{t}/hw.yaml'",
        2,
        "--out",
        seconds=30,
        torch=True,
    ),
    # --- an empty path is not the current folder (Path("") is ".") ---------------------------------------
    Case("empty paths", "--save-dir ''", lambda t: job(t, extra="--save-dir ''"), 2, "--save-dir': is empty"),
    Case("empty paths", "--plot ''", lambda t: job(t, extra="--plot ''"), 2, "--plot': is empty"),
    Case("empty paths", "--emit-out ' '", lambda t: job(t, extra=f"{EMIT} ' '"), 2, "--emit-out': is empty"),
    Case("empty paths", "--recipe ''", lambda t: job(t, extra="--recipe ''"), 2, "--recipe is empty"),
    Case("empty paths", "--seq-len-dist ''", lambda t: job(t, extra="--seq-len-dist ''"), 2, "--seq-len-dist is empty"),
    Case(
        "serve limits",
        "--concurrency 100,000 on one engine",
        lambda t: "{A} serve estimate llama3-8b --gpus 8 --tp 8 --concurrency 100000",
        2,
        "puts 100,000 requests in flight on each of 1 attention rank(s)",
        seconds=5,
    ),
    Case(
        "serve limits",
        "disagg on one GPU",
        lambda t: "{A} serve suggest llama3-8b --gpus 1 --modes disagg",
        2,
        "--modes disagg needs at least 2 GPUs",
        seconds=5,
    ),
    Case(
        "26.9 messages",
        "--mbs past the batch limit",
        lambda t: job(t, extra="--mbs 1000000000000").replace(" suggest ", " estimate "),
        2,
        "--mbs (1,000,000,000,000) x dp",
    ),
    Case(
        "26.9 messages",
        "calibrate --plan with --top",
        lambda t: "{A} calibrate llama3-8b --plan dp2,tp2 --top 3",
        2,
        "--plan and --top do not combine",
    ),
    Case("26.9 messages", "--stack a folder", lambda t: job(t, extra=f"--stack '{t}'"), 2, "(that is a folder)"),
    Case("empty paths", "--save-dir under a file", lambda t: job(t, extra=f"--save-dir '{t}/tiny.yaml/sub'"), 2, "cannot make the folder"),
]
