package cdc

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// The clock of the expiry tests: tombstones deleted before cutoff expire.
var (
	expiryNow       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	expiryRetention = 7 * 24 * time.Hour
	expiryCutoff    = value.MicrosOf(expiryNow.Add(-expiryRetention))
	oldTS           = expiryCutoff - value.Micros(time.Hour/time.Microsecond)
	freshTS         = expiryCutoff + value.Micros(time.Hour/time.Microsecond)
)

// tomb is one tombstone row of a table keyed by a single long "id".
type tomb struct {
	id        int64
	order     uint64
	deletedAt value.Micros
}

func (tb tomb) row() []any {
	order := binary.BigEndian.AppendUint64(nil, tb.order) // byte order = numeric order
	return []any{tb.id, order, fmt.Sprintf("pos-%d", tb.order), tb.deletedAt - 1000, tb.deletedAt}
}

func compareTombs(a, b tomb) int {
	return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.order, b.order), cmp.Compare(a.deletedAt, b.deletedAt))
}

// unexpired is the reference expiry: the rows deleted at or after cutoff.
func unexpired(rows []tomb) []tomb {
	var out []tomb
	for _, r := range rows {
		if r.deletedAt >= expiryCutoff {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, compareTombs)
	return out
}

func newTombstoneTable(t *testing.T, ctx context.Context) objstore.Store {
	t.Helper()
	store := objstore.NewMemory()
	source := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	schema, err := TombstoneSchema(source, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = delta.Open(store).Create(ctx, delta.CreateOptions{Schema: schema, Configuration: map[string]string{
		PropTable: "shop.customers", PropRole: "tombstones", PropKey: "id", PropExpiryRecorded: "true",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// asOlderRelease makes a tombstone table look as an older release made it:
// without PropExpiryRecorded.
func asOlderRelease(t *testing.T, ctx context.Context, store objstore.Store) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := snap.Metadata()
	delete(md.Configuration, PropExpiryRecorded)
	tx := snap.NewTransaction(delta.Operation{Name: "SET TBLPROPERTIES"})
	tx.SetMetadata(md)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// fileOptions shape a test data file.
type fileOptions struct {
	rowGroupRows int64 // 0: the default (one row group for small files)
	noStats      bool  // commit the add without stats
}

// appendTombstones commits one data file holding rows (sorted by key first,
// as the engine writes them) and returns its add.
func appendTombstones(t *testing.T, ctx context.Context, store objstore.Store, rows []tomb, fo fileOptions) delta.Add {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b tomb) int { return cmp.Compare(a.id, b.id) })
	w, err := delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: snap.Schema(), DataChange: true, RowGroupRows: fo.rowGroupRows})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r.row()); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fo.noStats {
		add.Stats = ""
	}
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append", "partitionBy": "[]"}})
	tx.Add(add)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return add
}

// readTombstones returns the rows of the current snapshot, sorted, and the
// snapshot.
func readTombstones(t *testing.T, ctx context.Context, store objstore.Store) ([]tomb, *delta.Snapshot) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []tomb
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			out = append(out, tomb{id: row[0].(int64), order: binary.BigEndian.Uint64(row[1].([]byte)), deletedAt: row[4].(value.Micros)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(out, compareTombs)
	return out, snap
}

// expiryOptions expire the tombstones deleted before expiryCutoff.
func expiryOptions(target int64) ExpireOptions {
	return ExpireOptions{Retention: expiryRetention, TargetFileBytes: target, Now: func() time.Time { return expiryNow }}
}

func expire(t *testing.T, ctx context.Context, store objstore.Store, target int64) ExpireResult {
	t.Helper()
	res, err := ExpireTombstones(ctx, store, expiryOptions(target))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func paths(snap *delta.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, f := range snap.Files() {
		out[f.Path] = true
	}
	return out
}

func lastCommit(t *testing.T, ctx context.Context, store objstore.Store) delta.HistoryEntry {
	t.Helper()
	h, err := delta.Open(store).History(ctx, 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %v (%d entries)", err, len(h))
	}
	return h[0]
}

func sameTombs(t *testing.T, got, want []tomb) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("tombstones differ:\n got  %v\n want %v", got, want)
	}
}

func TestExpireTombstonesRewritesOnlyFilesWithExpiredRows(t *testing.T) {
	ctx := context.Background()
	store := newTombstoneTable(t, ctx)
	allOld := []tomb{{1, 1, oldTS}, {2, 2, oldTS}}
	mixed := []tomb{{3, 3, oldTS}, {4, 4, freshTS}, {5, 5, expiryCutoff}, {6, 6, expiryCutoff - 1}}
	allFresh := []tomb{{7, 7, freshTS}, {8, 8, freshTS + 5}}
	a := appendTombstones(t, ctx, store, allOld, fileOptions{})
	b := appendTombstones(t, ctx, store, mixed, fileOptions{})
	c := appendTombstones(t, ctx, store, allFresh, fileOptions{})
	input := slices.Concat(allOld, mixed, allFresh)
	_, before := readTombstones(t, ctx, store)

	// Three small files are too few to compact: each is judged alone.
	res := expire(t, ctx, store, 1<<20)

	got, after := readTombstones(t, ctx, store)
	sameTombs(t, got, unexpired(input))
	if res.Expired != 4 || res.Copied != 2 || res.FilesRewritten != 2 || res.FilesCompacted != 0 {
		t.Fatalf("result %+v, want 4 expired (one at a microsecond before the cutoff), 2 copied, 2 files rewritten", res)
	}
	if after.Version() != before.Version()+1 {
		t.Fatalf("version %d -> %d, want one commit", before.Version(), after.Version())
	}
	p := paths(after)
	if !p[c.Path] {
		t.Fatalf("file without expired rows %s was rewritten: %v", c.Path, p)
	}
	if p[a.Path] || p[b.Path] {
		t.Fatalf("files with expired rows were kept: %v", p)
	}
	if len(p) != 2 {
		t.Fatalf("want the untouched file and the rewrite of the mixed one (the expired-only file leaves nothing), got %v", p)
	}
	for _, f := range after.Files() {
		if f.Path != c.Path && !f.DataChange {
			t.Fatalf("rewritten file %s has dataChange=false", f.Path)
		}
	}
	h := lastCommit(t, ctx, store)
	if h.Operation != "DELETE" || h.Metrics["numDeletedRows"] != "4" || h.Metrics["numCopiedRows"] != "2" {
		t.Fatalf("commit %s %v, want DELETE with numDeletedRows=4 numCopiedRows=2", h.Operation, h.Metrics)
	}
	if !strings.Contains(h.Parameters["predicate"], ColDeletedAt) {
		t.Fatalf("predicate %q does not name %s", h.Parameters["predicate"], ColDeletedAt)
	}
}

func TestExpireTombstonesCommitsNothingWhenNothingExpires(t *testing.T) {
	ctx := context.Background()
	t.Run("an absent table is not created", func(t *testing.T) {
		store := objstore.NewMemory()
		res, err := ExpireTombstones(ctx, store, expiryOptions(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		if res != (ExpireResult{}) {
			t.Fatalf("result %+v for an absent table", res)
		}
		if _, err := delta.Open(store).Snapshot(ctx); !errors.Is(err, delta.ErrNotATable) {
			t.Fatalf("snapshot after expiry: %v, want no table", err)
		}
	})
	t.Run("an empty table gets no commit", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		if res := expire(t, ctx, store, 1<<20); res != (ExpireResult{}) {
			t.Fatalf("result %+v for an empty table", res)
		}
		if _, snap := readTombstones(t, ctx, store); snap.Version() != 0 {
			t.Fatalf("version %d, want 0", snap.Version())
		}
	})
	t.Run("a table of an older release gets one commit recording the cutoff", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		asOlderRelease(t, ctx, store)
		appendTombstones(t, ctx, store, []tomb{{1, 1, expiryCutoff + 5}}, fileOptions{})
		_, before := readTombstones(t, ctx, store)
		if _, ok := expiredBefore(before); ok {
			t.Fatal("a table without the record claims to know its expiry cutoff")
		}
		expire(t, ctx, store, 1<<20)
		_, after := readTombstones(t, ctx, store)
		cutoff, ok := expiredBefore(after)
		if after.Version() != before.Version()+1 || !ok || cutoff != expiryCutoff {
			t.Fatalf("version %d -> %d, cutoff %v (known %v): want one commit recording %v", before.Version(), after.Version(), cutoff, ok, expiryCutoff)
		}
		expire(t, ctx, store, 1<<20)
		if _, again := readTombstones(t, ctx, store); again.Version() != after.Version() {
			t.Fatalf("a second expiry with nothing to do committed version %d", again.Version())
		}
	})
	t.Run("a table whose tombstones are all newer than the cutoff gets no commit", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		var input []tomb
		for i := range 7 { // fewer than tombstoneCompactMinFiles
			rows := []tomb{{int64(i), uint64(i), expiryCutoff + value.Micros(i)}}
			appendTombstones(t, ctx, store, rows, fileOptions{})
			input = append(input, rows...)
		}
		_, before := readTombstones(t, ctx, store)
		res := expire(t, ctx, store, 1<<20)
		got, after := readTombstones(t, ctx, store)
		if after.Version() != before.Version() || res.FilesAdded != 0 {
			t.Fatalf("version %d -> %d, result %+v: want no commit", before.Version(), after.Version(), res)
		}
		sameTombs(t, got, unexpired(input))
	})
}

