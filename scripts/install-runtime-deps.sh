#!/usr/bin/env bash
# Installs only what bloom-server and bloom-cli need at run time (scripts/runtime-packages.txt):
# the container image's runtime stage uses it.
set -euo pipefail
list="$(dirname "$0")/runtime-packages.txt"
mapfile -t packages < <(grep -v '^#' "$list" | grep -v '^$')
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
