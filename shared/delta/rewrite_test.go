package delta

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
)

func rwSchema() value.StructType {
	f := func(name string, t value.Type, nullable bool) value.Field {
		return value.Field{Name: name, Type: t, Nullable: nullable}
	}
	return value.StructType{Fields: []value.Field{
		f("id", value.Long, false),
		f("region", value.String, false),
		f("name", value.String, true),
		f("amount", value.DecimalType{Precision: 10, Scale: 2}, true),
		f("big", value.DecimalType{Precision: 25, Scale: 3}, true),
		f("ts", value.Timestamp, true),
		f("day", value.Date, true),
		f("score", value.Double, true),
		f("small", value.Short, true),
		f("ok", value.Boolean, true),
	}}
}

// rwRow is row i of the test table: every nullable column is null on some
// rows, negative decimals and long strings included.
func rwRow(i int, region string) []any {
	row := []any{int64(i), region, nil, nil, nil, nil, nil, nil, nil, nil}
	if i%7 != 0 {
		row[2] = fmt.Sprintf("name-%05d-%s", i, strings.Repeat("é", i%50))
	}
	if i%5 != 0 {
		row[3] = pqDec(fmt.Sprintf("%d.%02d", i-500, i%100))
	}
	if i%3 != 0 {
		row[4] = pqDec(fmt.Sprintf("-%d123456789.%03d", i, i%1000))
	}
	if i%11 != 0 {
		row[5] = value.Micros(1_700_000_000_000_000 + int64(i)*1_000_003)
	}
	if i%13 != 0 {
		row[6] = value.Days(19000 + i%400)
	}
	if i%4 != 0 {
		row[7] = float64(i) / 3
	}
	if i%6 != 0 {
		row[8] = int16(i%300 - 150)
	}
	if i%2 != 0 {
		row[9] = i%4 == 1
	}
	return row
}

const rwRows = 1000

// rwSource writes rows [0, rwRows) in row groups of 128 rows.
func rwSource(t *testing.T, store *pqMemStore, part bool) (Metadata, Add, [][]any) {
	t.Helper()
	schema := rwSchema()
	opts := WriteOptions{Schema: schema, RowGroupBytes: 1, DataChange: true}
	var partCols []string
	if part {
		partCols = []string{"region"}
		opts.PartitionColumns = partCols
		opts.PartitionValues = map[string]any{"region": "eu"}
	}
	var rows [][]any
	for i := range rwRows {
		rows = append(rows, rwRow(i, "eu"))
	}
	add := pqWrite(t, store, opts, rows)
	return pqMetadata(schema, partCols, nil), add, rows
}

func rwRowGroups(t *testing.T, store *pqMemStore, add Add) (*parquet.File, []byte) {
	t.Helper()
	name, err := decodeAddPath(add.Path)
	if err != nil {
		t.Fatal(err)
	}
	data := store.objects[name]
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return f, data
}

// rwCheckStats asserts the add's stats describe rows: numRecords exact,
// every present min/max bounds every value, every present null count exact.
func rwCheckStats(t *testing.T, schema value.StructType, partCols []string, add Add, rows [][]any) {
	t.Helper()
	st, err := ParseStats(add.Stats)
	if err != nil {
		t.Fatalf("stats of %s: %v", add.Path, err)
	}
	if st.NumRecords != int64(len(rows)) {
		t.Errorf("numRecords = %d, want %d", st.NumRecords, len(rows))
	}
	for i, f := range schema.Fields {
		if slices.Contains(partCols, f.Name) {
			continue
		}
		var nulls int64
		for _, r := range rows {
			if r[i] == nil {
				nulls++
			}
		}
		if n, ok := st.NullCountOf(f.Name); ok && n != nulls {
			t.Errorf("nullCount of %s = %d, want %d", f.Name, n, nulls)
		}
		lo, hi, ok := st.MinMax(f.Name, f.Type)
		if !ok {
			continue
		}
		for _, r := range rows {
			if r[i] == nil {
				continue
			}
			if value.Compare(lo, r[i]) > 0 || value.Compare(hi, r[i]) < 0 {
				t.Errorf("%s: value %v outside the stats bounds [%v, %v]", f.Name, r[i], lo, hi)
				break
			}
		}
	}
}

