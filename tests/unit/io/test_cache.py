"""io/cache.py: the values of the shipped files kept between runs are the values the pydantic path builds,
and a cache that is stale, corrupt, foreign or in a hostile place is ignored, never an error."""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from autopar.io import cache, error_model
from autopar.io.frameworks import builtin_frameworks, load_framework
from autopar.io.models import from_yaml_mapping, load_model, preset_names
from autopar.io.profiles import builtin_names, load_hardware
from autopar.io.reading import input_named, load_mapping
from autopar.io.stacks import builtin_stacks, load_stack, stack_versions
from autopar.spec.model import ModelSpec


def _every_builtin() -> Iterator[tuple[str, Callable[[], Any]]]:
    """(name, loader) of every shipped file's value: presets, profiles, each stack version, frameworks, the
    error model."""
    for name in preset_names():
        yield f"model {name}", partial(load_model, name)
    for name in builtin_names():
        yield f"hardware {name}", partial(load_hardware, name)
    for stack in builtin_stacks():
        for version in stack_versions(stack):
            yield f"stack {stack}@{version}", partial(load_stack, f"{stack}@{version}")
        yield f"stack {stack}", partial(load_stack, stack)
    for name, version in builtin_frameworks():
        yield f"framework {name}@{version}", partial(load_framework, f"{name}@{version}")
    yield "error model", lambda: error_model._builtin.__wrapped__()


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pickle"))


