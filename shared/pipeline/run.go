package pipeline

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// RunOptions configures one RunOnce pass of an embedded run.
type RunOptions struct {
	// Source is the Datastream output to stage, listed whole; its files
	// are named relative to it, in the empty bucket.
	Source objstore.Store
	// Parallel bounds the files staged at once (1 when < 1).
	Parallel int
	// Progress is told, one call at a time, after each file staged (nil:
	// nobody).
	Progress func(StageProgress)
	// Busy is told the status of a table whose lease another process holds,
	// each time the pass finds it so (nil: nobody).
	Busy func(st coord.TableStatus)
	// Wait makes the pass wait for busy tables, trying them again every
	// Poll (a second when 0), instead of leaving their files pending.
	Wait bool
	Poll time.Duration
	// mergeBudget bounds each table's merge (0: the pipeline's
	// MergeBudget): Watch's, so that a table taking files without pause
	// is still maintained.
	mergeBudget time.Duration
}

// budget is the bound of one table's merge in a pass run with o.
func (p *Pipeline) budget(o RunOptions) time.Duration {
	if o.mergeBudget > 0 && (p.MergeBudget <= 0 || o.mergeBudget < p.MergeBudget) {
		return o.mergeBudget
	}
	return p.MergeBudget
}

// StageProgress is how far a pass's staging is.
type StageProgress struct {
	Done, Total int           // files
	Elapsed     time.Duration // since staging started
}

// TableRun counts what one pass did to a table and the versions its Delta
// tables have after it.
type TableRun struct {
	StagedFiles, StagedEvents int64 // staged by this pass
	MergedFiles, MergedEvents int64 // merged by this pass, whoever staged them
	// Inserted, Updated and Deleted count keys of the current-state table,
	// Stale the events ignored as older than the stored row.
	Inserted, Updated, Deleted, Stale int64
	// StateVersion and HistoryVersion are -1 when unknown (no table yet,
	// or the id maps to no table).
	StateVersion, HistoryVersion int64
}

// RunResult is what a RunOnce pass did.
type RunResult struct {
	// Files are the files the pass staged, skipped or quarantined.
	Files []datastream.SourceFile
	// Skipped counts the files staging skipped: empty, holding no events,
	// or of an excluded table. Ignored counts the source's objects that
	// are no data files (by name), which are never staged.
	Skipped, Ignored int
	// Listed is set when the pass listed the source, so Ignored counts
	// what the listing found (a merging pass of Watch lists nothing).
	Listed bool
	// Tables has an entry for every table the pass staged or merged and
	// every table the registry knows.
	Tables map[string]*TableRun
	// Merged are the tables the pass merged and maintained; Busy those
	// whose lease another process still holds (their files stay pending).
	Merged, Busy []string
}

// Add adds another pass's counts to t and takes its versions where known,
// so that a run of several passes (--watch) sums them.
func (t *TableRun) Add(o TableRun) {
	t.StagedFiles += o.StagedFiles
	t.StagedEvents += o.StagedEvents
	t.MergedFiles += o.MergedFiles
	t.MergedEvents += o.MergedEvents
	t.Inserted += o.Inserted
	t.Updated += o.Updated
	t.Deleted += o.Deleted
	t.Stale += o.Stale
	if o.StateVersion >= 0 {
		t.StateVersion = o.StateVersion
	}
	if o.HistoryVersion >= 0 {
		t.HistoryVersion = o.HistoryVersion
	}
}

func (r *RunResult) table(tableID string) *TableRun {
	t := r.Tables[tableID]
	if t == nil {
		t = &TableRun{StateVersion: -1, HistoryVersion: -1}
		r.Tables[tableID] = t
	}
	return t
}

// RunOnce is one pass of an embedded run: it stages every file under the
// source that the registry does not know yet, with bounded parallelism, merges every table with
// pending work, maintains the tables it merged, and reads the versions the
// tables have now. Quarantined files are left to Unmerged.
func (p *Pipeline) RunOnce(ctx context.Context, o RunOptions) (RunResult, error) {
	res := RunResult{Tables: map[string]*TableRun{}}
	if err := p.stageAll(ctx, o, &res); err != nil {
		return res, err
	}
	if err := p.mergePending(ctx, o, &res, nil); err != nil {
		return res, err
	}
	return res, p.readVersions(ctx, &res)
}

// mergePending merges and maintains every table with pending work, in
// table order, and (o.Wait) waits for those whose lease another process
// holds; res.Busy are those still busy. A table merged is then
// maintained by maintain (nil: Maintain).
func (p *Pipeline) mergePending(ctx context.Context, o RunOptions, res *RunResult, maintain func(context.Context, string) error) error {
	statuses, err := p.Status.Statuses(ctx)
	if err != nil {
		return err
	}
	sort.Slice(statuses, func(i, j int) bool { return statuses[i].Table < statuses[j].Table })
	var busy []string
	for _, st := range statuses {
		if st.Pending == 0 && st.OpenBatchSeq == 0 {
			continue
		}
		merged, err := p.runMerge(ctx, st.Table, p.budget(o), res, maintain)
		if err != nil {
			return err
		}
		if !merged {
			busy = append(busy, st.Table)
		}
	}
	res.Busy, err = p.waitFor(ctx, o, busy, res)
	return err
}

// readVersions sets the versions every known table's Delta tables have
// now (maintenance commits too).
func (p *Pipeline) readVersions(ctx context.Context, res *RunResult) error {
	statuses, err := p.Status.Statuses(ctx)
	if err != nil {
		return err
	}
	for _, st := range statuses {
		t := res.table(st.Table)
		tabs, err := p.TableSet(st.Table)
		if err != nil {
			continue // a quarantine record of a file whose table is unknown
		}
		if s, err := delta.Open(tabs.State).Snapshot(ctx); err == nil {
			t.StateVersion = s.Version()
		}
		if s, err := delta.Open(tabs.History).Snapshot(ctx); err == nil {
			t.HistoryVersion = s.Version()
		}
	}
	return nil
}

