package backfillbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/memlimit"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// ChildResult is what the backfill child reports on stdout.
type ChildResult struct {
	StageMillis float64 `json:"stage_ms"`
	MergeMillis float64 `json:"merge_ms"`
	// TotalMillis runs from the listing of the source to the end of the
	// merge, the pause between the phases included.
	TotalMillis float64 `json:"total_ms"`
	// CPU time (user + system) of each phase: over its wall time, how many
	// cores it kept busy.
	StageCPUMillis float64 `json:"stage_cpu_ms"`
	MergeCPUMillis float64 `json:"merge_cpu_ms"`
	Parallel       int     `json:"parallel"` // files staged at once
	Files          int     `json:"files"`
	SourceBytes    int64   `json:"source_bytes"`
	StagedBytes    int64   `json:"staged_bytes"` // staged Parquet written
	Events         int64   `json:"events"`       // staged
	Batches        int     `json:"batches"`
	Inserted       int64   `json:"inserted"`
	Updated        int64   `json:"updated"`
	Stale          int64   `json:"stale"`
	Collapsed      int64   `json:"collapsed"`        // older events of a key within a batch
	StagedRowsRead int64   `json:"staged_rows_read"` // rows of staged parts the merge decoded
	StateRows      int64   `json:"state_rows"`
	HistoryRows    int64   `json:"history_rows"`
	// Resident set sizes (KiB): at start, the highest while staging, the
	// highest while merging (the high-water mark is reset between the
	// phases, after the staging garbage is returned to the system), and
	// the highest of the two.
	StartKiB      int64 `json:"start_kib"`
	StagePeakKiB  int64 `json:"stage_peak_kib"`
	MergeStartKiB int64 `json:"merge_start_kib"`
	MergePeakKiB  int64 `json:"merge_peak_kib"`
	PeakKiB       int64 `json:"peak_kib"`
	// The Go memory limit the run had (0: none), and whether collections
	// waited for the heap to reach it (see memlimit).
	MemLimitMiB    int64 `json:"mem_limit_mib"`
	GCPacedByLimit bool  `json:"gc_paced_by_limit"`

	// With ChildOptions.Maintain: the maintenance run after the merge,
	// its CPU time and its highest RSS (the high-water mark reset when it
	// starts), and what it compacted and left.
	MaintainMillis      float64 `json:"maintain_ms,omitempty"`
	MaintainCPUMillis   float64 `json:"maintain_cpu_ms,omitempty"`
	MaintainPeakKiB     int64   `json:"maintain_peak_kib,omitempty"`
	Compacted           int     `json:"compacted,omitempty"`
	Folded              int     `json:"folded,omitempty"`
	CompactionLeftBytes int64   `json:"compaction_left_bytes,omitempty"`
	// The files of the current state and of the history once the run
	// ended.
	StateFiles   int `json:"state_files"`
	HistoryFiles int `json:"history_files"`
}

// ChildOptions name the folders and the profiles of a child run.
type ChildOptions struct {
	Source, Lake            string
	CPUProfile, HeapProfile string
	Memory                  memlimit.Setting // what the child's memlimit.Apply set
	DeletionVectors         bool             // deletion_vectors: on
	// InOrder stages the files oldest first, as `dsdelta run` and the
	// reconcile hand them over and as their notifications arrive, instead
	// of in name order, which Datastream's names shuffle.
	InOrder bool
	// Maintain runs the table's maintenance (Pipeline.Maintain: compaction
	// within compaction_max_bytes, checkpoints, vacuum, merged staged
	// files deleted) after the merge, as the scheduled compact function
	// would between two rounds of a long load.
	Maintain bool
}

// SingleSource serves every bucket from the source folder, as the embedded
// run (`dsdelta run`) does.
type SingleSource struct{ Store objstore.Store }

func (s SingleSource) Bucket(context.Context, string) (objstore.Store, error) { return s.Store, nil }