func TestExpireTombstonesCopiesRowGroupsNewerThanTheCutoff(t *testing.T) {
	ctx := context.Background()
	store := newTombstoneTable(t, ctx)
	// Four row groups of 128 rows: all expired, all fresh, half and half,
	// all fresh.
	const groupRows = 128
	var input []tomb
	for g := range 4 {
		for i := range groupRows {
			ts := freshTS
			if g == 0 || g == 2 && i%2 == 0 {
				ts = oldTS - value.Micros(i)
			}
			id := int64(g*groupRows + i)
			input = append(input, tomb{id, uint64(id), ts})
		}
	}
	add := appendTombstones(t, ctx, store, input, fileOptions{rowGroupRows: groupRows})

	res := expire(t, ctx, store, 1<<20)

	got, after := readTombstones(t, ctx, store)
	sameTombs(t, got, unexpired(input))
	if res.Expired != groupRows+groupRows/2 {
		t.Fatalf("expired %d, want %d", res.Expired, groupRows+groupRows/2)
	}
	// The expired group leaves nothing, the fresh ones are copied as they
	// are and only the straddling one is decoded.
	if res.RowGroupsCopied != 2 || res.RowGroupsDecoded != 1 {
		t.Fatalf("row groups copied %d, decoded %d; want 2 and 1", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	if paths(after)[add.Path] || res.FilesRewritten != 1 {
		t.Fatalf("file %s was not rewritten: %+v", add.Path, res)
	}
}

func TestExpireTombstonesDoesNotDecodeAFileWithoutExpiredRows(t *testing.T) {
	ctx := context.Background()
	store := newTombstoneTable(t, ctx)
	var input []tomb
	for i := range 3 * 128 {
		input = append(input, tomb{int64(i), uint64(i), freshTS + value.Micros(i)})
	}
	// Without stats the file must be opened, but its row groups' bounds
	// show nothing expired: none is decoded and nothing is committed.
	add := appendTombstones(t, ctx, store, input, fileOptions{rowGroupRows: 128, noStats: true})
	_, before := readTombstones(t, ctx, store)

	res := expire(t, ctx, store, 1<<20)

	got, after := readTombstones(t, ctx, store)
	sameTombs(t, got, input)
	if res.RowGroupsCopied != 3 || res.RowGroupsDecoded != 0 {
		t.Fatalf("row groups copied %d, decoded %d; want 3 and 0", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	if after.Version() != before.Version() || !paths(after)[add.Path] {
		t.Fatalf("file %s was replaced (version %d -> %d)", add.Path, before.Version(), after.Version())
	}
	// The discarded copy is deleted, not left for vacuum.
	var parquet []string
	err := store.List(ctx, "", "", func(i objstore.Info) error {
		if strings.HasSuffix(i.Name, ".parquet") {
			parquet = append(parquet, i.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(parquet) != 1 {
		t.Fatalf("data files in the store: %v, want only %s", parquet, add.Path)
	}
}

func TestExpireTombstonesCompactsSmallFiles(t *testing.T) {
	ctx := context.Background()
	t.Run("many small files merge in key order, keeping the newest unexpired tombstone of each key", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		// Ten batches deleting overlapping keys: a key deleted, inserted
		// again and deleted again has a tombstone in several files, later
		// ones with greater orders and deletion times.
		var input []tomb
		order := uint64(0)
		for b := range 10 {
			ts := oldTS + value.Micros(b)*value.Micros(20*time.Minute/time.Microsecond) // straddles the cutoff
			var rows []tomb
			for id := int64(b % 3); id < 20; id += int64(b%4 + 1) {
				order++
				rows = append(rows, tomb{id, order, ts})
			}
			appendTombstones(t, ctx, store, rows, fileOptions{})
			input = append(input, rows...)
		}
		want := newestPerKey(unexpired(input))
		res := expire(t, ctx, store, 1<<20)
		got, after := readTombstones(t, ctx, store)
		sameTombs(t, got, want)
		if res.FilesCompacted != 10 || res.FilesAdded != 1 || after.NumFiles() != 1 {
			t.Fatalf("result %+v with %d files, want 10 files compacted into 1", res, after.NumFiles())
		}
		wantExpired := int64(len(input) - len(unexpired(input)))
		if res.Expired != wantExpired || res.Superseded != int64(len(unexpired(input))-len(want)) || res.Copied != int64(len(want)) {
			t.Fatalf("result %+v, want %d expired, %d superseded, %d copied", res, wantExpired, len(unexpired(input))-len(want), len(want))
		}
		assertClustered(t, ctx, store, after)
		if h := lastCommit(t, ctx, store); h.Operation != "DELETE" {
			t.Fatalf("operation %s, want DELETE", h.Operation)
		}
	})
	t.Run("small files that lose no row merge without a data change", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		var input []tomb
		for b := range 8 {
			rows := []tomb{{int64(b), uint64(b), freshTS}, {int64(b + 100), uint64(b + 100), freshTS}}
			appendTombstones(t, ctx, store, rows, fileOptions{})
			input = append(input, rows...)
		}
		res := expire(t, ctx, store, 1<<20)
		got, after := readTombstones(t, ctx, store)
		sameTombs(t, got, unexpired(input))
		if res.FilesCompacted != 8 || after.NumFiles() != 1 {
			t.Fatalf("result %+v with %d files, want 8 files compacted into 1", res, after.NumFiles())
		}
		if f := after.Files()[0]; f.DataChange {
			t.Fatalf("compacted file %s has dataChange=true though no row changed", f.Path)
		}
		if h := lastCommit(t, ctx, store); h.Operation != "OPTIMIZE" {
			t.Fatalf("operation %s, want OPTIMIZE", h.Operation)
		}
		assertClustered(t, ctx, store, after)
	})
	t.Run("a merge reads a bounded number of files at once", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		var input []tomb
		n := tombstoneMergeFanIn + 3
		for b := range n {
			rows := []tomb{{int64(b), uint64(b), freshTS}}
			appendTombstones(t, ctx, store, rows, fileOptions{})
			input = append(input, rows...)
		}
		res := expire(t, ctx, store, 1<<20)
		got, after := readTombstones(t, ctx, store)
		sameTombs(t, got, input)
		// The last bin has three files: it is merged too.
		if res.FilesCompacted != n || after.NumFiles() != 2 {
			t.Fatalf("result %+v with %d files, want %d files compacted into 2", res, after.NumFiles(), n)
		}
	})
}

// newestPerKey keeps, of rows sorted by compareTombs, the greatest order of
// each key.
func newestPerKey(rows []tomb) []tomb {
	var out []tomb
	for _, r := range rows {
		if len(out) > 0 && out[len(out)-1].id == r.id {
			out[len(out)-1] = r
			continue
		}
		out = append(out, r)
	}
	return out
}

// assertClustered checks each file's rows come in key order.
func assertClustered(t *testing.T, ctx context.Context, store objstore.Store, snap *delta.Snapshot) {
	t.Helper()
	for _, f := range snap.Files() {
		last := int64(-1 << 63)
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{Columns: []string{"id"}}, func(row []any) error {
			if id := row[0].(int64); id < last {
				return fmt.Errorf("key %d after %d", id, last)
			} else {
				last = id
			}
			return nil
		})
		if err != nil {
			t.Fatalf("file %s is not sorted by key: %v", f.Path, err)
		}
	}
}

// TestExpireTombstonesKeepsWhatLookupsSee checks random tombstone tables
// against the reference: every key's greatest unexpired order is still
// there (what the engine's lookup reads), nothing expired is, and every row
// left was in the input.
func TestExpireTombstonesKeepsWhatLookupsSee(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		target int64
	}{
		{"when small files are compacted", 1 << 20},
		{"when every file is rewritten alone", 1}, // nothing is small
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(5) {
				rng := rand.New(rand.NewPCG(seed, 7))
				store := newTombstoneTable(t, ctx)
				var input []tomb
				order := uint64(0)
				ts := oldTS - value.Micros(rng.IntN(3))*value.Micros(time.Hour/time.Microsecond)
				for range 9 + rng.IntN(6) {
					ts += value.Micros(rng.Int64N(int64(time.Hour / time.Microsecond)))
					var rows []tomb
					for id := range int64(40) {
						if rng.IntN(3) == 0 {
							order++
							rows = append(rows, tomb{id, order, ts})
						}
					}
					if len(rows) == 0 {
						continue
					}
					appendTombstones(t, ctx, store, rows, fileOptions{rowGroupRows: int64(1 + rng.IntN(256))})
					input = append(input, rows...)
				}
				res := expire(t, ctx, store, tc.target)
				got, _ := readTombstones(t, ctx, store)
				keep := unexpired(input)
				if !slices.Equal(newestPerKey(got), newestPerKey(keep)) {
					t.Fatalf("seed %d: newest tombstone per key differs:\n got  %v\n want %v", seed, newestPerKey(got), newestPerKey(keep))
				}
				for _, r := range got {
					if _, ok := slices.BinarySearchFunc(keep, r, compareTombs); !ok {
						t.Fatalf("seed %d: row %v is expired or was never written", seed, r)
					}
				}
				if res.Expired != int64(len(input)-len(keep)) {
					t.Fatalf("seed %d: expired %d, want %d", seed, res.Expired, len(input)-len(keep))
				}
			}
		})
	}
}

// objectReads counts the reads of each object of a store.
type objectReads struct {
	objstore.Store
	mu    sync.Mutex
	reads map[string]int
}

func (r *objectReads) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	r.mu.Lock()
	if r.reads == nil {
		r.reads = map[string]int{}
	}
	r.reads[name]++
	r.mu.Unlock()
	return r.Store.NewReader(ctx, name, offset, length)
}

