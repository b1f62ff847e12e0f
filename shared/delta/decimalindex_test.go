package delta

import (
	"bytes"
	"context"
	"errors"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestAWideDecimalHasAValidColumnIndexAndNoUnsignedBounds writes a
// decimal(25,2) column, stored as FIXED_LEN_BYTE_ARRAY, in small pages:
// runs of nulls that fill pages, pages of negatives only, of positives
// only, and of both (values beyond 64 bits). parquet-go took its bounds in
// unsigned byte order where a decimal's is signed: a page of -5 and 3 got
// min 3, and the chunk's statistics in the footer were as wrong. Its
// column index must have a bound per page (empty for a page of nulls;
// parquet-go left those out, which made a sparse read of the column fail
// as corrupt), bounds that hold every value (the precision's limits), and
// its chunk statistics a null count and no bounds. A read through the page
// index of the key, taking the decimal too, returns the rows.
func TestAWideDecimalHasAValidColumnIndexAndNoUnsignedBounds(t *testing.T) {
	dt := value.DecimalType{Precision: 25, Scale: 2}
	schema := value.StructType{Fields: []value.Field{
		{Name: "k", Type: value.Long, Nullable: true},
		{Name: "dec", Type: dt, Nullable: true},
	}}
	r := rand.New(rand.NewPCG(25, 2))
	const n = 6000
	rows := make([][]any, n)
	nulls := int64(0)
	for i := range rows {
		var d any
		switch seg := i / 1000; {
		case seg == 1 || seg == 4:
		// Nulls only.
		case seg == 2:
			d = value.Decimal{Unscaled: big.NewInt(-1 - r.Int64N(1e15)), Scale: 2}
		case seg == 3:
			d = value.Decimal{Unscaled: big.NewInt(r.Int64N(1e15)), Scale: 2}
		default:
			u := new(big.Int).Lsh(big.NewInt(r.Int64N(1e6)), 60) // beyond 64 bits
			if r.IntN(2) == 0 {
				u.Neg(u)
			}
			if r.IntN(5) > 0 {
				d = value.Decimal{Unscaled: u, Scale: 2}
			}
		}
		if d == nil {
			nulls++
		}
		rows[i] = []any{int64(i), d}
	}
	mem := newPQMemStore()
	add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 512, BloomFilterColumns: []string{"k"}}, rows)
	b := mem.objects[add.Path]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.RowGroups()) != 1 {
		t.Fatalf("%d row groups, want 1", len(f.RowGroups()))
	}
	st := f.Metadata().RowGroups[0].Columns[1].MetaData.Statistics
	if st.NullCount != nulls || st.MinValue != nil || st.MaxValue != nil || st.Min != nil || st.Max != nil {
		t.Fatalf("chunk statistics: %d nulls, min % x, max % x (deprecated % x, % x); want %d nulls and no bounds", st.NullCount, st.MinValue, st.MaxValue, st.Min, st.Max, nulls)
	}
	ci, oi := f.ColumnIndexes()[1], f.OffsetIndexes()[1]
	pages := len(oi.PageLocations)
	if len(ci.NullPages) != pages || len(ci.MinValues) != pages || len(ci.MaxValues) != pages || len(ci.NullCounts) != pages {
		t.Fatalf("column index of %d null flags, %d min, %d max bounds and %d null counts for %d pages", len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues), len(ci.NullCounts), pages)
	}
	if ci.BoundaryOrder != format.Unordered {
		t.Fatalf("boundary order %v, want UNORDERED", ci.BoundaryOrder)
	}
	// The least and greatest decimal(25,2): valid values of the column's
	// logical type, as bounds must be.
	m := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(25), nil), big.NewInt(1))
	lim, neg := parquetfile.TwosComplement(m, 11), parquetfile.TwosComplement(new(big.Int).Neg(m), 11)
	var nullPages, valuePages int
	for p, loc := range oi.PageLocations {
		end := int64(n)
		if p+1 < pages {
			end = oi.PageLocations[p+1].FirstRowIndex
		}
		nulls := int64(0)
		for _, row := range rows[loc.FirstRowIndex:end] {
			if row[1] == nil {
				nulls++
			}
		}
		null := nulls == end-loc.FirstRowIndex
		if ci.NullCounts[p] != nulls || ci.NullPages[p] != null {
			t.Fatalf("page %d: null count %d, null page %v; it holds %d nulls of %d rows", p, ci.NullCounts[p], ci.NullPages[p], nulls, end-loc.FirstRowIndex)
		}
		if null {
			nullPages++
			if len(ci.MinValues[p]) != 0 || len(ci.MaxValues[p]) != 0 {
				t.Fatalf("null page %d has bounds % x, % x", p, ci.MinValues[p], ci.MaxValues[p])
			}
			continue
		}
		valuePages++
		if !bytes.Equal(ci.MinValues[p], neg) || !bytes.Equal(ci.MaxValues[p], lim) {
			t.Fatalf("page %d has bounds % x, % x, want the precision's limits % x, % x", p, ci.MinValues[p], ci.MaxValues[p], neg, lim)
		}
	}
	if nullPages < 2 || valuePages < 6 {
		t.Fatalf("%d null pages, %d of values: the data must have several of each", nullPages, valuePages)
	}

	md := pqMetadata(schema, nil, nil)
	want := []any{int64(1500), int64(2500), int64(5999)}
	got, rs := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k", "dec"}, RowGroupFilter: &RowGroupFilter{Column: "k", Values: want}, OnlyValues: true})
	if rs.sparse != 1 || len(got) != len(want) {
		t.Fatalf("read %d rows (%d row groups through the page index), want %d", len(got), rs.sparse, len(want))
	}
	for i, x := range got {
		if x.pos != want[i].(int64) || value.Compare(x.row[0], want[i]) != 0 || !valueEqual(x.row[1], rows[x.pos][1]) {
			t.Fatalf("row %d: %v, want %v", i, x.row, rows[x.pos])
		}
	}
}

