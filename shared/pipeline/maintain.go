package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// MaintainResult reports what Maintain did.
type MaintainResult struct {
	Table              string
	Busy               bool // another holder had the lease: nothing done
	CompactedFiles     int  // small files rewritten into fewer
	CompactedInto      int
	ExpiredTombstones  int64
	VacuumedFiles      int
	LogFilesDeleted    int
	StagedFilesDeleted int
	Checkpoints        int
	// Woke is set when Maintain woke the table's merge after releasing the
	// lease, for files staged (or a batch left open) meanwhile.
	Woke bool
}

// Maintain compacts a table's Delta tables (bin-packs small files; the
// current state is re-clustered by key), expires tombstones past their
// retention, writes checkpoints, vacuums unreferenced files, cleans up
// expired log entries and deletes staged files already merged.
//
// Compaction and tombstone expiry run under the table's lease, so they
// never race a merge of the same table. The rest runs after the lease is
// released, because the Delta protocol already makes it safe beside a
// merge, and a file that arrives meanwhile then waits for the compactions
// only: a checkpoint describes a version already committed, vacuum deletes
// only files unreferenced for longer than the retention (a merge's new
// files are fresh), log cleanup removes only entries older than the
// retention and covered by a checkpoint, and the staged files deleted are
// those of batches already merged, which nothing reads again.
func (p *Pipeline) Maintain(ctx context.Context, tableID string) (MaintainResult, error) {
	res := MaintainResult{Table: tableID}
	tabs, err := p.TableSet(tableID)
	if err != nil {
		return res, err
	}
	start := time.Now()
	lease, err := p.Leaser.Acquire(ctx, tableID, p.holder(), p.leaseTTL())
	if errors.Is(err, coord.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("maintain %s: %w", tableID, err)
	}
	err = p.maintainUnderLease(ctx, tableID, tabs, lease, &res)
	if rerr := p.Leaser.Release(context.WithoutCancel(ctx), lease); rerr != nil && !errors.Is(rerr, coord.ErrLeaseLost) {
		p.log().Warn("release after maintenance failed", "table", tableID, "error", rerr)
	}
	leaseHeld := time.Since(start)
	if err != nil {
		return res, err
	}
	// Files staged while the lease was held had their wake-ups turned
	// away: wake the merge now rather than after the steps below.
	if p.Waker != nil {
		if st, err := p.Status.Status(ctx, tableID); err == nil && (st.Pending > 0 || st.OpenBatchSeq != 0) {
			if err := p.Waker.Wake(ctx, tableID); err != nil {
				return res, fmt.Errorf("maintain %s: wake: %w", tableID, err)
			}
			res.Woke = true
		}
	}
	if err := p.maintainAfterLease(ctx, tableID, tabs, &res); err != nil {
		return res, err
	}
	p.log().Info("table maintained", "event", "maintained", "table", tableID, "compacted", res.CompactedFiles, "vacuumed", res.VacuumedFiles, "tombstones_expired", res.ExpiredTombstones,
		"lease_ms", leaseHeld.Milliseconds(), "duration_ms", time.Since(start).Milliseconds())
	return res, nil
}

// maintainUnderLease compacts the state and history tables and expires
// tombstones: the steps that replace files a merge reads and rewrites.
func (p *Pipeline) maintainUnderLease(ctx context.Context, tableID string, tabs cdc.TableSet, lease coord.Lease, res *MaintainResult) error {
	tc := p.Config.Table(tableID)
	target := tc.TargetFileBytes
	// One instant for every step, as the removes they commit are stamped.
	now := p.now()
	clock := func() time.Time { return now }
	for _, store := range []objstore.Store{tabs.State, tabs.History} {
		r, err := compact(ctx, store, target, clock)
		if err != nil {
			return fmt.Errorf("maintain %s: compact %s: %w", tableID, store.URL(), err)
		}
		res.CompactedFiles += r.FilesRemoved
		res.CompactedInto += r.FilesAdded
	}
	expired, err := cdc.ExpireTombstones(ctx, tabs.Tombstones, cdc.ExpireOptions{Retention: time.Duration(tc.TombstoneRetention), TargetFileBytes: target, Now: clock})
	if err != nil {
		return fmt.Errorf("maintain %s: expire tombstones: %w", tableID, err)
	}
	res.ExpiredTombstones = expired.Expired
	if err := p.Leaser.CheckLease(ctx, lease); err != nil {
		return fmt.Errorf("maintain %s: %w", tableID, err)
	}
	return nil
}