func TestRewriteFileKeepsEveryRowButTheDroppedOnes(t *testing.T) {
	const groups = (rwRows + 127) / 128
	cases := []struct {
		name    string
		drop    func(id int64) bool
		copied  int
		decoded int
	}{
		{"no dropped key copies every row group", func(int64) bool { return false }, groups, 0},
		{"keys dropped in one row group copy the others", func(id int64) bool { return id == 130 || id == 200 }, groups - 1, 1},
		{"keys dropped in every row group decode every one", func(id int64) bool { return id%128 == 5 }, 0, groups},
		{"a row group whose rows are all dropped is skipped", func(id int64) bool { return id < 128 || id == 999 }, groups - 2, 1},
		{"every row dropped writes no file", func(int64) bool { return true }, 0, 0},
	}
	for _, part := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s (partitioned %v)", tc.name, part), func(t *testing.T) {
				store := newPQMemStore()
				md, add, rows := rwSource(t, store, part)
				var want [][]any
				for _, r := range rows {
					if !tc.drop(r[0].(int64)) {
						want = append(want, r)
					}
				}
				res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
					Write:           WriteOptions{Schema: rwSchema(), PartitionColumns: md.PartitionColumns, DataChange: true},
					TargetFileBytes: 128 << 20,
					Keys:            []string{"id", "region"},
					Drop: func(k []any) bool {
						if k[1] != "eu" {
							t.Fatalf("key %v: region not read", k)
						}
						return tc.drop(k[0].(int64))
					},
				})
				if err != nil {
					t.Fatalf("RewriteFile: %v", err)
				}
				if res.RowGroupsCopied != tc.copied || res.RowGroupsDecoded != tc.decoded {
					t.Errorf("copied %d and decoded %d row groups, want %d and %d", res.RowGroupsCopied, res.RowGroupsDecoded, tc.copied, tc.decoded)
				}
				// Rows of row groups that lost some (not all) rows are re-encoded.
				var reenc int64
				for g := 0; g < rwRows; g += 128 {
					var size, drops int64
					for id := g; id < min(g+128, rwRows); id++ {
						size++
						if tc.drop(int64(id)) {
							drops++
						}
					}
					if drops > 0 && drops < size {
						reenc += size - drops
					}
				}
				if res.Reencoded != reenc {
					t.Errorf("re-encoded %d rows, want %d", res.Reencoded, reenc)
				}
				if res.Rows != int64(len(want)) || res.Dropped != int64(rwRows-len(want)) {
					t.Errorf("kept %d and dropped %d rows, want %d and %d", res.Rows, res.Dropped, len(want), rwRows-len(want))
				}
				if len(want) == 0 {
					if len(res.Adds) != 0 {
						t.Fatalf("wrote %d files for no rows", len(res.Adds))
					}
					if len(store.objects) != 1 {
						t.Errorf("store holds %d objects, want only the source", len(store.objects))
					}
					return
				}
				if len(res.Adds) != 1 {
					t.Fatalf("wrote %d files, want 1", len(res.Adds))
				}
				out := res.Adds[0]
				if !out.DataChange || !maps2Equal(out.PartitionValues, add.PartitionValues) {
					t.Errorf("add has dataChange %v and partition values %v, want true and %v", out.DataChange, out.PartitionValues, add.PartitionValues)
				}
				got := pqRead(t, store, md, out, ReadOptions{})
				if len(got) != len(want) {
					t.Fatalf("read %d rows, want %d", len(got), len(want))
				}
				for i := range want {
					if !pqEqual(got[i], want[i]) {
						t.Fatalf("row %d = %v, want %v", i, got[i], want[i])
					}
				}
				rwCheckStats(t, rwSchema(), md.PartitionColumns, out, want)
				if len(want) == rwRows && out.Stats != add.Stats {
					// Every row group copied: the footer's chunk bounds and the
					// source's file bounds give back the source's exact stats.
					t.Errorf("stats of a verbatim copy = %s, want the source's %s", out.Stats, add.Stats)
				}
			})
		}
	}
}

func maps2Equal(a, b map[string]*string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !equalSer(v, w) {
			return false
		}
	}
	return true
}

