package cdc

import (
	"bytes"
	"context"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

func TestTheLookupSkipsRowGroupsByTheFirstKeyColumnsBloomFilter(t *testing.T) {
	m := newModelRun(t, Options{RowGroupBytes: 1}) // a row group per write batch
	ctx, tabs, key, apply := m.ctx, m.tabs, m.key, m.apply
	var seed []datastream.Event
	const rows = 20_000 // the data, not the footer, dominates what a lookup reads
	for i := range rows {
		seed = append(seed, genEvent(uint64(i+1), int64(2*i), "eu", i%100 == 0, int64(i))) // even ids
	}
	apply(1, seed)
	for _, tc := range []struct {
		name  string
		store objstore.Store
	}{
		{"state", tabs.State},
		{"tombstone", tabs.Tombstones},
	} {
		t.Run("the "+tc.name+" files have a bloom filter on the first key column only", func(t *testing.T) {
			checkFirstKeyBloom(t, tc.store, "id")
		})
	}

	t.Run("absent keys within every row group's bounds are ruled out by the filters", func(t *testing.T) {
		var n atomic.Int64
		counted, err := delta.Open(readCounter{tabs.State, &n}).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var keys []Change
		for i := range 300 {
			keys = append(keys, toChange(t, genEvent(uint64(rows+i), int64(2*(i*rows/300)+1), "eu", false, 0))) // odd ids, across the range
		}
		present := toChange(t, genEvent(2*rows, 2*2501, "eu", false, 0))
		keys = append(keys, present)
		sort.Slice(keys, func(i, j int) bool { return value.CompareKeys(keys[i].Key, keys[j].Key) < 0 })
		read := func(keys []Change) (int64, map[string]*stored) {
			found := map[string]*stored{}
			for _, c := range keys {
				found[c.KeyText] = &stored{}
			}
			n.Store(0)
			err := lookup(ctx, counted, counted.Files(), key, keys, found, nil, func(s *stored, order []byte, path string, _ int64) {
				s.rowOrder = order
			})
			if err != nil {
				t.Fatal(err)
			}
			return n.Load(), found
		}
		all, _ := read(nil) // no keys: no filter, every row group is read
		some, found := read(keys)
		for _, c := range keys {
			if got := found[c.KeyText].rowOrder != nil; got != (c.KeyText == present.KeyText) {
				t.Errorf("key %s found %v", c.KeyText, got)
			}
		}
		t.Logf("lookup read %d bytes with the filters, %d without", some, all)

		// Bounds alone keep every row group (each holds a probed odd id
		// within its range): only the bloom filters can skip them.
		firsts := make([]any, len(keys))
		for i, c := range keys {
			firsts[i] = c.Key[0]
		}
		flt := firstKeyFilter("id", firsts)
		// A filter of its own (a RowGroupFilter is not copied: it keeps a
		// memo of its Values).
		boundsOnly := delta.RowGroupFilter{Column: flt.Column, Keep: flt.Keep}
		decoded := func(flt *delta.RowGroupFilter) int {
			n := 0
			for _, f := range counted.Files() {
				err := delta.ReadFile(ctx, counted.Store(), counted.Metadata(), f, delta.ReadOptions{Columns: []string{"id"}, RowGroupFilter: flt}, func([]any) error {
					n++
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			return n
		}
		withBloom, withBounds := decoded(flt), decoded(&boundsOnly)
		if withBounds < rows*9/10 {
			t.Fatalf("bounds alone decode %d rows of %d: the probes do not cover every row group, the test proves nothing", withBounds, rows)
		}
		if withBloom > rows/10 {
			t.Errorf("with the bloom filters the lookup decodes %d rows, with bounds alone %d: want most row groups skipped", withBloom, withBounds)
		}
	})
	m.check()
}

// checkFirstKeyBloom fails unless every row group of every file of the
// table in store has a bloom filter on column first and on no other.
func checkFirstKeyBloom(t *testing.T, store objstore.Store, first string) {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.NumFiles() == 0 {
		t.Fatal("no files")
	}
	eachRowGroup(t, store, snap, func(path string, g int, rg format.RowGroup) {
		for _, cc := range rg.Columns {
			want := cc.MetaData.PathInSchema[0] == first
			if has := cc.MetaData.BloomFilterOffset > 0; has != want {
				t.Fatalf("%s row group %d column %v: bloom filter %v", path, g, cc.MetaData.PathInSchema, has)
			}
		}
	})
}

// eachRowGroup calls fn with the footer metadata of every row group of
// every file of snap, a snapshot of the table in store.
func eachRowGroup(t *testing.T, store objstore.Store, snap *delta.Snapshot, fn func(path string, g int, rg format.RowGroup)) {
	t.Helper()
	for _, f := range snap.Files() {
		b, err := objstore.ReadAll(context.Background(), store, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for g, rg := range pf.Metadata().RowGroups {
			fn(f.Path, g, rg)
		}
	}
}

func TestCompactedTombstonesKeepTheBloomFilter(t *testing.T) {
	m := newModelRun(t, Options{})
	for b := range 10 {
		var evs []datastream.Event
		for i := range 20 {
			id := int64(b*20 + i)
			evs = append(evs, genEvent(uint64(2*id+1), id, "eu", false, id), genEvent(uint64(2*id+2), id, "eu", true, 0))
		}
		m.apply(int64(b+1), evs)
	}
	before, err := delta.Open(m.tabs.Tombstones).Snapshot(m.ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ExpireTombstones(m.ctx, m.tabs.Tombstones, ExpireOptions{Retention: 24 * time.Hour, TargetFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesCompacted != before.NumFiles() || res.FilesAdded != 1 {
		t.Fatalf("compacted %d of %d files into %d, want all into 1", res.FilesCompacted, before.NumFiles(), res.FilesAdded)
	}
	checkFirstKeyBloom(t, m.tabs.Tombstones, "id")
	m.check()
}

// TestCompactedStateKeepsTheLookupAids: a state table compacted with its
// CompactionOptions keeps the bloom filter on the first key column and the
// small pages merges write, so lookups keep skipping its pages.
func TestCompactedStateKeepsTheLookupAids(t *testing.T) {
	m := newModelRun(t, Options{})
	for b := range 6 {
		var evs []datastream.Event
		for i := range 20 {
			id := int64(b*20 + i)
			evs = append(evs, genEvent(uint64(id+1), id, "eu", false, id))
		}
		m.apply(int64(b+1), evs)
	}
	snap, err := delta.Open(m.tabs.State).Snapshot(m.ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := CompactionOptions(snap)
	if o.PageBytes != StatePageBytes || len(o.BloomFilterColumns) != 1 || o.BloomFilterColumns[0] != "id" {
		t.Fatalf("compaction options %+v, want a bloom filter on id and %d-byte pages", o, StatePageBytes)
	}
	o.TargetFileBytes = 1 << 20
	res, err := snap.Optimize(m.ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != snap.NumFiles() || res.FilesAdded != 1 {
		t.Fatalf("compacted %d of %d files into %d, want all into 1", res.FilesRemoved, snap.NumFiles(), res.FilesAdded)
	}
	checkFirstKeyBloom(t, m.tabs.State, "id")
	m.check()
}
