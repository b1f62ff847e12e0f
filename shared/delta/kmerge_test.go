package delta

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// kmSchema is the schema of the merge tests' tables: a key and the input
// a row came from.
var kmSchema = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: false},
	{Name: "file", Type: value.Long, Nullable: false},
}}

// kmRow is one row of a kmSchema table.
type kmRow struct{ id, file int64 }

func kmRowOf(row []any) kmRow { return kmRow{row[0].(int64), row[1].(int64)} }

// kmByID orders kmSchema rows by key.
func kmByID(a, b []any) bool { return a[0].(int64) < b[0].(int64) }

// kmTable creates an empty kmSchema table in memory.
func kmTable(t *testing.T, ctx context.Context) objstore.Store {
	t.Helper()
	store := objstore.NewMemory()
	if _, err := Create(ctx, store, CreateOptions{Schema: kmSchema}); err != nil {
		t.Fatal(err)
	}
	return store
}

// kmAppend commits one data file holding rows, in the order given, with
// row groups of rowGroupRows (0: the default), and returns its add.
func kmAppend(t *testing.T, ctx context.Context, store objstore.Store, rows []kmRow, rowGroupRows int64) Add {
	t.Helper()
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewFileWriter(ctx, store, WriteOptions{Schema: snap.Schema(), DataChange: true, RowGroupRows: rowGroupRows})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write([]any{r.id, r.file}); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append", "partitionBy": "[]"}})
	tx.Add(add)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return add
}

// kmInputs commits three key-sorted files whose keys interleave and repeat
// across files (each row names its file).
func kmInputs(t *testing.T, ctx context.Context) (objstore.Store, *Snapshot, []Add) {
	t.Helper()
	store := kmTable(t, ctx)
	var adds []Add
	for f := range 3 {
		var rows []kmRow
		for id := int64(f); id < 300; id += 2 {
			rows = append(rows, kmRow{id, int64(f)})
		}
		adds = append(adds, kmAppend(t, ctx, store, rows, 40))
	}
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return store, snap, adds
}

func TestReadMergedEmitsInKeyOrderWithTiesInFileOrder(t *testing.T) {
	ctx := context.Background()
	store, snap, adds := kmInputs(t, ctx)
	var got, want []kmRow
	for f := range 3 {
		for id := int64(f); id < 300; id += 2 {
			want = append(want, kmRow{id, int64(f)})
		}
	}
	slices.SortStableFunc(want, func(a, b kmRow) int { return cmp.Compare(a.id, b.id) }) // file order on ties
	err := ReadMerged(ctx, store, snap.Metadata(), adds, MergeOptions{Less: kmByID}, func(row []any) error {
		got = append(got, kmRowOf(row))
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
	if err := ReadMerged(ctx, store, snap.Metadata(), adds, MergeOptions{}, func(row []any) error {
		got = append(got, kmRowOf(row))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(got, func(a, b kmRow) int { return cmp.Compare(a.file, b.file) }) || len(got) != len(want) {
		t.Fatalf("without an order, %d rows did not come file after file", len(got))
	}
}

func TestReadMergedStopsAtTheFirstErrorWithNoReaderLeft(t *testing.T) {
	ctx := context.Background()
	store, snap, adds := kmInputs(t, ctx)
	before := runtime.NumGoroutine()
	stop := errors.New("emit failed")
	n := 0
	err := ReadMerged(ctx, store, snap.Metadata(), adds, MergeOptions{Less: func(a, b []any) bool { return value.Compare(a[0], b[0]) < 0 }}, func([]any) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Fatalf("err = %v after %d rows, want the emit error after 5", err, n)
	}
	// A file that cannot be read ends the merge with its error.
	missing := append(slices.Clone(adds), Add{Path: "part-missing.parquet", Size: 100})
	err = ReadMerged(ctx, store, snap.Metadata(), missing, MergeOptions{}, func([]any) error { return nil })
	if err == nil {
		t.Fatal("merging a file that does not exist succeeded")
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after ReadMerged returned (%d before)", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
