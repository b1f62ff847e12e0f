package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// MaintainResult reports what Maintain did.
type MaintainResult struct {
	Table              string
	CompactedFiles     int // small files rewritten into fewer
	CompactedInto      int
	ExpiredTombstones  int64
	VacuumedFiles      int
	LogFilesDeleted    int
	StagedFilesDeleted int
	Checkpoints        int
	// DeletionVectorsFolded counts the files compaction rewrote without
	// the rows their deletion vectors marked, and RowsPurged those rows.
	DeletionVectorsFolded int
	RowsPurged            int64
	// CompactionLeftFiles files of CompactionLeftBytes bytes were due for
	// compaction but left to the next run by compaction_max_bytes.
	CompactionLeftFiles int
	CompactionLeftBytes int64
	// Conflicts counts the Delta tables whose compaction (or tombstone
	// expiry) lost the race to a concurrent commit twice and was left to
	// the next run.
	Conflicts int
	// Ops counts the billable calls of the run (see package opcount).
	Ops opcount.Counts
	// Duration is how long the run took.
	Duration time.Duration
}

// Maintain compacts a table's Delta tables (bin-packs small files; the
// current state is re-clustered by key), expires tombstones past their
// retention, writes checkpoints, vacuums unreferenced files, cleans up
// expired log entries and deletes staged files already merged.
//
// No step takes the table's lease, so a merge never waits for maintenance.
// Compaction and tombstone expiry commit optimistically and Delta's
// conflict rules decide a race with a merge (see compactTables for
// why each race is safe); the other steps are safe beside a merge by the
// protocol itself: a checkpoint describes a version already committed,
// vacuum deletes only files unreferenced for longer than the retention (a
// merge's new files, and those a concurrent compaction is writing, are
// fresh), log cleanup removes only entries older than the retention and
// covered by a checkpoint, and the staged files deleted are those of
// batches already merged, which nothing reads again.
//
// Compaction rewrites at most the table's compaction_max_bytes in each
// Delta table; what it leaves is counted in the result, for the next run.
func (p *Pipeline) Maintain(ctx context.Context, tableID string) (res MaintainResult, err error) {
	return p.maintain(ctx, tableID, p.Config.Table(tableID).CompactionCap())
}

// maintain is Maintain with compaction capped at maxBytes per Delta table
// (0: no cap).
func (p *Pipeline) maintain(ctx context.Context, tableID string, maxBytes int64) (res MaintainResult, err error) {
	res = MaintainResult{Table: tableID}
	ctx, ops := opcount.Start(ctx)
	start := time.Now()
	defer func() { res.Ops, res.Duration = ops.Counts(), time.Since(start) }()
	tabs, err := p.TableSet(tableID)
	if err != nil {
		return res, err
	}
	if err := p.compactTables(ctx, tableID, tabs, maxBytes, &res); err != nil {
		return res, err
	}
	compacted := time.Since(start)
	if err := p.maintainFiles(ctx, tableID, tabs, &res); err != nil {
		return res, err
	}
	p.log().Info("table maintained", append([]any{"event", "maintained", "table", tableID, "compacted", res.CompactedFiles, "vacuumed", res.VacuumedFiles, "tombstones_expired", res.ExpiredTombstones,
		"deletion_vectors_folded", res.DeletionVectorsFolded, "rows_purged", res.RowsPurged,
		"compaction_left_files", res.CompactionLeftFiles, "compaction_left_bytes", res.CompactionLeftBytes, "conflicts", res.Conflicts, "staged_files_deleted", res.StagedFilesDeleted,
		"compact_ms", compacted.Milliseconds(), "duration_ms", time.Since(start).Milliseconds()}, ops.Counts().Attrs()...)...)
	return res, nil
}

// compactAttempts is how many times a compaction of one Delta table is
// tried per run: once, and once more from a fresh snapshot after losing a
// race. A second loss means merges keep rewriting the same files; the
// compaction waits for the next run rather than compete with them.
const compactAttempts = 2

