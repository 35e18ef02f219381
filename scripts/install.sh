#!/usr/bin/env bash
# Install cxrils into a fresh virtual environment.
#   bash scripts/install.sh [VENV_DIR] [EXTRAS]      e.g.  bash scripts/install.sh .venv serve,models
# torch comes first from the CPU wheel (a plain 'torch' requirement would pull a CUDA
# build of several GB); medspaCy (used by the default report structurer) goes in with
# --no-deps because it pins spacy<3.8 (hence numpy<2) on Python < 3.12 while running fine
# on spacy 3.8, which the core dependencies already bring (see docs/report.md).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
extras=${2:-}
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1
pip install -q torch==2.13.0
pip install -q -e ".${extras:+[$extras]}"
pip install -q --no-deps medspacy==1.3.1 pyrush==1.0.13 medspacy_quickumls==3.2
echo "cxrils installed in $venv ($(python -c 'import cxrils; print(cxrils.__version__)'))"
