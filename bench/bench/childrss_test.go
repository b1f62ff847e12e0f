package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
)

// childMiBEnv makes the test binary a child for childRunner: it touches
// that many MiB, prints an empty JSON object and exits.
const childMiBEnv = "DSDELTA_BENCH_TEST_CHILD_MIB"

func TestMain(m *testing.M) {
	if v, ok := os.LookupEnv(childMiBEnv); ok {
		mib, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		b := touch(mib)
		fmt.Println("{}")
		runtime.KeepAlive(b)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// touch allocates mib MiB and writes every page, so they are resident.
func touch(mib int) []byte {
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

func TestChildMaxRSS(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		maxRSS, driver, want int64
	}{
		{"a maxrss below the driver's mark may be the driver's", 1_310_720, 1_400_000, 0},
		{"a maxrss equal to the driver's mark is the driver's", 1_310_720, 1_310_720, 0},
		{"a maxrss above the driver's mark is the child's", 450_000, 60_000, 450_000},
		{"no driver mark known: the maxrss stands", 450_000, 0, 450_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := childMaxRSS(tc.maxRSS, tc.driver); got != tc.want {
				t.Errorf("childMaxRSS(%d, %d) = %d, want %d", tc.maxRSS, tc.driver, got, tc.want)
			}
		})
	}
}

// runTestChild runs this test binary as a child that touches mib MiB and
// returns the peak RSS childRunner reports for it.
func runTestChild(t *testing.T, mib int) int64 {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(childMiBEnv, strconv.Itoa(mib))
	var out struct{}
	maxRSS, err := childRunner{exe: exe}.run(context.Background(), nil, "", "", &out)
	if err != nil {
		t.Fatalf("run child: %v", err)
	}
	return maxRSS
}

// The backfill's peak was reported as 1280 MiB for a child whose own
// high-water mark was 375 MiB: the figure was the driver's, which had run
// DuckDB's merges.
func TestChildPeakLeavesOutTheDriversMemory(t *testing.T) {
	if _, err := mergebench.PeakRSSKiB(); err != nil {
		t.Skip(err)
	}
	const driverMiB, childMiB = 256, 16
	b := touch(driverMiB)
	got := runTestChild(t, childMiB)
	runtime.KeepAlive(b)
	if got >= driverMiB<<10 {
		t.Errorf("a child touching %d MiB, started by a driver holding %d MiB: peak %d MiB, want the child's, below %d MiB", childMiB, driverMiB, got>>10, driverMiB)
	}
}

func TestChildPeakCountsAChildAboveTheDriver(t *testing.T) {
	if _, err := mergebench.PeakRSSKiB(); err != nil {
		t.Skip(err)
	}
	// The driver's mark as low as it gets, so the child's can exceed it.
	debug.FreeOSMemory()
	mergebench.ResetPeakRSS()
	driver, _ := mergebench.PeakRSSKiB()
	const childMiB = 192
	if driver >= childMiB<<10 {
		t.Skipf("this process holds %d MiB; a %d MiB child would not exceed it", driver>>10, childMiB)
	}
	if got := runTestChild(t, childMiB); got < childMiB<<10 {
		t.Errorf("a child touching %d MiB above a driver of %d MiB: peak %d KiB, want at least %d MiB", childMiB, driver>>10, got, childMiB)
	}
}

// The children run with the collector settings the bench gives them, not
// the driver's.
func TestChildEnvSetsTheCollectorAsTheBenchSays(t *testing.T) {
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	c := childRunner{}.withEnv("GOMEMLIMIT=409MiB")
	var got []string
	for _, kv := range childEnv(c.env) {
		if strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			got = append(got, kv)
		}
	}
	if len(got) != 1 || got[0] != "GOMEMLIMIT=409MiB" {
		t.Errorf("collector settings in the child's environment: %q, want only GOMEMLIMIT=409MiB", got)
	}
	if slices.ContainsFunc(childEnv(nil), func(kv string) bool {
		return strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=")
	}) {
		t.Errorf("a child at the runtime's defaults gets the driver's GOGC or GOMEMLIMIT")
	}
}
