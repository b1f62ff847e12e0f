package cdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Tombstone compaction limits. A tombstone table gains one small file per
// merge that deletes anything, so small files are merged once they are
// numerous enough to slow lookups; each merge reads at most
// tombstoneMergeFanIn files at once (one goroutine and about one row group
// each), whatever the table's size. Tombstone rows are narrow: bins of
// that many files are merged in one pass, with no intermediate file.
const (
	tombstoneCompactMinFiles = 8
	tombstoneMergeFanIn      = 32
)

// ExpireOptions configure ExpireTombstones.
type ExpireOptions struct {
	// Retention keeps the tombstones deleted less than Retention ago.
	Retention time.Duration
	// TargetFileBytes is the size of the files written; tombstone files
	// smaller than a quarter of it are small and get merged.
	TargetFileBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// DryRun counts what would expire (reading the files that may hold
	// expired rows) without writing or committing anything.
	DryRun bool
}

// ExpireResult counts what one expiry run did.
type ExpireResult struct {
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
	// BytesRemoved and BytesAdded are the sizes of the files removed and
	// added (on a dry run, of those that would be removed).
	BytesRemoved, BytesAdded int64
	// Version is the version committed; 0 when nothing was (a dry run, or
	// nothing to expire).
	Version int64
}

// ExpireTombstones removes from the tombstone table in store the
// tombstones deleted before opts.Now − opts.Retention (the cutoff), and
// compacts its small files, streaming: memory holds about a row group per
// file being read, never the table. The caller counts and logs the expired
// keys: a delete older than the retention can then be undone by an even
// older late event, which is the documented trade-off of a bounded
// tombstone table.
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
// without an expired row verbatim. Rows a file's deletion vector deletes
// are left out of whatever is written. One commit replaces them all.
func ExpireTombstones(ctx context.Context, store objstore.Store, opts ExpireOptions) (ExpireResult, error) {
	plan, err := planExpiry(ctx, store, opts)
	if err != nil || plan == nil {
		return ExpireResult{}, err
	}
	if opts.DryRun {
		return plan.dryRun(ctx)
	}
	removes, adds, res, err := plan.rewrite(ctx)
	if err != nil {
		return res, err
	}
	snap, cutoff := plan.snap, plan.tc.cutoff
	// A table that cannot tell whether tombstones were lost (created by
	// an older release, see PropExpiryRecorded) records this cutoff even
	// when nothing expires now: the history's duplicate check then trusts
	// its tombstones again.
	_, recorded := expiredBefore(snap)
	if len(removes) == 0 {
		if recorded {
			return res, nil
		}
		tx := expiryDelete(snap, cutoff)
		tx.SetMetrics(map[string]string{"numDeletedRows": "0", "numRemovedFiles": "0", "numAddedFiles": "0"})
		tx.SetTxn(expiryAppID, expiryTxnVersion(snap, cutoff))
		committed, err := tx.Commit(ctx)
		if err != nil {
			return res, fmt.Errorf("record the tombstone expiry cutoff of %s: %w", store.URL(), err)
		}
		res.Version = committed.Version()
		return res, nil
	}
	res.FilesAdded = len(adds)
	deleted := res.Expired + res.Superseded
	var tx *delta.Transaction
	if deleted > 0 {
		tx = expiryDelete(snap, cutoff)
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
	for _, a := range adds {
		res.BytesAdded += a.Size
	}
	tx.Remove(removes...)
	tx.Add(adds...)
	if res.Expired > 0 || !recorded {
		tx.SetTxn(expiryAppID, expiryTxnVersion(snap, cutoff))
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("commit tombstone expiry to %s: %w", store.URL(), err)
	}
	res.Version = committed.Version()
	return res, nil
}

// expiryDelete is the DELETE transaction of an expiry at cutoff.
func expiryDelete(snap *delta.Snapshot, cutoff value.Micros) *delta.Transaction {
	return snap.NewTransaction(delta.Operation{Name: "DELETE", Parameters: map[string]string{"predicate": fmt.Sprintf(`["%s < '%s'"]`, ColDeletedAt, cutoff)}})
}

// expiryPlan is what one expiry run reads: bins of small files to merge
// together, and the other files, which are rewritten when their stats
// show an expired row.
type expiryPlan struct {
	store  objstore.Store
	snap   *delta.Snapshot
	tc     tombstoneCut
	now    time.Time
	target int64
	bins   [][]delta.Add
	rest   []delta.Add
}

// planExpiry reads the tombstone table in store and plans its expiry; a
// nil plan when there is no table yet.
func planExpiry(ctx context.Context, store objstore.Store, opts ExpireOptions) (*expiryPlan, error) {
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	cutoff := value.MicrosOf(now.Add(-opts.Retention))
	target := opts.TargetFileBytes
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return nil, nil // no delete yet
	}
	if err != nil {
		return nil, fmt.Errorf("open tombstones %s: %w", store.URL(), err)
	}
	schema := snap.Schema()
	at := schema.Index(ColDeletedAt)
	ord := schema.Index(ColOrder)
	if at < 0 || ord < 1 || !value.Equal(schema.Fields[ord].Type, value.Binary) {
		return nil, fmt.Errorf("%s is not a tombstone table (schema %s)", store.URL(), schema)
	}
	p := &expiryPlan{store: store, snap: snap, now: now, target: target,
		tc: tombstoneCut{cutoff: cutoff, at: at, ord: ord, nkey: ord}} // key columns come first
	// Files() is shared: these are copies of its elements. Small files
	// with a deletion vector merge like the others: ReadMerged leaves out
	// the rows their vectors delete, and the remove carries the vector.
	var small []delta.Add
	for _, f := range snap.Files() {
		if f.Size < target/4 {
			small = append(small, f)
		} else {
			p.rest = append(p.rest, f)
		}
	}
	if len(small) < tombstoneCompactMinFiles {
		p.rest = append(p.rest, small...)
		return p, nil
	}
	for _, bin := range delta.PackBins(small, target, tombstoneMergeFanIn) {
		if len(bin) < 2 {
			p.rest = append(p.rest, bin...)
			continue
		}
		p.bins = append(p.bins, bin)
	}
	return p, nil
}

