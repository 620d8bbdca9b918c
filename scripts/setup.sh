#!/usr/bin/env bash
# Create .venv and install gate into it (editable) with the extras in GATE_EXTRAS
# (default: dev,text,evidence). Safe to run again: it only installs what is missing.
#   bash scripts/setup.sh                          # everything `gate check` and the tests use
#   GATE_EXTRAS=text,evidence bash scripts/setup.sh  # no test tools
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${GATE_EXTRAS:-dev,text,evidence}"
python="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install --quiet --constraint constraints/local.txt)

# torch first, pinned, whenever an extra needs it (text embeddings, remediation):
# letting pip pick torch freely may pull a multi-GB CUDA build.
case ",$extras," in
  *,text,*|*,remediation,*) "${pip[@]}" torch ;;
esac
"${pip[@]}" --editable ".[${extras}]"
echo "gate installed in .venv with extras [${extras}]" >&2