func TestRewriteFileCopiesRowGroupsByteForByte(t *testing.T) {
	store := newPQMemStore()
	md, add, _ := rwSource(t, store, false)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: rwSchema()},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return k[0].(int64) == 300 },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	src, srcData := rwRowGroups(t, store, add)
	dst, dstData := rwRowGroups(t, store, res.Adds[0])
	srcGroups, dstGroups := src.Metadata().RowGroups, dst.Metadata().RowGroups
	if len(dstGroups) != len(srcGroups) {
		t.Fatalf("output has %d row groups, source %d", len(dstGroups), len(srcGroups))
	}
	for g := range srcGroups {
		same := true
		for col := range srcGroups[g].Columns {
			a := rwChunkBytes(srcData, src, g, col)
			b := rwChunkBytes(dstData, dst, g, col)
			if !bytes.Equal(a, b) {
				same = false
			}
		}
		if hasDrop := g == 300/128; same == hasDrop {
			t.Errorf("row group %d: chunks byte-identical to the source = %v, want %v", g, same, !hasDrop)
		}
	}
}

func rwChunkBytes(data []byte, f *parquet.File, g, col int) []byte {
	cm := f.Metadata().RowGroups[g].Columns[col].MetaData
	start := cm.DataPageOffset
	if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < start {
		start = cm.DictionaryPageOffset
	}
	return data[start : start+cm.TotalCompressedSize]
}

func TestRewriteFileRollsOutputAtTheTargetSize(t *testing.T) {
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write:           WriteOptions{Schema: rwSchema()},
		TargetFileBytes: add.Size / 3,
		Keys:            []string{"id"},
		Drop:            func(k []any) bool { return k[0].(int64)%400 == 1 },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	if len(res.Adds) < 2 {
		t.Fatalf("wrote %d files, want the output rolled into several", len(res.Adds))
	}
	var got [][]any
	for _, a := range res.Adds {
		part := pqRead(t, store, md, a, ReadOptions{})
		rwCheckStats(t, rwSchema(), nil, a, part)
		got = append(got, part...)
	}
	var want [][]any
	for _, r := range rows {
		if r[0].(int64)%400 != 1 {
			want = append(want, r)
		}
	}
	if g, w := pqRowsJSON(t, rwSchema(), got), pqRowsJSON(t, rwSchema(), want); !slices.Equal(g, w) {
		t.Errorf("rolled files hold %d rows, want %d (contents differ)", len(g), len(w))
	}
}

func TestRewriteFileFallsBackToRowsWhenTheSchemaChanged(t *testing.T) {
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	wider := rwSchema()
	wider.Fields = append(wider.Fields, value.Field{Name: "extra", Type: value.Integer, Nullable: true})
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write:   WriteOptions{Schema: wider},
		Keys:    []string{"id"},
		Drop:    func(k []any) bool { return k[0].(int64) == 7 },
		Conform: func(row []any) []any { return append(row, int32(42)) },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	if res.RowGroupsCopied != 0 || res.RowGroupsDecoded != 0 {
		t.Errorf("copied %d and decoded %d row groups, want the row path (0 and 0)", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	if res.Reencoded != rwRows-1 {
		t.Errorf("re-encoded %d rows, want every kept row (%d) on the row path", res.Reencoded, rwRows-1)
	}
	got := pqRead(t, store, pqMetadata(wider, nil, nil), res.Adds[0], ReadOptions{})
	if len(got) != rwRows-1 {
		t.Fatalf("read %d rows, want %d", len(got), rwRows-1)
	}
	for i, r := range got {
		src := rows[i]
		if i >= 7 {
			src = rows[i+1]
		}
		if !pqEqual(r[:len(src)], src) || r[len(src)] != int32(42) {
			t.Fatalf("row %d = %v, want %v conformed", i, r, src)
		}
	}
}

func TestRewriteFileStatsOmitBoundsItCannotProve(t *testing.T) {
	// A double column whose source file held NaN has no max in the source
	// stats; a copied row group cannot bound it, so the output omits it.
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "x", Type: value.Double, Nullable: true},
	}}
	store := newPQMemStore()
	var rows [][]any
	for i := range 600 {
		x := any(float64(i))
		switch {
		case i == 10:
			x = math.NaN()
		case i%9 == 0:
			x = nil
		}
		rows = append(rows, []any{int64(i), x})
	}
	add := pqWrite(t, store, WriteOptions{Schema: schema, RowGroupBytes: 1}, rows)
	md := pqMetadata(schema, nil, nil)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: schema},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return k[0].(int64) == 500 },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	if res.RowGroupsCopied == 0 {
		t.Fatal("no row group copied")
	}
	st, err := ParseStats(res.Adds[0].Stats)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.MaxValues["x"]; ok {
		t.Errorf("stats %s bound a column holding NaN", res.Adds[0].Stats)
	}
	want := append(slices.Clone(rows[:500]), rows[501:]...)
	rwCheckStats(t, schema, nil, res.Adds[0], want)
}

