"""Where the tests find the repository and the committed exports, from any folder under tests/.

``ROOT`` is the repository checkout; ``DATA`` is ``tests/data`` (real nsys exports recorded on
the GPU and their ``nsys stats`` CSVs, see ``data/SCHEMA_2023.md``); ``BEFORE``/``AFTER`` are
the EAGLE loop with per-node graph tracing before and after the fused metadata copy, ``GRAPH``
the same loop traced as whole graphs.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
BEFORE = DATA / "eagle_node_before.sqlite"
AFTER = DATA / "eagle_node_after.sqlite"
GRAPH = DATA / "eagle_graph_before.sqlite"
