#!/usr/bin/env bash
# Installs Knot DNS (knotd) from Debian's packages when it is missing: the authoritative
# DNS server the tests run on a loopback port (internal/harness/dns.go), to which
# external-dns's RFC 2136 provider writes through TSIG-signed dynamic updates. Knot
# rather than BIND: one small package, and a configuration a test writes in a few lines.
# The tests run knotd themselves, from a directory of their own; the package's service
# is not used (Debian may start it with its default configuration, which serves no zone).
# Without root or sudo it says what to install and fails.
set -euo pipefail
if [ -x /usr/sbin/knotd ] || command -v knotd >/dev/null 2>&1; then exit 0; fi
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-dns-server: install Debian's knot (no root, no sudo)" >&2; exit 1; }
  sudo_cmd=sudo
fi
echo "install-dns-server: installing knot" >&2
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends knot
