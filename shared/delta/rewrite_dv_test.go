package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestRewriteFileWithADeletionVectorCopiesTheRowGroupsItSpares: the rows a
// file's deletion vector marks are left out, and the row groups holding
// none of them (nor a dropped key) are still copied verbatim. The source
// has 8 row groups of 128 rows (the last of 104).
func TestRewriteFileWithADeletionVectorCopiesTheRowGroupsItSpares(t *testing.T) {
	const groups = (rwRows + 127) / 128
	cases := []struct {
		name            string
		deleted         []uint64
		drop            func(id int64) bool
		filter          bool // a row group filter that rejects every row group
		copied, decoded int
	}{
		{"deleted rows in two row groups decode those two", []uint64{130, 131, 700}, func(int64) bool { return false }, false, groups - 2, 2},
		{"a dropped key in a third row group decodes it too", []uint64{130, 131, 700}, func(id int64) bool { return id == 900 }, false, groups - 3, 3},
		{"a row group wholly deleted is skipped unread", rangeRows(0, 128), func(int64) bool { return false }, false, groups - 1, 0},
		{"deleted rows in the last row group and its last row", []uint64{896, 999}, func(int64) bool { return false }, false, groups - 1, 1},
		{"a key both deleted and dropped is counted as deleted", []uint64{5}, func(id int64) bool { return id == 5 || id == 6 }, false, groups - 1, 1},
		{"row groups a filter skips still lose their deleted rows", []uint64{130, 700}, func(int64) bool { return false }, true, groups - 2, 2},
		{"every row deleted writes no file", rangeRows(0, rwRows), func(int64) bool { return false }, false, 0, 0},
	}
	for _, stored := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s (vector in a file: %v)", tc.name, stored), func(t *testing.T) {
				ctx := context.Background()
				store := newPQMemStore()
				md, add, rows := rwSource(t, store, false)
				add = withDV(t, store, add, stored, tc.deleted)
				isDeleted := map[int64]bool{}
				for _, r := range tc.deleted {
					isDeleted[int64(r)] = true
				}
				var want [][]any
				var dropped int64
				for _, r := range rows {
					id := r[0].(int64)
					switch {
					case isDeleted[id]:
					case tc.drop(id):
						dropped++
					default:
						want = append(want, r)
					}
				}
				opts := RewriteOptions{
					Write: WriteOptions{Schema: rwSchema(), DataChange: true},
					Keys:  []string{"id"},
					Drop: func(k []any) bool {
						if isDeleted[k[0].(int64)] {
							t.Errorf("Drop saw key %v, a row the deletion vector deletes", k)
						}
						return tc.drop(k[0].(int64))
					},
				}
				if tc.filter {
					opts.RowGroupFilter = &RowGroupFilter{Column: "id", Keep: func(min, max any) bool { return false }}
				}
				res, err := RewriteFile(ctx, store, md, add, opts)
				if err != nil {
					t.Fatalf("RewriteFile: %v", err)
				}
				if res.RowGroupsCopied != tc.copied || res.RowGroupsDecoded != tc.decoded {
					t.Errorf("copied %d and decoded %d row groups, want %d and %d", res.RowGroupsCopied, res.RowGroupsDecoded, tc.copied, tc.decoded)
				}
				if res.Rows != int64(len(want)) || res.Dropped != dropped || res.Deleted != int64(len(tc.deleted)) {
					t.Errorf("kept %d, dropped %d, deleted %d rows; want %d, %d, %d", res.Rows, res.Dropped, res.Deleted, len(want), dropped, len(tc.deleted))
				}
				if len(want) == 0 {
					if len(res.Adds) != 0 {
						t.Errorf("wrote %d files for no rows", len(res.Adds))
					}
					return
				}
				if len(res.Adds) != 1 || res.Adds[0].DeletionVector != nil {
					t.Fatalf("wrote %+v, want one file without a deletion vector", res.Adds)
				}
				got := pqRead(t, store, md, res.Adds[0], ReadOptions{})
				if len(got) != len(want) {
					t.Fatalf("read %d rows, want %d", len(got), len(want))
				}
				for i := range want {
					if !pqEqual(got[i], want[i]) {
						t.Fatalf("row %d = %v, want %v", i, got[i], want[i])
					}
				}
				rwCheckStats(t, rwSchema(), nil, res.Adds[0], want)
			})
		}
	}
}

