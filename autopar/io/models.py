"""Model loaders: a preset name, a YAML spec (format in DESIGN.md), a Hugging Face
config.json, or a folder holding one; all become a :class:`ModelSpec`.

The config.json readers (io/hf_config.py and the modules under it, io/hf_quant.py) are
imported when a config.json is read, so that a preset loads none (tests/cli/test_startup.py);
``from_hf_config`` is still importable from here."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopar.errors import SpecError
from autopar.io.cache import builtin
from autopar.io.files import exists
from autopar.io.reading import did_you_mean, load_mapping, named
from autopar.spec.families import MambaSpec, MLASpec, MoESpec
from autopar.spec.model import ModelSpec

if TYPE_CHECKING:
    from collections.abc import Iterator

    from autopar.io.hf_config import from_hf_config as from_hf_config


def __getattr__(name: str) -> Any:
    if name == "from_hf_config":  # PEP 562: the reader, imported on first use
        from autopar.io.hf_config import from_hf_config

        return from_hf_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def preset_names() -> list[str]:
    """Names of the built-in model presets."""
    root = resources.files("autopar") / "data" / "presets"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_model(ref: str) -> ModelSpec:
    """A preset name, a YAML spec, a Hugging Face config.json, or a folder holding one."""
    if not ref.strip():
        raise SpecError("empty model name: give a preset name (see `autopar models`), a model .yaml file or a Hugging Face config.json")
    path = Path(ref)
    if exists(path, folder=True):
        path = path / "config.json"
        if not exists(path):
            raise SpecError(f"{named(ref)}: folder has no config.json")
    if path.suffix.lower() == ".json":
        with _said_by_file(named(path)):
            return _hf_spec(load_mapping(path), where=named(path), path=path)
    if path.suffix.lower() in (".yaml", ".yml") or exists(path):
        with _said_by_file(named(path)):
            return from_yaml_mapping(load_mapping(path), where=named(path))
    names = preset_names()
    if re.fullmatch(r"[\w-][\w.-]*/[\w.-]+", ref) and ref not in names:  # a Hugging Face repo id
        cached = hf_cached_config(ref)
        if cached is not None:  # the repo's own config.json, read as a file is
            data = dict(load_mapping(cached))
            data["_name_or_path"] = ref.rsplit("/", 1)[-1].lower()
            return _hf_spec(data, where=f"{ref} ({named(cached)})", path=cached)
        found = preset_for_hf_id(ref)
        if found is None:
            raise SpecError(
                f"unknown model '{named(ref)}': its config.json is not in the Hugging Face cache "
                f"({named(hf_cache_dir())}) and no built-in preset has this architecture (see `autopar "
                f"models`); get it with `huggingface-cli download {ref} config.json`, or pass a config.json"
            )
        ref = found
    if ref in names:
        return builtin("model", ref, ModelSpec, lambda: _preset(ref))
    raise SpecError(
        f"unknown model '{named(ref)}'{did_you_mean(ref, names)}: give a preset name (see `autopar models`), "
        "a model .yaml file or a Hugging Face config.json"
    )


def _preset(name: str) -> ModelSpec:
    """A built-in preset read from its file (io/cache.py keeps the value between runs)."""
    with resources.as_file(resources.files("autopar") / "data" / "presets" / f"{name}.yaml") as p:
        return from_yaml_mapping(load_mapping(p), where=f"preset {name}")


@contextlib.contextmanager
def _said_by_file(where: str) -> Iterator[None]:
    """A model's own checks (ModelSpec's 'NAME: what', or no name) said with the file that gave it, as its fields' are."""
    try:
        yield
    except SpecError as exc:
        text = str(exc)
        if text.startswith(where):
            raise
        raise SpecError(f"{where}: {text}") from None


def _hf_spec(config: dict[str, Any], *, where: str, path: Path) -> ModelSpec:
    """The spec of a Hugging Face config.json read from `path`, with its checkpoint's KV dtype."""
    from autopar.io.hf_config import from_hf_config as from_hf_config

    return with_checkpoint_kv(from_hf_config(config, where=where), path, config)


def with_checkpoint_kv(spec: ModelSpec, config_path: Path, config: dict[str, Any]) -> ModelSpec:
    """The spec with the KV dtype its checkpoint names for `auto` (io/hf_quant.py), when it names one."""
    from autopar.io.hf_quant import checkpoint_kv_dtype

    dtype, why = checkpoint_kv_dtype(config_path, config)
    return dataclasses.replace(spec, kv_dtype_default=dtype, kv_dtype_source=why) if dtype else spec


