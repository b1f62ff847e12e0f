#!/usr/bin/env bash
# Runs every Fuzz target in the module briefly (default 5s each). go test
# -fuzz takes one target and one package at a time, hence the loop. Seed
# corpora of every target also run as plain tests in `go test ./...`.
set -euo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
# Targets not fuzzed in CI, space-separated and space-padded, with the
# reason next to each (their seeds still run as tests). None at present.
skip=" "
found=0
# A target must execute at least this many inputs in its $fuzztime: one
# that stalls tests nothing. Healthy targets execute thousands in 5s on a
# loaded 2-core machine, a stalled one a few dozen.
minexecs=${FUZZ_MIN_EXECS:-500}
# fuzz_once fuzzes one target for $fuzztime, its output in
# /tmp/dsdelta-fuzz.log; timeout guards against a target hanging on one
# input. Go minimises every input that finds new coverage, and its
# minimisation is quadratic in the input's length: on the data-file
# targets, whose inputs are whole files of 10-30 KB, it runs to its limit
# each time, and with a limit in time (60s by default) both workers spend
# the run minimising, not fuzzing. A limit in executions keeps it short.
fuzz_once() {
  timeout 180 go test -run '^$' -fuzz "^${2}\$" -fuzztime "$fuzztime" -fuzzminimizetime 100x "$1" >/tmp/dsdelta-fuzz.log 2>&1
}
# execs prints how many inputs the run in /tmp/dsdelta-fuzz.log executed,
# from go's last "fuzz: elapsed: ..., execs: N (...)" line; or, when the
# run's time went by while go ran the inputs cached by earlier fuzzing
# (its "gathering baseline coverage: N/M" lines: a large cache takes
# longer than $fuzztime on a loaded machine), how many of those it ran.
# It prints nothing when the log has neither.
execs() {
  local n
  n=$(grep -oE '^fuzz: elapsed: [0-9]+s, execs: [0-9]+' /tmp/dsdelta-fuzz.log | tail -n 1 | sed -E 's/.*execs: //' || true)
  if [[ -z "$n" ]]; then
    n=$(grep -oE 'gathering baseline coverage: [0-9]+/' /tmp/dsdelta-fuzz.log | tail -n 1 | sed -E 's/.*: ([0-9]+)\//\1/' || true)
  fi
  echo "$n"
}
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    if [[ "$skip" == *" $target "* ]]; then
      echo "fuzz $pkg $target: skipped (see scripts/fuzz.sh)"
      continue
    fi
    found=$((found + 1))
    echo "fuzz $pkg $target for $fuzztime"
    if ! fuzz_once "$pkg" "$target"; then
      # Go 1.26's fuzz coordinator can report "context deadline exceeded"
      # when -fuzztime ends while a worker is mid-input (go.dev/issue/75804,
      # fixed in Go 1.27): no input failed and none was written. Such a run
      # is retried, twice at most; any other failure fails CI at once.
      retried=0
      passed=false
      while [[ $retried -lt 2 ]] && grep -q 'context deadline exceeded' /tmp/dsdelta-fuzz.log && ! grep -q 'Failing input written' /tmp/dsdelta-fuzz.log; do
        retried=$((retried + 1))
        echo "fuzz $target: fuzz-time deadline race of the Go toolchain (no failing input); retry $retried"
        if fuzz_once "$pkg" "$target"; then
          passed=true
          break
        fi
      done
      if ! $passed; then
        cat /tmp/dsdelta-fuzz.log
        echo "fuzz $target failed (or hung)"
        exit 1
      fi
    fi
    n=$(execs)
    if [[ -z "$n" || "$n" -lt "$minexecs" ]]; then
      cat /tmp/dsdelta-fuzz.log
      echo "fuzz $pkg $target: executed ${n:-no} inputs in $fuzztime, fewer than the $minexecs a target must (it stalls: see fuzz_once in scripts/fuzz.sh)"
      exit 1
    fi
    echo "fuzz $pkg $target: $n execs"
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz' shared cmd functions 2>/dev/null | sort || true)
echo "fuzzed $found targets"
