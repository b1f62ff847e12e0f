package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// MergeResult sums what MergeTable did.
type MergeResult struct {
	Table       string
	Batches     int
	Files       int
	Quarantined int
	Result      cdc.Result // counters summed over batches; versions of the last
	Busy        bool       // another holder has the lease
	Remaining   bool       // stopped by the budget with work left (re-woken)
}

func (r *MergeResult) add(b cdc.Result) {
	s := &r.Result
	s.Events += b.Events
	s.Keys += b.Keys
	s.Inserted += b.Inserted
	s.Updated += b.Updated
	s.Deleted += b.Deleted
	s.Buried += b.Buried
	s.Stale += b.Stale
	s.Collapsed += b.Collapsed
	s.Redelivered += b.Redelivered
	s.FilesRead += b.FilesRead
	s.FilesRewritten += b.FilesRewritten
	s.FilesAdded += b.FilesAdded
	s.HistoryVersion, s.StateVersion, s.TombstoneVersion = b.HistoryVersion, b.StateVersion, b.TombstoneVersion
}

// MergeTable takes the table's lease and merges batches of staged files
// until none is pending or the budget runs out. The lease is renewed while
// work runs; losing it cancels the work before its next commit. After
// releasing, it looks for files staged meanwhile so no wake-up is lost.
func (p *Pipeline) MergeTable(ctx context.Context, table string) (MergeResult, error) {
	res := MergeResult{Table: table}
	tabs, err := p.Tables(table)
	if err != nil {
		return res, err
	}
	start := p.now()
	log := p.log().With("table", table)
	for {
		more, err := p.mergeUnderLease(ctx, tabs, start, &res)
		if errors.Is(err, coord.ErrLeaseHeld) {
			res.Busy = true
			log.Info("another merge holds the table", "event", "busy")
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if !more {
			return res, nil
		}
		// Files were staged while we released: merge them now, or hand
		// them to the next invocation when the budget is spent.
		if p.MergeBudget > 0 && p.now().Sub(start) > p.MergeBudget/2 {
			res.Remaining = true
			if p.Waker != nil {
				if err := p.Waker.Wake(ctx, table); err != nil {
					return res, fmt.Errorf("merge %s: re-wake: %w", table, err)
				}
			}
			return res, nil
		}
	}
}

// mergeUnderLease runs batches under one lease; more reports pending work
// found after the release.
func (p *Pipeline) mergeUnderLease(ctx context.Context, tabs cdc.Tables, start time.Time, res *MergeResult) (more bool, err error) {
	ttl := p.leaseTTL()
	lease, err := p.Coord.Acquire(ctx, tabs.ID, p.holder(), ttl)
	if err != nil {
		return false, err
	}
	log := p.log().With("table", tabs.ID, "lease", lease.Token)
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	var mu sync.Mutex // guards current, renewed in the background
	current := lease
	held := func() coord.Lease {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	go func() { // renew at a third of the TTL; a lost lease stops the work
		defer close(renewed)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-workCtx.Done():
				return
			case <-t.C:
				l, err := p.Coord.Renew(workCtx, held(), ttl)
				if err != nil {
					if workCtx.Err() == nil {
						log.Warn("lease lost; stopping before the next commit", "error", err)
						cancel(fmt.Errorf("%w: %v", coord.ErrLeaseLost, err))
					}
					return
				}
				mu.Lock()
				current = l
				mu.Unlock()
			}
		}
	}()
	stopRenew := func() Lease {
		cancel(nil)
		<-renewed
		return held()
	}
	// abandon gives the lease up after a failure, so the retry (or another
	// instance) resumes the open batch at once instead of after the TTL.
	// A lost lease makes Release fail, which is fine.
	abandon := func() {
		_ = p.Coord.Release(context.WithoutCancel(ctx), stopRenew())
	}
	budgetLeft := func() bool {
		return p.MergeBudget <= 0 || p.now().Sub(start) < p.MergeBudget*3/4
	}
	for budgetLeft() {
		b, err := p.Coord.NextBatch(workCtx, held(), tabs.ID, coord.BatchLimits{Files: p.Config.MaxFiles(), Bytes: p.Config.MaxBytes(), Events: p.Config.MaxEvents(), SourceBytes: p.Config.MaxSourceBytes()})
		if errors.Is(err, coord.ErrNoWork) {
			break
		}
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s: next batch: %w", tabs.ID, err))
		}
		r, quarantined, err := p.applyBatch(workCtx, tabs, b)
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s batch %d: %w", tabs.ID, b.Seq, err))
		}
		err = p.Coord.CompleteBatch(workCtx, held(), b, coord.BatchStats{
			StateVersion: r.StateVersion, HistoryVersion: r.HistoryVersion, CommittedAt: p.now(),
			Events: r.Events, Inserted: r.Inserted, Updated: r.Updated, Deleted: r.Deleted + r.Buried, Stale: r.Stale,
		})
		if err != nil {
			abandon()
			return false, leaseErr(workCtx, fmt.Errorf("merge %s batch %d: complete: %w", tabs.ID, b.Seq, err))
		}
		res.Batches++
		res.Files += len(b.Files) - quarantined
		res.Quarantined += quarantined
		res.add(r)
		log.Info("batch merged", "event", "merged", "batch", b.Seq, "files", len(b.Files), "events", r.Events,
			"inserted", r.Inserted, "updated", r.Updated, "deleted", r.Deleted, "stale", r.Stale,
			"state_version", r.StateVersion, "history_version", r.HistoryVersion,
			"lag_seconds", p.now().Sub(maxSource(b)).Seconds())
	}
	final := stopRenew()
	if err := p.Coord.Release(ctx, final); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
		return false, fmt.Errorf("merge %s: release: %w", tabs.ID, err)
	}
	pending, err := p.Coord.Pending(ctx, tabs.ID, 1)
	if err != nil {
		return false, fmt.Errorf("merge %s: check pending: %w", tabs.ID, err)
	}
	return len(pending) > 0, nil
}

