"""benchmarks/runtime_bench.py's small-message table: run tiny on real gloo processes, and its
arithmetic (best of the passes, the ratio, the noise report) checked against the raw passes."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("runtime_bench", os.path.join(ROOT, "benchmarks", "runtime_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_table(bench, measured, sizes, passes):
    assert set(measured) == {"ours", "raw"} and all(len(measured[k]) == passes for k in measured)
    rows = bench.table_rows(measured)
    assert [n for n, *_ in rows] == list(sizes)
    for n, ours, raw, ratio in rows:
        assert ours == min(p[n] for p in measured["ours"]) and raw == min(p[n] for p in measured["raw"])
        assert ratio == pytest.approx(ours / raw)
    lines = bench.format_table("title", measured)
    assert lines[0] == "title" and len(lines) >= 3 + len(sizes)
    for line, (n, ours, raw, ratio) in zip(lines[2:], rows):
        assert line.split() == [str(n), f"{ours * 1e6:.1f}", f"{raw * 1e6:.1f}", f"{ratio:.2f}"]
    assert lines[2 + len(sizes)].startswith(f"best of {passes} passes; noise:")
    return rows


def test_table_arithmetic_on_made_up_passes(bench):
    measured = {"ours": [{1024: 3e-4, 65536: 5e-4}, {1024: 2e-4, 65536: 9e-4}],
                "raw": [{1024: 1e-4, 65536: 4e-4}, {1024: 1.5e-4, 65536: 4.5e-4}]}
    rows = _check_table(bench, measured, (1024, 65536), 2)
    assert rows == [(1024, 2e-4, 1e-4, pytest.approx(2.0)), (65536, 5e-4, 4e-4, pytest.approx(1.25))]
    lines = bench.format_table("t", measured)
    # Group's 1 KB passes disagree by 1.5x, 64 KB by 1.8x: the noise report says so
    assert any(line.startswith("  Group: repeated passes disagree at 1 of 2 sizes") for line in lines), lines


def test_the_table_runs_tiny_on_gloo(bench):
    sizes = (1024, 65536)
    measured = bench.small_message_tables(sizes=sizes, passes=2, scale=0.02, mpi=False)
    assert list(measured) == ["gloo"]
    rows = _check_table(bench, measured["gloo"], sizes, 2)
    assert all(0 < ours < 1 and 0 < raw < 1 for _, ours, raw, _ in rows)