// maintainAfterLease writes checkpoints, vacuums, cleans up the logs and
// deletes the staged files of merged batches (see Maintain for why these
// need no lease).
func (p *Pipeline) maintainAfterLease(ctx context.Context, tableID string, tabs cdc.TableSet, res *MaintainResult) error {
	for _, store := range []objstore.Store{tabs.State, tabs.History, tabs.Tombstones} {
		tab := delta.Open(store)
		snap, err := tab.Snapshot(ctx)
		if errors.Is(err, delta.ErrNotATable) {
			continue
		}
		if err != nil {
			return err
		}
		if snap.CheckpointVersion() < snap.Version() {
			if err := snap.WriteCheckpoint(ctx); err != nil {
				return fmt.Errorf("maintain %s: checkpoint %s: %w", tableID, store.URL(), err)
			}
			res.Checkpoints++
		}
		vr, err := tab.Vacuum(ctx, delta.VacuumOptions{Now: p.Now})
		if err != nil {
			return fmt.Errorf("maintain %s: vacuum %s: %w", tableID, store.URL(), err)
		}
		res.VacuumedFiles += len(vr.Files)
		cr, err := tab.CleanupLog(ctx, delta.CleanupOptions{Now: p.Now})
		if err != nil {
			return fmt.Errorf("maintain %s: log cleanup %s: %w", tableID, store.URL(), err)
		}
		res.LogFilesDeleted += len(cr.Deleted)
	}
	merged, err := p.Registry.ListFiles(ctx, tableID, coord.StateMerged)
	if err != nil {
		return err
	}
	for _, f := range merged {
		if f.StagedPath == "" {
			continue
		}
		// The manifest names its Parquet files (fresh names per staging
		// attempt, so a replay never collides with an earlier attempt);
		// it goes last, so a failure leaves it to name them next time.
		var names []string
		if m, err := p.readStaged(ctx, f.StagedPath); err == nil {
			for _, part := range m.Parts {
				if name, err := part.Add.ObjectName(); err == nil {
					names = append(names, name)
				}
			}
		}
		names = append(names, f.StagedPath)
		for _, name := range names {
			err := p.Lake.Delete(ctx, name)
			switch {
			case err == nil:
				res.StagedFilesDeleted++
			case !errors.Is(err, objstore.ErrNotExist):
				return fmt.Errorf("maintain %s: delete staged %s: %w", tableID, name, err)
			}
		}
	}
	return p.dropStalePlans(ctx, tableID, res)
}

// dropStalePlans deletes the step plans of completed batches that a merge
// did not delete itself (it died between completing the batch and deleting
// the plan). A batch's plan is stale once the table has no open batch of
// that number or a lower one.
func (p *Pipeline) dropStalePlans(ctx context.Context, tableID string, res *MaintainResult) error {
	st, err := p.Status.Status(ctx, tableID)
	if err != nil {
		if errors.Is(err, coord.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("maintain %s: status: %w", tableID, err)
	}
	prefix := stagingDir(tableID) + "/_steps/"
	var stale []string
	err = p.Lake.List(ctx, prefix, "", func(info objstore.Info) error {
		seq, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(info.Name, prefix), ".json"), 10, 64)
		if err != nil {
			return nil // not a plan of ours
		}
		if seq <= st.LastBatchSeq && (st.OpenBatchSeq == 0 || seq < st.OpenBatchSeq) {
			stale = append(stale, info.Name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("maintain %s: list step plans: %w", tableID, err)
	}
	for _, name := range stale {
		if err := p.Lake.Delete(ctx, name); err != nil && !errors.Is(err, objstore.ErrNotExist) {
			return fmt.Errorf("maintain %s: delete step plan %s: %w", tableID, name, err)
		}
		res.StagedFilesDeleted++
	}
	return nil
}

// compact bin-packs the small files of a table, the current state
// clustered by key (see delta.Snapshot.Optimize); a table not created yet
// has nothing to compact.
func compact(ctx context.Context, store objstore.Store, target int64, clock func() time.Time) (delta.OptimizeResult, error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return delta.OptimizeResult{}, nil
	}
	if err != nil {
		return delta.OptimizeResult{}, err
	}
	return snap.Optimize(ctx, delta.OptimizeOptions{TargetFileBytes: target, ClusterBy: cdc.ClusterColumns(snap), Now: clock})
}
