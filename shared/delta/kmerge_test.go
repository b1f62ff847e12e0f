package delta

import (
	"cmp"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
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

// kmInputs commits n key-sorted files whose keys interleave and repeat
// across files (each row names its file), and returns them in commit
// order with every row, sorted by key with ties in file order.
func kmInputs(t *testing.T, ctx context.Context, n int) (objstore.Store, *Snapshot, []Add, []kmRow) {
	t.Helper()
	store := kmTable(t, ctx)
	var adds []Add
	var want []kmRow
	for f := range n {
		var rows []kmRow
		for id := int64(f); id < 300; id += 2 {
			rows = append(rows, kmRow{id, int64(f)})
		}
		adds = append(adds, kmAppend(t, ctx, store, rows, 40))
		want = append(want, rows...)
	}
	slices.SortStableFunc(want, func(a, b kmRow) int { return cmp.Compare(a.id, b.id) }) // file order on ties
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return store, snap, adds, want
}

// kmDataFiles lists the Parquet objects of a store outside the log.
func kmDataFiles(t *testing.T, ctx context.Context, store objstore.Store) []string {
	t.Helper()
	var out []string
	err := store.List(ctx, "", "", func(i objstore.Info) error {
		if strings.HasSuffix(i.Name, ".parquet") && !strings.HasPrefix(i.Name, logDir) {
			out = append(out, i.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// kmMerge runs ReadMerged and returns the rows it emitted.
func kmMerge(t *testing.T, ctx context.Context, store objstore.Store, md Metadata, adds []Add, opts MergeOptions) []kmRow {
	t.Helper()
	var got []kmRow
	err := ReadMerged(ctx, store, md, adds, opts, func(row []any) error {
		got = append(got, kmRowOf(row))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReadMergedEmitsInKeyOrderWithTiesInFileOrder(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files int
		fanIn int
	}{
		{"with every file read at once", 3, 0},
		{"in passes when the files are many more than the fan-in", 7, 2},
		{"in one pass merging as few files as needed", 7, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, snap, adds, want := kmInputs(t, ctx, tc.files)
			before := kmDataFiles(t, ctx, store)
			got := kmMerge(t, ctx, store, snap.Metadata(), adds, MergeOptions{Less: kmByID, FanIn: tc.fanIn})
			if !slices.Equal(got, want) {
				t.Fatalf("merged %d rows (want %d) out of order or with ties out of file order", len(got), len(want))
			}
			if after := kmDataFiles(t, ctx, store); !slices.Equal(after, before) {
				t.Fatalf("data files after the merge %v, want the inputs only %v", after, before)
			}

			// Without an order the files come one after the other.
			got = kmMerge(t, ctx, store, snap.Metadata(), adds, MergeOptions{FanIn: tc.fanIn})
			if !slices.IsSortedFunc(got, func(a, b kmRow) int { return cmp.Compare(a.file, b.file) }) || len(got) != len(want) {
				t.Fatalf("without an order, %d rows did not come file after file", len(got))
			}
		})
	}
}

func TestReadMergedStopsAtTheFirstErrorWithNoReaderLeft(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		fanIn int
	}{
		{"with every file read at once", 0},
		{"in passes, leaving no intermediate file", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, snap, adds, _ := kmInputs(t, ctx, 3)
			files := kmDataFiles(t, ctx, store)
			before := runtime.NumGoroutine()
			stop := errors.New("emit failed")
			n := 0
			err := ReadMerged(ctx, store, snap.Metadata(), adds, MergeOptions{Less: func(a, b []any) bool { return value.Compare(a[0], b[0]) < 0 }, FanIn: tc.fanIn}, func([]any) error {
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
			for _, less := range []func(a, b []any) bool{nil, kmByID} {
				err = ReadMerged(ctx, store, snap.Metadata(), missing, MergeOptions{Less: less, FanIn: tc.fanIn}, func([]any) error { return nil })
				if !errors.Is(err, objstore.ErrNotExist) {
					t.Fatalf("merging a file that does not exist: err = %v, want %v", err, objstore.ErrNotExist)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
				if time.Now().After(deadline) {
					t.Fatalf("%d goroutines left after ReadMerged returned (%d before)", runtime.NumGoroutine(), before)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if after := kmDataFiles(t, ctx, store); !slices.Equal(after, files) {
				t.Fatalf("data files after failed merges %v, want the inputs only %v", after, files)
			}
		})
	}
}

// kmOpenReaders counts the readers of data files open at once, each held
// open a little so that readers running together overlap.
type kmOpenReaders struct {
	objstore.Store
	mu         sync.Mutex
	open, peak int
}

func (s *kmOpenReaders) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.NewReader(ctx, name, offset, length)
	if err != nil || !strings.HasSuffix(name, ".parquet") {
		return rc, err
	}
	s.mu.Lock()
	s.open++
	s.peak = max(s.peak, s.open)
	s.mu.Unlock()
	time.Sleep(time.Millisecond)
	return &kmCountedReader{ReadCloser: rc, s: s}, nil
}

func (s *kmOpenReaders) maxOpen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

type kmCountedReader struct {
	io.ReadCloser
	s    *kmOpenReaders
	once sync.Once
}

func (r *kmCountedReader) Close() error {
	r.once.Do(func() {
		r.s.mu.Lock()
		r.s.open--
		r.s.mu.Unlock()
	})
	return r.ReadCloser.Close()
}

func TestReadMergedReadsAtMostFanInFilesAtOnce(t *testing.T) {
	ctx := context.Background()
	const files, fanIn = 40, 4
	mem, snap, adds, want := kmInputs(t, ctx, files)
	for _, tc := range []struct {
		name string
		less func(a, b []any) bool
	}{
		{"merging by key", kmByID},
		{"one file after the other", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &kmOpenReaders{Store: mem}
			got := kmMerge(t, ctx, store, snap.Metadata(), adds, MergeOptions{Less: tc.less, FanIn: fanIn})
			if peak := store.maxOpen(); peak > fanIn {
				t.Fatalf("%d data files were read at once, want at most %d", peak, fanIn)
			}
			if tc.less != nil && !slices.Equal(got, want) {
				t.Fatalf("merged %d rows (want %d) out of order or with ties out of file order", len(got), len(want))
			}
			if tc.less == nil && (len(got) != len(want) || !slices.IsSortedFunc(got, func(a, b kmRow) int { return cmp.Compare(a.file, b.file) })) {
				t.Fatalf("%d rows (want %d) did not come file after file", len(got), len(want))
			}
		})
	}
}