// rewrite writes the plan's new files: the bins merged, the other files
// with an expired row rewritten without it. Outputs are written before the
// commit; when anything fails they are unreferenced and vacuum deletes
// them later.
func (p *expiryPlan) rewrite(ctx context.Context) (removes []delta.Remove, adds []delta.Add, res ExpireResult, err error) {
	store, md, tc, target := p.store, p.snap.Metadata(), p.tc, p.target
	nowMs := p.now.UnixMilli()
	for _, bin := range p.bins {
		a, m, err := mergeTombstones(ctx, store, md, bin, tc, target)
		if err != nil {
			return nil, nil, res, fmt.Errorf("compact %d tombstone files: %w", len(bin), err)
		}
		// A merge that dropped nothing only rearranges rows.
		changed := m.Expired+m.Superseded > 0
		for i := range a {
			a[i].DataChange = changed
		}
		for _, f := range bin {
			removes = append(removes, f.Remove(nowMs, changed))
			res.BytesRemoved += f.Size
		}
		adds = append(adds, a...)
		res.Expired += m.Expired
		res.Superseded += m.Superseded
		res.Copied += m.Copied
		res.FilesCompacted += len(bin)
	}
	schema := p.snap.Schema()
	for _, f := range p.rest {
		if !tc.fileMayExpire(md, f) {
			continue
		}
		rw, err := delta.RewriteFile(ctx, store, md, f, tc.rewriteOptions(schema, md, target))
		if err != nil {
			return nil, nil, res, fmt.Errorf("expire tombstones of %s: %w", f.Path, err)
		}
		res.RowGroupsCopied += rw.RowGroupsCopied
		res.RowGroupsDecoded += rw.RowGroupsDecoded
		if rw.Dropped == 0 {
			// Stats were missing or coarser than the values (Delta keeps
			// timestamps to the millisecond): the file stays as it is.
			delta.DiscardFiles(ctx, store, rw.Adds)
			continue
		}
		removes = append(removes, f.Remove(nowMs, true))
		res.BytesRemoved += f.Size
		adds = append(adds, rw.Adds...)
		res.Expired += rw.Dropped
		res.Copied += rw.Rows
		res.FilesRewritten++
	}
	return removes, adds, res, nil
}

