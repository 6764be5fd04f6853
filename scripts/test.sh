#!/usr/bin/env bash
# Set up (editable install with test extras) and run lint + the default test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Pin the CPU build of torch first: a bare range would pull a multi-GB CUDA build here.
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test,dev]"
ruff check .
set +e
python -m pytest -q
rc=$?
set -e
# pytest exits 5 when no test was collected: that is a failure of this suite, say so.
if [ "$rc" -eq 5 ]; then echo "no tests collected" >&2; exit 1; fi
exit "$rc"
