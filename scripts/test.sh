#!/usr/bin/env bash
# The test command of the README (run inside an environment where cxrils is installed
# with the dev extra): lint, format and type checks (ruff check, ruff format --check,
# mypy; configured in pyproject.toml),
# the fast suite (pytest's default, `-m "not slow"` in pyproject.toml), then the slow
# tests (`-m slow`), so that a run of this script (and CI, .ci/run) runs every check.
# Extra arguments go to both runs; a run that selects no test (pytest's exit status 5,
# e.g. a test file without slow tests) is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for check in "ruff check ." "ruff format --check ." "mypy"; do
  echo "==> $check"
  $check || status=1
done
for marks in "not slow" "slow"; do
  echo "==> python -m pytest -q -m \"$marks\" $*"
  python -m pytest -q -m "$marks" "$@"
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=$rc; fi
done
exit $status