// dryRun counts what rewrite would do without writing: the expired rows
// of the files it would read, the small files it would merge and the
// other files it would rewrite, and their bytes. Superseded rows, which
// only a merge finds, are not counted.
func (p *expiryPlan) dryRun(ctx context.Context) (ExpireResult, error) {
	var res ExpireResult
	md := p.snap.Metadata()
	count := func(f delta.Add) (int64, error) {
		var n int64
		err := delta.ReadFile(ctx, p.store, md, f, delta.ReadOptions{}, func(row []any) error {
			if p.tc.expired(row[p.tc.at]) {
				n++
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("count expired tombstones of %s: %w", f.Path, err)
		}
		return n, nil
	}
	for _, bin := range p.bins {
		for _, f := range bin {
			n, err := count(f)
			if err != nil {
				return res, err
			}
			res.Expired += n
			res.FilesCompacted++
			res.BytesRemoved += f.Size
		}
	}
	for _, f := range p.rest {
		if !p.tc.fileMayExpire(md, f) {
			continue
		}
		n, err := count(f)
		if err != nil {
			return res, err
		}
		if n > 0 {
			res.Expired += n
			res.FilesRewritten++
			res.BytesRemoved += f.Size
		}
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
		Write:           delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, DataChange: true, BloomFilterColumns: firstKeyColumn(schema), PageBytes: StatePageBytes},
		TargetFileBytes: target,
		Keys:            []string{ColDeletedAt},
		Drop:            func(k []any) bool { return c.expired(k[0]) },
		RowGroupFilter:  c.rowGroupFilter(),
	}
}

// rowGroupFilter keeps the row groups whose least deletion time is before
// the cutoff: the others are copied without decoding.
func (c tombstoneCut) rowGroupFilter() *delta.RowGroupFilter {
	return &delta.RowGroupFilter{Column: ColDeletedAt, Keep: func(lo, _ any) bool {
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
	lo, _, ok := st.MinMax(ColDeletedAt, value.Timestamp)
	return !ok || c.expired(lo)
}

// firstKeyColumn names the first key column of a tombstone schema (the key
// columns come first): the column merges look tombstones up by, which
// gets a bloom filter as in the files merges write.
func firstKeyColumn(schema value.StructType) []string {
	return []string{schema.Fields[0].Name}
}

// mergeTombstones streams the rows of files (each sorted by key, as merges
// and expiry write them) into new files in key order, leaving out expired
// rows and, of the rows of one key that meet, all but the one with the
// greatest order. Memory holds about a row group per file (delta.ReadMerged) and
// one of the output. Files not sorted by key still come out whole, only
// less clustered and with fewer duplicates dropped.
func mergeTombstones(ctx context.Context, store objstore.Store, md delta.Metadata, files []delta.Add, c tombstoneCut, target int64) ([]delta.Add, ExpireResult, error) {
	var m ExpireResult
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return nil, m, err
	}
	w := delta.NewRollingWriter(ctx, store, delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, DataChange: true, BloomFilterColumns: firstKeyColumn(schema), PageBytes: StatePageBytes}, target)
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
	err = delta.ReadMerged(ctx, store, md, files, delta.MergeOptions{Less: byKey, FanIn: tombstoneMergeFanIn}, func(row []any) error {
		if c.expired(row[c.at]) {
			m.Expired++
			return nil
		}
		key = AppendKeyText(key[:0], row[:c.nkey])
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
