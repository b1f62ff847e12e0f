package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
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
func (p *Pipeline) Maintain(ctx context.Context, table string) (MaintainResult, error) {
	res := MaintainResult{Table: table}
	tabs, err := p.Tables(table)
	if err != nil {
		return res, err
	}
	start := time.Now()
	lease, err := p.Leaser.Acquire(ctx, table, p.holder(), p.leaseTTL())
	if errors.Is(err, coord.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("maintain %s: %w", table, err)
	}
	err = p.maintainUnderLease(ctx, table, tabs, lease, &res)
	if rerr := p.Leaser.Release(context.WithoutCancel(ctx), lease); rerr != nil && !errors.Is(rerr, coord.ErrLeaseLost) {
		p.log().Warn("release after maintenance failed", "table", table, "error", rerr)
	}
	leaseHeld := time.Since(start)
	if err != nil {
		return res, err
	}
	// Files staged while the lease was held had their wake-ups turned
	// away: wake the merge now rather than after the steps below.
	if p.Waker != nil {
		if st, err := p.Status.Status(ctx, table); err == nil && (st.Pending > 0 || st.OpenBatchSeq != 0) {
			if err := p.Waker.Wake(ctx, table); err != nil {
				return res, fmt.Errorf("maintain %s: wake: %w", table, err)
			}
			res.Woke = true
		}
	}
	if err := p.maintainAfterLease(ctx, table, tabs, &res); err != nil {
		return res, err
	}
	p.log().Info("table maintained", "event", "maintained", "table", table, "compacted", res.CompactedFiles, "vacuumed", res.VacuumedFiles, "tombstones_expired", res.ExpiredTombstones,
		"lease_ms", leaseHeld.Milliseconds(), "duration_ms", time.Since(start).Milliseconds())
	return res, nil
}

// maintainUnderLease compacts the state and history tables and expires
// tombstones: the steps that replace files a merge reads and rewrites.
func (p *Pipeline) maintainUnderLease(ctx context.Context, table string, tabs cdc.Tables, lease coord.Lease, res *MaintainResult) error {
	tc := p.Config.Table(table)
	target := tc.TargetFileBytes
	now := p.now()
	for _, t := range []struct {
		store  objstore.Store
		sorted bool
	}{{tabs.State, true}, {tabs.History, false}} {
		n, into, err := compact(ctx, t.store, target, t.sorted, now)
		if err != nil {
			return fmt.Errorf("maintain %s: compact %s: %w", table, t.store.URL(), err)
		}
		res.CompactedFiles += n
		res.CompactedInto += into
	}
	expired, err := expireTombstones(ctx, tabs.Tombstones, time.Duration(tc.TombstoneRetention), target, now)
	if err != nil {
		return fmt.Errorf("maintain %s: expire tombstones: %w", table, err)
	}
	res.ExpiredTombstones = expired
	if err := p.Leaser.CheckLease(ctx, lease); err != nil {
		return fmt.Errorf("maintain %s: %w", table, err)
	}
	return nil
}

// maintainAfterLease writes checkpoints, vacuums, cleans up the logs and
// deletes the staged files of merged batches (see Maintain for why these
// need no lease).
func (p *Pipeline) maintainAfterLease(ctx context.Context, table string, tabs cdc.Tables, res *MaintainResult) error {
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
				return fmt.Errorf("maintain %s: checkpoint %s: %w", table, store.URL(), err)
			}
			res.Checkpoints++
		}
		vr, err := tab.Vacuum(ctx, delta.VacuumOptions{Now: p.Now})
		if err != nil {
			return fmt.Errorf("maintain %s: vacuum %s: %w", table, store.URL(), err)
		}
		res.VacuumedFiles += len(vr.Files)
		cr, err := tab.CleanupLog(ctx, delta.CleanupOptions{Now: p.Now})
		if err != nil {
			return fmt.Errorf("maintain %s: log cleanup %s: %w", table, store.URL(), err)
		}
		res.LogFilesDeleted += len(cr.Deleted)
	}
	merged, err := p.Registry.ListFiles(ctx, table, coord.StateMerged)
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
				names = append(names, stagedPartPath(part))
			}
		}
		names = append(names, f.StagedPath)
		for _, name := range names {
			err := p.Lake.Delete(ctx, name)
			switch {
			case err == nil:
				res.StagedFilesDeleted++
			case !errors.Is(err, objstore.ErrNotExist):
				return fmt.Errorf("maintain %s: delete staged %s: %w", table, name, err)
			}
		}
	}
	return nil
}