// valueEqual compares two values of package value, nil with nil.
func valueEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return value.Compare(a, b) == 0
}

// TestAFileWithParquetGosShortDecimalIndexIsReadAndRewritten: files written
// before decimalIndexer (and by other parquet-go writers) have a column
// index with fewer bounds than pages for a wide decimal with a page of
// nulls, and its chunk statistics in unsigned order. A read through the
// page index of another column, taking the decimal too, must not fail on
// it (it needs only the decimal's offset index), and a rewrite must copy
// neither into a new file: the row groups that hold them are written
// anew.
func TestAFileWithParquetGosShortDecimalIndexIsReadAndRewritten(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{
		{Name: "k", Type: value.Long, Nullable: true},
		{Name: "dec", Type: value.DecimalType{Precision: 25, Scale: 2}, Nullable: true},
	}}
	const n = 3000
	var rows [][]any
	for i := range n {
		var d any
		if i < 1000 || i >= 2000 {
			d = value.Decimal{Unscaled: big.NewInt(int64(i) - 1500), Scale: 2}
		}
		rows = append(rows, []any{int64(i), d})
	}
	mem := newPQMemStore()
	add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 256}, rows)
	// parquet-go's own indexer, in row groups of fzGroupRows.
	b := fzReencode(t, mem.objects[add.Path], parquet.PageBufferSize(256))
	mem.objects[add.Path], add.Size = b, int64(len(b))
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	short := 0
	ra, err := parquetfile.Open(ctx, mem, add.Path, add.Size)
	if err != nil {
		t.Fatal(err)
	}
	for g, rg := range f.Metadata().RowGroups {
		if err := ra.Prefetch(chunkRanges(rg, true)); err != nil {
			t.Fatal(err)
		}
		if err := ra.CheckPageIndex(g, 1); errors.Is(err, parquetfile.ErrCorrupt) {
			short++
		}
		ra.Release()
	}
	if short == 0 {
		t.Fatal("no row group has a short column index: the test must exercise one")
	}

	md := pqMetadata(schema, nil, nil)
	want := []any{int64(10), int64(1010), int64(1990), int64(2990)}
	got, st := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k", "dec"}, RowGroupFilter: &RowGroupFilter{Column: "k", Values: want}, OnlyValues: true})
	if st.sparse == 0 || len(got) != len(want) {
		t.Fatalf("read %d rows (%d row groups through the page index), want %d", len(got), st.sparse, len(want))
	}
	for i, x := range got {
		if x.pos != want[i].(int64) || !valueEqual(x.row[1], rows[x.pos][1]) {
			t.Fatalf("row %d: %v, want %v", i, x.row, rows[x.pos])
		}
	}

	res, err := RewriteFile(ctx, mem, md, add, RewriteOptions{
		Write: WriteOptions{Schema: schema, DataChange: true},
		Keys:  []string{"k"},
		Drop:  func(k []any) bool { return k[0] == int64(5) },
	})
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	// Every row group but the one that loses key 5 would be copied, and
	// each has a short index or unsigned bounds in its statistics (those
	// with a page of values): none is.
	groups := len(f.Metadata().RowGroups)
	if res.RowGroupsCopied != 0 || res.RowGroupsNotCopied != groups-1 {
		t.Fatalf("%d row groups copied and %d written anew for their metadata, want 0 and %d of %d (%+v)", res.RowGroupsCopied, res.RowGroupsNotCopied, groups-1, groups, res)
	}
	var kept int
	for _, out := range res.Adds {
		if err := fzCheckOutput(mem, out); err != nil {
			t.Fatalf("the rewrite wrote %s, which fails the checks: %v", out.Path, err)
		}
		ob := mem.objects[out.Path]
		of, err := parquet.OpenFile(bytes.NewReader(ob), int64(len(ob)), parquet.SkipPageIndex(true))
		if err != nil {
			t.Fatal(err)
		}
		for g, rg := range of.Metadata().RowGroups {
			if st := rg.Columns[1].MetaData.Statistics; st.MinValue != nil || st.MaxValue != nil || st.Min != nil || st.Max != nil {
				t.Fatalf("the rewrite's row group %d keeps the decimal's bounds % x, % x", g, st.MinValue, st.MaxValue)
			}
		}
		for _, r := range pqRead(t, mem, md, out, ReadOptions{}) {
			k := r[0].(int64)
			if k == 5 || !valueEqual(r[1], rows[k][1]) {
				t.Fatalf("the rewrite holds %v, want row %v", r, rows[k])
			}
			kept++
		}
	}
	if kept != n-1 {
		t.Fatalf("the rewrite holds %d rows, want %d", kept, n-1)
	}
}
