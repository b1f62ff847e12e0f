package main

import (
	"fmt"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
)

// machine describes the host the benchmark ran on.
type machine struct {
	CPUModel string
	Cores    int
	MemGiB   float64
	Kernel   string
}

func describeMachine() machine {
	m := machine{Cores: runtime.NumCPU(), CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if kib, ok := mergebench.ProcField("/proc/meminfo", "MemTotal"); ok {
		m.MemGiB = float64(kib) / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func startCPUProfile(w io.Writer) error {
	if err := pprof.StartCPUProfile(w); err != nil {
		return fmt.Errorf("start cpu profile: %w", err)
	}
	return nil
}

func stopCPUProfile() { pprof.StopCPUProfile() }
