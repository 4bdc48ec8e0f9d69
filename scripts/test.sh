#!/usr/bin/env bash
# The README's test command, and CI's last step: the Rust tests (`cargo test`: the
# library, the CLI, the doctests), then the Python package installed into a fresh
# virtualenv exactly as a user installs it (`pip install ./python`, maturin as the
# PEP 517 backend) and its pytest suite, the LangChain adapter's tests included.
# Needs a Rust toolchain and Python 3.9+ with venv and pip; cargo and pip fetch the
# rest (crates.io, PyPI). PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

echo "== cargo test"
cargo test

python=${PYTHON:-python3}
venv=target/python-test-venv
echo; echo "== a fresh virtualenv ($venv) with $("$python" --version)"
rm -rf "$venv"
"$python" -m venv "$venv"
# pytest for the suite; LangChain so that the adapter's tests run instead of skipping.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "pytest>=7" "langchain>=1,<2" "langchain-core>=1,<2"

echo; echo "== pip install ./python ($((SECONDS - start))s)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check ./python

echo; echo "== pytest python/tests ($((SECONDS - start))s)"
# Run from the repository root, where no `cutpoint` folder shadows the installed
# package. A missing LangChain fails the adapter's tests instead of skipping them.
CUTPOINT_REQUIRE_LANGCHAIN=1 "$venv/bin/python" -m pytest -q python/tests
echo "scripts/test.sh passed in $((SECONDS - start))s"