// compactTables compacts the state and history tables, rewriting at most
// maxBytes in each (0: no cap), and expires tombstones, each committed
// optimistically with no lease.
//
// Why each race with a merge is safe under Delta's conflict rules
// (checklist §11, delta.Transaction.checkConflicts):
//
//   - Compaction changes no row: its commit removes small files and adds
//     files holding exactly their rows, all with dataChange=false. A commit
//     whose result depends only on the rows it read is therefore unaffected
//     by it, unless the two commits remove the same file (the rows would be
//     both rewritten by the merge and copied by the compaction: duplicated
//     or resurrected) or the merge read a file the compaction removed.
//     Both are conflicts: the compaction records its inputs as read and
//     removed, the merge its candidate files (read) and the files it
//     rewrites (removed), so whichever commits second fails with
//     ErrConflict. A merge that loses plans again from a fresh snapshot
//     (cdc.ApplyStep); a compaction that loses is tried once more, then
//     left to the next run. Deletion vectors change nothing here: a merge
//     that gives file P a vector removes (P, old vector) and adds (P, new
//     vector), and conflicts are decided by path, so it conflicts with any
//     compaction that removed P; compaction leaves files with a vector
//     alone, so its retry after such a merge skips P.
//   - State: the merge's lookup prunes files by key bounds; a file it did
//     not read cannot hold a batch key, so compacting only such files
//     changes nothing the merge decided. A schema change by the merge is a
//     metaData action, which fails a compaction committing after it; one
//     that rewrites every file (a widened column) also removes the
//     compaction's inputs.
//   - History: a merge appends blindly (its re-delivery lookup reads rows,
//     which compaction keeps), so compaction and merges never conflict
//     there, and neither can lose or duplicate an event: the compaction
//     removes only the files it read, never the merge's new ones. A merge
//     that rewrites the history (a widened column) reads the whole table
//     and removes every file, and conflicts with the compaction.
//   - Tombstones: merges append blindly, so expiry and merges never
//     conflict. Expiry can remove a tombstone a concurrent merge's Decide
//     relied on; the merge's commits do not record that read, and need
//     not: its decision is the one it would make had it run entirely
//     before the expiry, which is a serial order of the two. Had it run
//     after, the event older than the expired delete would be applied:
//     exactly the documented trade-off of a bounded tombstone table
//     (cdc.ExpireTombstones), which applies to this race no more than to
//     an event arriving a moment later. A merge's new tombstones are never
//     expired by it (they are fresh) nor merged away by its compaction of
//     small files, which reads only files of its own snapshot.
//
// Two maintenance runs of one table may overlap now: they race like a
// compaction and a merge, the second to commit loses on the files both
// removed, and nothing is lost; only work is wasted.
func (p *Pipeline) compactTables(ctx context.Context, tableID string, tabs cdc.TableSet, maxBytes int64, res *MaintainResult) error {
	tc := p.Config.Table(tableID)
	target := tc.TargetFileBytes
	// One instant for every step, as the removes they commit are stamped.
	now := p.now()
	clock := func() time.Time { return now }
	for _, store := range []objstore.Store{tabs.State, tabs.History} {
		var r delta.OptimizeResult
		err := p.compactOptimistically(ctx, tableID, store, res, func(ctx context.Context) error {
			var err error
			r, err = Compact(ctx, store, CompactOptions{TargetFileBytes: target, MaxDeletedShare: tc.DVMaxDeletedShare, MaxBytes: maxBytes, Now: clock})
			return err
		})
		if err != nil {
			return fmt.Errorf("maintain %s: compact %s: %w", tableID, store.URL(), err)
		}
		res.CompactedFiles += r.FilesRemoved
		res.CompactedInto += r.FilesAdded
		res.DeletionVectorsFolded += r.DeletionVectorsPurged
		res.RowsPurged += r.RowsPurged
		res.CompactionLeftFiles += r.FilesLeft
		res.CompactionLeftBytes += r.BytesLeft
	}
	var expired cdc.ExpireResult
	err := p.compactOptimistically(ctx, tableID, tabs.Tombstones, res, func(ctx context.Context) error {
		var err error
		expired, err = cdc.ExpireTombstones(ctx, tabs.Tombstones, cdc.ExpireOptions{Retention: time.Duration(tc.TombstoneRetention), TargetFileBytes: target, Now: clock})
		return err
	})
	if err != nil {
		return fmt.Errorf("maintain %s: expire tombstones: %w", tableID, err)
	}
	res.ExpiredTombstones = expired.Expired
	return nil
}

