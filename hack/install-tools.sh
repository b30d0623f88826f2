#!/usr/bin/env bash
# Installs, from Debian's packages, the tools some tests run and a fresh machine lacks:
# kubectl (an integration test checks what `kubectl get leases` shows) and promtool
# (config's tests check the alert rules and run their unit tests with it; it comes from
# the prometheus package, taken without its recommends). Does nothing when both are
# there; without root or sudo it says what to install and fails.
set -euo pipefail
pkgs=()
command -v kubectl >/dev/null 2>&1 || pkgs+=(kubectl)
command -v promtool >/dev/null 2>&1 || pkgs+=(prometheus)
[ ${#pkgs[@]} -eq 0 ] && exit 0
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-tools: install Debian's ${pkgs[*]} (no root, no sudo)" >&2; exit 1; }
  sudo_cmd=sudo
fi
echo "install-tools: installing ${pkgs[*]}" >&2
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