func (r *objectReads) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[name]
}

func TestExpireTombstonesSkipsFilesByTheirStats(t *testing.T) {
	ctx := context.Background()
	mem := newTombstoneTable(t, ctx)
	fresh := appendTombstones(t, ctx, mem, []tomb{{1, 1, expiryCutoff}, {2, 2, freshTS}}, fileOptions{})
	stale := appendTombstones(t, ctx, mem, []tomb{{3, 3, oldTS}, {4, 4, freshTS}}, fileOptions{})
	store := &objectReads{Store: mem}

	res := expire(t, ctx, store, 1<<20)

	if n := store.count(fresh.Path); n != 0 {
		t.Fatalf("file %s, whose stats show no expired row, was read %d times", fresh.Path, n)
	}
	if store.count(stale.Path) == 0 || res.FilesRewritten != 1 || res.Expired != 1 {
		t.Fatalf("file %s with an expired row was not rewritten: %+v", stale.Path, res)
	}
}

func TestExpireTombstonesRowGroupFilterSparesReadingFreshRowGroups(t *testing.T) {
	ctx := context.Background()
	mem := newTombstoneTable(t, ctx)
	var input []tomb
	for i := range 4 * 128 {
		ts := freshTS
		if i < 128 {
			ts = oldTS
		}
		input = append(input, tomb{int64(i), uint64(i), ts})
	}
	add := appendTombstones(t, ctx, mem, input, fileOptions{rowGroupRows: 128})
	snap, err := delta.Open(mem).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ord := snap.Schema().Index(ColOrder)
	tc := tombstoneCut{cutoff: expiryCutoff, at: snap.Schema().Index(ColDeletedAt), ord: ord, nkey: ord}
	// The same rewrite without the filter reads the deletion times of every
	// row group; with it, only those of the row group that has expired rows.
	reads := map[bool]int{}
	for _, filtered := range []bool{true, false} {
		store := &objectReads{Store: mem}
		opts := tc.rewriteOptions(snap.Schema(), snap.Metadata(), 1<<20)
		if !filtered {
			opts.RowGroupFilter = nil
		}
		rw, err := delta.RewriteFile(ctx, store, snap.Metadata(), add, opts)
		if err != nil {
			t.Fatal(err)
		}
		if rw.Dropped != 128 || rw.Rows != 3*128 || rw.RowGroupsCopied != 3 {
			t.Fatalf("filtered=%v: rewrite %+v, want 128 dropped and 3 row groups copied", filtered, rw)
		}
		reads[filtered] = store.count(add.Path)
	}
	if reads[true] >= reads[false] {
		t.Fatalf("reads of %s: %d with the row-group filter, %d without; want fewer with it", add.Path, reads[true], reads[false])
	}
}