def test_every_shipped_value_from_the_cache_equals_the_pydantic_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a cache (AUTOPAR_CACHE a file: the slow path), on the run that fills it and on the run that reads
    it back: equal values, of equal reprs (so equal types: an int stays an int)."""
    loaders = list(_every_builtin())
    monkeypatch.setenv("AUTOPAR_CACHE", os.devnull)
    slow = [load() for _, load in loaders]
    monkeypatch.setenv("AUTOPAR_CACHE", str(tmp_path))
    filled = [load() for _, load in loaders]
    assert len(_entries(tmp_path)) == len(loaders)  # one entry each (a name and its name@version are two)
    kept = [load() for _, load in loaders]
    assert len(loaders) > 50
    for (what, _), a, b, c in zip(loaders, slow, filled, kept, strict=True):
        assert a == b == c and repr(a) == repr(b) == repr(c), what


def _counted(path: Path) -> tuple[Callable[[], ModelSpec], list[int]]:
    """A build reading the model file at `path` and counting its calls."""
    calls = [0]

    def build() -> ModelSpec:
        calls[0] += 1
        return from_yaml_mapping(load_mapping(path), where="test")

    return build, calls


MODEL = "name: tiny\nlayers: 2\nhidden_size: 64\nnum_attention_heads: 4\nffn_hidden_size: 128\nvocab_size: 1000\nseq_len: 128\n"


def test_a_kept_value_is_read_back_and_an_edited_file_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "m.yaml"
    source.write_text(MODEL)
    monkeypatch.setenv("AUTOPAR_CACHE", str(tmp_path / "cache"))
    build, calls = _counted(source)
    first = cache.builtin("model", "tiny", ModelSpec, build)
    assert cache.builtin("model", "tiny", ModelSpec, build) == first and calls == [1]
    assert input_named(source) == str(source.resolve())  # read back, the file is still an input of the command
    source.write_text(MODEL.replace("layers: 2", "layers: 3"))  # stale: the digest of its bytes differs
    assert cache.builtin("model", "tiny", ModelSpec, build).layers == 3 and calls == [2]
    assert cache.builtin("model", "tiny", ModelSpec, build).layers == 3 and calls == [2]  # rewritten
    assert cache.builtin("model", "other", ModelSpec, build) is not None and calls == [3]  # another name: its own entry
    assert [oct(p.stat().st_mode & 0o777) for p in _entries(tmp_path / "cache")] == ["0o600", "0o600"]
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize(
    "spoil",
    [
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),  # truncated
        lambda p: p.write_bytes(b""),  # empty
        lambda p: p.write_bytes(b"\x80\x05garbage"),  # not a pickle
        lambda p: p.write_bytes(pickle.dumps((cache.FORMAT, (), None))),  # no files, no value
        lambda p: p.write_bytes(pickle.dumps((cache.FORMAT + 1, *pickle.loads(p.read_bytes())[1:]))),  # another format
        lambda p: p.write_bytes(pickle.dumps((cache.FORMAT, pickle.loads(p.read_bytes())[1], 7))),  # another type
        lambda p: p.write_bytes(pickle.dumps((cache.FORMAT, [("/nonexistent/x", "0")], pickle.loads(p.read_bytes())[2]))),
        lambda p: p.write_bytes(pickle.dumps((cache.FORMAT, (), Path("/")))),  # a class outside autopar.spec
        lambda p: os.chmod(p, 0o666),  # writable by others
    ],
    ids=["truncated", "empty", "garbage", "nothing", "format", "type", "missing-file", "foreign-class", "world-writable"],
)
def test_a_spoiled_entry_is_ignored_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: Callable[[Path], Any]) -> None:
    source = tmp_path / "m.yaml"
    source.write_text(MODEL)
    monkeypatch.setenv("AUTOPAR_CACHE", str(tmp_path / "cache"))
    build, calls = _counted(source)
    value = cache.builtin("model", "tiny", ModelSpec, build)
    (entry,) = _entries(tmp_path / "cache")
    spoil(entry)
    assert cache.builtin("model", "tiny", ModelSpec, build) == value and calls == [2]
    assert cache.builtin("model", "tiny", ModelSpec, build) == value and calls == [2]  # the rewritten entry is read


class _Shell:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch pwned",))


def test_a_pickle_naming_any_other_callable_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only autopar.spec's dataclasses and enums may be named: not os.system, not a function reached through a
    spec module's imports (autopar.spec.model's `dataclass`)."""
    source = tmp_path / "m.yaml"
    source.write_text(MODEL)
    monkeypatch.setenv("AUTOPAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    build, calls = _counted(source)
    cache.builtin("model", "tiny", ModelSpec, build)
    (entry,) = _entries(tmp_path / "cache")
    entry.write_bytes(pickle.dumps((cache.FORMAT, (), _Shell())))
    assert cache.builtin("model", "tiny", ModelSpec, build).name == "tiny" and calls == [2]
    assert not (tmp_path / "pwned").exists()
    for module, name in (("autopar.spec.model", "dataclass"), ("autopar.spec.model", "dataclasses.replace"), ("posix", "system")):
        with pytest.raises(pickle.UnpicklingError):
            cache._Values(io.BytesIO(b"")).find_class(module, name)


def _hostile(tmp_path: Path, kind: str) -> Path:
    """A cache folder (AUTOPAR_CACHE) of the `kind` asked for."""
    target = tmp_path / "c"
    if kind == "file":
        target.write_text("x")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "under-a-file":
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "c"
    elif kind == "device":
        target = Path(os.devnull)
    elif kind == "symlinked-folder":
        (tmp_path / "real").mkdir()
        target.symlink_to(tmp_path / "real")
    elif kind == "dangling-symlink":
        target.symlink_to(tmp_path / "nowhere" / "deeper")
    return target


@pytest.mark.parametrize("kind", ["file", "fifo", "under-a-file", "device", "symlinked-folder", "dangling-symlink"])
def test_a_cache_folder_in_a_hostile_place_is_never_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("AUTOPAR_CACHE", str(_hostile(tmp_path, kind)))
    expected = load_model("llama3-8b")
    assert load_model("llama3-8b") == expected
    if kind == "file":
        assert (tmp_path / "c").read_text() == "x"


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_an_entry_that_is_not_a_regular_file_is_replaced_never_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """A symlink in an entry's place is neither read nor written through (its target keeps its bytes); a FIFO
    neither hangs the read nor takes the write; a folder in its place is left, the value built each time."""
    source, folder = tmp_path / "m.yaml", tmp_path / "cache"
    source.write_text(MODEL)
    monkeypatch.setenv("AUTOPAR_CACHE", str(folder))
    build, calls = _counted(source)
    cache.builtin("model", "tiny", ModelSpec, build)
    (entry,) = _entries(folder)
    kept, victim = entry.read_bytes(), tmp_path / "victim"
    victim.write_bytes(kept)
    entry.unlink()
    {"symlink": lambda: entry.symlink_to(victim), "fifo": lambda: os.mkfifo(entry), "folder": entry.mkdir}[kind]()
    assert cache.builtin("model", "tiny", ModelSpec, build).name == "tiny" and calls == [2]
    assert victim.read_bytes() == kept
    if kind != "folder":
        assert entry.is_file() and not entry.is_symlink()
        assert cache.builtin("model", "tiny", ModelSpec, build).name == "tiny" and calls == [2]


def test_no_home_means_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOPAR_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/y")
    assert cache.cache_dir() == Path("/x/y/autopar")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home"))))
    assert cache.cache_dir() is None
    assert load_model("llama3-8b").layers == 32  # Llama 3 Herd of Models, Table 3: 32 layers for 8B