# Suffixes a Hugging Face repo adds to a model's name that leave its architecture as it is: the tuned
# variant (Instruct, Chat, Base, it, Thinking: Qwen3-235B-A22B-Thinking-2507 and Kimi-K2-Thinking have their
# Instruct sibling's config.json shape), the weight format (FP8, FP4, AWQ, Static-PerTensor, ...), a release
# date (Qwen3-...-2507, DeepSeek-V3-0324), a version (Mixtral-...-v0.1) and a context tag (-8K).
_VARIANT = re.compile(
    r"[-_.](instruct|chat|base|it|thinking|hf|fp8|fp4|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8"
    r"|dynamic|static|pertensor|\d{4}|v\d+(\.\d+)*|\d+k)$",
    re.IGNORECASE,
)
# Released under another name with a preset's architecture (their config.json matches it):
# DeepSeek-R1 is trained from DeepSeek-V3-Base (arXiv:2501.12948 sec. 2.2); Llama 3.3 70B has the
# Llama 3.1 70B shape (meta-llama/Llama-3.3-70B-Instruct config.json: 80 layers, 8192 hidden, 64/8 heads).
# Kimi-K2.5 is Kimi K2 with a vision tower (moonshotai/Kimi-K2.5 config.json text_config: DeepseekV3ForCausalLM,
# 61 layers, 7168 hidden, 64 heads, MLA 1536/512, 384 experts top-8, 1 shared, vocab 163840, as kimi-k2).
# Qwen3-Coder-480B-A35B and Llama-4-Scout-17B-16E are the presets qwen3-coder-480b and llama4-scout (shorter
# names, so `autopar models` fits 80 columns).
_SAME_ARCHITECTURE = {
    "deepseekr1": "deepseek-v3",
    "llama3370b": "llama3.1-70b",
    "qwen3coder480ba35b": "qwen3-coder-480b",
    "llama4scout17b16e": "llama4-scout",
    "kimik25": "kimi-k2",
}


def _stem(name: str) -> str:
    """A model name without its variant suffixes and punctuation: Llama-3.1-8B-Instruct-FP8 -> llama318b."""
    while (m := _VARIANT.search(name)) is not None and m.start() > 0:
        name = name[: m.start()]
    stem = re.sub(r"[^a-z0-9]", "", name.lower())
    return stem.removeprefix("meta") if stem.startswith("metallama") else stem


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it: HF_HUB_CACHE (or the older
    HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else ~/.cache/huggingface/hub (huggingface_hub constants.py)."""
    hub = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return Path(hub).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def hf_cached_config(repo: str) -> Path | None:
    """A repo's config.json in the local Hugging Face cache, without the network: the snapshot refs/main
    names (the cache layout: models--ORG--NAME/{refs/main, snapshots/COMMIT/config.json}), else the most
    recent snapshot holding one; None when the cache has none."""
    folder = hf_cache_dir() / f"models--{repo.replace('/', '--')}"
    try:
        commit = (folder / "refs" / "main").read_text(encoding="utf-8").strip()
        if commit and (folder / "snapshots" / commit / "config.json").is_file():
            return folder / "snapshots" / commit / "config.json"
    except (OSError, UnicodeDecodeError):
        pass
    try:
        found = [p for p in (folder / "snapshots").glob("*/config.json") if p.is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: (p.stat().st_mtime, str(p))) if found else None


def preset_for_hf_id(hf_id: str) -> str | None:
    """The preset a Hugging Face repo id (org/name) names, or None: meta-llama/Llama-3.1-8B-Instruct -> llama3.1-8b."""
    stem = _stem(hf_id.rsplit("/", 1)[-1])
    if not stem:
        return None
    by_stem = {_stem(n): n for n in preset_names()} | _SAME_ARCHITECTURE
    return by_stem.get(stem)


def from_yaml_mapping(data: dict[str, Any], *, where: str) -> ModelSpec:
    """Build a spec from the DESIGN.md YAML format (autopar.io.schema.ModelFile); unknown keys are errors."""
    from autopar.io.schema import ModelFile, validate  # pydantic: only once a file is read

    m = validate(ModelFile, data, where=where, err=SpecError)
    heads, hidden = m.num_attention_heads, m.hidden_size
    return ModelSpec(
        name=m.name,
        layers=m.layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=m.num_kv_heads or heads,
        head_dim=m.head_dim or _default_head_dim(hidden, heads, where),
        ffn_hidden_size=m.ffn_hidden_size,
        ffn_activation=m.ffn_activation,
        vocab_size=m.vocab_size,
        seq_len=m.seq_len,
        max_seq_len=m.max_seq_len or m.seq_len,
        tie_embeddings=m.tie_embeddings,
        source=m.source or where,
        dropout=m.dropout,
        norm=m.norm,
        position_embedding=m.position_embedding,
        rope_base=m.rope_base,
        rope_scaling=m.rope_scaling,
        linear_bias=m.linear_bias,
        qk_norm=m.qk_norm,
        sliding_window=m.sliding_window,
        window_layers=m.window_layers,
        kv_dtype_default=m.kv_dtype_default or "",
        kv_dtype_source=f"{where} kv_dtype_default" if m.kv_dtype_default else "",
        moe=MoESpec(**m.moe.model_dump()) if m.moe else None,
        mla=MLASpec(**m.mla.model_dump()) if m.mla else None,
        mamba=MambaSpec(**m.mamba.model_dump()) if m.mamba else None,
    )


def _default_head_dim(hidden: int, heads: int, where: str) -> int:
    if hidden % heads:
        raise SpecError(f"{where}: hidden_size ({hidden}) must be divisible by num_attention_heads ({heads}), or give head_dim")
    return hidden // heads