// compact bin-packs files smaller than a quarter of the target, per
// partition, into files of about the target size, with dataChange=false.
// When sorted, the inputs (each sorted by key, as the engine writes them)
// are merged by key so the output is clustered. Rows stream through: a
// bounded buffer per input file, never a whole file.
func compact(ctx context.Context, store objstore.Store, target int64, sorted bool, now time.Time) (int, int, error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	groups := map[string][]delta.Add{}
	var order []string
	for _, f := range snap.Files() {
		if f.Size >= target/4 || f.DeletionVector != nil {
			continue
		}
		k := partitionKey(f.PartitionValues)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	sort.Strings(order)
	schema := snap.Schema()
	keyCols := keyColumns(schema, snap.Configuration())
	var removes []delta.Remove
	var adds []delta.Add
	compacted := 0
	for _, k := range order {
		files := groups[k]
		if len(files) < 2 {
			continue
		}
		// Bins of about the target size.
		var bins [][]delta.Add
		var cur []delta.Add
		var size int64
		for _, f := range files {
			if size+f.Size > target && len(cur) > 0 {
				bins = append(bins, cur)
				cur, size = nil, 0
			}
			cur = append(cur, f)
			size += f.Size
		}
		bins = append(bins, cur)
		for _, bin := range bins {
			if len(bin) < 2 {
				continue
			}
			a, err := rewriteMerged(ctx, snap, bin, schema, keyCols, sorted, target)
			if err != nil {
				return 0, 0, err
			}
			for _, f := range bin {
				removes = append(removes, f.Remove(now.UnixMilli(), false))
			}
			adds = append(adds, a...)
			compacted += len(bin)
		}
	}
	if len(removes) == 0 {
		return 0, 0, nil
	}
	tx := snap.NewTransaction(delta.Operation{Name: "OPTIMIZE", Parameters: map[string]string{"predicate": "[]", "zOrderBy": "[]", "auto": "true"}})
	for _, r := range removes {
		tx.ReadFiles(r.Path)
	}
	tx.Remove(removes...)
	tx.Add(adds...)
	tx.SetMetrics(map[string]string{"numRemovedFiles": strconv.Itoa(len(removes)), "numAddedFiles": strconv.Itoa(len(adds))})
	if _, err := tx.Commit(ctx); err != nil {
		return 0, 0, err
	}
	return compacted, len(adds), nil
}

func partitionKey(pv map[string]*string) string {
	keys := make([]string, 0, len(pv))
	for k := range pv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		v := "\x00null"
		if pv[k] != nil {
			v = *pv[k]
		}
		s += k + "=" + v + "/"
	}
	return s
}