// failingReads fails every read of one object.
type failingReads struct {
	objstore.Store
	name string
}

var errInjected = errors.New("injected read failure")

func (f failingReads) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	if name == f.name {
		return nil, errInjected
	}
	return f.Store.NewReader(ctx, name, offset, length)
}

func TestExpireTombstonesCommitsNothingWhenAFileCannotBeRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files int // 8 or more small files are merged, fewer rewritten alone
	}{
		{"while merging small files", 9},
		{"while rewriting a file alone", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newTombstoneTable(t, ctx)
			var input []tomb
			var last delta.Add
			for b := range tc.files {
				rows := []tomb{{int64(b), uint64(b), oldTS}, {int64(b + 100), uint64(b + 100), freshTS}}
				last = appendTombstones(t, ctx, mem, rows, fileOptions{})
				input = append(input, rows...)
			}
			_, before := readTombstones(t, ctx, mem)
			_, err := ExpireTombstones(ctx, failingReads{Store: mem, name: last.Path}, expiryOptions(1<<20))
			if !errors.Is(err, errInjected) {
				t.Fatalf("expiry error %v, want the read failure", err)
			}
			got, after := readTombstones(t, ctx, mem)
			if after.Version() != before.Version() {
				t.Fatalf("version %d -> %d after a failed expiry", before.Version(), after.Version())
			}
			slices.SortFunc(input, compareTombs)
			sameTombs(t, got, input)
		})
	}
}