func TestRewriteFileWithADeletionVectorDropsItsRowsToo(t *testing.T) {
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	add.DeletionVector = pqInlineDV(t, []uint64{3, 600})
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: rwSchema()},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return k[0].(int64) == 900 },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	// Rows 3, 600 and 900 are in row groups 0, 4 and 7 of 8.
	if res.RowGroupsCopied != 5 || res.RowGroupsDecoded != 3 || res.Deleted != 2 || res.Dropped != 1 {
		t.Errorf("copied %d and decoded %d row groups, %d rows deleted and %d dropped; want 5, 3, 2 and 1",
			res.RowGroupsCopied, res.RowGroupsDecoded, res.Deleted, res.Dropped)
	}
	var want [][]any
	for _, r := range rows {
		if id := r[0].(int64); id != 3 && id != 600 && id != 900 {
			want = append(want, r)
		}
	}
	got := pqRead(t, store, md, res.Adds[0], ReadOptions{})
	if g, w := pqRowsJSON(t, rwSchema(), got), pqRowsJSON(t, rwSchema(), want); !slices.Equal(g, w) {
		t.Errorf("read %d rows, want %d (contents differ)", len(g), len(w))
	}
	rwCheckStats(t, rwSchema(), nil, res.Adds[0], want)
}

// BenchmarkRewriteFile drops 1% of the keys of a 600k-row state file, all
// among its 10% most recent keys (the clustered merge), through the
// row-group path and through the row path, for two row-group sizes.
func BenchmarkRewriteFile(b *testing.B) {
	const rows = 600_000
	schema := pqCDCSchema()
	md := pqMetadata(schema, nil, nil)
	drop := func(k []any) bool { id := k[0].(int64); return id >= rows*9/10 && id%10 == 3 }
	for _, rg := range []int64{64 << 20, 16 << 20} {
		store := newPQMemStore()
		add := pqCDCFile(b, store, WriteOptions{RowGroupBytes: rg}, rows)
		opts := RewriteOptions{Write: WriteOptions{Schema: schema, RowGroupBytes: rg}, TargetFileBytes: 128 << 20, Keys: []string{"id"}, Drop: drop}
		for _, path := range []string{"row groups", "rows"} {
			b.Run(fmt.Sprintf("rowGroupMiB=%d/path=%s", rg>>20, path), func(b *testing.B) {
				for range b.N {
					res := benchRewrite(b, store, md, add, opts, path)
					b.ReportMetric(float64(res.RowGroupsCopied), "copied/op")
				}
				b.ReportMetric(float64(add.Size)/(1<<20), "fileMiB")
			})
		}
	}
}