// RunChild runs dsdelta's embedded pipeline as `dsdelta run` wires it —
// local object stores for the source and the lake, local coordination in
// the lake, default configuration, files staged NumCPU at a time — over
// every file of the source, then merges the table (no maintenance), and
// prints a ChildResult as JSON on stdout.
func RunChild(ctx context.Context, o ChildOptions) error {
	r, err := run(ctx, o)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func run(ctx context.Context, o ChildOptions) (ChildResult, error) {
	var r ChildResult
	r.MemLimitMiB, r.GCPacedByLimit = o.Memory.Limit>>20, o.Memory.PacedByLimit
	r.StartKiB, _ = mergebench.ProcField("/proc/self/status", "VmRSS")
	source, err := objstore.NewLocal(o.Source)
	if err != nil {
		return r, err
	}
	lake, err := objstore.NewLocal(o.Lake)
	if err != nil {
		return r, err
	}
	c, err := coord.NewLocal(lake, coord.LocalOptions{})
	if err != nil {
		return r, fmt.Errorf("open local coordination in %s: %w", o.Lake, err)
	}
	var cfg config.Config
	if o.DeletionVectors {
		cfg.Defaults.DeletionVectors = config.On
	}
	p := &pipeline.Pipeline{Lake: lake, Sources: SingleSource{source}, Coordination: pipeline.Coordinate(c), Config: cfg,
		Holder: fmt.Sprintf("bench-%d", os.Getpid()), Logger: slog.Default()}
	r.Parallel = runtime.NumCPU()

	stopProfiles, err := mergebench.Profile(o.CPUProfile, o.HeapProfile)
	if err != nil {
		return r, err
	}
	start, startCPU := time.Now(), CPUTime()
	var files []datastream.SourceFile
	err = source.List(ctx, "", "", func(info objstore.Info) error {
		if cfg.IsDataFile(info.Name) {
			files = append(files, datastream.SourceFile{Name: info.Name, Generation: info.Generation, Size: info.Size, Created: info.Updated})
			r.SourceBytes += info.Size
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("list %s: %w", o.Source, err)
	}
	r.Files = len(files)
	if o.InOrder {
		slices.SortStableFunc(files, func(a, b datastream.SourceFile) int { return a.Created.Compare(b.Created) })
	}
	var events atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.Parallel)
	for _, f := range files {
		g.Go(func() error {
			res, err := p.Stage(gctx, f)
			if err != nil {
				return err
			}
			if res.Quarantined != "" || res.Skipped != "" {
				return fmt.Errorf("stage %s: quarantined %q, skipped %q", f.Name, res.Quarantined, res.Skipped)
			}
			events.Add(res.Events)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		_ = stopProfiles()
		return r, err
	}
	r.StageMillis, r.StageCPUMillis = millis(time.Since(start)), millis(CPUTime()-startCPU)
	r.Events = events.Load()
	r.StagePeakKiB, _ = mergebench.PeakRSSKiB()

	// The merge starts with the memory staging left resident, as it does
	// in `dsdelta run` and in a warm merge instance. Returning it to the
	// system first, so that the merge's high-water mark was its own, made
	// the merge fault its whole heap in again (about 95k pages, 8% of its
	// time) inside the measured job; the merge's figure is the process's
	// high-water mark over the merge instead.
	mergebench.ResetPeakRSS()
	r.MergeStartKiB, _ = mergebench.ProcField("/proc/self/status", "VmRSS")
	mergeStart, mergeCPU := time.Now(), CPUTime()
	mr, err := p.MergeTable(ctx, TableID)
	r.MergeMillis, r.MergeCPUMillis = millis(time.Since(mergeStart)), millis(CPUTime()-mergeCPU)
	r.TotalMillis = millis(time.Since(start))
	if perr := stopProfiles(); perr != nil {
		return r, perr
	}
	if err != nil {
		return r, fmt.Errorf("merge %s: %w", TableID, err)
	}
	r.MergePeakKiB, _ = mergebench.PeakRSSKiB()
	r.PeakKiB = max(r.StagePeakKiB, r.MergePeakKiB)
	// Sized before maintenance deletes the merged staged files.
	if r.StagedBytes, err = stagedBytes(o.Lake); err != nil {
		return r, err
	}
	if o.Maintain {
		mergebench.ResetPeakRSS()
		start, startCPU := time.Now(), CPUTime()
		res, err := p.Maintain(ctx, TableID)
		r.MaintainMillis, r.MaintainCPUMillis = millis(time.Since(start)), millis(CPUTime()-startCPU)
		if err != nil {
			return r, fmt.Errorf("maintain %s: %w", TableID, err)
		}
		r.MaintainPeakKiB, _ = mergebench.PeakRSSKiB()
		r.PeakKiB = max(r.PeakKiB, r.MaintainPeakKiB)
		r.Compacted, r.Folded, r.CompactionLeftBytes = res.CompactedFiles, res.DeletionVectorsFolded, res.CompactionLeftBytes
	}
	r.Batches, r.Inserted, r.Updated, r.Stale, r.Collapsed = mr.Batches, mr.Result.Inserted, mr.Result.Updated, mr.Result.Stale, mr.Result.Collapsed
	r.StagedRowsRead = mr.StagedRowsRead
	tabs, err := p.TableSet(TableID)
	if err != nil {
		return r, err
	}
	if r.StateRows, r.StateFiles, err = tableSize(ctx, tabs.State); err != nil {
		return r, err
	}
	if r.HistoryRows, r.HistoryFiles, err = tableSize(ctx, tabs.History); err != nil {
		return r, err
	}
	return r, nil
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// CPUTime is the process's CPU time so far, user and system.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stagedBytes sums the staged Parquet files the run wrote to the lake.
func stagedBytes(lake string) (int64, error) {
	return DirBytes(filepath.Join(lake, "_staging"), ".parquet")
}

// DirBytes sums the sizes of the files under dir whose names end in
// suffix ("": every file).
func DirBytes(dir, suffix string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(p, suffix) {
			info, err := e.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size the files of %s: %w", dir, err)
	}
	return n, nil
}

// tableSize is the rows and the data files of a Delta table's latest
// version.
func tableSize(ctx context.Context, store objstore.Store) (rows int64, files int, err error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", store.URL(), err)
	}
	n, _ := snap.NumRecords()
	return n, snap.NumFiles(), nil
}
