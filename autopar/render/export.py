"""``--save-dir``: the answer as files, rendered to text here and written by ``autopar.io.savedir``.

- ``plans.csv`` / ``plans.jsonl``: suggest's ranked plans (the ``--top`` of them, the rows of
  ``--json``'s ``plans`` after a ``plan`` label as the table says it), one row or JSON object per
  plan; recompute modules join with ``+`` in the CSV.
- ``front.csv`` / ``front.jsonl``: serve suggest's Pareto front, one row per point.
- ``suggestion.json``: the ``--json`` document.
- the launch: ``launch.sh`` (what ``--emit-out`` writes) and the files it reads (``ds_config.json``),
  or for serving ``launch.txt`` (the server lines and the benchmark, as printed) and the engine configs.

CSV columns are the JSON keys, in the JSON's order; a key a row lacks is empty.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autopar.advise.launch import Launch
    from autopar.advise.serve import ServeContext, ServeSweep
    from autopar.advise.train import Suggestion
    from autopar.emit.serving import ServeLaunch


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as CSV with a header: every key seen, in first-seen order; lists joined with '+' (a [p10, p90]
    range as p10+p90), mappings as JSON."""
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(keys), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(
            {k: "+".join(map(str, v)) if isinstance(v, list) else json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()}
        )
    return out.getvalue()


def jsonl_text(rows: Sequence[dict[str, Any]]) -> str:
    """One JSON object per line."""
    return "".join(json.dumps(row, sort_keys=False) + "\n" for row in rows)


def table_files(stem: str, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    return {f"{stem}.csv": csv_text(rows), f"{stem}.jsonl": jsonl_text(rows)}


def suggestion_files(s: Suggestion, top: int, *, launch: Launch | None = None) -> dict[str, str]:
    """suggest --save-dir: the plans, the --json document and the launch with the files it reads."""
    from autopar.advise.launch import script_text
    from autopar.render.labels import plan_text
    from autopar.render.report import plan_dict, suggestion_json

    files = table_files(
        "plans", [{"plan": plan_text(e), **plan_dict(e, s.bands(e), headroom_bytes=s.ctx.headroom_bytes)} for e in s.plans[:top]]
    )
    files["suggestion.json"] = suggestion_json(s, top, launch=launch) + "\n"
    if launch is not None:
        files["launch.sh"] = script_text(launch)
        files.update(dict(launch.files))
    return files


def serve_files(ctx: ServeContext, result: ServeSweep, launched: ServeLaunch | None) -> dict[str, str]:
    """serve suggest --save-dir: the Pareto front, the --json document and the launch lines with their configs."""
    from autopar.render.serve import _point_row, suggestion_json

    files = table_files("front", [_point_row(p) for p in result.pareto])
    files["suggestion.json"] = suggestion_json(ctx, result, launched) + "\n"
    if launched is not None:
        # the lines as suggest prints them: each server runs in its own shell (on its host), then the benchmark
        files["launch.txt"] = (
            f"# {launched.framework} servers, one line per engine, then a benchmark; written by autopar\n{launched.text()}\n"
        )
        files.update(dict(launched.files))
    return files