// benchRewrite rewrites add through the path named ("rows": the row path,
// else RewriteFile) with key column 0, and deletes what it wrote.
func benchRewrite(b *testing.B, store *pqMemStore, md Metadata, add Add, opts RewriteOptions, path string) RewriteResult {
	ctx := context.Background()
	var res RewriteResult
	var err error
	if path == "rows" {
		res, err = rewriteByRow(ctx, store, md, add, opts, []int{0})
	} else {
		res, err = RewriteFile(ctx, store, md, add, opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range res.Adds {
		name, _ := decodeAddPath(a.Path)
		delete(store.objects, name)
	}
	return res
}

func TestRewriteFileStatsOfDecodedRowGroupsAreTheKeptRowsExactBounds(t *testing.T) {
	// Every row group loses a row, so every one is re-encoded column by
	// column: the stats come from the kept values themselves and must be
	// their exact extremes, not the source's (which the dropped rows set).
	drop := func(id int64) bool { return id%128 == 0 || id == rwRows-1 || id%7 == 1 }
	_, _, rows, res := rwRewriteDropping(t, drop)
	if res.RowGroupsCopied != 0 || res.RowGroupsDecoded != (rwRows+127)/128 {
		t.Fatalf("copied %d and decoded %d row groups, want every one decoded", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	var kept [][]any
	for _, r := range rows {
		if !drop(r[0].(int64)) {
			kept = append(kept, r)
		}
	}
	st, err := ParseStats(res.Adds[0].Stats)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range rwSchema().Fields {
		if !hasMinMax(f.Type) {
			continue
		}
		var lo, hi any
		for _, r := range kept {
			if r[i] == nil {
				continue
			}
			if lo == nil || value.Compare(r[i], lo) < 0 {
				lo = r[i]
			}
			if hi == nil || value.Compare(r[i], hi) > 0 {
				hi = r[i]
			}
		}
		gotLo, gotHi, ok := st.MinMax(f.Name, f.Type)
		switch {
		case f.Type == value.Timestamp:
			// Stats carry milliseconds (as Spark writes them): the bounds
			// are the kept extremes widened to the millisecond.
			l, h := int64(lo.(value.Micros)), int64(hi.(value.Micros))
			if !ok || int64(gotLo.(value.Micros)) != l-l%1000 || int64(gotHi.(value.Micros)) != h-h%1000+999 {
				t.Errorf("%s: bounds [%v, %v] (present %v), want [%v, %v] widened to the millisecond", f.Name, gotLo, gotHi, ok, lo, hi)
			}
		case f.Type == value.String:
			// Strings are truncated to a prefix in stats; the kept rows'
			// extremes must still be inside them.
			if !ok || value.Compare(gotLo, lo) > 0 || value.Compare(gotHi, hi) < 0 {
				t.Errorf("%s: bounds [%v, %v] (present %v) do not cover [%v, %v]", f.Name, gotLo, gotHi, ok, lo, hi)
			}
		default:
			if !ok || value.Compare(gotLo, lo) != 0 || value.Compare(gotHi, hi) != 0 {
				t.Errorf("%s: bounds [%v, %v] (present %v), want the kept rows' exact [%v, %v]", f.Name, gotLo, gotHi, ok, lo, hi)
			}
		}
	}
	rwCheckStats(t, rwSchema(), nil, res.Adds[0], kept)
}

func TestRewriteFileInterleavesCopiedAndDecodedRowGroupsInOrder(t *testing.T) {
	// Copied and re-encoded row groups alternate in the output; reading it
	// back gives the kept rows in the source's order.
	drop := func(id int64) bool { return (id/128)%2 == 1 && id%3 == 0 }
	store, md, rows, res := rwRewriteDropping(t, drop)
	if res.RowGroupsCopied == 0 || res.RowGroupsDecoded == 0 {
		t.Fatalf("copied %d and decoded %d row groups, want both paths taken", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	got := pqRead(t, store, md, res.Adds[0], ReadOptions{})
	i := 0
	for _, r := range rows {
		if drop(r[0].(int64)) {
			continue
		}
		if i >= len(got) || !pqEqual(got[i], r) {
			t.Fatalf("row %d of the output is not the kept row %v", i, r)
		}
		i++
	}
	if i != len(got) {
		t.Errorf("output has %d rows, want %d", len(got), i)
	}
}

// rwRewriteDropping rewrites the test source without the ids drop reports.
func rwRewriteDropping(t *testing.T, drop func(id int64) bool) (*pqMemStore, Metadata, [][]any, RewriteResult) {
	t.Helper()
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: rwSchema()},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return drop(k[0].(int64)) },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	return store, md, rows, res
}

func TestRewriteFileStatsSurviveExtremesFoundOnEarlierPages(t *testing.T) {
	// A re-encoded column spans several pages, and page buffers are
	// recycled as the copy moves on: an extreme found on the first page
	// must still be right once later pages reused its memory. Strings fall
	// as ids rise, so the largest kept name is on the first page and the
	// smallest on the last.
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "name", Type: value.String, Nullable: true},
	}}
	const n = 60_000 // about 1.4 MB of names: several 256 KiB pages
	name := func(i int) string { return fmt.Sprintf("name-%012d-%06d", n-i, i%999_999) }
	var rows [][]any
	for i := range n {
		rows = append(rows, []any{int64(i), name(i)})
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema}, rows)
	f, _ := rwRowGroups(t, store, add)
	oi, err := f.RowGroups()[0].ColumnChunks()[1].OffsetIndex()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.RowGroups()) != 1 || oi.NumPages() < 3 {
		t.Fatalf("source has %d row groups and %d pages of names, want 1 row group of several pages", len(f.RowGroups()), oi.NumPages())
	}
	drop := func(id int64) bool { return id == 0 || id == n-1 || id%1000 == 7 }
	res, err := RewriteFile(context.Background(), store, pqMetadata(schema, nil, nil), add, RewriteOptions{
		Write: WriteOptions{Schema: schema},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return drop(k[0].(int64)) },
	})
	if err != nil {
		t.Fatalf("RewriteFile: %v", err)
	}
	if res.RowGroupsDecoded == 0 {
		t.Fatal("no row group was re-encoded")
	}
	st, err := ParseStats(res.Adds[0].Stats)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, ok := st.MinMax("name", value.String)
	wantLo, wantHi := name(n-2), name(1) // ids 0 and n-1 are dropped
	if !ok || lo != wantLo || hi != wantHi {
		t.Errorf("name bounds [%v, %v] (present %v), want [%s, %s]", lo, hi, ok, wantLo, wantHi)
	}
	if lo, hi, ok := st.MinMax("id", value.Long); !ok || lo != int64(1) || hi != int64(n-2) {
		t.Errorf("id bounds [%v, %v] (present %v), want [1, %d]", lo, hi, ok, n-2)
	}
}

