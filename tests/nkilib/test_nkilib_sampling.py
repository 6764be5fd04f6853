"""tools/nkilib_sample.py, the pytest plugin of tools/run_nkilib.py: kernel families from node
ids, the stratified per-family sample, and the per-test time limit."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import nkilib_sample  # noqa: E402


def ids(fam: str, n: int) -> list[str]:
    return [f"test/integration/nkilib/{fam}/test_x.py::test_x[{i}]" for i in range(n)]


def test_family_is_the_folder_under_core_or_experimental():
    assert nkilib_sample.family(ids("core/attention", 1)[0]) == "core/attention"
    assert nkilib_sample.family(ids("experimental/conv", 1)[0]) == "experimental/conv"
    assert nkilib_sample.family("test/unit/test_y.py::test_y") == "other"


def test_per_family_keeps_n_of_each_family_by_hash():
    big, small = ids("core/moe", 50), ids("core/max", 2)
    kept = nkilib_sample.per_family(big + small, 3)
    assert set(small) <= kept
    assert len(kept & set(big)) == 3
    assert kept & set(big) == set(sorted(big, key=nkilib_sample.node_hash)[:3])
    assert nkilib_sample.per_family(list(reversed(big + small)), 3) == kept


def test_timeout_fails_a_test_that_runs_too_long(tmp_path):
    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_slow():\n    time.sleep(30)\n\ndef test_fast():\n    pass\n")
    env = dict(os.environ, NKILIB_TEST_TIMEOUT_S="0.5",
               PYTHONPATH=os.pathsep.join([str(TOOLS), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "nkilib_sample", "-p", "no:cacheprovider",
         "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=25, check=False)
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    assert "ran past 0.5 s (NKILIB_TEST_TIMEOUT_S)" in proc.stdout


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_share_bounds(share):
    assert all(nkilib_sample.keep(i, share) == bool(share) for i in ids("core/moe", 20))


def test_sample_windows_are_disjoint_and_cover_the_range():
    every = ids("core/moe", 400)
    first = {i for i in every if nkilib_sample.keep(i, 0.5)}
    second = {i for i in every if nkilib_sample.keep(i, 0.5, start=0.5)}
    assert first and second
    assert not first & second
    assert first | second == set(every)
    assert {i for i in every if nkilib_sample.keep(i, 0.25, start=0.25)} <= first
