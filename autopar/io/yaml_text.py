"""YAML text to plain values, safely: the pure-Python loader for any file (line numbers in its messages) and
libyaml for the files autopar ships, with the same constructor rules. io/reading.py imports this module when
it parses YAML, so that a command whose files all come from the cache (io/cache.py) imports no yaml."""

from __future__ import annotations

from typing import Any

import yaml

from autopar.io.bounds import MAX_DEPTH, MAX_NODES, Refused, one_line, shown


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader that bounds depth and values, and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._nodes += 1
        if self._depth > MAX_DEPTH or self._nodes > MAX_NODES:
            mark = self.peek_event().start_mark
            what = f"nested deeper than {MAX_DEPTH} levels" if self._depth > MAX_DEPTH else f"more than {MAX_NODES:,} values"
            raise Refused(f"{what} (at line {mark.line + 1})")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        _no_duplicates(self, node)
        return super().construct_mapping(node, deep=deep)


def _no_duplicates(loader: Any, node: Any) -> None:
    """Refuse a mapping that repeats a key (YAML 1.2 forbids it; PyYAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the constructor reports it
            if duplicate:
                raise Refused(f"duplicate key {shown(key)} (at line {key_node.start_mark.line + 1})")


def _expanded(node: Any) -> int:
    """Values in the document with every alias expanded (each shared node counted once per use)."""
    sizes: dict[int, int] = {}

    def size(n: Any) -> int:
        got = sizes.get(id(n))
        if got is not None:
            return got
        if isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(c) for c in n.value)
        elif isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        else:
            total = 1
        sizes[id(n)] = min(total, MAX_NODES + 1)
        return sizes[id(n)]

    return size(node)  # depth is bounded by the composer, so this recursion is too


_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_VALUE = (yaml.ScalarEvent, yaml.AliasEvent, *_OPEN)


def _precheck(text: str) -> None:
    """Depth and values counted on libyaml's events (C, about 20 times faster than the pure-Python composer),
    so that an over-large file is refused before the slow parse; the parse below checks the same bounds
    again, and says what else is wrong (a syntax error stops this count and is left to it)."""
    if not getattr(yaml, "__with_libyaml__", False):
        return
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, _VALUE):
                nodes += 1
            if isinstance(event, _OPEN):
                depth += 1
            elif isinstance(event, _CLOSE):
                depth -= 1
            if depth > MAX_DEPTH or nodes > MAX_NODES:
                what = f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else f"more than {MAX_NODES:,} values"
                mark = event.start_mark
                raise Refused(f"{what}" + (f" (at line {mark.line + 1})" if mark is not None else ""))
    except yaml.YAMLError:
        return


if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(yaml.CSafeLoader):
        """libyaml's parser with _Loader's constructor rules (no duplicate keys), for the files we ship."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            _no_duplicates(self, node)
            return super().construct_mapping(node, deep=deep)


def _load_shipped(text: str) -> Any:
    """A file of autopar/data parsed by libyaml (about 10 times faster: `suggest` reads four), or None to
    parse it as any other file. The same values: tests/unit/io/test_builtin_data.py parses every shipped
    file both ways; anything libyaml refuses is parsed the slow way, which says why."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    loader = _CLoader(text)
    try:
        node = loader.get_single_node()
        if node is None or _expanded(node) > MAX_NODES:
            return None
        return loader.construct_document(node)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    finally:
        loader.dispose()


def _load_yaml(text: str, *, shipped: bool = False) -> Any:
    _precheck(text)
    if shipped and (data := _load_shipped(text)) is not None:
        return data
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded(node) > MAX_NODES:
            raise Refused(f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?)")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def parse_yaml(text: str, *, shipped: bool = False) -> Any:
    """YAML text to plain values; ValueError with a one-line reason (`shipped`: a file of autopar/data)."""
    try:
        return _load_yaml(text, shipped=shipped)
    except yaml.constructor.ConstructorError as exc:
        problem = str(getattr(exc, "problem", "") or "unsupported tag")
        if "could not determine a constructor" in problem:
            raise ValueError(f"YAML tags that construct objects are not allowed ({one_line(problem, 120)})") from None
        raise ValueError(f"malformed YAML: {one_line(problem, 120)}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ValueError(f"malformed YAML{where}: {one_line(problem, 120)}") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