func rangeRows(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// withDV gives add a deletion vector of rows, inline or in a DV file of
// store, as a commit would (Add.WithDeletionVector).
func withDV(t *testing.T, store *pqMemStore, add Add, stored bool, rows []uint64) Add {
	t.Helper()
	bm := roaring64.BitmapOf(rows...)
	if !stored {
		dv, err := InlineDeletionVector(bm)
		if err != nil {
			t.Fatal(err)
		}
		return add.WithDeletionVector(&dv)
	}
	dvs, err := WriteDeletionVectors(context.Background(), store, "ab", []*roaring64.Bitmap{bm})
	if err != nil {
		t.Fatal(err)
	}
	return add.WithDeletionVector(&dvs[0])
}

func TestRewriteFileRefusesADeletionVectorPastTheFilesEnd(t *testing.T) {
	store := newPQMemStore()
	md, add, _ := rwSource(t, store, false)
	add = withDV(t, store, add, false, []uint64{3, rwRows})
	_, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{Write: WriteOptions{Schema: rwSchema()}, Keys: []string{"id"}})
	if !errors.Is(err, ErrDeletionVector) {
		t.Errorf("err = %v, want ErrDeletionVector", err)
	}
}

// TestRewriteFileOfSparksDeletionVectorFiles: Spark-written files with a
// deletion vector (read row by row: not written by dsdelta) come out
// without the deleted rows, the fixtures' expected contents.
func TestRewriteFileOfSparksDeletionVectorFiles(t *testing.T) {
	cases := []struct {
		table string
		want  []int64 // the values of the first column left
	}{
		{"table-with-dv-small", []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"basic-dv-no-checkpoint", []int64{2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for _, tc := range cases {
		t.Run(tc.table+" loses its deleted rows", func(t *testing.T) {
			ctx := context.Background()
			store := pqFixtureStore(t, tc.table)
			md, adds := pqReplay(t, store, -1)
			schema, err := value.ParseSchema(md.SchemaString)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			var deleted int64
			for _, a := range adds {
				res, err := RewriteFile(ctx, store, md, a, RewriteOptions{
					Write: WriteOptions{Schema: schema, ColumnMappingMode: ColumnMappingMode(md)},
				})
				if err != nil {
					t.Fatalf("RewriteFile(%s): %v", a.Path, err)
				}
				deleted += res.Deleted
				for _, out := range res.Adds {
					if out.DeletionVector != nil {
						t.Errorf("output %s has a deletion vector", out.Path)
					}
					for _, r := range pqRead(t, store, md, out, ReadOptions{}) {
						got = append(got, toInt64(r[0]))
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || deleted != 2 {
				t.Errorf("rows %v with %d deleted, want %v with 2", got, deleted, tc.want)
			}
		})
	}
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int64:
		return x
	}
	return -1
}

// BenchmarkRewriteFileWithADeletionVector folds a vector marking 1% of
// the rows of a 600k-row state file, all among its 10% most recent keys,
// through the row-group path (row groups the vector spares are copied)
// and through the row path, which decodes every row.
func BenchmarkRewriteFileWithADeletionVector(b *testing.B) {
	const rows = 600_000
	schema := pqCDCSchema()
	md := pqMetadata(schema, nil, nil)
	store := newPQMemStore()
	add := pqCDCFile(b, store, WriteOptions{RowGroupBytes: 16 << 20}, rows)
	deleted := roaring64.New()
	for i := uint64(rows * 9 / 10); i < rows; i += 10 {
		deleted.Add(i)
	}
	dv, err := InlineDeletionVector(deleted)
	if err != nil {
		b.Fatal(err)
	}
	add = add.WithDeletionVector(&dv)
	opts := RewriteOptions{Write: WriteOptions{Schema: schema, RowGroupBytes: 16 << 20}, TargetFileBytes: 128 << 20,
		Keys: []string{"id"}, Drop: func([]any) bool { return false }}
	for _, path := range []string{"row groups", "rows"} {
		b.Run("path="+path, func(b *testing.B) {
			for range b.N {
				res := benchRewrite(b, store, md, add, opts, path)
				if res.Deleted != int64(deleted.GetCardinality()) {
					b.Fatalf("deleted %d rows, want %d", res.Deleted, deleted.GetCardinality())
				}
				b.ReportMetric(float64(res.RowGroupsCopied), "copied/op")
				b.ReportMetric(float64(res.RowGroupsCopied+res.RowGroupsDecoded), "groups/op")
			}
		})
	}
}
