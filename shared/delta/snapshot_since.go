package delta

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// SnapshotSince returns the table's latest snapshot given prev, an earlier
// snapshot of it. When the log still holds prev's commit as prev's reader
// listed it, and every commit after it, only those commits are read and
// applied to a copy of prev's state, as a reader replays the commits after
// a checkpoint (PROTOCOL.md "Action Reconciliation"); otherwise (prev's
// version known only from a checkpoint, commits cleaned up meanwhile, the
// table recreated) the latest snapshot is read whole. prev itself is
// returned when no commit followed it.
//
// The snapshot then holds the same files, metadata, protocol, transactions
// and domains as one read whole; its Tombstones may hold removes that a
// newer checkpoint has expired (a checkpoint written from it drops them
// again, see WriteCheckpoint). A merge reads its tables' snapshots at
// every step: whole, each read decodes the latest checkpoint, which lists
// every file, and the commits after it, while the steps in between
// committed a few actions.
func (t *Table) SnapshotSince(ctx context.Context, prev *Snapshot) (*Snapshot, error) {
	if prev == nil || prev.commit.Name == "" {
		return t.Snapshot(ctx)
	}
	snap, err := t.snapshotAfter(ctx, prev)
	if errors.Is(err, errNeedFullListing) {
		return t.Snapshot(ctx)
	}
	return snap, err
}

// snapshotAfter is SnapshotSince's incremental read; errNeedFullListing
// when the log no longer holds prev's commit as it was, or each commit
// after it.
func (t *Table) snapshotAfter(ctx context.Context, prev *Snapshot) (*Snapshot, error) {
	l, commits, err := t.commitsAfter(ctx, prev.version, prev.commit)
	if err != nil {
		return nil, err
	}
	if len(commits) == 0 {
		return prev, nil
	}
	latest := prev.version + int64(len(commits))
	st := prev.st.clone()
	lastTs := st.applyCommits(prev.timestampMs, commits...)
	cpVersion := prev.checkpointVersion
	for v := range l.checkpoints {
		cpVersion = max(cpVersion, v)
	}
	return t.snapshotOf(st, latest, cpVersion, lastTs, l.commits[latest])
}

// Snapshots keeps the latest snapshot read of each table, by its store
// (the same Store value: two stores of one URL, as memory stores, are
// two tables), so that reading a table again reads only the commits since
// (SnapshotSince). It is for work that reads the same few tables again
// and again in a short time, such as one batch's merge, which reads its
// three tables at every step; it keeps every snapshot it read until it is
// dropped. It is safe for concurrent use; the zero value is ready, and a
// nil *Snapshots reads every snapshot whole.
type Snapshots struct {
	mu    sync.Mutex
	snaps map[objstore.Store]*Snapshot
}

// Latest returns t's latest snapshot (see SnapshotSince), remembering it.
// A store that is not a pointer is read whole every time: it is known by
// its identity.
func (c *Snapshots) Latest(ctx context.Context, t *Table) (*Snapshot, error) {
	if c == nil || reflect.TypeOf(t.store).Kind() != reflect.Pointer {
		return t.Snapshot(ctx)
	}
	key := t.store
	c.mu.Lock()
	prev := c.snaps[key]
	c.mu.Unlock()
	snap, err := t.SnapshotSince(ctx, prev)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snaps == nil {
		c.snaps = map[objstore.Store]*Snapshot{}
	}
	if old := c.snaps[key]; old == nil || old.version <= snap.version {
		c.snaps[key] = snap
	}
	return snap, nil
}
