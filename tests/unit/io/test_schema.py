"""The pydantic file formats: `autopar schema`, lazy import, and the messages they give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autopar.cli import app
from autopar.errors import ProfileError, SpecError
from autopar.io.models import load_model, preset_names
from autopar.io.profiles import builtin_names, load_hardware, parse_profile
from autopar.spec import limits
from tests.conftest import toy_profile_dict

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


def schema(kind: str) -> dict:
    r = runner.invoke(app, ["schema", kind])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_model_schema_forbids_unknown_keys_and_names_the_bounds() -> None:
    s = schema("model")
    assert s["$schema"].endswith("2020-12/schema") and s["additionalProperties"] is False
    props = s["properties"]
    assert props["layers"]["maximum"] == limits.MAX_LAYERS == 4096 and props["layers"]["minimum"] == 1
    assert props["ffn_activation"]["enum"] == ["swiglu", "gelu", "relu2"]
    assert set(s["required"]) == {"name", "layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size", "seq_len"}
    assert s["$defs"]["MoEFile"]["additionalProperties"] is False


def test_hardware_and_distribution_schemas() -> None:
    hw = schema("hardware")
    assert set(hw["required"]) == {"schema_version", "name", "source", "gpu", "node", "cluster", "overlap"}
    assert hw["$defs"]["FitFile"]["properties"]["bw_gbps"]["maximum"] == limits.MAX_BUS_GBPS
    assert hw["$defs"]["OverlapFile"]["properties"]["compute_slowdown"]["minimum"] == 1.0
    dist = schema("distribution")
    assert dist["$defs"]["LognormalFile"]["properties"]["sigma"]["maximum"] == limits.MAX_SIGMA


def test_unknown_schema_kind_is_one_line() -> None:
    r = runner.invoke(app, ["schema", "gpu"])
    kinds = "model, hardware, distribution, stack, framework"
    assert r.exit_code == 2 and r.stderr == f"autopar: error: schema: expected one of {kinds}, got 'gpu'\n"


def test_every_builtin_file_passes_its_schema() -> None:
    assert all(load_model(name).layers >= 1 for name in preset_names())
    assert all(load_hardware(name).gpus_per_node >= 1 for name in builtin_names())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"layers": "32"}, "m.yaml: layers: expected an integer, got '32'"),  # no coercion from strings
        ({"layers": 32.5}, "m.yaml: layers: expected an integer, got 32.5"),
        ({"layers": True}, "m.yaml: layers: expected an integer, got True"),
        ({"vocab_size": 2**30}, "m.yaml: vocab_size: must be at most 16,777,216, got 1073741824"),
        ({"tie_embeddings": "yes"}, "m.yaml: tie_embeddings: expected true or false, got 'yes'"),
        ({"name": "  "}, "m.yaml: name: expected a non-empty string, got '  '"),
        ({"moe": [1]}, "m.yaml: moe: expected a mapping, got a list"),
        ({"ffn_activation": "swiglo"}, "m.yaml: ffn_activation: must be one of swiglu, gelu, relu2, got 'swiglo' (did you mean 'swiglu'?)"),
    ],
)
def test_model_messages_name_file_and_field(tmp_path: Path, change: dict, message: str) -> None:
    base = {
        "name": "m",
        "layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "ffn_hidden_size": 128,
        "vocab_size": 100,
        "seq_len": 128,
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({**base, **change}))
    with pytest.raises(SpecError) as err:
        load_model(str(path))
    assert str(err.value) == f"{tmp_path}/{message}"


def test_integral_floats_are_integers(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "name: m\nlayers: 2.0\nhidden_size: 6.4e+1\nnum_attention_heads: 4\nffn_hidden_size: 128\nvocab_size: 100\nseq_len: 128\n"
    )
    m = load_model(str(path))
    assert (m.layers, m.hidden_size, m.head_dim) == (2, 64, 16)


def test_profile_key_errors_say_what_is_allowed() -> None:
    data = toy_profile_dict()
    data["gpu"]["peak_tflops"] = {"bf16": 1000, "bf17": 1}
    with pytest.raises(ProfileError) as err:
        parse_profile(data, where="toy.yaml")
    assert str(err.value) == (
        "toy.yaml: gpu.peak_tflops.bf17: must be one of bf16, fp16, fp8, fp4, fp32, tf32, got 'bf17' (did you mean 'bf16'?)"
    )


def test_help_does_not_import_pydantic() -> None:
    """`autopar --help` builds no pydantic model (its start-up time is measured in benchmarks/search_speed.py)."""
    code = (
        "import sys\nfrom autopar.cli import main\nsys.argv = ['autopar', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('pydantic' in sys.modules, file=sys.stderr)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert res.stderr.split()[-1] == "False"