// stageAll stages the source's files the registry does not know yet,
// o.Parallel at a time. It finds them as the cloud's reconcile does
// (Reconcile, with no grace period and every object looked up), tick after
// tick until a tick finds nothing more.
func (p *Pipeline) stageAll(ctx context.Context, o RunOptions, res *RunResult) error {
	start := time.Now()
	total := 0
	for {
		var found []datastream.SourceFile
		rr, err := p.Reconcile(ctx, ReconcileOptions{
			Sources:  p.Streams(Source{Store: o.Source}),
			Embedded: true,
			Announce: AnnounceFunc(func(_ context.Context, files []datastream.SourceFile) error {
				found = append(found, files...)
				return nil
			}),
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", o.Source.URL(), err)
		}
		res.Ignored, res.Listed = rr.Ignored, true
		if len(found) == 0 {
			return nil
		}
		total += len(found)
		if err := p.stageFound(ctx, o, found, total, start, res); err != nil {
			return err
		}
	}
}

// stageFound stages files a reconcile found, o.Parallel at a time.
func (p *Pipeline) stageFound(ctx context.Context, o RunOptions, files []datastream.SourceFile, total int, start time.Time, res *RunResult) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, o.Parallel))
	for _, f := range files {
		g.Go(func() error {
			sr, err := p.Stage(gctx, f)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			res.Files = append(res.Files, f)
			switch {
			case sr.Skipped != "":
				res.Skipped++
			case sr.Quarantined != "":
				// Left to Unmerged, from the registry.
			case !sr.Duplicate:
				t := res.table(sr.Table)
				t.StagedFiles++
				t.StagedEvents += sr.Events
			}
			if o.Progress != nil {
				o.Progress(StageProgress{Done: len(res.Files), Total: total, Elapsed: time.Since(start)})
			}
			return nil
		})
	}
	return g.Wait()
}

// runMerge merges a table's pending files, for at most budget (0: no
// bound; see MergeTable), and has maintain (nil: Maintain) maintain it.
// It reports false when another process holds the table's lease, so
// nothing was merged.
func (p *Pipeline) runMerge(ctx context.Context, tableID string, budget time.Duration, res *RunResult, maintain func(context.Context, string) error) (bool, error) {
	mr, err := p.mergeTable(ctx, tableID, budget)
	// A busy result may follow batches merged before the lease was lost,
	// and an error batches merged before it (a stop that cuts the lease's
	// release short): both count.
	t := res.table(tableID)
	t.MergedFiles += int64(mr.Files)
	t.MergedEvents += mr.Result.Events
	t.Inserted += mr.Result.Inserted
	t.Updated += mr.Result.Updated
	t.Deleted += mr.Result.Deleted + mr.Result.Buried
	t.Stale += mr.Result.Stale
	if err != nil {
		return false, err
	}
	if mr.Busy {
		return false, nil
	}
	res.Merged = append(res.Merged, tableID)
	if maintain == nil {
		maintain = func(ctx context.Context, tableID string) error {
			_, err := p.Maintain(ctx, tableID)
			return err
		}
	}
	if err := maintain(ctx, tableID); err != nil {
		return false, err
	}
	return true, nil
}

// waitFor tells o.Busy of the tables whose lease another process holds
// and, when o.Wait, merges each once its lease is free; it returns the
// tables still busy. The lease of a process gone from this host is taken
// over by the merge itself, so what is waited for is a live process, or
// one on another host until its lease expires.
func (p *Pipeline) waitFor(ctx context.Context, o RunOptions, busy []string, res *RunResult) ([]string, error) {
	poll := o.Poll
	if poll <= 0 {
		poll = time.Second
	}
	for len(busy) > 0 {
		for _, table := range busy {
			st, err := p.Status.Status(ctx, table)
			if err != nil {
				return busy, fmt.Errorf("lease of %s: %w", table, err)
			}
			if st.LeaseHolder != "" && o.Busy != nil {
				o.Busy(st) // released meanwhile when no holder: the next look merges
			}
		}
		if !o.Wait {
			return busy, nil
		}
		select {
		case <-ctx.Done():
			return busy, ctx.Err()
		case <-time.After(poll):
		}
		var still []string
		for _, table := range busy {
			merged, err := p.runMerge(ctx, table, p.budget(o), res, nil)
			if err != nil {
				return busy, err
			}
			if !merged {
				still = append(still, table)
			}
		}
		busy = still
	}
	return nil, nil
}

// Unmerged are a table's files not merged: pending (staged, or in an open
// batch) and quarantined.
type Unmerged struct {
	Table                string
	Pending, Quarantined []coord.FileRecord
}

// Unmerged returns, by table id, the files of every table that has some
// not merged, in arrival order.
func (p *Pipeline) Unmerged(ctx context.Context) ([]Unmerged, error) {
	statuses, err := p.Status.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	var out []Unmerged
	for _, st := range statuses {
		if st.Pending == 0 && st.OpenBatchSeq == 0 && st.Quarantined == 0 {
			continue
		}
		files, err := p.Registry.ListFiles(ctx, st.Table, "")
		if err != nil {
			return nil, err
		}
		u := Unmerged{Table: st.Table}
		for _, f := range files {
			switch f.State {
			case coord.StateStaged, coord.StateBatched:
				u.Pending = append(u.Pending, f)
			case coord.StateQuarantined:
				u.Quarantined = append(u.Quarantined, f)
			}
		}
		out = append(out, u)
	}
	return out, nil
}
