"""Print the README's metric table (Markdown) from the metric catalog; ``--write`` puts it in
README.md between the ``<!-- metric-table:start -->`` / ``<!-- metric-table:end -->`` markers.

One row per catalog entry (:data:`specscope.analysis.catalog.CATALOG`): the metric or family,
its unit, which way it improves (what ``specscope compare`` judges by) and its one-line meaning.
``tests/analysis/test_catalog.py`` fails when README.md and the catalog disagree.

    python scripts/metric_table.py            # print
    python scripts/metric_table.py --write    # update README.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without specscope installed
    sys.path.insert(0, str(ROOT))

from specscope.analysis.catalog import CATALOG  # noqa: E402

START, END = "<!-- metric-table:start -->", "<!-- metric-table:end -->"
UNITS = {"us": "µs", "%": "%", "B": "bytes", "count": "count"}
BETTER = {"lower": "lower", "higher": "higher", "neutral": "—"}


def metric_table() -> str:
    """The Markdown table, one row per catalog entry, without a trailing newline."""
    lines = ["| metric | unit | better | meaning |", "| --- | --- | --- | --- |"]
    for e in CATALOG:
        unit = UNITS.get(e.unit, e.unit)
        cuda = "" if e.needs_cuda else " (host only: also without CUDA data)"
        lines.append(
            f"| `{e.pattern}` | {unit} | {BETTER[e.direction.value]} | {e.meaning}{cuda} |"
        )
    return "\n".join(lines)


def with_table(readme: str) -> str:
    """``readme`` with the text between the markers replaced by :func:`metric_table`."""
    head, start, rest = readme.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"Error: README.md lacks the markers {START} ... {END}")
    return f"{head}{START}\n{metric_table()}\n{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update README.md in place")
    args = parser.parse_args()
    if not args.write:
        print(metric_table())
        return
    path = ROOT / "README.md"
    path.write_text(with_table(path.read_text()))


if __name__ == "__main__":
    main()