// compactOptimistically runs one optimistic rewrite of the Delta table in
// store as Optimistically does, res.Conflicts counting a second loss.
func (p *Pipeline) compactOptimistically(ctx context.Context, tableID string, store objstore.Store, res *MaintainResult, op func(context.Context) error) error {
	lost, err := Optimistically(ctx, p.log().With("table", tableID), store, op)
	if lost {
		res.Conflicts++
	}
	return err
}

// Optimistically runs op, one optimistic rewrite of the Delta table in
// store that reads a fresh snapshot on each call, by maintenance's rule:
// losing the race to a concurrent commit (delta.ErrConflict) is no
// failure; op runs again once, and after a second loss lost is true and
// the table is left as the winners made it. The files a losing attempt
// wrote are referenced by no commit; vacuum deletes them after the
// retention. Each loss is logged to logger.
func Optimistically(ctx context.Context, logger *slog.Logger, store objstore.Store, op func(context.Context) error) (lost bool, err error) {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if !errors.Is(err, delta.ErrConflict) {
			return false, err
		}
		if attempt == compactAttempts {
			logger.Info("compaction lost to a concurrent commit again; left to the next maintenance run", "event", "compact_conflict",
				"delta_table", store.URL(), "attempts", attempt, "error", err)
			return true, nil
		}
		logger.Info("compaction lost to a concurrent commit; trying again from a fresh snapshot", "event", "compact_conflict",
			"delta_table", store.URL(), "attempt", attempt, "error", err)
	}
}

// maintainFiles writes checkpoints, vacuums, cleans up the logs and
// deletes the staged files of merged batches (see Maintain for why these
// need no lease).
func (p *Pipeline) maintainFiles(ctx context.Context, tableID string, tabs cdc.TableSet, res *MaintainResult) error {
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
	if err := p.dropMergedStaged(ctx, tableID, res); err != nil {
		return err
	}
	return p.dropStalePlans(ctx, tableID, res)
}

