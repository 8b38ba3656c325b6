#!/usr/bin/env bash
# Installs kcat, which tests/integration/test_old_clients.py runs as an old client (Debian's
# kcat 1.7.1, built on librdkafka 2.0.2). Idempotent: does nothing when `kcat` is on the PATH.
# Needs root and apt-get (Debian/Ubuntu); anywhere else it says how to install kcat and exits 0,
# so that `make test` still runs: the kcat tests then fail with the same instructions.
set -euo pipefail

if command -v kcat >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "kcat is missing: install it as root with 'apt-get install -y kcat'" \
         "(or your system's kcat/kafkacat package); the kcat tests fail until it is there" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq kcat >/dev/null
echo "installed $(command -v kcat)"
