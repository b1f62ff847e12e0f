package delta

import (
	"bytes"
	"context"
	"errors"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestAWideDecimalHasAValidColumnIndexAndSignedBounds writes a
// decimal(25,2) column, stored as FIXED_LEN_BYTE_ARRAY, in small pages:
// runs of nulls that fill pages, pages of negatives only, of positives
// only, and of both (values beyond 64 bits). Its bounds are in the signed
// order of the values (LogicalTypes.md, DECIMAL), where parquet-go before
// v0.32.1 took them as unsigned bytes (a page of -5 and 3 got min 3): the
// chunk statistics in the footer are the least and greatest values, the
// column index has a bound per page (empty for a page of nulls, which
// parquet-go left out), each page's its least and greatest values, and a
// boundary order that holds. A read through the page index of the key,
// taking the decimal too, returns the rows.
func TestAWideDecimalHasAValidColumnIndexAndSignedBounds(t *testing.T) {
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
	lo, hi := decimalExtremes(rows, 1, 0, n, 11)
	if st.NullCount != nulls || !bytes.Equal(st.MinValue, lo) || !bytes.Equal(st.MaxValue, hi) {
		t.Fatalf("chunk statistics: %d nulls, min % x, max % x; want %d nulls, % x, % x", st.NullCount, st.MinValue, st.MaxValue, nulls, lo, hi)
	}
	ci, oi := f.ColumnIndexes()[1], f.OffsetIndexes()[1]
	pages := len(oi.PageLocations)
	if len(ci.NullPages) != pages || len(ci.MinValues) != pages || len(ci.MaxValues) != pages || len(ci.NullCounts) != pages {
		t.Fatalf("column index of %d null flags, %d min, %d max bounds and %d null counts for %d pages", len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues), len(ci.NullCounts), pages)
	}
	var nullPages, valuePages int
	var mins, maxes [][]byte // of the pages of values
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
		lo, hi := decimalExtremes(rows, 1, loc.FirstRowIndex, end, 11)
		if !bytes.Equal(ci.MinValues[p], lo) || !bytes.Equal(ci.MaxValues[p], hi) {
			t.Fatalf("page %d has bounds % x, % x, want its values' % x, % x", p, ci.MinValues[p], ci.MaxValues[p], lo, hi)
		}
		mins, maxes = append(mins, lo), append(maxes, hi)
	}
	if nullPages < 2 || valuePages < 6 {
		t.Fatalf("%d null pages, %d of values: the data must have several of each", nullPages, valuePages)
	}
	for _, bounds := range [][][]byte{mins, maxes} {
		for p := 1; p < len(bounds); p++ {
			c := parquetfile.CompareDecimalBytes(bounds[p-1], bounds[p])
			if ci.BoundaryOrder == format.Ascending && c > 0 || ci.BoundaryOrder == format.Descending && c < 0 {
				t.Fatalf("boundary order %v, but the bounds of pages of values %d and %d are % x, % x", ci.BoundaryOrder, p-1, p, bounds[p-1], bounds[p])
			}
		}
	}

	md := pqMetadata(schema, nil, nil)
	want := []any{int64(1500), int64(2500), int64(5999)}
	got, rs := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k", "dec"}, RowGroupFilter: &RowGroupFilter{Column: "k", Values: want}, OnlyValues: true})
	if rs.Sparse != 1 || len(got) != len(want) {
		t.Fatalf("read %d rows (%d row groups through the page index), want %d", len(got), rs.Sparse, len(want))
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

// decimalExtremes returns the least and greatest of the decimals in column
// c of rows[from:to], in two's complement of size bytes; nil when there
// are none.
func decimalExtremes(rows [][]any, c int, from, to int64, size int) (lo, hi []byte) {
	var min, max *big.Int
	for _, row := range rows[from:to] {
		d, ok := row[c].(value.Decimal)
		if !ok {
			continue
		}
		if min == nil || d.Unscaled.Cmp(min) < 0 {
			min = d.Unscaled
		}
		if max == nil || d.Unscaled.Cmp(max) > 0 {
			max = d.Unscaled
		}
	}
	if min == nil {
		return nil, nil
	}
	return parquetfile.TwosComplement(min, size), parquetfile.TwosComplement(max, size)
}

// v0320Rows are the rows of testdata/parquet-go-v0.32.0/short-decimal-index.parquet:
// a key k and a decimal(25,2), in row groups of 20 rows: the first 50 of
// values of both signs, the next 50 of nulls, the last 50 of positive
// values.
func v0320Rows() (value.StructType, [][]any) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "k", Type: value.Long, Nullable: true},
		{Name: "dec", Type: value.DecimalType{Precision: 25, Scale: 2}, Nullable: true},
	}}
	var rows [][]any
	for i := range 3000 {
		var d any
		switch {
		case i < 1000 && i%2 == 0:
			d = value.Decimal{Unscaled: big.NewInt(int64(i) + 1), Scale: 2}
		case i < 1000:
			d = value.Decimal{Unscaled: big.NewInt(-int64(i) - 1), Scale: 2}
		case i >= 2000:
			d = value.Decimal{Unscaled: big.NewInt(int64(i) - 1500), Scale: 2}
		}
		rows = append(rows, []any{int64(i), d})
	}
	return schema, rows
}

