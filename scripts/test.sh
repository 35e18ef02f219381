#!/usr/bin/env bash
# The test command of the README (run inside an environment where cxrils is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pytest -q "$@"
