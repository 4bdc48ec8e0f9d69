#!/usr/bin/env bash
# The real-client tests (docs/clients.md): installs the pinned Claude Code, Codex and
# Gemini CLI from npm into target/clients/ (one `npm install`, reused while the versions
# match), builds the cutpoint CLI (release), and runs tests/clients/harness.py: every real
# Claude Code, Codex and Gemini CLI fixture, every route, resumed by its client against a
# loopback stand-in for the provider API. Rewrites docs/clients.md's results table.
# Then builds cutpoint-proxy (dev profile; CI has built its dependencies for its tests
# already) and runs tests/clients/proxy_clients.py: every Claude Code and Codex fixture's
# original file resumed directly, through the proxy in check mode and in compact mode
# (docs/proxy.md's "Real clients through the proxy" table, rewritten too).
# Needs a Rust toolchain, Python 3.9+ and Node.js with npm (the npm registry reachable).
# Exits non-zero on any unexpected failure, on a known failure that now passes, and when a
# client cannot be installed. Arguments go to the harness (e.g. --only codex__, --keep).
# CLIENTS_JOBS (default 2) sets how many clients run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
# Absolute paths: each client runs in a temporary project folder of its own.
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
clients_dir=${CLIENTS_DIR:-$target/clients}
mkdir -p "$clients_dir"
clients_dir=$(cd "$clients_dir" && pwd)
python=${PYTHON:-python3}
for tool in node npm "$python" cargo; do
  command -v "$tool" >/dev/null || { echo "clients.sh: $tool is not on PATH (needs Rust, Python and Node.js with npm)" >&2; exit 2; }
done
echo "== the request checkers fail on what they exist to catch (tests/clients/test_checks.py)"
PYTHONDONTWRITEBYTECODE=1 "$python" -m unittest discover -s tests/clients -p 'test_*.py'
echo; echo "== cargo build --release -p cutpoint-cli"
cargo build --release -p cutpoint-cli
echo; echo "== cargo build -p cutpoint-proxy"
cargo build -p cutpoint-proxy
echo; echo "== tests/clients/harness.py ($((SECONDS - start))s; node $(node --version), npm $(npm --version))"
"$python" tests/clients/harness.py --cutpoint "$target/release/cutpoint" \
  --clients-dir "$clients_dir" --jobs "${CLIENTS_JOBS:-2}" "$@"
proxy_start=$SECONDS
echo; echo "== tests/clients/proxy_clients.py (the real clients through cutpoint-proxy)"
# Only the harness's --only takes the proxy part along; its other options are the harness's.
only=()
for ((i = 1; i <= $#; i++)); do
  if [[ ${!i} == --only ]]; then j=$((i + 1)); only=(--only "${!j}"); fi
  if [[ ${!i} == --only=* ]]; then only=(--only "${!i#--only=}"); fi
done
"$python" tests/clients/proxy_clients.py --proxy "$target/debug/cutpoint-proxy" --cutpoint "$target/release/cutpoint" \
  --clients-dir "$clients_dir" --jobs "${CLIENTS_JOBS:-2}" ${only[@]+"${only[@]}"}
echo "the proxy part took $((SECONDS - proxy_start))s"
echo; echo "clients.sh passed in $((SECONDS - start))s"