// dropMergedStaged deletes the staged objects of merged files. It lists
// the table's staging folder and looks up the files whose objects are
// there, rather than going over the registry's merged files: their
// records stay for the retention (days), and each run read and deleted
// again the objects of every one of them. The folder holds only what is
// still staged, so a run costs a listing and the lookups of the files
// pending or merged since the last run. Every object of a merged file
// goes, those of an earlier staging attempt that its manifest does not
// name too: nothing reads a merged file's staged objects again.
func (p *Pipeline) dropMergedStaged(ctx context.Context, tableID string, res *MaintainResult) error {
	dir := stagingDir(tableID) + "/"
	objects := map[string][]string{} // by file id
	err := p.Lake.List(ctx, dir, "", func(info objstore.Info) error {
		if id, ok := stagedFileID(info.Name); ok {
			objects[id] = append(objects[id], info.Name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("maintain %s: list staged files: %w", tableID, err)
	}
	if len(objects) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(objects))
	recs, err := p.Registry.Files(ctx, ids)
	if err != nil {
		return fmt.Errorf("maintain %s: look up staged files: %w", tableID, err)
	}
	for _, id := range ids {
		if rec, ok := recs[id]; !ok || rec.State != coord.StateMerged {
			continue // pending, quarantined, or being staged
		}
		for _, name := range objects[id] {
			err := p.Lake.Delete(ctx, name)
			switch {
			case err == nil:
				res.StagedFilesDeleted++
			case !errors.Is(err, objstore.ErrNotExist):
				return fmt.Errorf("maintain %s: delete staged %s: %w", tableID, name, err)
			}
		}
	}
	return nil
}

// stagedFileID returns the registry id of the file a staged object belongs
// to: its manifest is <id>.json, its parts <id>-<attempt>-<n>.snappy.parquet
// (in a partition folder when dated) with their key hashes beside them.
// Step plans (_steps/<seq>.json) and the records beside them
// (_steps/<seq>-broken-<step>.json) belong to no file.
func stagedFileID(name string) (string, bool) {
	base := path.Base(name)
	id, rest, _ := strings.Cut(base, "-")
	if rest == "" {
		id = strings.TrimSuffix(base, ".json")
	}
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", false
	}
	return id, true
}

// dropStalePlans deletes the step plans of completed batches, and their
// records of broken history copies, that a merge did not delete itself (it
// died between completing the batch and deleting them). A batch's plan is stale once the table has no open batch of
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
		// <seq>.json, or <seq>-broken-<step>.json (brokenCopies).
		name := strings.TrimSuffix(strings.TrimPrefix(info.Name, prefix), ".json")
		if n, _, ok := strings.Cut(name, "-broken-"); ok {
			name = n
		}
		seq, err := strconv.ParseInt(name, 10, 64)
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

// CompactOptions tune Compact.
type CompactOptions struct {
	// TargetFileBytes is the size of the files written (the table's
	// target_file_bytes).
	TargetFileBytes int64
	// MaxDeletedShare is the share of a file's rows its deletion vector
	// may mark before the file is rewritten without them (the table's
	// deletion_vector_max_deleted_share; 0: delta.DefaultMaxDeletedShare).
	MaxDeletedShare float64
	// MaxBytes caps the bytes of the files rewritten (the table's
	// compaction_max_bytes; 0: no cap); see delta.OptimizeOptions.
	MaxBytes int64
	// Now stamps the removes; nil means the table's clock.
	Now func() time.Time
	// DryRun reports what would be rewritten, writing nothing.
	DryRun bool
}

// Compact bin-packs the small files of the Delta table in store as
// maintenance does, with the options of cdc.CompactionOptions: a
// current-state table clustered by key, any table's deletion vectors
// folded (see delta.Snapshot.Optimize). A table not created yet has
// nothing to compact. It commits optimistically once; Optimistically
// decides what a lost race means.
func Compact(ctx context.Context, store objstore.Store, opts CompactOptions) (delta.OptimizeResult, error) {
	snap, o, err := compactionSnapshot(ctx, store)
	if snap == nil {
		return delta.OptimizeResult{}, err
	}
	o.TargetFileBytes, o.MaxDeletedShare, o.MaxBytes, o.Now, o.DryRun = opts.TargetFileBytes, opts.MaxDeletedShare, opts.MaxBytes, opts.Now, opts.DryRun
	return snap.Optimize(ctx, o)
}

// RepairStats repairs the statistics older releases wrote wrong in the
// Delta table in store (see delta.Snapshot.RepairStats), rewriting files
// with the bloom filters and pages compaction gives them. A table not
// created yet has nothing to repair. It commits optimistically once, as
// Compact does.
func RepairStats(ctx context.Context, store objstore.Store, dryRun bool) (delta.RepairStatsResult, error) {
	snap, o, err := compactionSnapshot(ctx, store)
	if snap == nil {
		return delta.RepairStatsResult{}, err
	}
	return snap.RepairStats(ctx, delta.RepairStatsOptions{BloomFilterColumns: o.BloomFilterColumns, PageBytes: o.PageBytes, DryRun: dryRun})
}

// compactionSnapshot reads the Delta table in store and the options
// maintenance writes its files with (cdc.CompactionOptions); a nil
// snapshot, and no error, when the table is not created yet.
func compactionSnapshot(ctx context.Context, store objstore.Store) (*delta.Snapshot, delta.OptimizeOptions, error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return nil, delta.OptimizeOptions{}, nil
	}
	if err != nil {
		return nil, delta.OptimizeOptions{}, err
	}
	return snap, cdc.CompactionOptions(snap), nil
}