// keyColumns are the clustering columns of a current-state table: the
// primary key recorded at creation.
func keyColumns(schema value.StructType, conf map[string]string) []int {
	if conf[cdc.PropRole] != "state" || conf[cdc.PropKey] == "" {
		return nil
	}
	var out []int
	for _, k := range strings.Split(conf[cdc.PropKey], ",") {
		if i := schema.Index(k); i >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// rewriteMerged streams the rows of files into new files (dataChange=false),
// merging by the key columns when sorted.
func rewriteMerged(ctx context.Context, snap *delta.Snapshot, files []delta.Add, schema value.StructType, keyCols []int, sorted bool, target int64) ([]delta.Add, error) {
	md := snap.Metadata()
	var less func(a, b []any) bool
	if sorted {
		less = func(a, b []any) bool {
			for _, k := range keyCols {
				if c := value.Compare(a[k], b[k]); c != 0 {
					return c < 0
				}
			}
			return false
		}
	}
	var w *delta.RollingWriter
	err := mergeRows(ctx, snap.Store(), md, files, less, func(row []any) error {
		if w == nil {
			// Each output file holds one partition; its values come from
			// the first row (all inputs share them).
			pv := map[string]any{}
			for _, c := range md.PartitionColumns {
				if fi := schema.Index(c); fi >= 0 {
					pv[c] = row[fi]
				}
			}
			// dataChange=false: compaction rearranges rows, it changes none.
			w = delta.NewRollingWriter(ctx, snap.Store(), delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, PartitionValues: pv}, target)
		}
		return w.Write(row)
	})
	if w == nil {
		return nil, err // no row at all: nothing written
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w.Close()
}

// Tombstone compaction limits. A tombstone table gains one small file per
// merge that deletes anything, so small files are merged once they are
// numerous enough to slow lookups; each merge reads at most
// tombstoneMergeFanIn files at once (one goroutine and about one row group
// each), whatever the table's size.
const (
	tombstoneCompactMinFiles = 8
	tombstoneMergeFanIn      = 32
)

// tombstoneExpiry counts what one expiry run did.
type tombstoneExpiry struct {
	// Expired rows were older than the retention; Superseded rows were
	// older tombstones of a key whose newer tombstone a compaction kept.
	Expired, Superseded int64
	// Copied rows were written again into the new files.
	Copied int64
	// FilesRewritten had expired rows and were rewritten one by one;
	// FilesCompacted were small files merged together; FilesAdded are the
	// outputs of both.
	FilesRewritten, FilesCompacted, FilesAdded int
	// RowGroupsCopied and RowGroupsDecoded add up RewriteFile's counts.
	RowGroupsCopied, RowGroupsDecoded int
}

// expireTombstones drops the tombstones older than the retention and
// compacts the small tombstone files, returning how many tombstones
// expired. Expired keys are counted and logged by the caller: a delete
// older than the retention can then be undone by an even older late event,
// which is the documented trade-off of a bounded tombstone table.
func expireTombstones(ctx context.Context, store objstore.Store, retention time.Duration, target int64, now time.Time) (int64, error) {
	r, err := expireTombstoneFiles(ctx, store, value.MicrosOf(now.Add(-retention)), target, now)
	return r.Expired, err
}

// expireTombstoneFiles removes the tombstones whose deletion time is before
// cutoff, streaming: memory holds about a row group per file being read,
// never the table.
//
// A key can have several tombstones: a merge appends one per deleted key
// and never removes older ones, so a key deleted, inserted again and
// deleted again has two, in different files. The engine's lookup takes the
// greatest order among them, and a key's later tombstone has both the
// greater order and the later deletion time: it is written by a later
// merge (Decide writes one only for an order at least the stored one) and
// stamped with that merge's clock. Dropping expired rows one by one
// therefore drops a key's older tombstones no later than its newest, and
// keeping unexpired duplicates changes no lookup; they are dropped where it
// costs nothing extra, when small files are merged in key order. (Should
// skewed clocks let an older tombstone outlive the newest, lookups see the
// older order: it refuses a subset of the events the newest refused, all
// of them genuinely older than a delete.)
//
// Files whose stats show no expired row are left alone. When there are at
// least tombstoneCompactMinFiles small files (under a quarter of target),
// they are merged in key order into files of about target bytes, dropping
// expired and superseded rows on the way. Every other file with an expired
// row is rewritten by delta.RewriteFile, which copies the row groups
// without an expired row verbatim. One commit replaces them all.
func expireTombstoneFiles(ctx context.Context, store objstore.Store, cutoff value.Micros, target int64, now time.Time) (tombstoneExpiry, error) {
	var res tombstoneExpiry
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return res, nil // no delete yet
	}
	if err != nil {
		return res, fmt.Errorf("open tombstones %s: %w", store.URL(), err)
	}
	schema := snap.Schema()
	md := snap.Metadata()
	at := schema.Index(cdc.ColDeletedAt)
	ord := schema.Index(cdc.ColOrder)
	if at < 0 || ord < 1 || !value.Equal(schema.Fields[ord].Type, value.Binary) {
		return res, fmt.Errorf("%s is not a tombstone table (schema %s)", store.URL(), schema)
	}
	tc := tombstoneCut{cutoff: cutoff, at: at, ord: ord, nkey: ord} // key columns come first
	// Files() is shared: these are copies of its elements.
	var small, rest []delta.Add
	for _, f := range snap.Files() {
		if f.Size < target/4 && f.DeletionVector == nil {
			small = append(small, f)
		} else {
			rest = append(rest, f)
		}
	}
	var bins [][]delta.Add
	if len(small) >= tombstoneCompactMinFiles {
		for _, bin := range tombstoneBins(small, target) {
			if len(bin) < 2 {
				rest = append(rest, bin...)
				continue
			}
			bins = append(bins, bin)
		}
	} else {
		rest = append(rest, small...)
	}

	var removes []delta.Remove
	var adds []delta.Add
	// Outputs are written before the commit; when anything fails they are
	// unreferenced and vacuum deletes them later.
	for _, bin := range bins {
		a, m, err := mergeTombstones(ctx, store, md, bin, tc, target)
		if err != nil {
			return res, fmt.Errorf("compact %d tombstone files: %w", len(bin), err)
		}
		// A merge that dropped nothing only rearranges rows.
		changed := m.Expired+m.Superseded > 0
		for i := range a {
			a[i].DataChange = changed
		}
		for _, f := range bin {
			removes = append(removes, f.Remove(now.UnixMilli(), changed))
		}
		adds = append(adds, a...)
		res.Expired += m.Expired
		res.Superseded += m.Superseded
		res.Copied += m.Copied
		res.FilesCompacted += len(bin)
	}
	for _, f := range rest {
		if !tc.fileMayExpire(md, f) {
			continue
		}
		rw, err := delta.RewriteFile(ctx, store, md, f, tc.rewriteOptions(schema, md, target))
		if err != nil {
			return res, fmt.Errorf("expire tombstones of %s: %w", f.Path, err)
		}
		res.RowGroupsCopied += rw.RowGroupsCopied
		res.RowGroupsDecoded += rw.RowGroupsDecoded
		if rw.Dropped == 0 {
			// Stats were missing or coarser than the values (Delta keeps
			// timestamps to the millisecond): the file stays as it is.
			discardOutputs(ctx, store, rw.Adds)
			continue
		}
		removes = append(removes, f.Remove(now.UnixMilli(), true))
		adds = append(adds, rw.Adds...)
		res.Expired += rw.Dropped
		res.Copied += rw.Rows
		res.FilesRewritten++
	}
	if len(removes) == 0 {
		return res, nil
	}
	res.FilesAdded = len(adds)
	deleted := res.Expired + res.Superseded
	var tx *delta.Transaction
	if deleted > 0 {
		tx = snap.NewTransaction(delta.Operation{Name: "DELETE", Parameters: map[string]string{"predicate": fmt.Sprintf(`["%s < '%s'"]`, cdc.ColDeletedAt, cutoff)}})
		tx.SetMetrics(map[string]string{
			"numDeletedRows":  strconv.FormatInt(deleted, 10),
			"numCopiedRows":   strconv.FormatInt(res.Copied, 10),
			"numRemovedFiles": strconv.Itoa(len(removes)),
			"numAddedFiles":   strconv.Itoa(len(adds)),
		})
	} else {
		tx = snap.NewTransaction(delta.Operation{Name: "OPTIMIZE", Parameters: map[string]string{"predicate": "[]", "zOrderBy": "[]", "auto": "true"}})
		tx.SetMetrics(map[string]string{"numRemovedFiles": strconv.Itoa(len(removes)), "numAddedFiles": strconv.Itoa(len(adds))})
	}
	// Merges only append tombstones: the files read are all this commit
	// depends on.
	for _, r := range removes {
		tx.ReadFiles(r.Path)
	}
	tx.Remove(removes...)
	tx.Add(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit tombstone expiry to %s: %w", store.URL(), err)
	}
	return res, nil
}

// tombstoneCut is the expiry rule over tombstone rows: positions of the
// deletion time, the order and the key columns (the first nkey), and the
// cutoff.
type tombstoneCut struct {
	cutoff  value.Micros
	at, ord int
	nkey    int
}

// expired reports whether a deletion time is before the cutoff. The column
// is not nullable; a null there gives no age to judge, so the tombstone is
// kept, as RowGroupFilter keeps the null rows of a copied row group.
func (c tombstoneCut) expired(v any) bool {
	ts, ok := v.(value.Micros)
	return ok && ts < c.cutoff
}

// rewriteOptions drop the expired rows of a file of the table (schema and
// md), copying the row groups without one verbatim.
func (c tombstoneCut) rewriteOptions(schema value.StructType, md delta.Metadata, target int64) delta.RewriteOptions {
	return delta.RewriteOptions{
		Write:           delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, DataChange: true},
		TargetFileBytes: target,
		Keys:            []string{cdc.ColDeletedAt},
		Drop:            func(k []any) bool { return c.expired(k[0]) },
		RowGroupFilter:  c.rowGroupFilter(),
	}
}

