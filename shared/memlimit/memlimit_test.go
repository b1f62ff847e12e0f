package memlimit

import (
	"io/fs"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestDecide(t *testing.T) {
	const mib = 1 << 20
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if s, ok := m[name]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	v2, v1 := cgroupFiles[0], cgroupFiles[1]
	for _, tc := range []struct {
		name    string
		env     map[string]string
		files   map[string]string
		current int64
		want    Setting
	}{
		{"GOMEMLIMIT given", map[string]string{"GOMEMLIMIT": "409MiB"}, map[string]string{v2: "536870912\n"}, 409 * mib,
			Setting{Limit: 409 * mib, From: "GOMEMLIMIT", PacedByLimit: true}},
		{"GOGC given keeps its pace", map[string]string{"GOMEMLIMIT": "409MiB", "GOGC": "100"}, nil, 409 * mib,
			Setting{Limit: 409 * mib, From: "GOMEMLIMIT"}},
		{"GOMEMLIMIT=off", map[string]string{"GOMEMLIMIT": "off"}, map[string]string{v2: "536870912\n"}, math.MaxInt64,
			Setting{}},
		{"cgroup v2", nil, map[string]string{v2: "536870912\n"}, math.MaxInt64,
			Setting{Limit: 536870912 / 5 * 4, From: "cgroup"}},
		{"cgroup v2 without a limit, v1 with one", nil, map[string]string{v2: "max\n", v1: "1073741824"}, math.MaxInt64,
			Setting{Limit: 1073741824 / 5 * 4, From: "cgroup"}},
		{"cgroup v1 unlimited", nil, map[string]string{v1: "9223372036854771712\n"}, math.MaxInt64, Setting{}},
		{"no container", nil, nil, math.MaxInt64, Setting{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(func(k string) string { return tc.env[k] }, files(tc.files), tc.current)
			if got != tc.want {
				t.Errorf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestApplyPacesCollectionsByTheLimit: a process given a limit collects
// when its heap reaches it, not each time the heap doubles, and stays
// under it.
func TestApplyPacesCollectionsByTheLimit(t *testing.T) {
	// A limit far above the heap the process keeps live (8 MiB here, and
	// 20-odd MiB with what earlier tests of the process left): a collection
	// paced by the limit frees the limit less that heap, one paced by
	// doubling about that heap, and at 96 MiB the two ratios came within a
	// collection of each other (6 against 17 in one of 20 runs).
	const limit = 192 << 20
	startWith(t, "192MiB", limit) // as the runtime starts with GOMEMLIMIT

	// Collections over 400 MiB of garbage with 8 MiB live, GOGC=100.
	churn := func() (gcs uint32, peak uint64) {
		live := make([][]byte, 8)
		for i := range live {
			live[i] = make([]byte, 1<<20)
		}
		var before, ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range 400 * 4 {
			b := make([]byte, 256<<10)
			b[0] = byte(i)
			if i%64 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		}
		runtime.ReadMemStats(&ms)
		runtime.KeepAlive(live)
		return ms.NumGC - before.NumGC, peak
	}
	byDoubling, _ := churn()

	s := Apply()
	if s.Limit != limit || s.From != "GOMEMLIMIT" || !s.PacedByLimit {
		t.Fatalf("Apply = %+v, want the 192 MiB limit from GOMEMLIMIT, paced by it", s)
	}
	if pct := debug.SetGCPercent(-1); pct != -1 {
		t.Errorf("GOGC after Apply = %d, want off", pct)
	}
	byLimit, peak := churn()
	t.Logf("collections over 400 MiB of garbage: %d doubling the heap, %d paced by the limit; peak heap %d MiB", byDoubling, byLimit, peak>>20)
	if byLimit*3 > byDoubling {
		t.Errorf("%d collections paced by the limit, want under a third of the %d when the heap doubles", byLimit, byDoubling)
	}
	if peak > limit {
		t.Errorf("heap reached %d MiB, over the %d MiB limit", peak>>20, limit>>20)
	}
}

func TestApplyWithoutLimitKeepsTheDefaults(t *testing.T) {
	startWith(t, "off", math.MaxInt64)
	if s := Apply(); s != (Setting{}) {
		t.Errorf("Apply = %+v, want no limit", s)
	}
	if pct := debug.SetGCPercent(100); pct != 100 {
		t.Errorf("GOGC after Apply = %d, want 100", pct)
	}
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		t.Errorf("limit after Apply = %d, want none", lim)
	}
}

// startWith sets the collector as the runtime sets it for GOMEMLIMIT=env
// (limit) and no GOGC, and puts the test process's own settings back when
// the test ends.
func startWith(t *testing.T, env string, limit int64) {
	restoreLimit := debug.SetMemoryLimit(limit)
	restorePct := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(restoreLimit)
		debug.SetGCPercent(restorePct)
	})
	t.Setenv("GOMEMLIMIT", env)
	t.Setenv("GOGC", "")
}
