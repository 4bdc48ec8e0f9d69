#!/usr/bin/env bash
# Proves the model tests can fail: builds the tracker with one legality rule switched
# off (`--cfg cutpoint_mutant`, never set in normal builds, with the rule named by
# CUTPOINT_MUTANT at compile time: one RUSTFLAGS for every mutant, so the dependencies
# are built once and only cutpoint is rebuilt per mutant) and expects the model tests
# (`tests/model.rs`, a test binary of its own so that only it and the library are built
# here, not the `it` binary's forty modules) to catch each mutant. Exits non-zero if a
# mutant survives.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for mutant in ignore_pending ignore_orphan; do
  log=$(mktemp)
  # RUSTFLAGS rebuilds every dependency, so build unoptimized (the first failing case
  # ends the run; speed of the tests does not matter here, compile time does).
  if RUSTFLAGS="--cfg cutpoint_mutant" CUTPOINT_MUTANT=$mutant CARGO_TARGET_DIR=target/mutants \
      CARGO_PROFILE_TEST_OPT_LEVEL=0 CARGO_PROFILE_DEV_OPT_LEVEL=0 \
      cargo test --quiet -p cutpoint --test model >"$log" 2>&1; then
    echo "mutant $mutant SURVIVED: the model tests did not notice rule $mutant switched off"
    status=1
  elif grep -q "test result: FAILED" "$log"; then
    echo "mutant $mutant killed: $(grep -m1 -E 'panicked at|minimal failing input' "$log")"
  else
    echo "mutant $mutant: the build failed instead of the tests:"; tail -20 "$log"; status=1
  fi
  rm -f "$log"
done
exit $status