// v0320File puts the file of testdata/parquet-go-v0.32.0 in place of
// add's, which must hold the same rows: FileWriter of the release before
// parquet-go v0.32.1 wrote add's rows, and fzReencode wrote them again
// with parquet-go's own decimal indexer, in row groups of fzGroupRows and
// pages of 256 bytes, as files of other parquet-go writers (and of older
// releases) have them.
func v0320File(t *testing.T, mem *pqMemStore, md Metadata, add *Add, file string) {
	t.Helper()
	name, err := decodeAddPath(add.Path)
	if err != nil {
		t.Fatal(err)
	}
	want := pqRead(t, mem, md, *add, ReadOptions{})
	b, err := os.ReadFile(filepath.Join("testdata", "parquet-go-v0.32.0", file))
	if err != nil {
		t.Fatal(err)
	}
	mem.objects[name], add.Size = b, int64(len(b))
	got := pqRead(t, mem, md, *add, ReadOptions{})
	if !slices.EqualFunc(got, want, func(a, b []any) bool { return pqEqual(a, b) }) {
		t.Fatalf("%s holds %d rows other than the %d written", file, len(got), len(want))
	}
}

// TestAFileOfParquetGoV0320IsReadAndRewritten: files written with
// parquet-go before v0.32.1 (by older releases, and by other parquet-go
// writers) have, for a wide decimal, a column index with fewer bounds
// than pages where a row group has a page of nulls, and chunk statistics
// in unsigned byte order, wrong where a row group holds values of both
// signs. A read through the page index of another column, taking the
// decimal too, must not fail on the short index (it needs only the
// decimal's offset index), and a rewrite must copy neither into a new
// file: those row groups are written anew. The row groups of values of
// one sign, whose bounds are right in either order, are copied.
func TestAFileOfParquetGoV0320IsReadAndRewritten(t *testing.T) {
	ctx := context.Background()
	schema, rows := v0320Rows()
	n := len(rows)
	md := pqMetadata(schema, nil, nil)
	mem := newPQMemStore()
	add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 256}, rows)
	v0320File(t, mem, md, &add, "short-decimal-index.parquet")
	b := mem.objects[add.Path]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	ra, err := parquetfile.Open(ctx, mem, add.Path, add.Size)
	if err != nil {
		t.Fatal(err)
	}
	var short, unsigned int
	for g, rg := range f.Metadata().RowGroups {
		if err := ra.Prefetch(chunkRanges(rg, true)); err != nil {
			t.Fatal(err)
		}
		if err := ra.CheckPageIndex(g, 1); errors.Is(err, parquetfile.ErrCorrupt) {
			short++
		} else if unsignedDecimalStats(&rg.Columns[1].MetaData.Statistics) {
			unsigned++
		}
		ra.Release()
	}
	groups := len(f.Metadata().RowGroups)
	if short != 50 || unsigned != 50 || groups != 150 {
		t.Fatalf("%d of %d row groups have a short column index and %d unsigned bounds, want 50 and 50 of 150", short, groups, unsigned)
	}

	want := []any{int64(10), int64(1010), int64(1990), int64(2990)}
	got, st := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k", "dec"}, RowGroupFilter: &RowGroupFilter{Column: "k", Values: want}, OnlyValues: true})
	if st.Sparse == 0 || len(got) != len(want) {
		t.Fatalf("read %d rows (%d row groups through the page index), want %d", len(got), st.Sparse, len(want))
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
	// Key 5 is in the first row group, of both signs, which is decoded.
	if res.RowGroupsCopied != 50 || res.RowGroupsNotCopied != 99 {
		t.Fatalf("%d row groups copied and %d written anew for their metadata, want 50 and 99 (%+v)", res.RowGroupsCopied, res.RowGroupsNotCopied, res)
	}
	var kept int
	for _, out := range res.Adds {
		if err := fzCheckOutput(mem, out); err != nil {
			t.Fatalf("the rewrite wrote %s, which fails the checks: %v", out.Path, err)
		}
		kept += checkDecimalChunkBounds(t, mem.objects[out.Path], rows)
		for _, r := range pqRead(t, mem, md, out, ReadOptions{}) {
			k := r[0].(int64)
			if k == 5 || !valueEqual(r[1], rows[k][1]) {
				t.Fatalf("the rewrite holds %v, want row %v", r, rows[k])
			}
		}
	}
	if kept != n-1 {
		t.Fatalf("the rewrite holds %d rows, want %d", kept, n-1)
	}
}

// checkDecimalChunkBounds checks that the chunk statistics of the decimal
// (leaf 1) of each row group of the Parquet file b are the least and
// greatest values of its rows, keyed by leaf 0 into rows, and returns how
// many rows it holds.
func checkDecimalChunkBounds(t *testing.T, b []byte, rows [][]any) int {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	var held int
	for g, rg := range f.RowGroups() {
		var group [][]any
		r := rg.Rows()
		buf := make([]parquet.Row, rg.NumRows())
		m, err := r.ReadRows(buf)
		r.Close()
		if int64(m) != rg.NumRows() || err != nil && m == 0 {
			t.Fatalf("row group %d: read %d of %d rows: %v", g, m, rg.NumRows(), err)
		}
		for _, row := range buf {
			group = append(group, rows[row[0].Int64()])
		}
		held += len(group)
		st := f.Metadata().RowGroups[g].Columns[1].MetaData.Statistics
		lo, hi := decimalExtremes(group, 1, 0, int64(len(group)), 11)
		if !bytes.Equal(st.MinValue, lo) || !bytes.Equal(st.MaxValue, hi) {
			t.Fatalf("row group %d has decimal bounds % x, % x, want its values' % x, % x", g, st.MinValue, st.MaxValue, lo, hi)
		}
	}
	return held
}