// rowGroupFilter keeps the row groups whose least deletion time is before
// the cutoff: the others are copied without decoding.
func (c tombstoneCut) rowGroupFilter() *delta.RowGroupFilter {
	return &delta.RowGroupFilter{Column: cdc.ColDeletedAt, Keep: func(lo, _ any) bool {
		ts, ok := lo.(value.Micros)
		return !ok || ts < c.cutoff
	}}
}

// fileMayExpire reports whether file f can hold an expired tombstone: its
// stats' least deletion time is before the cutoff, or unknown. Stats
// truncate timestamps to milliseconds, downwards for the minimum, so a
// minimum at or after the cutoff is exact enough to skip the file.
func (c tombstoneCut) fileMayExpire(md delta.Metadata, f delta.Add) bool {
	if delta.ColumnMappingMode(md) != delta.ColumnMappingNone || f.DeletionVector != nil {
		return true // stats name physical columns or count deleted rows
	}
	st, err := delta.ParseStats(f.Stats)
	if err != nil || f.Stats == "" {
		return true
	}
	if st.NumRecords == 0 {
		return false
	}
	lo, _, ok := st.MinMax(cdc.ColDeletedAt, value.Timestamp)
	return !ok || c.expired(lo)
}

// tombstoneBins groups small files into bins of about target bytes and at
// most tombstoneMergeFanIn files, in path order.
func tombstoneBins(files []delta.Add, target int64) [][]delta.Add {
	var bins [][]delta.Add
	var cur []delta.Add
	var size int64
	for _, f := range files {
		if len(cur) > 0 && (size+f.Size > target || len(cur) == tombstoneMergeFanIn) {
			bins = append(bins, cur)
			cur, size = nil, 0
		}
		cur = append(cur, f)
		size += f.Size
	}
	if len(cur) > 0 {
		bins = append(bins, cur)
	}
	return bins
}

