package cdc

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/parquet-go/parquet-go/format"
)

func TestFirstKeyFilterKeepsARangeOnlyWhenABatchKeyFallsInIt(t *testing.T) {
	keys := []any{int64(5), int64(10), int64(20)}
	for _, tc := range []struct {
		name   string
		lo, hi any
		want   bool
	}{
		{"a range between two keys is skipped", int64(6), int64(9), false},
		{"a range ending on a key is kept", int64(0), int64(5), true},
		{"a range starting on a key is kept", int64(20), int64(30), true},
		{"a range holding a middle key is kept", int64(9), int64(11), true},
		{"a range below every key is skipped", int64(-3), int64(4), false},
		{"a range above every key is skipped", int64(21), int64(1 << 40), false},
		{"a one-value range equal to a key is kept", int64(10), int64(10), true},
		{"bounds of another type than the keys are kept", int32(6), int32(9), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := firstKeyFilter("id", keys)
			if f == nil || f.Column != "id" {
				t.Fatalf("filter = %+v, want one on column id", f)
			}
			if got := f.Keep(tc.lo, tc.hi); got != tc.want {
				t.Errorf("Keep(%v, %v) = %v, want %v", tc.lo, tc.hi, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		firsts []any
	}{
		{"no keys give no filter", nil},
		{"a null first key value gives no filter", []any{nil, int64(3)}},
		{"first key values of mixed types give no filter", []any{int32(1), int64(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := firstKeyFilter("id", tc.firsts); f != nil {
				t.Errorf("filter = %+v, want nil", f)
			}
		})
	}
}

// readCounter counts the bytes read from a store.
type readCounter struct {
	objstore.Store
	n *atomic.Int64
}

func (s readCounter) NewReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	r, err := s.Store.NewReader(ctx, name, off, length)
	if err != nil {
		return nil, err
	}
	return countingReader{r, s.n}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

func TestMergeIntoAStateFileOfManyRowGroupsReadsAndRewritesOnlyTheOneTouched(t *testing.T) {
	m, _ := seedManyRowGroups(t)
	ctx, tabs, key := m.ctx, m.tabs, m.key

	t.Run("the lookup reads less of the file than without the filter and still finds the key", func(t *testing.T) {
		var n atomic.Int64
		counted, err := delta.Open(readCounter{tabs.State, &n}).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		probe := toChange(t, genEvent(9000, 2500, "eu", false, 0))
		read := func(keys []Change) (int64, *stored) {
			found := map[string]*stored{probe.KeyText: {}}
			n.Store(0)
			err := lookup(ctx, counted, counted.Files(), key, keys, found, nil, func(s *stored, order []byte, path string, pos int64) {
				s.rowOrder = order
				s.rows = append(s.rows, rowAt{path, pos})
			})
			if err != nil {
				t.Fatal(err)
			}
			return n.Load(), found[probe.KeyText]
		}
		all, plain := read(nil) // no keys: no filter, every row group is read
		some, filtered := read([]Change{probe})
		if plain.rowOrder == nil || filtered.rowOrder == nil || string(plain.rowOrder) != string(filtered.rowOrder) {
			t.Fatalf("found order %x with the filter, %x without", filtered.rowOrder, plain.rowOrder)
		}
		if len(plain.rows) != 1 || len(filtered.rows) != 1 || plain.rows[0] != filtered.rows[0] {
			t.Fatalf("found the row at %v with the filter, %v without: skipped row groups must still count", filtered.rows, plain.rows)
		}
		t.Logf("lookup read %d bytes with the filter, %d without", some, all)
		if some >= all {
			t.Errorf("lookup read %d bytes with the row-group filter, %d without: nothing was skipped", some, all)
		}
	})

	applyClustered(m)
	m.check()
}

// seedManyRowGroups merges 5000 keys into a new table, in a state file of
// a row group per write batch.
func seedManyRowGroups(t *testing.T) (*modelRun, *delta.Snapshot) {
	t.Helper()
	m := newModelRun(t, Options{RowGroupBytes: 1}) // a row group per write batch
	var seed []datastream.Event
	for i := range 5000 {
		seed = append(seed, genEvent(uint64(i+1), int64(i), "eu", false, int64(i)))
	}
	m.apply(1, seed)
	snap, err := delta.Open(m.tabs.State).Snapshot(m.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.NumFiles() != 1 {
		t.Fatalf("state has %d files, want 1", snap.NumFiles())
	}
	return m, snap
}

// applyClustered merges one update, one delete and one insert, clustered
// in one row group of seedManyRowGroups' file, and checks that only that
// row group was re-encoded.
func applyClustered(m *modelRun) {
	m.t.Helper()
	r := m.apply(2, []datastream.Event{
		genEvent(10_001, 2500, "eu", false, 7),
		genEvent(10_002, 2501, "eu", true, 0),
		genEvent(10_003, 2502, "xx", false, 8),
	})
	if r.Updated != 1 || r.Deleted != 1 || r.Inserted != 1 {
		m.t.Errorf("updated/deleted/inserted = %d/%d/%d, want 1/1/1", r.Updated, r.Deleted, r.Inserted)
	}
	if r.RowGroupsDecoded != 1 || r.RowGroupsCopied < 3 {
		m.t.Errorf("row groups decoded %d, copied %d: want the one holding the keys decoded and the others (several) copied", r.RowGroupsDecoded, r.RowGroupsCopied)
	}
}

// TestMergeIntoAStateFileWithoutBloomFiltersCopiesItsRowGroups: a state
// file written before state files had bloom filters (here: the merge's file
// rewritten without them) keeps the row groups a clustered batch does not
// touch verbatim, and the rewritten file carries no filter, as its source
// (a copy that had to build one would re-encode every row group).
func TestMergeIntoAStateFileWithoutBloomFiltersCopiesItsRowGroups(t *testing.T) {
	m, snap := seedManyRowGroups(t)
	ctx, tabs := m.ctx, m.tabs
	old := snap.Files()[0]
	rw, err := delta.RewriteFile(ctx, tabs.State, snap.Metadata(), old, delta.RewriteOptions{
		Write: delta.WriteOptions{Schema: snap.Schema(), PartitionColumns: snap.PartitionColumns(), PageBytes: StatePageBytes},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(delta.Operation{Name: "OPTIMIZE"})
	tx.Remove(old.Remove(time.Now().UnixMilli(), false))
	tx.Add(rw.Adds...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	filters := func() (with, without int) {
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		eachRowGroup(t, tabs.State, snap, func(_ string, _ int, rg format.RowGroup) {
			if rg.Columns[0].MetaData.BloomFilterOffset > 0 {
				with++
			} else {
				without++
			}
		})
		return with, without
	}
	if with, without := filters(); with != 0 || without < 4 {
		t.Fatalf("before the merge: %d row groups with a filter, %d without; want none with, several without", with, without)
	}

	// The insert goes to a file of its own, which has a filter.
	applyClustered(m)
	if with, without := filters(); with > 1 || without < 4 {
		t.Errorf("after the merge: %d row groups with a filter, %d without; want the rewritten file without (only the upserts' file may have one)", with, without)
	}
	m.check()
}
