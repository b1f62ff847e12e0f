package mergebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
)

// ChildResult is what a merge child process reports on stdout.
type ChildResult struct {
	Millis       float64 `json:"ms"`
	PeakKiB      int64   `json:"peak_kib"`
	StartKiB     int64   `json:"start_kib"`
	BeforeKiB    int64   `json:"before_kib"`
	FilesRead    int     `json:"files_read"`
	Rewritten    int     `json:"files_rewritten"`
	Inserted     int64   `json:"inserted"`
	Updated      int64   `json:"updated"`
	Deleted      int64   `json:"deleted"`
	StateVersion int64   `json:"state_version"`
	// Row groups of the rewritten files copied verbatim and re-encoded, and
	// the rows re-encoded.
	RowGroupsCopied  int   `json:"row_groups_copied"`
	RowGroupsDecoded int   `json:"row_groups_reencoded"`
	RowsReencoded    int64 `json:"rows_reencoded"`
	// DeletionVectors counts the state files given a deletion vector
	// (mode ModeRandomDV) instead of a rewrite.
	DeletionVectors int `json:"deletion_vectors"`
}

// ModeRandomDV is the random batch merged with deletion vectors on: the
// changed rows are marked in vectors rather than their files rewritten.
const ModeRandomDV = "random-dv"

// RunChild applies the benchmark batch for a table of rows to the tables
// in dir and prints a ChildResult as JSON on stdout: the merge's time and
// this process's own peak RSS, so the figure is the merge's and not the
// benchmark driver's. The profiles are written when their paths are set.
//
// tableMode is the table mode of the table in dir (cdc.Mode; "" is mode
// current).
func RunChild(ctx context.Context, dir string, rows int64, mode, tableMode, cpuProfile, heapProfile string) error {
	startKiB, _ := ProcField("/proc/self/status", "VmRSS")
	b, err := BuildBatch(PlanBatch(rows, mode))
	if err != nil {
		return err
	}
	tabs, err := TableDirs{Root: dir}.TableSet()
	if err != nil {
		return err
	}
	before, _ := PeakRSSKiB()
	stopProfiles, err := Profile(cpuProfile, heapProfile)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := cdc.Apply(ctx, tabs, 1, b, cdc.Options{TargetFileBytes: TargetFileBytes, DeletionVectors: mode == ModeRandomDV, Mode: cdc.Mode(tableMode)})
	elapsed := time.Since(start)
	if perr := stopProfiles(); perr != nil {
		return perr
	}
	if err != nil {
		return fmt.Errorf("merge into %d rows: %w", rows, err)
	}
	peak, err := PeakRSSKiB()
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(ChildResult{
		Millis: float64(elapsed.Microseconds()) / 1000, PeakKiB: peak, StartKiB: startKiB, BeforeKiB: before,
		FilesRead: res.FilesRead, Rewritten: res.FilesRewritten,
		Inserted: res.Inserted, Updated: res.Updated, Deleted: res.Deleted, StateVersion: res.StateVersion,
		RowGroupsCopied: res.RowGroupsCopied, RowGroupsDecoded: res.RowGroupsDecoded, RowsReencoded: res.RowsReencoded,
		DeletionVectors: res.DeletionVectors,
	})
}

// Profile starts a CPU profile into cpuPath and watches the heap for
// heapPath, each when its path is set; stop ends both and writes the heap
// profile.
func Profile(cpuPath, heapPath string) (stop func() error, err error) {
	var cpu *os.File
	if cpuPath != "" {
		if cpu, err = os.Create(cpuPath); err != nil {
			return nil, fmt.Errorf("create cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("start cpu profile: %w", err)
		}
	}
	var heap *heapAtPeak
	if heapPath != "" {
		heap = watchHeap()
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return fmt.Errorf("close cpu profile: %w", err)
			}
		}
		if heap != nil {
			return heap.stop(heapPath)
		}
		return nil
	}, nil
}

// heapAtPeak keeps the heap profile taken when the process's RSS was
// highest: a heap profile at the end of a merge shows what is left, not
// what made the peak.
type heapAtPeak struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	best []byte
	rss  int64
}

func watchHeap() *heapAtPeak {
	h := &heapAtPeak{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
			}
			rss, ok := ProcField("/proc/self/status", "VmRSS")
			if !ok || rss <= h.rss+h.rss/20 {
				continue
			}
			var buf bytes.Buffer
			runtime.GC() // the heap profile reflects the last GC
			if err := pprof.Lookup("heap").WriteTo(&buf, 0); err == nil {
				h.mu.Lock()
				h.best, h.rss = buf.Bytes(), rss
				h.mu.Unlock()
			}
		}
	}()
	return h
}

func (h *heapAtPeak) stop(path string) error {
	close(h.done)
	h.wg.Wait()
	if err := os.WriteFile(path, h.best, 0o644); err != nil {
		return fmt.Errorf("write heap profile: %w", err)
	}
	return nil
}
