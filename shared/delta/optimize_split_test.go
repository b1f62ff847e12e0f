package delta

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// splitSchema is the schema of the SeparateNulls tests: a key and a
// nullable column whose null rows compaction keeps apart (as an scd2
// table's open versions, whose valid-to is null).
var splitSchema = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long},
	{Name: "to", Type: value.Long, Nullable: true},
}}

// splitRow is one row of a splitSchema table; to < 0 stands for null.
type splitRow struct{ id, to int64 }

// splitTable creates an empty splitSchema table in memory.
func splitTable(t *testing.T, ctx context.Context) objstore.Store {
	t.Helper()
	store := objstore.NewMemory()
	if _, err := Create(ctx, store, CreateOptions{Schema: splitSchema}); err != nil {
		t.Fatal(err)
	}
	return store
}

// splitAppend commits one data file holding rows, in the order given.
func splitAppend(t *testing.T, ctx context.Context, store objstore.Store, rows ...splitRow) Add {
	t.Helper()
	var raw [][]any
	for _, r := range rows {
		var to any
		if r.to >= 0 {
			to = r.to
		}
		raw = append(raw, []any{r.id, to})
	}
	return commitRows(t, ctx, store, WriteOptions{Schema: splitSchema, DataChange: true}, raw)
}

// commitRows commits one data file, written with wo, holding rows.
func commitRows(t *testing.T, ctx context.Context, store objstore.Store, wo WriteOptions, rows [][]any) Add {
	t.Helper()
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := pqWriteRows(t, store, wo, len(rows), func(i int) []any { return rows[i] })
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(add)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return add
}

// splitRead returns the rows of each file of the latest snapshot.
func splitRead(t *testing.T, ctx context.Context, store objstore.Store) (map[string][]splitRow, *Snapshot) {
	t.Helper()
	raw, snap := readRows(t, ctx, store)
	out := map[string][]splitRow{}
	for path, rows := range raw {
		for _, row := range rows {
			r := splitRow{id: row[0].(int64), to: -1}
			if row[1] != nil {
				r.to = row[1].(int64)
			}
			out[path] = append(out[path], r)
		}
	}
	return out, snap
}

// readRows returns the rows of each file of the latest snapshot, in file
// order, and the snapshot.
func readRows(t *testing.T, ctx context.Context, store objstore.Store) (map[string][][]any, *Snapshot) {
	t.Helper()
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]any{}
	for _, f := range snap.Files() {
		err := ReadFile(ctx, store, snap.Metadata(), f, ReadOptions{}, func(row []any) error {
			out[f.Path] = append(out[f.Path], row)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out, snap
}

func splitAll(files map[string][]splitRow) []splitRow {
	var all []splitRow
	for _, rows := range files {
		all = append(all, rows...)
	}
	slices.SortFunc(all, func(a, b splitRow) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.to, b.to)) })
	return all
}

// mixedRows are n keys from first, two rows each: a closed one (to set)
// and an open one (to null), sorted by key.
func mixedRows(first, n int64) []splitRow {
	var rows []splitRow
	for id := first; id < first+n; id++ {
		rows = append(rows, splitRow{id, id * 10}, splitRow{id, -1})
	}
	return rows
}

