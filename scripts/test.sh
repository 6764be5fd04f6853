#!/usr/bin/env bash
# Set up and run lint + the default test suite: exactly what CI runs (.ci/run).
set -euo pipefail
exec bash "$(dirname "$0")/../.ci/run"