// Lease is coord.Lease, named here for readability of the renew loop.
type Lease = coord.Lease

func leaseErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, coord.ErrLeaseLost) {
		return fmt.Errorf("%w (%v)", cause, err)
	}
	return err
}

func maxSource(b coord.Batch) time.Time {
	var t time.Time
	for _, f := range b.Files {
		if f.MaxSourceTime.After(t) {
			t = f.MaxSourceTime
		}
	}
	return t
}

// applyBatch reads the batch's staged files and applies them. Files whose
// schema conflicts with the table are quarantined and left out; the
// decision only depends on column types, which merge mode never changes, so
// a re-run of the batch leaves out the same files.
func (p *Pipeline) applyBatch(ctx context.Context, tabs cdc.Tables, b coord.Batch) (cdc.Result, int, error) {
	current := value.StructType{}
	if snap, err := delta.Open(tabs.State).Snapshot(ctx); err == nil {
		current = cdc.SourceSchema(snap.Schema())
	} else if !errors.Is(err, delta.ErrNotATable) {
		return cdc.Result{}, 0, err
	}
	type staged struct {
		rec coord.FileRecord
		m   *manifest
		src value.StructType
	}
	var files []staged
	var key []string
	source := current
	quarantined := 0
	overwrite := p.Config.Table(tabs.ID).SchemaMode == config.SchemaOverwrite
	for _, rec := range b.Files {
		if rec.State == coord.StateQuarantined {
			quarantined++
			continue
		}
		m, err := p.readStaged(ctx, rec.StagedPath)
		if err != nil {
			return cdc.Result{}, 0, err
		}
		hs, err := value.ParseSchema(m.Schema)
		if err != nil {
			return cdc.Result{}, 0, fmt.Errorf("staged %s: %w", rec.StagedPath, err)
		}
		src := cdc.SourceSchema(hs)
		if overwrite {
			// The batch's schema is chosen below, once every file's
			// newest change is known; casting never conflicts.
			if len(m.Key) > 0 {
				key = m.Key
			}
			files = append(files, staged{rec: rec, m: m, src: src})
			continue
		}
		merged, _, err := cdc.MergeSchemas(source, withoutUntyped(src, m.Untyped))
		if err != nil {
			reason := fmt.Sprintf("%s: %v (table %s)", rec.Name, err, tabs.ID)
			if _, qerr := p.Coord.Quarantine(ctx, rec, reason); qerr != nil {
				return cdc.Result{}, 0, qerr
			}
			p.log().Warn("file quarantined", "event", "quarantined", "table", tabs.ID, "file", rec.Name, "batch", b.Seq, "reason", reason)
			quarantined++
			continue
		}
		source = merged
		if len(m.Key) > 0 {
			key = m.Key
		}
		files = append(files, staged{rec: rec, m: m, src: src})
	}
	if overwrite && len(files) > 0 {
		ms := make([]*manifest, len(files))
		for i, f := range files {
			ms[i] = f.m
		}
		newest, err := p.newestFile(ctx, ms)
		if err != nil {
			return cdc.Result{}, 0, err
		}
		// The schema as of the batch's newest change, not of its last
		// arrival: files come in any order. The engine keeps the table's
		// schema when it already holds a newer change's. Columns the file
		// only guessed (null throughout) keep the current type.
		source = overwriteSchema(current, files[newest].src, files[newest].m.Untyped)
	}
	batch := cdc.Batch{Source: source, Key: key}
	var keyIdx []int
	if len(key) > 0 {
		var err error
		if keyIdx, err = cdc.KeyIndexes(source, key); err != nil {
			return cdc.Result{}, 0, err
		}
	}
	hs := cdc.HistorySchema(source)
	for _, f := range files {
		fromSchema := cdc.HistorySchema(f.src)
		md := delta.Metadata{SchemaString: f.m.Schema, Format: delta.Format{Provider: "parquet"}, PartitionColumns: []string{}, Configuration: map[string]string{}}
		var changes []cdc.Change
		var convErr error
		err := delta.ReadFile(ctx, p.Lake, md, f.m.Add, delta.ReadOptions{}, func(row []any) error {
			var h []any
			if overwrite {
				h = cdc.ConformCast(row, fromSchema, hs)
			} else {
				var err error
				if h, err = cdc.Conform(row, fromSchema, hs); err != nil {
					convErr = err
					return err
				}
			}
			if len(key) == 0 {
				changes = append(changes, cdc.Change{History: h})
				return nil
			}
			c, err := cdc.ChangeFromHistory(h, source, keyIdx)
			if err != nil {
				return err
			}
			changes = append(changes, c)
			return nil
		})
		if convErr != nil {
			// A value that does not fit the widened column: the file
			// cannot join the table, the rest of the batch goes on.
			reason := fmt.Sprintf("%s: %v (table %s)", f.rec.Name, convErr, tabs.ID)
			if _, qerr := p.Coord.Quarantine(ctx, f.rec, reason); qerr != nil {
				return cdc.Result{}, 0, qerr
			}
			p.log().Warn("file quarantined", "event", "quarantined", "table", tabs.ID, "file", f.rec.Name, "batch", b.Seq, "reason", reason)
			quarantined++
			continue
		}
		if err != nil {
			return cdc.Result{}, 0, fmt.Errorf("read staged %s: %w", f.rec.StagedPath, err)
		}
		batch.Changes = append(batch.Changes, changes...)
	}
	if len(files) == 0 {
		return cdc.Result{HistoryVersion: -1, StateVersion: -1, TombstoneVersion: -1}, quarantined, nil
	}
	tc := p.Config.Table(tabs.ID)
	r, err := cdc.Apply(ctx, tabs, b.Seq, batch, cdc.Options{TargetFileBytes: tc.TargetFileBytes, Now: p.now, Logger: p.log(),
		StatePartitionColumns: tc.PartitionColumns, Overwrite: overwrite})
	return r, quarantined, err
}

