#!/usr/bin/env bash
# The main job on a fresh machine: makes sure the pipeline sandbox (bubblewrap) is
# installed, then runs `plinth quickstart` (a platform in a temporary directory, a sample
# Promise, a request, and the files it wrote to Git). Extra arguments go to quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "quickstart: installing bubblewrap (the sandbox pipelines run in)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "quickstart: bubblewrap (bwrap) is needed to run pipelines; install it, e.g. 'sudo apt-get install bubblewrap'" >&2
    exit 1
  fi
fi
exec cargo run -p plinth -- quickstart "$@"
