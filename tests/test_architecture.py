"""The layer contract of autopar/, read from the source with `ast` (docs/architecture.md).

Every import counts: module level, inside a function and under ``if TYPE_CHECKING:``, since an
import that only runs late still ties the two modules together. The rules:

- cycle      no import cycle between modules
- direction  imports run down tools -> cli -> render -> advise -> {search, varlen, emit} -> cost -> io
             -> spec -> errors; probe/ and calibrate/ sit beside advise and reach only cost, io, spec,
             errors (calibrate also probe and search); layers of one rank do not import each other
- reach      cli goes through advise (no search, varlen, emit, cost); render formats results (no
             search, no io); varlen reads no file (no io)
- emit       emit/ imports only spec/ and errors
- writes     render/ returns strings: no open(..., "w"), Path.write_*, mkdir, atomic writer or
             savefig to a path
- torch      torch is imported only in probe/ and calibrate/
- layer      every module has a layer (its folder, or its entry in TOP)
- size       no module over 420 lines, no function over 80 (counted from the line after its
             signature, so a Typer command's option list does not count)
- flags      outside cli/, no message given to an AutoparError names a command-line flag: `--` then a
             letter, in a string or an f-string part (also `--{name}`); it names the parameter as the
             Python API does, `gpus` (autopar/errors.py), and cli/run.py says it as --gpus
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autopar"

# layer -> rank; a module may import only layers of a lower rank (or its own layer)
RANK = {
    "errors": 0,
    "spec": 1,
    "io": 2,
    "cost": 3,
    "search": 4,
    "varlen": 4,
    "emit": 4,
    "advise": 5,
    "probe": 5,
    "calibrate": 5,
    "render": 6,
    "cli": 7,
    "tools": 8,
}
# the layers a layer may import, where that is narrower than "every lower rank"
ONLY = {
    "emit": {"spec", "errors"},
    "probe": {"cost", "io", "spec", "errors"},
    # a use case like advise/ that also drives probe/: it searches plans to run
    "calibrate": {"probe", "search", "cost", "io", "spec", "errors"},
}
# lower layers a layer may not reach, though they are below it, and why
ADVISE = "the CLI goes through advise/"
NOT = {
    "cli": {"search": ADVISE, "varlen": ADVISE, "emit": ADVISE, "cost": ADVISE},
    "render": {
        "search": "render/ formats the results advise/ returns",
        "io": "render/ reads and writes no file (io/ does, called by the CLI)",
    },
    "varlen": {"io": "varlen/ reads no file (io/distributions.py reads the lengths)"},
}
# top-level modules and the layer they belong to; a folder's name is its layer
TOP = {
    "autopar": "cli",  # the package root: the Python API, loaded lazily from api/
    "autopar.__main__": "cli",
    "autopar.api": "cli",  # a package: its modules are in its layer too
    "autopar.completions": "cli",  # the callbacks behind the CLI's options; cli/ imports them
    "autopar.errors": "errors",
    "autopar.docs": "tools",
}
TORCH_LAYERS = {"probe", "calibrate"}
# Known reaches, each with the branch that removes it (the list may only shrink)
ALLOWED: set[tuple[str, str]] = set()  # none left
WRITE_METHODS = {"write_text", "write_bytes", "mkdir", "touch"}
# another program's flags a message may name as that program spells them, and why (may only shrink)
FOREIGN_FLAGS = {"--hybrid-context-parallel": "Megatron-LM's own flag, in emit/megatron.py's refusals"}
FLAG = re.compile(r"--[A-Za-z][\w-]*|--$")  # `--$`: a part that ends in -- before a {value}
WRITE_FUNCTIONS = {"write_atomic", "write_text_atomic", "atomic_write"}


@dataclass(frozen=True, slots=True)
class Import:
    source: str  # the importing module, e.g. autopar.render.plot
    target: str  # the imported module (or a top-level package outside autopar)
    line: int


@dataclass(frozen=True, slots=True)
class Source:
    path: str  # relative to the package folder, e.g. render/plot.py
    text: str


Tree = dict[str, Source]  # dotted module name -> its source


def module_name(path: str) -> str:
    """render/plot.py -> autopar.render.plot; cost/__init__.py -> autopar.cost."""
    parts = (PACKAGE.name, *Path(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_tree(root: Path = PACKAGE) -> Tree:
    """Every .py under `root` (the autopar package folder)."""
    files = (str(p.relative_to(root)) for p in sorted(root.rglob("*.py")))
    return {module_name(f): Source(path=f, text=(root / f).read_text()) for f in files}


def planted(tree: Tree, files: dict[str, str]) -> Tree:
    """`tree` with `files` (path -> text) added or replaced."""
    return {**tree, **{module_name(f): Source(path=f, text=text) for f, text in files.items()}}


@functools.cache
def _parse(text: str) -> ast.Module:
    return ast.parse(text)


@functools.cache
def _import_nodes(text: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    return tuple(node for node in ast.walk(_parse(text)) if isinstance(node, ast.Import | ast.ImportFrom))


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: Tree) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = name.split(".") if is_package else name.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, *([node.module] if node.module else [])])
    # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def _owner(target: str, known: Tree) -> str:
    """The module of ours that `target` names (autopar.cost.step.StepEstimate -> autopar.cost.step)."""
    while target not in known and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


def imports(tree: Tree) -> list[Import]:
    """Every import statement in `tree`, wherever it sits in its module."""
    out = []
    for name, source in tree.items():
        for node in _import_nodes(source.text):
            for target in _targets(node, name, source.path.endswith("__init__.py"), tree):
                owner = _owner(target, tree) if target.split(".")[0] == PACKAGE.name else target
                out.append(Import(source=name, target=owner, line=node.lineno))
    return list(dict.fromkeys(out))  # `from m import a, b` is one import of m


def layer(module: str) -> str:
    """The layer of one of our modules: its entry (or its top-level package's) in TOP, else its folder ("" when neither)."""
    parts = module.split(".")
    for name in (module, ".".join(parts[:2])):
        if name in TOP:
            return TOP[name]
    return parts[1] if len(parts) > 2 or parts[1] in RANK else ""


def _where(imp: Import) -> str:
    return f"{imp.source} (line {imp.line}) imports {imp.target}"


def layer_violations(found: list[Import]) -> list[str]:
    """Imports against the direction, reach, emit and torch rules, one message each."""
    out = []
    ours = PACKAGE.name
    for imp in found:
        src = layer(imp.source)
        top = imp.target.split(".")[0]
        if top == "torch" and src not in TORCH_LAYERS:
            out.append(f"{_where(imp)}: torch only in probe/ and calibrate/ [torch]")
        if top != ours or (imp.source, imp.target) in ALLOWED:
            continue
        dst = layer(imp.target)
        if dst == src or "" in (src, dst):
            continue  # a module in no layer is reported once, by layer_violations' caller
        if src == "emit" and dst not in ONLY["emit"]:
            out.append(f"{_where(imp)}: emit/ imports only spec/ and errors [emit]")
        elif src in ONLY and dst not in ONLY[src]:
            allowed = ", ".join(sorted(ONLY[src]))
            out.append(f"{_where(imp)}: {src} may import only {allowed} [direction]")
        elif src not in ONLY and RANK[dst] >= RANK[src]:
            out.append(f"{_where(imp)}: {src} may not import {dst}, which is above or beside it [direction]")
        elif dst in NOT.get(src, {}):
            out.append(f"{_where(imp)}: {NOT[src][dst]} [reach]")
    return out


def cycles(found: list[Import]) -> list[list[str]]:
    """The import cycles between our modules: strongly connected components of more than one."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if imp.target.split(".")[0] == imp.source.split(".")[0] and imp.target != imp.source:
            graph.setdefault(imp.source, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def cycle_violations(found: list[Import]) -> list[str]:
    out = []
    for component in cycles(found):
        inside = set(component)
        edges = [imp for imp in found if imp.source in inside and imp.target in inside and imp.source != imp.target]
        lines = "; ".join(f"{imp.source} (line {imp.line}) imports {imp.target}" for imp in edges)
        out.append(f"import cycle {' <-> '.join(component)}: {lines} [cycle]")
    return out


def _mode(call: ast.Call, position: int) -> str:
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    if len(call.args) > position and isinstance(call.args[position], ast.Constant):
        return str(call.args[position].value)
    return "r"


def _buffers(tree: ast.AST) -> set[str]:
    """Names bound to an in-memory file (io.StringIO() or io.BytesIO()) anywhere in the module."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr in ("StringIO", "BytesIO"):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def _writes(tree: ast.AST) -> Iterator[tuple[int, str]]:
    buffers = _buffers(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "open":
            mode = _mode(node, 1 if isinstance(func, ast.Name) else 0)
            if set(mode) & set("wax+"):
                yield node.lineno, f'open(..., "{mode}")'
        elif (name in WRITE_METHODS and isinstance(func, ast.Attribute)) or name in WRITE_FUNCTIONS:
            yield node.lineno, f"{name}()"
        elif name == "savefig":  # matplotlib: into a buffer is rendering, to a path is writing
            target = node.args[0] if node.args else None
            if not (isinstance(target, ast.Name) and target.id in buffers):
                yield node.lineno, "savefig() to a path"


def write_violations(tree: Tree) -> list[str]:
    """Calls in render/ that write a file."""
    out = []
    for name, source in tree.items():
        if layer(name) == "render":
            for line, call in _writes(_parse(source.text)):
                out.append(f"{name} (line {line}) calls {call}: render/ returns strings and writes no file [writes]")
    return out


def error_classes(tree: Tree) -> set[str]:
    """AutoparError and its subclasses, read from autopar/errors.py."""
    out = {"AutoparError"}
    classes = [n for n in ast.walk(_parse(tree["autopar.errors"].text)) if isinstance(n, ast.ClassDef)]
    for _ in classes:  # as many passes as classes: a subclass of a subclass is found too
        out |= {c.name for c in classes if any(isinstance(b, ast.Name) and b.id in out for b in c.bases)}
    return out


def _flags_named(call: ast.Call) -> Iterator[tuple[int, str]]:
    """The flags the string literals and f-string parts of `call`'s arguments name."""
    for arg in (*call.args, *(kw.value for kw in call.keywords)):
        for node in ast.walk(arg):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for flag in FLAG.findall(node.value):
                    if flag not in FOREIGN_FLAGS:
                        yield node.lineno, flag if flag != "--" else "--{...}"


def flag_violations(tree: Tree) -> list[str]:
    """Messages given to an AutoparError below cli/ that name a command-line flag."""
    names, out = error_classes(tree), []
    for name, source in tree.items():
        if source.path.startswith("cli/"):
            continue
        for node in ast.walk(_parse(source.text)):
            func = node.func if isinstance(node, ast.Call) else None
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in names:
                assert isinstance(node, ast.Call)
                out += [
                    f"{name} (line {line}) names the flag {flag} in a message to {called}: name the parameter "
                    "as the Python API does, in backticks (autopar/errors.py) [flags]"
                    for line, flag in _flags_named(node)
                ]
    return out


def unplaced(tree: Tree) -> list[str]:
    where = "add it to TOP or move it into a layer's folder"
    return [f"{name} is in no layer: {where} [layer]" for name in tree if layer(name) == ""]


def violations(tree: Tree) -> list[str]:
    """Every break of the contract in `tree`, one line each."""
    found = imports(tree)
    return (
        unplaced(tree)
        + cycle_violations(found)
        + layer_violations(found)
        + write_violations(tree)
        + flag_violations(tree)
        + size_violations(tree)
    )


MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 80
# Modules over a limit that other branches are splitting now (the list may only shrink)
SIZE_ALLOWED: set[str] = set()


def _signature_end(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The line of the colon that ends a def's signature (after its arguments and return annotation)."""
    depth = 0
    text = "".join(lines[node.lineno - 1 :])
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
            return node.lineno + tok.start[0] - 1
    raise AssertionError(f"no end to the signature of {node.name} (line {node.lineno})")


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every def in `node` with its qualified name (Class.method, outer.inner), nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            if not isinstance(child, ast.ClassDef):
                yield name, child
            yield from _functions(child, f"{name}.")
        else:
            yield from _functions(child, prefix)


@functools.cache
def _oversized(source: Source) -> tuple[str, ...]:
    """The size breaks of one module, one message each."""
    out = []
    where = f"autopar/{source.path}"
    lines = source.text.splitlines(keepends=True)
    if len(lines) > MAX_MODULE_LINES:
        out.append(f"{where} is {len(lines)} lines, over {MAX_MODULE_LINES}: split it by concept [size]")
    for name, node in _functions(_parse(source.text)):
        length = (node.end_lineno or node.lineno) - _signature_end(lines, node)
        if length > MAX_FUNCTION_LINES:
            out.append(
                f"{where}: function {name} (line {node.lineno}) is {length} lines after its signature, "
                f"over {MAX_FUNCTION_LINES}: split it into named steps [size]"
            )
    return tuple(out)


def size_violations(tree: Tree) -> list[str]:
    """Modules over MAX_MODULE_LINES and functions whose body (after the signature) is over MAX_FUNCTION_LINES."""
    return [v for source in tree.values() if source.path not in SIZE_ALLOWED for v in _oversized(source)]


@pytest.fixture(scope="module")
def tree() -> Tree:
    return read_tree()


def test_the_tree_keeps_the_layer_contract(tree: Tree) -> None:
    found = violations(tree)
    assert not found, f"{len(found)} breaks of the layer contract (docs/architecture.md):\n" + "\n".join(found)


def test_the_allowlist_names_only_real_reaches(tree: Tree) -> None:
    """Each entry of ALLOWED exists and breaks a rule, so the list can only shrink."""
    found = [imp for imp in imports(tree) if (imp.source, imp.target) in ALLOWED]
    assert {(imp.source, imp.target) for imp in found} == ALLOWED
    saved = set(ALLOWED)
    try:
        ALLOWED.clear()
        broken = layer_violations(found)
    finally:
        ALLOWED.update(saved)
    assert len(broken) == len(found), broken


def test_the_scan_sees_every_kind_of_import(tree: Tree) -> None:
    """Module level, function-local, TYPE_CHECKING and relative imports all count: read from this tree."""
    found = {(imp.source, imp.target) for imp in imports(tree)}
    assert ("autopar", "autopar.api") in found  # under `if TYPE_CHECKING:` and inside __getattr__
    assert ("autopar.cli.tools", "autopar.probe.command") in found  # inside a command function


# A planted violation in a copy of the tree: (module, source text, the message it must give)
PLANTED = [
    (
        "cost/planted.py",
        "from autopar.advise import train\n",
        "autopar.cost.planted (line 1) imports autopar.advise.train: cost may not import advise, which is above or beside it [direction]",
    ),
    (
        "spec/planted.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from autopar.io.models import load_model\n",
        "autopar.spec.planted (line 3) imports autopar.io.models: spec may not import io",
    ),
    (
        "search/planted.py",
        "def f():\n    from ..varlen import strategies\n",
        "autopar.search.planted (line 2) imports autopar.varlen.strategies: search may not import varlen",
    ),
    (
        "emit/planted.py",
        "from autopar.cost.pipeline import schedule_time\n",
        "autopar.emit.planted (line 1) imports autopar.cost.pipeline: emit/ imports only spec/ and errors [emit]",
    ),
    (
        "render/planted.py",
        "from autopar.search import planner\n",
        "autopar.render.planted (line 1) imports autopar.search.planner: render/ formats the results advise/ returns [reach]",
    ),
    (
        "render/planted.py",
        "from pathlib import Path\n\ndef save(p: Path) -> None:\n    p.write_text('x')\n",
        "autopar.render.planted (line 4) calls write_text(): render/ returns strings and writes no file [writes]",
    ),
    (
        "render/planted.py",
        "def save(p):\n    with open(p, 'w') as f:\n        f.write('x')\n",
        'autopar.render.planted (line 2) calls open(..., "w"): render/ returns strings',
    ),
    (
        "cli_planted.py",
        "import os\n",
        "autopar.cli_planted is in no layer: add it to TOP or move it into a layer's folder [layer]",
    ),
    (
        "advise/planted.py",
        "import torch\n",
        "autopar.advise.planted (line 1) imports torch: torch only in probe/ and calibrate/ [torch]",
    ),
    (
        "probe/planted.py",
        "from autopar.render import text\n",
        "autopar.probe.planted (line 1) imports autopar.render.text: probe may import only cost, errors, io, spec",
    ),
    (
        "varlen/planted.py",
        "from autopar.io.reading import read_text\n",
        "autopar.varlen.planted (line 1) imports autopar.io.reading: varlen/ reads no file",
    ),
    (
        "cli/planted.py",
        "from autopar.search.serve import sweep\n",
        "autopar.cli.planted (line 1) imports autopar.search.serve: the CLI goes through advise/ [reach]",
    ),
    (
        "render/planted.py",
        "def save(fig, path):\n    fig.savefig(path)\n",
        "autopar.render.planted (line 2) calls savefig() to a path: render/ returns strings",
    ),
    (
        "advise/planted.py",
        'from autopar.errors import SpecError\n\ndef f(n):\n    raise SpecError(f"--gpus must be at least 1, got {n}")\n',
        "autopar.advise.planted (line 4) names the flag --gpus in a message to SpecError: name the parameter as the "
        "Python API does, in backticks (autopar/errors.py) [flags]",
    ),
    (
        "spec/planted.py",
        'from autopar import errors\n\ndef f(name):\n    raise errors.InfeasibleError(\n        "x " f"--{name} is too small")\n',
        "autopar.spec.planted (line 5) names the flag --{...} in a message to InfeasibleError",
    ),
    (
        "spec/units.py",
        "from autopar.spec.planted_b import X\n",
        "import cycle autopar.spec.planted_b <-> autopar.spec.units: ",
    ),
]


@pytest.mark.parametrize(("path", "text", "message"), PLANTED, ids=[f"{p[0]}:{p[2][-14:-1]}" for p in PLANTED])
def test_a_planted_violation_fails_with_its_rule(tree: Tree, path: str, text: str, message: str) -> None:
    files = {path: text}
    if path == "spec/units.py":  # a cycle: units imports planted_b, which imports units back
        files = {path: tree["autopar.spec.units"].text + text, "spec/planted_b.py": "from autopar.spec.units import GIB\nX = GIB\n"}
    found = violations(planted(tree, files))
    assert any(message in v for v in found), f"expected {message!r} in:\n" + "\n".join(found)


def test_the_size_allowlist_names_only_modules_over_a_limit(tree: Tree) -> None:
    """Each entry of SIZE_ALLOWED exists and breaks a size limit, so the list can only shrink."""
    saved = set(SIZE_ALLOWED)
    try:
        SIZE_ALLOWED.clear()
        broken = size_violations(tree)
    finally:
        SIZE_ALLOWED.update(saved)
    over = {path for path in SIZE_ALLOWED if any(v.startswith(f"autopar/{path} ") or v.startswith(f"autopar/{path}:") for v in broken)}
    assert over == SIZE_ALLOWED, f"under the limits now, remove from SIZE_ALLOWED: {sorted(SIZE_ALLOWED - over)}"


SIGNATURE = "def command(\n" + "".join(f"    option_{i}: int = {i},\n" for i in range(40)) + ") -> None:\n"
# (path, source text, the message it must give; None: no size message)
PLANTED_SIZES = [
    ("spec/planted.py", "x = 1\n" * 421, "autopar/spec/planted.py is 421 lines, over 420: split it by concept [size]"),
    ("spec/planted.py", "x = 1\n" * 420, None),
    (
        "advise/planted.py",
        "def long():\n" + "    x = 1\n" * 81,
        "autopar/advise/planted.py: function long (line 1) is 81 lines after its signature, over 80",
    ),
    ("advise/planted.py", "def long():\n" + "    x = 1\n" * 80, None),
    (
        "render/planted.py",
        "class Table:\n    @property\n    def rows(self):\n" + "        x = 1\n" * 81,
        "autopar/render/planted.py: function Table.rows (line 3) is 81 lines after its signature",
    ),
    ("cli/planted.py", SIGNATURE + "    x = 1\n" * 80, None),  # a long option list does not count
    ("cli/planted.py", SIGNATURE + "    x = 1\n" * 81, "autopar/cli/planted.py: function command (line 1) is 81 lines"),
]


@pytest.mark.parametrize(("path", "text", "message"), PLANTED_SIZES)
def test_a_planted_size_fails_with_file_function_and_length(tree: Tree, path: str, text: str, message: str | None) -> None:
    found = size_violations(planted(tree, {path: text}))
    mine = [v for v in found if v.startswith(f"autopar/{path}")]
    if message is None:
        assert mine == []
    else:
        assert any(message in v for v in mine), f"expected {message!r} in:\n" + "\n".join(found)


def test_the_foreign_flags_are_named_by_some_message(tree: Tree) -> None:
    """Each entry of FOREIGN_FLAGS is still in a message, so the list can only shrink."""
    texts = [n.value for s in tree.values() for n in ast.walk(_parse(s.text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert all(any(flag in t for t in texts) for flag in FOREIGN_FLAGS)


def test_the_cli_may_name_flags(tree: Tree) -> None:
    """cli/ speaks in flags: the same message there is no violation."""
    text = 'from autopar.errors import SpecError\n\ndef f():\n    raise SpecError("--gpus is required")\n'
    assert flag_violations(planted(tree, {"cli/planted.py": text})) == flag_violations(tree) == []
