#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test in the workspace, the
# doctests, and the upstream kubectl tests (scripts/kubectl-upstream.sh).
# Extra arguments go to cargo nextest (e.g. `scripts/test.sh -p plinth-apiserver`).
#
# The Kratix corpus (real Kratix YAML, kept outside the repository) is read from
# $PLINTH_CORPUS, or from ../shared/corpus beside the checkout. Without it, the tests
# that need it are reported as ignored (skipped) and everything else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
export PLINTH_TEST_TOOLS="${PLINTH_TEST_TOOLS:-$PWD/target/test-tools}"

corpus="${PLINTH_CORPUS:-../shared/corpus}"
if [ -d "$corpus" ]; then
  echo "test.sh: Kratix corpus found at $(cd "$corpus" && pwd): the corpus tests run"
else
  echo "test.sh: no Kratix corpus at $corpus (set PLINTH_CORPUS to its path):" \
    "the tests that need it are SKIPPED (reported as ignored); all others run"
fi

status=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@" || status=$?
else
  cargo test --workspace --no-fail-fast "$@" || status=$?
fi

# The examples in the libraries' documentation (nextest does not run doctests; about 30 s).
if [ "$#" -eq 0 ]; then
  cargo test --doc --workspace --no-fail-fast || status=$?
fi

# Kubernetes' own kubectl tests against `plinth up` (about two minutes; see COMPATIBILITY.md).
# Read from $PLINTH_KUBECTL_TESTS or ../shared/corpus/kubernetes-kubectl-tests; SKIPPED
# without it. It fails when a function listed in scripts/kubectl-upstream.expected fails.
# Only with the whole workspace: extra arguments select cargo tests.
if [ "$#" -eq 0 ]; then
  cargo build -q -p plinth --bin plinth
  scripts/kubectl-upstream.sh || status=$?
fi
exit "$status"
