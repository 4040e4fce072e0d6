"""Where the tests find the repository and the committed exports, from any folder under tests/.

``ROOT`` is the repository checkout; ``DATA`` is ``tests/data`` (real nsys exports recorded on
the GPU and their ``nsys stats`` CSVs, see ``data/SCHEMA_2023.md``); ``BEFORE``/``AFTER`` are
the EAGLE loop with per-node graph tracing before and after the fused metadata copy, ``GRAPH``
the same loop traced as whole graphs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
BEFORE = DATA / "eagle_node_before.sqlite"
AFTER = DATA / "eagle_node_after.sqlite"
GRAPH = DATA / "eagle_graph_before.sqlite"


def bench_module(name: str):
    """The script ``bench/<name>.py`` loaded as a module (the scripts are not a package;
    ``bench/`` on ``sys.path``, as when a script runs, for those that import another)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.append(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses and multiprocessing look the module up)
    spec.loader.exec_module(module)
    return module