// newestFile returns the index of the file holding the batch's greatest
// ordering key (the later one on a tie, e.g. a file written again under a
// new generation). The manifests record each file's greatest key; for one
// staged before they did, only the order column of the staged file is read.
func (p *Pipeline) newestFile(ctx context.Context, files []*manifest) (int, error) {
	best, bestOrder := 0, []byte(nil)
	for i, m := range files {
		if m.MaxOrder != nil {
			if bestOrder == nil || bytes.Compare(m.MaxOrder, bestOrder) >= 0 {
				best, bestOrder = i, m.MaxOrder
			}
			continue
		}
		md := delta.Metadata{SchemaString: m.Schema, Format: delta.Format{Provider: "parquet"}, PartitionColumns: []string{}, Configuration: map[string]string{}}
		err := delta.ReadFile(ctx, p.Lake, md, m.Add, delta.ReadOptions{Columns: []string{cdc.ColOrder}}, func(row []any) error {
			if o, _ := row[0].([]byte); bestOrder == nil || bytes.Compare(o, bestOrder) >= 0 {
				best, bestOrder = i, o
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the orders of staged %s: %w", m.Add.Path, err)
		}
	}
	return best, nil
}

// withoutUntyped drops from a staged file's schema the columns whose type
// was only guessed (null in every record of a JSON file): the table's type,
// or another file's values, decide it. Their values are all null, so
// nothing is lost whichever type the column ends up with.
func withoutUntyped(src value.StructType, untyped []string) value.StructType {
	return dropColumns(src, untyped)
}

// overwriteSchema is the batch schema in schema mode "overwrite": the
// file's columns, except that a column the file only guessed (null in every
// record) keeps the table's current type, or is left out when the table
// has none.
func overwriteSchema(current, src value.StructType, untyped []string) value.StructType {
	guessed := map[string]bool{}
	for _, u := range untyped {
		guessed[strings.ToLower(u)] = true
	}
	var out value.StructType
	for _, f := range src.Fields {
		if guessed[strings.ToLower(f.Name)] {
			cur, ok := current.Field(f.Name)
			if !ok {
				continue
			}
			f.Type = cur.Type
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}
