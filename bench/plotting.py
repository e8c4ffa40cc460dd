"""Charts for the benchmarks: matplotlib on its file-only backend, when the bench extra is installed.

A benchmark prints and writes its figures first; the chart is the last step, and without matplotlib it is
skipped with a note instead of failing after the work is done.
"""

from __future__ import annotations

import sys
from pathlib import Path


def pyplot():
    """`matplotlib.pyplot` (Agg backend), or None after telling the user how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install -e '.[bench]')", file=sys.stderr)
        return None
    return plt


# how a request was decided, as the charts that compare the three name them
DECIDERS = {"rules": "rules alone", "model": "model alone", "served": "served (model + rules)"}


def save(plt, fig, path: Path, dpi: int = 110) -> Path:
    """Lay the figure out, write it to `path` and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
