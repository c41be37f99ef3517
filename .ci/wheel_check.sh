#!/usr/bin/env bash
# The wheel, as users install it (issue 48): `python -m build` makes the sdist and, from the sdist,
# the wheel; the wheel (not editable) goes into a fresh venv outside the checkout, which then runs
# the README's first example, `check --format json`, `why`, `plan`, `run --device cpu`,
# `--version` and `rules init` on a copy of facts/megatron-mlp-tp2, with nothing of the
# repository on its path. Called by .ci/run; about a minute, most of it pip installing the
# dependencies into the fresh venv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
"${PYTHON:-.venv/bin/python}" -m build -q --outdir "$work/dist" . >/dev/null  # PYTHON: one with `build`
python3 -m venv "$work/venv" && "$work/venv/bin/pip" install -q "$work"/dist/tprules-*.whl
mkdir "$work/facts" && cp -r facts/megatron-mlp-tp2 "$work/facts/"
cd "$work"
unset PYTHONPATH
export TPRULES_CACHE_DIR="$work/cache"
t="$work/venv/bin/tprules"
# Each output to a file first, then looked at (a grep that stops reading early would break the pipe).
$t --version > version.txt && cat version.txt
grep -q "^default rules: $work/venv/.*/tprules/defaults/rules (packaged with tprules)$" version.txt
# The README's first example, verbatim; its summary line is the README's transcript's.
$t check facts/megatron-mlp-tp2 > check.txt && tail -n 1 check.txt && grep -qxF "$(tail -n 1 check.txt)" "$root/README.md"
$t check facts/megatron-mlp-tp2 --format json > check.json
"$work/venv/bin/python" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert [f["fusion"] for f in d["fusions"]
    if f["legal"]] == ["bias_residual", "gelu_mm2_1", "mm1_gelu_0"], d' check.json
$t why facts/megatron-mlp-tp2 'legal("gelu_0_1")' > why.txt && grep -q 'refused("gelu_0_1", "spans_chips")' why.txt
$t plan facts/megatron-mlp-tp2 --format json > plan.json && grep -q '"place": "collective"' plan.json
$t run facts/megatron-mlp-tp2 --device cpu > run.txt && grep -q "the output matches the reference" run.txt
$t rules init my-rules > init.txt && TPRULES_RULES=my-rules $t check facts/megatron-mlp-tp2 > mine.txt
grep -q "rules my-rules$" mine.txt
echo "wheel check: ok ($(basename "$work"/dist/*.whl), $((SECONDS - start)) s)"
