package gcp

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// SetMemoryLimit gives the Go runtime a soft memory limit of 80% of the
// container's (Cloud Run exposes it as the cgroup's memory.max), so garbage
// collection works harder before the instance is killed for exceeding its
// memory, rather than letting the heap double between collections. An
// explicit GOMEMLIMIT wins. It returns the limit set, or 0.
func SetMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n > 1<<50 { // "max" or an unlimited sentinel
			continue
		}
		limit := n / 10 * 8
		debug.SetMemoryLimit(limit)
		return limit
	}
	return 0
}
