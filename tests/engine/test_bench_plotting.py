"""bench/plotting.py: every benchmark's chart goes through it, so a missing bench extra costs the chart only."""

import sys
from pathlib import Path

from tests.factories import bench_script

ROOT = Path(__file__).resolve().parents[2]
plotting = bench_script("plotting")


def test_without_matplotlib_there_is_no_chart_and_a_note(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    assert plotting.pyplot() is None
    assert "matplotlib not installed" in capsys.readouterr().err


def test_every_benchmark_charts_through_it():
    for path in sorted((ROOT / "bench").glob("*.py")):
        text = path.read_text()
        if path.name != "plotting.py" and "plt." in text:
            assert "pyplot()" in text and "import matplotlib" not in text, path.name
