"""Output fits 80 columns: every line every command prints for people, at most 80 terminal cells.

Runs every README sample command and representative commands of each kind (suggest and estimate for
dense, MoE, hybrid and variable-length jobs, serve agg and disagg, --emit for each framework, the
listings) through the CLI as a pipe sees it (CliRunner: not a terminal) and measures
each line with rich's cell_len (a wide character counts 2). The wrapped launch commands must still
paste and run: the shell reads back the words of the one-line form (`--json`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.text import Text
from typer.testing import CliRunner

from autopar.cli import app
from autopar.render.text import WIDTH, error, shell_lines, shell_text, shell_words, table, wrap
from tests.cli.test_readme_samples import samples

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

COMMANDS = [
    # training: dense, MoE, hybrid, --gpus auto, a plan that does not fit (fit advice), variable length
    "suggest llama3-70b --hardware h100-sxm --gpus 64",
    "suggest deepseek-v3 --hardware h100-sxm --gpus 256 --top 5",
    "suggest nemotron-h-8b --hardware h100-sxm --gpus 16 --top 5",
    "suggest llama3-8b --hardware h100-sxm --gpus auto",
    "estimate llama3-70b --hardware h100-sxm --gpus 64 --tp 8 --pp 4 --vpp 5 --recompute selective",
    "estimate mixtral-8x7b --hardware h100-sxm --gpus 64 --tp 2 --pp 4 --ep 8",
    "estimate llama3-70b --hardware h100-sxm --gpus 64 --tp 4 --pp 2",
    "estimate llama3-70b --hardware h100-sxm --gpus 8 --tp 8",
    "suggest examples/models/llama-7b.yaml --hardware h100-sxm --gpus 64 --seq-len-dist examples/seqlen/wlb.yaml "
    "--global-batch 118 --top 3",
    # launches
    "suggest llama3-8b --hardware h100-sxm --gpus 16 --top 3 --emit megatron",
    "suggest llama3-8b --hardware h100-sxm --gpus 8 --top 3 --emit torchtitan",
    "suggest llama3-8b --hardware h100-sxm --gpus 16 --top 3 --emit slurm --slurm-partition gpu",
    "suggest llama3-8b --hardware h100-sxm --gpus 16 --top 3 --emit slurm-torchtitan",
    "estimate deepseek-v3 --hardware h100-sxm --gpus 256 --tp 2 --pp 16 --cp 2 --ep 8 --no-explain --emit megatron",
    "estimate nemotron-h-8b --hardware h100-sxm --gpus 16 --tp 2 --pp 2 --no-explain --emit megatron",
    "suggest llama3.1-405b --hardware h100-sxm --gpus 128 --top 3 --emit megatron",  # a 32-chunk uneven layout
    "suggest llama3.1-405b --hardware h100-sxm --gpus 128 --top 3 --emit slurm",
    # serving: MoE agg and disagg, each framework's launch
    "serve suggest qwen3-30b-a3b --hardware h100-sxm --gpus 8 --isl 1024 --osl 256 --emit trtllm",
    "serve suggest qwen3-30b-a3b --hardware h100-sxm --gpus 8 --isl 4096 --osl 256 --modes disagg --emit vllm",
    "serve suggest llama3.1-8b --hardware h100-sxm --gpus 4 --isl 1024 --osl 1024 --emit vllm",
    "serve estimate llama3.1-70b --hardware h100-sxm --gpus 8 --tp 4 --mode disagg --prefill-workers 1 --prefill-tp 4 "
    "--decode-workers 1 --decode-tp 4 --concurrency 64 --emit sglang",
    "serve estimate llama3.1-70b --hardware h100-sxm --gpus 8 --tp 4 --mode disagg --prefill-workers 1 --prefill-tp 4 "
    "--decode-workers 1 --decode-tp 4 --concurrency 64 --emit trtllm",
    # listings (`schema` prints JSON, as --json does: not for people, and not wrapped)
    "models",
    "hardware",
    "stacks",
]


def readme_commands() -> list[str]:
    return [" ".join(shlex.split(c)[1:]) for c, _ in samples()]


def too_wide(text: str) -> list[str]:
    return [f"{cell_len(line)}: {line}" for line in text.split("\n") if cell_len(line) > WIDTH]


@pytest.mark.parametrize("command", [*readme_commands(), *COMMANDS])
def test_every_line_fits_80_columns(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    r = runner.invoke(app, shlex.split(command))
    over = command.startswith("estimate") and r.exit_code == 1 and "does not fit" in r.stdout  # exit 1, still shown
    assert r.exit_code == 0 or over, r.output
    assert not too_wide(r.stdout), "\n".join(too_wide(r.stdout))
    assert not too_wide(r.stderr), "\n".join(too_wide(r.stderr))


def pasted(text: str) -> list[str]:
    """What the shell reads from printed lines: continuations joined, then split into words."""
    return shlex.split(text.replace("\\\n", ""))


def test_a_printed_megatron_command_pastes_to_the_json_one() -> None:
    args = [
        "estimate",
        "deepseek-v3",
        "--hardware",
        "h100-sxm",
        "--gpus",
        "256",
        "--tp",
        "2",
        "--pp",
        "16",
        "--cp",
        "2",
        "--ep",
        "8",
        "--no-explain",
        "--emit",
        "megatron",
        "--emit-extra",
        "--save '/ck pt' --log-interval 1",
    ]
    printed = runner.invoke(app, args).stdout.split("first node's address\n", 1)[1]
    assert pasted(printed) == shlex.split(json.loads(runner.invoke(app, [*args, "--json"]).stdout)["launch"])


def test_a_long_pipeline_layout_stays_indented(tmp_path: Path) -> None:
    # issue 25: a layout too long for its flag's line printed "--pipeline-model-parallel-layout \\" at column 0
    preset = ROOT / "autopar" / "data" / "presets" / "llama3-8b.yaml"
    model = tmp_path / "odd.yaml"
    model.write_text(re.sub(r"(?m)^layers: .*$", "layers: 119", preset.read_text()))  # 12 uneven chunks: 60 characters
    args = [
        "estimate",
        str(model),
        "--hardware",
        "h100-sxm",
        "--gpus",
        "24",
        "--tp",
        "8",
        "--pp",
        "3",
        "--vpp",
        "4",
        "--no-explain",
        "--emit",
        "megatron",
    ]
    out = runner.invoke(app, args).stdout
    lines = out.split("\n")
    flag = next(i for i, line in enumerate(lines) if "--pipeline-model-parallel-layout" in line)
    assert lines[flag] == "    --pipeline-model-parallel-layout \\"
    assert lines[flag + 1] == "        'Et*10|t*10|t*10|t*10|t*10|t*10|t*10|t*10|t*10|t*10|t*10|t*9L' \\"
    assert not too_wide(out)
    printed = out.split("first node's address\n", 1)[1] if "first node's address" in out else out.split("GPU)\n", 1)[1]
    assert pasted(printed) == shlex.split(json.loads(runner.invoke(app, [*args, "--json"]).stdout)["launch"])


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_printed_serving_lines_paste_to_the_json_ones(framework: str) -> None:
    args = [
        "serve",
        "estimate",
        "qwen3-235b-a22b",
        "--hardware",
        "h200-sxm",
        "--gpus",
        "16",
        "--tp",
        "1",
        "--dp",
        "8",
        "--attention-dp",
        "--ep",
        "8",
        "--weights",
        "fp8",
        "--concurrency",
        "512",
        "--isl",
        "1000",
        "--osl",
        "1000",
        "--emit",
        framework,
    ]
    printed = runner.invoke(app, args).stdout.split("reproduces the workload:\n", 1)[1]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["launch"]
    commands = [c for c in (*doc["servers"], *doc["benchmark"].split("\n")) if not c.startswith("#")]
    joined = printed.replace("\\\n", "")
    for command in commands:
        assert shlex.split(command) in [shlex.split(line) for line in joined.split("\n") if line and line[0] != "#"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_printed_sbatch_script_runs_the_one_line_command(tmp_path: Path) -> None:
    """srun and torchrun stubbed: the printed script hands torchrun the words of the command, continuations joined."""
    args = ["suggest", "llama3-8b", "--hardware", "h100-sxm", "--gpus", "16", "--top", "1", "--emit", "slurm"]
    script = runner.invoke(app, args).stdout.split("sbatch script (2 nodes x 8 GPUs)\n", 1)[1]
    one_line = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["launch"].replace("\\\n", "")
    srun = next(line for line in one_line.split("\n") if line.startswith("srun "))
    inner = shlex.split(shlex.split(srun)[-1])
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in (("srun", 'shift 3; exec "$@"'), ("torchrun", 'printf "%s\\0" "$@"'), ("scontrol", "echo node0")):
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(0o755)
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        check=True,
        text=True,
        env={"PATH": f"{stubs}:/usr/bin:/bin", "SLURM_JOB_NODELIST": "n"},
    ).stdout
    argv = out.split("\0")[:-1]
    assert argv == [w.replace("$MASTER_ADDR", "node0") for w in inner[2:]]  # torchrun's own words


# --- the helpers, on hand-made cases ---------------------------------------------------------------


def test_wrap_breaks_at_words_and_indents_continuations() -> None:
    lines = [t.plain for t in wrap("aaa bbb ccc ddd", width=8, indent=2)]
    assert lines == ["aaa bbb", "  ccc", "  ddd"]
    assert [t.plain for t in wrap("short", width=8)] == ["short"]
    assert [t.plain for t in wrap("abcdefghij", width=4, indent=1)] == ["abcd", " efg", " hij"]  # a word too long: cut


def test_wrap_keeps_markup_styles_across_lines() -> None:
    lines = wrap("[bold]one two three[/] four", width=9, indent=0)
    assert [t.plain for t in lines] == ["one two", "three", "four"]
    assert lines[1].spans and lines[1].spans[0].style == "bold" and not lines[2].spans


def test_wide_characters_count_two_cells() -> None:
    lines = wrap("日本語 日本語 日本語", width=14, indent=0)
    assert [t.plain for t in lines] == ["日本語 日本語", "日本語"] and max(t.cell_len for t in lines) == 13


def test_shell_lines_break_before_options_and_keep_values_with_them() -> None:
    line = 'server --model-path "$MODEL" --tp-size 8 --dp-size 8 --enable-dp-attention --port 30000 &'
    assert shell_lines(line, width=40) == [
        'server --model-path "$MODEL" \\',
        "    --tp-size 8 --dp-size 8 \\",
        "    --enable-dp-attention --port 30000 &",
    ]
    assert shell_lines("# one two three four five", width=12) == ["# one two", "# three four", "# five"]


def test_shell_text_leaves_heredocs_and_quoted_bodies_alone() -> None:
    long_yaml = "key: " + "x " * 50
    text = f"cat > a.yaml <<'EOF'\n{long_yaml}\nEOF\nbash -c 'a \\\n    {'--b ' * 30}'"
    assert shell_text(text, width=40).split("\n")[1] == long_yaml
    assert shell_text(text, width=40).split("\n")[-1] == f"    {'--b ' * 30}'"


def test_shell_words_keep_quotes() -> None:
    assert shell_words("a 'b c' \"d e\" f\\ g") == ["a", "'b c'", '"d e"', "f\\ g"]


WORD = st.text(alphabet=st.sampled_from("abcXYZ019-_=./$:,'\" "), min_size=1, max_size=30)


@given(st.lists(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), min_size=1, max_size=40), st.integers(min_value=20, max_value=100))
def test_wrap_keeps_every_word_in_order_within_the_width(words: list[str], width: int) -> None:
    lines = wrap(Text(" ".join(words)), width=width, indent=2)
    assert all(t.cell_len <= width for t in lines)
    assert " ".join(t.plain for t in lines).split() == words


@given(
    st.lists(st.tuples(st.from_regex(r"--[a-z]{1,20}", fullmatch=True), WORD), min_size=1, max_size=25),
    st.integers(min_value=40, max_value=100),
)
def test_shell_lines_paste_back_to_the_same_words(pairs: list[tuple[str, str]], width: int) -> None:
    line = "cmd " + " ".join(f"{flag} {shlex.quote(value)}" for flag, value in pairs)
    wrapped = shell_lines(line, width=width)
    assert shlex.split("\n".join(wrapped).replace("\\\n", "")) == shlex.split(line)
    longest = max(cell_len(f"{flag} {shlex.quote(value)}") for flag, value in pairs)
    assert all(cell_len(w) <= max(width, longest + 4 + 2) for w in wrapped)


def test_errors_are_one_line_piped_and_wrapped_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    message = (
        "unknown model 'llama3-405b' (did you mean 'llama3.1-405b'?): give a preset name (see `autopar models`), "
        "a model .yaml file or a Hugging Face config.json"
    )
    error(message, terminal=False)
    assert capsys.readouterr().err == f"autopar: error: {message}\n"
    error(message + "\nsecond", terminal=True)
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert len(lines) == 3 and all(cell_len(line) <= WIDTH for line in lines)
    assert lines[0].startswith("autopar: error: unknown model") and lines[1].startswith("  ")
    assert " ".join(" ".join(lines).split()) == f"autopar: error: {message}\\nsecond"


def test_a_table_too_wide_wraps_its_label_columns_and_cuts_nothing() -> None:
    from rich.console import Console

    t = table("plan", "recompute", "tok/s/GPU", left=("plan", "recompute"), wrap=("plan", "recompute"))
    t.add_row("dp8 tp2+sp pp16 ep16", "selective (moe_act, layernorm)", "1,093")
    out = Console(width=34, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    out.print(t)
    text = out.export_text()
    assert max(cell_len(line) for line in text.split("\n")) <= 34 and "…" not in text
    for word in ("dp8", "tp2+sp", "pp16", "ep16", "selective", "(moe_act,", "layernorm)", "1,093"):
        assert word in text.split()
    narrow = Console(width=24, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    narrow.print(t)
    assert "…" not in narrow.export_text()  # a word wider than its column folds
