#!/usr/bin/env bash
# Runs every Fuzz target in the module for a short time each (default 10s).
# go test -fuzz takes one target and one package at a time, hence the loop.
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
found=0
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    found=$((found + 1))
    echo "fuzz $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/dsdelta-fuzz.log 2>&1 || { cat /tmp/dsdelta-fuzz.log; echo "fuzz $target failed"; exit 1; }
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' shared cmd functions 2>/dev/null || true)
echo "fuzzed $found targets"