func TestOptimizeSeparatingNullsWritesTheNullRowsAndTheOthersToFilesOfTheirOwnEachClustered(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		files [][]splitRow
		// big: the target makes the first file large, not one
		// compaction picks for its size.
		big bool
	}{
		{name: "small mixed files are compacted into one file of each group", files: [][]splitRow{mixedRows(5, 20), mixedRows(1, 30), {{2, 7}, {40, -1}}}},
		{name: "a large mixed file alone is rewritten", files: [][]splitRow{mixedRows(1, 400)}, big: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := splitTable(t, ctx)
			var first Add
			for i, rows := range tc.files {
				a := splitAppend(t, ctx, store, rows...)
				if i == 0 {
					first = a
				}
			}
			before, snap := splitRead(t, ctx, store)
			target := int64(1 << 20)
			if tc.big {
				target = 2 * first.Size
			}
			res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, ClusterBy: []string{"id", "to"}, SeparateNulls: "to"})
			if err != nil {
				t.Fatal(err)
			}
			after, snap2 := splitRead(t, ctx, store)
			if res.FilesRemoved != len(tc.files) || res.FilesAdded != 2 || snap2.NumFiles() != 2 {
				t.Fatalf("result %+v with %d files, want the %d files rewritten into 2", res, snap2.NumFiles(), len(tc.files))
			}
			if !slices.Equal(splitAll(after), splitAll(before)) {
				t.Fatalf("rows differ after compaction:\n got  %v\n want %v", splitAll(after), splitAll(before))
			}
			for _, f := range snap2.Files() {
				rows := after[f.Path]
				null := rows[0].to < 0
				if slices.ContainsFunc(rows, func(r splitRow) bool { return (r.to < 0) != null }) {
					t.Fatalf("file %s mixes null and non-null rows: %v", f.Path, rows)
				}
				if !slices.IsSortedFunc(rows, func(a, b splitRow) int { return cmp.Compare(a.id, b.id) }) {
					t.Fatalf("file %s is not clustered by key: %v", f.Path, rows)
				}
				st, err := ParseStats(f.Stats)
				if err != nil {
					t.Fatal(err)
				}
				if n, ok := st.NullCountOf("to"); !ok || (n == 0) == null || (n > 0 && n < st.NumRecords) {
					t.Fatalf("file %s: null count %d (%v), want it to tell the group", f.Path, n, ok)
				}
			}
			// Separated, the files are left as they are.
			res, err = snap2.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, ClusterBy: []string{"id", "to"}, SeparateNulls: "to"})
			if err != nil || res != (OptimizeResult{}) {
				t.Fatalf("second compaction: %+v, %v; want nothing done", res, err)
			}
		})
	}
}

func TestOptimizeLeavesALargeFileOfOneGroupAlone(t *testing.T) {
	ctx := context.Background()
	store := splitTable(t, ctx)
	var closed []splitRow
	for id := int64(1); id <= 400; id++ {
		closed = append(closed, splitRow{id, id})
	}
	big := splitAppend(t, ctx, store, closed...)
	splitAppend(t, ctx, store, splitRow{500, -1})
	_, snap := splitRead(t, ctx, store)
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 2 * big.Size, ClusterBy: []string{"id"}, SeparateNulls: "to"})
	if err != nil || res != (OptimizeResult{}) {
		t.Fatalf("result %+v, error %v; want nothing done", res, err)
	}
}

func TestOptimizeRejectsAnUnknownColumnToSeparateNullsOf(t *testing.T) {
	ctx := context.Background()
	store := splitTable(t, ctx)
	splitAppend(t, ctx, store, splitRow{1, -1})
	splitAppend(t, ctx, store, splitRow{2, 3})
	_, snap := splitRead(t, ctx, store)
	_, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20, SeparateNulls: "nope"})
	if !errors.Is(err, ErrUnknownColumn) {
		t.Fatalf("error %v, want %v", err, ErrUnknownColumn)
	}
}

func TestOptimizeLeavesAFileWithoutNullCountsOfTheColumnAlone(t *testing.T) {
	ctx := context.Background()
	store := splitTable(t, ctx)
	// Statistics of the key only: nothing tells whether the file mixes
	// the groups, and rewriting it would not tell either.
	big := commitRows(t, ctx, store, WriteOptions{Schema: splitSchema, DataChange: true, StatsColumns: 1}, [][]any{{int64(1), int64(2)}, {int64(1), nil}, {int64(2), nil}})
	if st, err := ParseStats(big.Stats); err != nil {
		t.Fatal(err)
	} else if _, ok := st.NullCountOf("to"); ok {
		t.Fatalf("stats %s count the nulls of to", big.Stats)
	}
	_, snap := splitRead(t, ctx, store)
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 2 * big.Size, ClusterBy: []string{"id"}, SeparateNulls: "to"})
	if err != nil || res != (OptimizeResult{}) {
		t.Fatalf("result %+v, error %v; want nothing done", res, err)
	}
}
