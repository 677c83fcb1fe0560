#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test in the workspace.
# Extra arguments go to cargo nextest (e.g. `scripts/test.sh -p plinth-apiserver`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
export PLINTH_TEST_TOOLS="${PLINTH_TEST_TOOLS:-$PWD/target/test-tools}"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
