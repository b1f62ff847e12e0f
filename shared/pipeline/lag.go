package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// SourceLag is a table's lag seen from the source bucket's side, which
// the registry alone cannot see: files whose notification never arrived.
type SourceLag struct {
	// Table is the table id, or "folder <name>" for a source folder none
	// of whose files the registry knows yet.
	Table string
	// Unregistered counts the source objects older than the grace period
	// that the registry does not know; AtLeast is true when the listing's
	// bounds stopped short, so there may be more.
	Unregistered int
	AtLeast      bool
	// OldestUnmerged is when the oldest source object not yet merged
	// (unregistered, staged or in an open batch) was created: now minus
	// it is the lake's true end-to-end lag. Zero when all is merged.
	OldestUnmerged time.Time
}

// SourceLags reports, per table, what the source holds that is not
// merged: a reconcile that only looks (DryRun) finds the unregistered
// files, and the registry's pending files date the rest. Tables with
// nothing unmerged are reported too, with zero counts, when the registry
// knows them.
func (p *Pipeline) SourceLags(ctx context.Context, sources []Source, embedded bool) (map[string]*SourceLag, error) {
	rr, err := p.Reconcile(ctx, ReconcileOptions{Sources: sources, Embedded: embedded, DryRun: true})
	if err != nil {
		return nil, err
	}
	out := map[string]*SourceLag{}
	get := func(table string) *SourceLag {
		l := out[table]
		if l == nil {
			l = &SourceLag{Table: table}
			out[table] = l
		}
		return l
	}
	for _, f := range rr.Folders {
		table := f.Table
		if table == "" {
			if f.Unregistered == 0 {
				continue
			}
			table = "folder " + f.Source.dir() + f.Folder
		}
		l := get(table)
		l.Unregistered += f.Unregistered
		l.AtLeast = l.AtLeast || !f.Complete
		l.OldestUnmerged = earliest(l.OldestUnmerged, f.OldestUnregistered)
	}
	statuses, err := p.Status.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	for _, st := range statuses {
		l := get(st.Table)
		if st.Pending == 0 && st.OpenBatchSeq == 0 {
			continue
		}
		oldest, err := p.oldestUnmerged(ctx, st.Table)
		if err != nil {
			return nil, err
		}
		l.OldestUnmerged = earliest(l.OldestUnmerged, oldest)
	}
	return out, nil
}

// oldestUnmerged is the creation time of the oldest registered file of a
// table that is in its open batch or, of the staged ones, the first to
// arrive (when it was staged, for a record that does not know its source
// object's time): a few records, whatever the backlog.
func (p *Pipeline) oldestUnmerged(ctx context.Context, tableID string) (time.Time, error) {
	batched, err := p.Registry.ListFiles(ctx, tableID, coord.StateBatched)
	if err != nil {
		return time.Time{}, fmt.Errorf("batched files of %s: %w", tableID, err)
	}
	first, err := p.Registry.Pending(ctx, tableID, 1)
	if err != nil {
		return time.Time{}, fmt.Errorf("pending files of %s: %w", tableID, err)
	}
	var oldest time.Time
	for _, files := range [][]coord.FileRecord{batched, first} {
		for _, f := range files {
			created := f.SourceCreated
			if created.IsZero() {
				created = f.StagedAt
			}
			oldest = earliest(oldest, created)
		}
	}
	return oldest, nil
}

// earliest is the earlier of two times, a zero one counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