// TestRewriteFileDropsRowsByPosition: DropRows leaves out the rows at
// those physical positions, besides those Drop reports, on the row-group
// path and on the row-by-row one (a wider output schema); without Drop no
// key is read and only the row groups holding a dropped position are
// decoded.
func TestRewriteFileDropsRowsByPosition(t *testing.T) {
	wider := rwSchema()
	wider.Fields = append(slices.Clone(wider.Fields), value.Field{Name: "extra", Type: value.Long, Nullable: true})
	by500 := func(k []any) bool { return k[0] == int64(500) }
	for _, tc := range []struct {
		name    string
		schema  value.StructType
		conform func([]any) []any
		drop    func([]any) bool
		gone    []int64 // ids (= positions) Drop or DropRows leave out
		copied  int     // row groups
		deleted []uint64
	}{
		// Rows 5, 130, 500 and 999 lie in 4 of the 8 row groups of 128.
		{"row groups holding a dropped position or key are decoded, the others copied", rwSchema(), nil, by500, []int64{5, 130, 500, 999}, 4, nil},
		{"a file read row by row drops the same rows", wider, func(r []any) []any { return append(r, nil) }, by500, []int64{5, 130, 500, 999}, 0, nil},
		{"by position alone, the row groups without a dropped position are copied", rwSchema(), nil, nil, []int64{5, 130, 999}, 5, nil},
		// Row 5 is both deleted and dropped (it counts as deleted), row
		// 300 deleted in a row group that loses nothing else.
		{"by position in a file with a deletion vector, its deleted rows go too", rwSchema(), nil, nil, []int64{130, 999}, 4, []uint64{5, 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			md, add, rows := rwSource(t, store, false)
			if tc.deleted != nil {
				add = withDV(t, store, add, true, tc.deleted)
			}
			res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
				Write:           WriteOptions{Schema: tc.schema, DataChange: true},
				TargetFileBytes: 128 << 20,
				Keys:            []string{"id"},
				Drop:            tc.drop,
				DropRows:        roaring64.BitmapOf(5, 130, 999),
				Conform:         tc.conform,
			})
			if err != nil {
				t.Fatalf("RewriteFile: %v", err)
			}
			if res.RowGroupsCopied != tc.copied {
				t.Errorf("copied %d row groups, want %d", res.RowGroupsCopied, tc.copied)
			}
			n := int64(len(tc.gone))
			dels := int64(len(tc.deleted))
			if res.Dropped != n || res.Deleted != dels || res.Rows != rwRows-n-dels {
				t.Fatalf("kept %d, dropped %d and deleted %d rows, want %d, %d and %d", res.Rows, res.Dropped, res.Deleted, rwRows-n-dels, n, dels)
			}
			got := pqRead(t, store, Metadata{SchemaString: tc.schema.SchemaString()}, res.Adds[0], ReadOptions{})
			var ids []int64
			for _, r := range got {
				ids = append(ids, r[0].(int64))
			}
			for _, gone := range tc.gone {
				if slices.Contains(ids, gone) {
					t.Errorf("row %d kept", gone)
				}
			}
			for _, gone := range tc.deleted {
				if slices.Contains(ids, int64(gone)) {
					t.Errorf("deleted row %d kept", gone)
				}
			}
			if want := len(rows) - len(tc.gone) - len(tc.deleted); len(ids) != want {
				t.Errorf("read %d rows, want %d", len(ids), want)
			}
		})
	}
}
