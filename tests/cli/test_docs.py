"""docs/: the generated parts are what the code gives now (python -m autopar.docs)."""

from __future__ import annotations

import pytest

from autopar import docs


@pytest.mark.parametrize("name", sorted(docs.FILES))
def test_generated_docs_are_fresh(name: str) -> None:
    source, build = docs.FILES[name]
    text = (docs.ROOT / name).read_text(encoding="utf-8")
    assert docs.rendered(text, source, build()) == text, f"{name} is stale: run python -m autopar.docs"


def test_commands_md_has_every_command_and_option() -> None:
    """Each command's --help is there, with an option added by any engineer (e.g. suggest --headroom)."""
    text = (docs.ROOT / "docs/commands.md").read_text(encoding="utf-8")
    for title in (
        "autopar suggest",
        "autopar estimate",
        "autopar serve suggest",
        "autopar serve estimate",
        "autopar profile",
        "autopar calibrate",
        "autopar schema",
    ):
        assert f"$ {title} --help\n" in text
    assert "--headroom" in text and "--version" in text


def test_formats_md_has_every_field_of_the_schemas() -> None:
    from autopar.io.schema import schemas

    text = (docs.ROOT / "docs/formats.md").read_text(encoding="utf-8")
    for schema in schemas().values():
        for name in schema["properties"]:
            assert f"| `{name}` |" in text


def test_rendered_replaces_only_the_generated_part() -> None:
    begin = docs.BEGIN.format(by="python -m autopar.docs", source="x")
    old = f"# Title\n\nprose\n\n{begin}\n\nold\n\n{docs.END}\n"
    assert docs.rendered(old, "x", "new") == f"# Title\n\nprose\n\n{begin}\n\nnew\n\n{docs.END}\n"
    assert docs.rendered("# Title\n", "x", "new") == f"# Title\n\n{begin}\n\nnew\n\n{docs.END}\n"


def test_check_exits_1_when_stale(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "docs").mkdir()
    for name in docs.FILES:
        (tmp_path / name).write_text("# stale\n", encoding="utf-8")
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0


def test_accuracy_tables_are_what_the_benchmarks_print() -> None:
    """docs/accuracy.md and docs/varlen.md's tables come from the benchmarks (about 12 s of CPU)."""
    from benchmarks import accuracy_docs

    for name in accuracy_docs.PAGES:
        text = (docs.ROOT / name).read_text(encoding="utf-8")
        assert accuracy_docs.page(name) == text, f"{name} is stale: run python benchmarks/accuracy_docs.py"
