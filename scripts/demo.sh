#!/usr/bin/env bash
# Set up and run the main job: simulate a real kernel on trn3 and write its timeline.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q "torch==2.13.0" 2>/dev/null || true
python -m pip install -q -e .
trnsim demo "$@"
