package pipeline

import (
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
}

// Maintain compacts a table's Delta tables (bin-packs small files; the
// current state is re-clustered by key), expires tombstones past their
// retention, writes checkpoints, vacuums unreferenced files, cleans up
// expired log entries and deletes staged files already merged. It runs
// under the table's lease so it never races a merge of the same table.
func (p *Pipeline) Maintain(ctx context.Context, table string) (MaintainResult, error) {
	res := MaintainResult{Table: table}
	tabs, err := p.Tables(table)
	if err != nil {
		return res, err
	}
	lease, err := p.Coord.Acquire(ctx, table, p.holder(), p.leaseTTL())
	if errors.Is(err, coord.ErrLeaseHeld) {
		res.Busy = true
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("maintain %s: %w", table, err)
	}
	defer func() {
		if err := p.Coord.Release(context.WithoutCancel(ctx), lease); err != nil && !errors.Is(err, coord.ErrLeaseLost) {
			p.log().Warn("release after maintenance failed", "table", table, "error", err)
		}
	}()
	tc := p.Config.Table(table)
	target := tc.TargetFileBytes
	now := p.now()
	for _, t := range []struct {
		store  objstore.Store
		sorted bool
	}{{tabs.State, true}, {tabs.History, false}} {
		n, into, err := compact(ctx, t.store, target, t.sorted, now)
		if err != nil {
			return res, fmt.Errorf("maintain %s: compact %s: %w", table, t.store.URL(), err)
		}
		res.CompactedFiles += n
		res.CompactedInto += into
	}
	expired, err := expireTombstones(ctx, tabs.Tombstones, time.Duration(tc.TombstoneRetention), target, now)
	if err != nil {
		return res, fmt.Errorf("maintain %s: expire tombstones: %w", table, err)
	}
	res.ExpiredTombstones = expired
	if err := p.Coord.CheckLease(ctx, lease); err != nil {
		return res, fmt.Errorf("maintain %s: %w", table, err)
	}
	for _, store := range []objstore.Store{tabs.State, tabs.History, tabs.Tombstones} {
		tab := delta.Open(store)
		snap, err := tab.Snapshot(ctx)
		if errors.Is(err, delta.ErrNotATable) {
			continue
		}
		if err != nil {
			return res, err
		}
		if snap.CheckpointVersion() < snap.Version() {
			if err := snap.WriteCheckpoint(ctx); err != nil {
				return res, fmt.Errorf("maintain %s: checkpoint %s: %w", table, store.URL(), err)
			}
			res.Checkpoints++
		}
		vr, err := tab.Vacuum(ctx, delta.VacuumOptions{Now: p.Now})
		if err != nil {
			return res, fmt.Errorf("maintain %s: vacuum %s: %w", table, store.URL(), err)
		}
		res.VacuumedFiles += len(vr.Files)
		cr, err := tab.CleanupLog(ctx, delta.CleanupOptions{Now: p.Now})
		if err != nil {
			return res, fmt.Errorf("maintain %s: log cleanup %s: %w", table, store.URL(), err)
		}
		res.LogFilesDeleted += len(cr.Deleted)
	}
	merged, err := p.Coord.ListFiles(ctx, table, coord.StateMerged)
	if err != nil {
		return res, err
	}
	for _, f := range merged {
		if f.StagedPath == "" {
			continue
		}
		// The manifest names its Parquet file (a fresh name per staging
		// attempt, so a replay never collides with an earlier attempt).
		names := []string{f.StagedPath}
		if m, err := p.readStaged(ctx, f.StagedPath); err == nil {
			if n, err := url.PathUnescape(m.Add.Path); err == nil {
				names = append([]string{n}, names...)
			}
		}
		for _, name := range names {
			err := p.Lake.Delete(ctx, name)
			switch {
			case err == nil:
				res.StagedFilesDeleted++
			case !errors.Is(err, objstore.ErrNotExist):
				return res, fmt.Errorf("maintain %s: delete staged %s: %w", table, name, err)
			}
		}
	}
	p.log().Info("table maintained", "event", "maintained", "table", table, "compacted", res.CompactedFiles, "vacuumed", res.VacuumedFiles, "tombstones_expired", res.ExpiredTombstones)
	return res, nil
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	md := snap.Metadata()
	type stream struct {
		ch   chan []any
		errc chan error
		head []any
	}
	streams := make([]*stream, len(files))
	for i, f := range files {
		s := &stream{ch: make(chan []any, 256), errc: make(chan error, 1)}
		streams[i] = s
		go func() {
			defer close(s.ch)
			s.errc <- delta.ReadFile(ctx, snap.Store(), md, f, delta.ReadOptions{}, func(row []any) error {
				select {
				case s.ch <- row:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}()
	}
	next := func(s *stream) error {
		row, ok := <-s.ch
		if ok {
			s.head = row
			return nil
		}
		s.head = nil
		if err := <-s.errc; err != nil {
			return err
		}
		s.errc <- nil // keep the channel answering
		return nil
	}
	for _, s := range streams {
		if err := next(s); err != nil {
			return nil, err
		}
	}
	// Each output file holds one partition; partition values come from the
	// first input (all inputs share them).
	pv := map[string]any{}
	for _, c := range md.PartitionColumns {
		fi := schema.Index(c)
		if fi < 0 {
			continue
		}
		if streams[0].head != nil {
			pv[c] = streams[0].head[fi]
		}
	}
	// dataChange=false: compaction rearranges rows, it changes none.
	w := delta.NewRollingWriter(ctx, snap.Store(), delta.WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, PartitionValues: pv}, target)
	less := func(a, b []any) bool {
		for _, k := range keyCols {
			if c := value.Compare(a[k], b[k]); c != 0 {
				return c < 0
			}
		}
		return false
	}
	for {
		var best *stream
		for _, s := range streams {
			if s.head == nil {
				continue
			}
			if best == nil || (sorted && less(s.head, best.head)) {
				best = s
			}
		}
		if best == nil {
			break
		}
		if err := w.Write(best.head); err != nil {
			w.Abort()
			return nil, err
		}
		if err := next(best); err != nil {
			w.Abort()
			return nil, err
		}
	}
	return w.Close()
}

// expireTombstones rewrites the tombstone table without tombstones older
// than the retention, keeping the newest tombstone per key. Expired keys
// are counted and logged by the caller: a delete older than the retention
// can then be undone by an even older late event, which is the documented
// trade-off of a bounded tombstone table.
func expireTombstones(ctx context.Context, store objstore.Store, retention time.Duration, target int64, now time.Time) (int64, error) {
	snap, err := delta.Open(store).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	schema := snap.Schema()
	at := schema.Index(cdc.ColDeletedAt)
	ord := schema.Index(cdc.ColOrder)
	if at < 0 || ord < 0 {
		return 0, fmt.Errorf("%s is not a tombstone table (schema %s)", store.URL(), schema)
	}
	cutoff := value.MicrosOf(now.Add(-retention))
	nkey := ord // key columns come first
	latest := map[string][]any{}
	var expired, total int64
	files := snap.Files()
	for _, f := range files {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			total++
			if ts, _ := row[at].(value.Micros); ts < cutoff {
				expired++
				return nil
			}
			k := cdc.KeyText(row[:nkey])
			if cur, ok := latest[k]; !ok || string(row[ord].([]byte)) > string(cur[ord].([]byte)) {
				latest[k] = row
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if expired == 0 && int64(len(latest)) == total && len(files) < 8 {
		return 0, nil // nothing to drop and few files: leave it
	}
	rows := make([][]any, 0, len(latest))
	for _, r := range latest {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return value.CompareKeys(rows[i][:nkey], rows[j][:nkey]) < 0 })
	w := delta.NewRollingWriter(ctx, store, delta.WriteOptions{Schema: schema, DataChange: true}, target)
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			w.Abort()
			return 0, err
		}
	}
	adds, err := w.Close()
	if err != nil {
		return 0, err
	}
	tx := snap.NewTransaction(delta.Operation{Name: "DELETE", Parameters: map[string]string{"predicate": fmt.Sprintf(`["%s < '%s'"]`, cdc.ColDeletedAt, cutoff)}})
	tx.ReadWholeTable()
	for _, f := range files {
		tx.Remove(f.Remove(now.UnixMilli(), true))
	}
	tx.Add(adds...)
	tx.SetMetrics(map[string]string{"numDeletedRows": strconv.FormatInt(total-int64(len(rows)), 10), "numCopiedRows": strconv.Itoa(len(rows))})
	if _, err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return expired, nil
}