// TestExpireTombstonesDryRunCountsWhatARunExpires: a dry run counts the
// expired rows and the files a run rewrites and merges, and commits
// nothing; the run then expires as many.
func TestExpireTombstonesDryRunCountsWhatARunExpires(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files int
	}{
		{"files judged alone", 3},
		{"small files merged", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newTombstoneTable(t, ctx)
			var input []tomb
			for b := range tc.files {
				rows := []tomb{{int64(b), uint64(2 * b), oldTS}, {int64(b + 100), uint64(2*b + 1), freshTS}}
				appendTombstones(t, ctx, store, rows, fileOptions{})
				input = append(input, rows...)
			}
			_, before := readTombstones(t, ctx, store)
			o := expiryOptions(1 << 20)
			o.DryRun = true
			dry, err := ExpireTombstones(ctx, store, o)
			if err != nil {
				t.Fatal(err)
			}
			if _, snap := readTombstones(t, ctx, store); snap.Version() != before.Version() || dry.Version != 0 {
				t.Fatalf("a dry run committed version %d", snap.Version())
			}
			res := expire(t, ctx, store, 1<<20)
			if dry.Expired != int64(tc.files) || dry.Expired != res.Expired || dry.FilesRewritten != res.FilesRewritten ||
				dry.FilesCompacted != res.FilesCompacted || dry.BytesRemoved != res.BytesRemoved || dry.BytesRemoved != before.SizeBytes() {
				t.Fatalf("dry run %+v, run %+v, table of %d bytes", dry, res, before.SizeBytes())
			}
			got, after := readTombstones(t, ctx, store)
			sameTombs(t, got, unexpired(input))
			if res.Version != after.Version() || res.BytesAdded != after.SizeBytes() {
				t.Fatalf("run %+v, table at version %d of %d bytes", res, after.Version(), after.SizeBytes())
			}
		})
	}
}
