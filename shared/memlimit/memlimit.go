// Package memlimit sets the Go runtime's memory limit and the pace of its
// collections from the memory a process is given.
//
// A dsdelta process (a function instance, or an embedded run given a
// budget) has its memory to itself: Cloud Run reserves an instance's
// memory whatever it holds, and a run given GOMEMLIMIT was told what it
// may use. Collecting each time the heap doubles (GOGC=100) then spends
// CPU to keep memory free that nothing else would take: a bulk load's
// collections cost about a tenth of its CPU that way. Once a limit is in
// force, the collector runs when the heap reaches the limit instead
// (GOGC=off): it marks the same live heap, far less often, and the limit
// still holds the process under its memory. That is done for a limit the
// process is given (GOMEMLIMIT, which terraform sets for every function);
// a container's own limit is applied as a limit only, and without either
// the runtime's defaults stay.
package memlimit

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Setting is what Apply found and set.
type Setting struct {
	// Limit is the soft memory limit in force, in bytes (0: none).
	Limit int64
	// From says where the limit came from: "GOMEMLIMIT", "cgroup", or ""
	// without one.
	From string
	// PacedByLimit says that collections wait for the heap to reach the
	// limit (GOGC off): the limit came from GOMEMLIMIT and GOGC is unset.
	PacedByLimit bool
}

// limitOfContainer is the limit for a container of n bytes: four fifths,
// as terraform sets GOMEMLIMIT, leaving the rest to what the limit does
// not count (the binary, memory the runtime has not yet returned).
func limitOfContainer(n int64) int64 { return n / 5 * 4 }

// cgroupFiles hold the container's memory limit (cgroup v2, then v1).
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Apply sets the limit and the pace: GOMEMLIMIT when the environment sets
// it (the runtime has already applied it), else four fifths of the
// container's memory when the process runs in a cgroup with a limit; and,
// when GOMEMLIMIT sets the limit and GOGC is not set, collections paced by
// it. Call it once, from main or a function's first event: it changes the
// whole process's collector.
func Apply() Setting {
	s := decide(os.Getenv, os.ReadFile, debug.SetMemoryLimit(-1))
	if s.From == "cgroup" {
		debug.SetMemoryLimit(s.Limit)
	}
	if s.PacedByLimit {
		debug.SetGCPercent(-1)
	}
	return s
}

// decide is Apply's choice, given the environment, a file reader and the
// runtime's current limit (math.MaxInt64 when none is set).
func decide(getenv func(string) string, readFile func(string) ([]byte, error), current int64) Setting {
	var s Setting
	switch {
	case getenv("GOMEMLIMIT") != "" && current != math.MaxInt64:
		s.Limit, s.From = current, "GOMEMLIMIT"
	case getenv("GOMEMLIMIT") == "":
		if n := containerMemory(readFile); n > 0 {
			s.Limit, s.From = limitOfContainer(n), "cgroup"
		}
	}
	// "GOMEMLIMIT=off" (or another value the runtime took as no limit)
	// sets none: the defaults stay. A limit read from the cgroup is not
	// one the process was given: a container may hold other processes
	// (the emulator stack runs every function in one), which a heap grown
	// to four fifths of it would starve; its collections keep their pace.
	s.PacedByLimit = s.From == "GOMEMLIMIT" && getenv("GOGC") == ""
	return s
}

// containerMemory is the cgroup's memory limit in bytes, or 0 when there
// is none (no file, "max", or an unlimited sentinel).
func containerMemory(readFile func(string) ([]byte, error)) int64 {
	for _, f := range cgroupFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n > 1<<50 {
			continue
		}
		return n
	}
	return 0
}
