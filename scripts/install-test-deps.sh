#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine that has only the
# Rust toolchain: Debian packages (sshd + git-shell for the SSH git server,
# bubblewrap for the pipeline sandbox, chromium for the web view test, redis-server and
# nats-server for the health stream tests) and an S3-compatible server (moto, from PyPI).
# Idempotent: a second run only checks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools="${PLINTH_TEST_TOOLS:-$here/../target/test-tools}"
mkdir -p "$tools"

need_apt=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# kubectl comes with the machine image (Debian has no package for it); the tests that
# drive it say so visibly when it is absent.
# Job runner engine tests: podman with runc (crun fails on this hybrid-cgroup host) and a
# static busybox to build a local test image without a registry.
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || need_apt+=(runc)
[ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || need_apt+=(busybox-static)
# HTTPS git server (git-http-backend behind lighttpd with basic auth and TLS).
command -v lighttpd >/dev/null 2>&1 || [ -x /usr/sbin/lighttpd ] || need_apt+=(lighttpd)
[ -e /usr/lib/lighttpd/mod_openssl.so ] || need_apt+=(lighttpd-mod-openssl)
# Stream transports of the health records (crates/plinth-controllers/tests/health_streams.rs):
# a Redis server and a NATS server (run with -js for JetStream).
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need_apt+=(nats-server)
# Headless browser for the web view test (crates/plinth/tests/web_view.rs).
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "install-test-deps: apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install-test-deps: missing ${need_apt[*]} and not root; tests that need them will say so" >&2
  fi
fi

# SSH git server for the Git writer tests: a user whose login shell is git-shell
# (crates/plinth-statestore/tests/support). useradd leaves the account locked ('!'),
# which sshd refuses, hence the usermod.
if [ "$(id -u)" = 0 ] && ! id plinth-git >/dev/null 2>&1; then
  git_shell=$(command -v git-shell || echo /usr/bin/git-shell)
  echo "install-test-deps: creating user plinth-git (shell $git_shell)"
  useradd -r -M -d /nonexistent -s "$git_shell" plinth-git
  usermod -p '*' plinth-git
fi

# S3-compatible server for the bucket writer tests.
if [ ! -x "$tools/venv/bin/moto_server" ]; then
  echo "install-test-deps: installing moto[server] into $tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q 'moto[server]==5.*'
fi
# Azure Blob Storage emulator for the HealthSource reader tests (npm).
if ! command -v azurite-blob >/dev/null 2>&1; then
  if command -v npm >/dev/null 2>&1; then
    echo "install-test-deps: npm install -g azurite"
    npm install -g --silent azurite
  else
    echo "install-test-deps: npm missing; the Azure Blob tests will say SKIPPED" >&2
  fi
fi
echo "install-test-deps: ok ($tools)"
