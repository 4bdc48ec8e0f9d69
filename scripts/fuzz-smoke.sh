#!/usr/bin/env bash
# Fuzz smoke for CI: builds the cargo-fuzz targets in fuzz/ and runs each of them
# (tracker_ops, jsonl_reader, compaction, stream_decoders, pipeline, transcripts) for a short while (FUZZ_SMOKE_SECONDS,
# default 30; .ci/run uses 10), seeded from fuzz/seeds/TARGET where there are seeds
# (the compaction seeds are the minimized inputs of a fixed bug). Installs what it needs (a nightly toolchain
# through rustup, cargo-fuzz through cargo); when nightly cannot be had it says so and
# exits 0, since the crate itself builds on stable. A finding fails the script and
# leaves the crashing input under fuzz/artifacts/TARGET/.
#
# The smoke builds without a sanitizer (`-s none`): the crate forbids unsafe code, so
# AddressSanitizer adds build time and little else here. Long runs use the default:
#   cargo +nightly fuzz run tracker_ops -- -max_total_time=600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SMOKE_SECONDS:-30}
targets=(tracker_ops jsonl_reader compaction stream_decoders pipeline transcripts)
skip() { echo "fuzz smoke: SKIPPED: $*"; exit 0; }

command -v rustup >/dev/null || skip "no rustup, so no nightly toolchain (cargo-fuzz needs one)"
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz smoke: installing a nightly toolchain"
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 \
    || skip "a nightly toolchain cannot be installed here"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz smoke: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet || skip "cargo-fuzz cannot be installed here"
fi

echo "fuzz smoke: building ${targets[*]}"
cargo +nightly fuzz build -s none
for target in "${targets[@]}"; do
  corpus=$(mktemp -d)
  seeds=()
  [ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
  echo "fuzz smoke: $target for ${seconds}s"
  # libFuzzer writes new inputs to the first directory only; the seeds stay as they are.
  log=$(mktemp)
  status=0
  cargo +nightly fuzz run -s none "$target" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E '^(Done|stat::number_of_executed_units)' "$log" || true
  if [ "$status" -ne 0 ]; then tail -n 40 "$log"; fi
  rm -f "$log"
  rm -rf "$corpus"
  if [ "$status" -ne 0 ]; then
    echo "fuzz smoke: $target FAILED (exit $status); the input is under fuzz/artifacts/$target/"
    exit 1
  fi
done
echo "fuzz smoke: passed"
