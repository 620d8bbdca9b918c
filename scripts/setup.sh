#!/usr/bin/env bash
# Create .venv and install gate into it (editable) with the extras in GATE_EXTRAS
# (default: dev,text,evidence,remediation,spark). Safe to run again: it only installs what is missing.
#   bash scripts/setup.sh                          # everything `gate check` and the tests use
#   GATE_EXTRAS=text,evidence bash scripts/setup.sh  # no test tools
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${GATE_EXTRAS:-dev,text,evidence,remediation,spark}"
python="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip install --quiet --constraint constraints/local.txt)

# Nothing to do when the same project files were installed with the same extras before.
stamp=".venv/.gate-installed"
wanted="$(cat pyproject.toml constraints/local.txt | sha256sum | cut -d' ' -f1) ${extras}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && .venv/bin/python -c "import gate" 2>/dev/null; then
  echo "gate already installed in .venv with extras [${extras}]" >&2
  exit 0
fi
rm -f "$stamp"

# torch first, pinned, whenever an extra needs it (text embeddings, remediation):
# letting pip pick torch freely may pull a multi-GB CUDA build.
case ",$extras," in
  *,text,*|*,remediation,*) "${pip[@]}" torch ;;
esac
"${pip[@]}" --editable ".[${extras}]"
echo "$wanted" > "$stamp"
echo "gate installed in .venv with extras [${extras}]" >&2
