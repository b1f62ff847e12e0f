package pipeline

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// mergeInputs commits three key-sorted tombstone files whose keys
// interleave and repeat across files (each row's order names its file).
func mergeInputs(t *testing.T, ctx context.Context) (objstore.Store, *delta.Snapshot, []delta.Add) {
	t.Helper()
	store := newTombstoneTable(t, ctx)
	var adds []delta.Add
	for f := range 3 {
		var rows []tomb
		for id := int64(f); id < 300; id += 2 {
			rows = append(rows, tomb{id: id, order: uint64(f), deletedAt: freshTS})
		}
		adds = append(adds, appendTombstones(t, ctx, store, rows, fileOptions{rowGroupRows: 40}))
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return store, snap, adds
}

func TestMergeRowsEmitsInKeyOrderWithTiesInFileOrder(t *testing.T) {
	ctx := context.Background()
	store, snap, adds := mergeInputs(t, ctx)
	var got, want []tomb
	for f := range 3 {
		for id := int64(f); id < 300; id += 2 {
			want = append(want, tomb{id: id, order: uint64(f)})
		}
	}
	slices.SortStableFunc(want, func(a, b tomb) int { return cmp.Compare(a.id, b.id) }) // file order on ties
	byID := func(a, b []any) bool { return a[0].(int64) < b[0].(int64) }
	err := mergeRows(ctx, store, snap.Metadata(), adds, byID, func(row []any) error {
		got = append(got, tomb{id: row[0].(int64), order: orderOf(row)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("merged %d rows out of order or with ties out of file order", len(got))
	}

	// Without an order the files come one after the other.
	got = got[:0]
	if err := mergeRows(ctx, store, snap.Metadata(), adds, nil, func(row []any) error {
		got = append(got, tomb{id: row[0].(int64), order: orderOf(row)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(got, func(a, b tomb) int { return cmp.Compare(a.order, b.order) }) || len(got) != len(want) {
		t.Fatalf("without an order, %d rows did not come file after file", len(got))
	}
}

func orderOf(row []any) uint64 {
	b := row[1].([]byte)
	return uint64(b[len(b)-1])
}

func TestMergeRowsStopsAtTheFirstErrorWithNoReaderLeft(t *testing.T) {
	ctx := context.Background()
	store, snap, adds := mergeInputs(t, ctx)
	before := runtime.NumGoroutine()
	stop := errors.New("emit failed")
	n := 0
	err := mergeRows(ctx, store, snap.Metadata(), adds, func(a, b []any) bool { return value.Compare(a[0], b[0]) < 0 }, func([]any) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Fatalf("err = %v after %d rows, want the emit error after 5", err, n)
	}
	// A file that cannot be read ends the merge with its error.
	missing := append(slices.Clone(adds), delta.Add{Path: "part-missing.parquet", Size: 100})
	err = mergeRows(ctx, store, snap.Metadata(), missing, nil, func([]any) error { return nil })
	if err == nil {
		t.Fatal("merging a file that does not exist succeeded")
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after mergeRows returned (%d before)", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