// mergeTombstones streams the rows of files (each sorted by key, as merges
// and expiry write them) into new files in key order, leaving out expired
// rows and, of the rows of one key that meet, all but the one with the
// greatest order. Memory holds about a row group per file (mergeRows) and
// one of the output. Files not sorted by key still come out whole, only
// less clustered and with fewer duplicates dropped.
func mergeTombstones(ctx context.Context, store objstore.Store, md delta.Metadata, files []delta.Add, c tombstoneCut, target int64) ([]delta.Add, tombstoneExpiry, error) {
	var m tombstoneExpiry
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return nil, m, err
	}
	w := delta.NewRollingWriter(ctx, store, delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, DataChange: true}, target)
	var pending []any
	var pendingKey, key []byte
	flush := func() error {
		if pending == nil {
			return nil
		}
		m.Copied++
		return w.Write(pending)
	}
	byKey := func(a, b []any) bool { return value.CompareKeys(a[:c.nkey], b[:c.nkey]) < 0 }
	err = mergeRows(ctx, store, md, files, byKey, func(row []any) error {
		if c.expired(row[c.at]) {
			m.Expired++
			return nil
		}
		key = cdc.AppendKeyText(key[:0], row[:c.nkey])
		if pending != nil && bytes.Equal(key, pendingKey) {
			m.Superseded++
			o, _ := row[c.ord].([]byte)
			if po, _ := pending[c.ord].([]byte); bytes.Compare(o, po) > 0 {
				pending = row
			}
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		pending, pendingKey = row, append(pendingKey[:0], key...)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		w.Abort()
		return nil, m, err
	}
	adds, err := w.Close()
	if err != nil {
		return nil, m, err
	}
	return adds, m, nil
}

// discardOutputs deletes files written for a rewrite that is not committed.
// Failures are left to vacuum, which deletes unreferenced files anyway.
func discardOutputs(ctx context.Context, store objstore.Store, adds []delta.Add) {
	for _, a := range adds {
		if name, err := url.PathUnescape(a.Path); err == nil {
			_ = store.Delete(ctx, name)
		}
	}
}
