package delta

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
)

// piSchema is a state table with a composite key (k, k2), a payload and
// the merge's order column; k is of type kt.
func piSchema(kt value.Type) value.StructType {
	return value.StructType{Fields: []value.Field{
		{Name: "k", Type: kt, Nullable: true},
		{Name: "k2", Type: value.Long, Nullable: true},
		{Name: "name", Type: value.String, Nullable: true},
		{Name: "_order", Type: value.Binary, Nullable: true},
	}}
}

// piKey is the i-th key value of type kt: strings of 82 bytes sharing a
// 50-byte prefix, so that the column index truncates their bounds (to
// parquetfile.LookupBoundBytes) within the part that tells them apart.
func piKey(kt value.Type, i int) any {
	if kt == value.String {
		return fmt.Sprintf("customer-%041d-%014d-%016x", 0, i, i*7919)
	}
	switch kt {
	case value.Integer:
		return int32(i*3 - 1000)
	case value.Date:
		return value.Days(i*3 - 1000)
	}
	return int64(i) * 3
}

type piRow struct {
	pos int64
	row []any
}

// piRead reads the file with opts, collecting every row with its position,
// and returns how its row groups were read.
func piRead(t *testing.T, store *countingStore, md Metadata, add Add, opts ReadOptions) ([]piRow, parquetfile.ReadStats) {
	t.Helper()
	var out []piRow
	var st parquetfile.ReadStats
	ctx := parquetfile.WithReadStats(context.Background(), &st)
	err := ReadFileAt(ctx, store, md, add, opts, func(pos int64, row []any) error {
		out = append(out, piRow{pos, row})
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFileAt: %v", err)
	}
	return out, st
}

// TestOnlyValuesReadsExactlyTheMatchingRowsOfAFullRead writes random files
// (key-sorted or not, several row groups of several pages, null keys and
// payloads, duplicate keys, a deletion vector) and checks that a read with
// OnlyValues returns exactly the rows of a full read whose key is one of the
// values, at the same positions, whether it goes through the page index or
// not.
func TestOnlyValuesReadsExactlyTheMatchingRowsOfAFullRead(t *testing.T) {
	ctx := context.Background()
	var sparse, dense, stored, byValue, narrowed int
	for trial := range 60 {
		r := rand.New(rand.NewPCG(uint64(trial), 14))
		kt := []value.Type{value.String, value.Long, value.Integer, value.Date}[trial%4]
		sorted := trial%3 != 1
		schema := piSchema(kt)
		// Half the trials add columns of other kinds of stored values: a
		// required one (pages without definition levels), a double and a
		// decimal stored as fixed-length byte arrays (whose column index
		// parquet-go before v0.32.1 wrote short of a page of nulls; the
		// files of testdata/parquet-go-v0.32.0 have such indexes).
		wide := trial%2 == 1
		if wide {
			schema.Fields = append(schema.Fields,
				value.Field{Name: "seq", Type: value.Long, Nullable: false},
				value.Field{Name: "d", Type: value.Double, Nullable: true},
				value.Field{Name: "dec", Type: value.DecimalType{Precision: 25, Scale: 2}, Nullable: true})
		}
		n := 200 + r.IntN(3000)
		keys := make([]any, n)
		for i := range keys {
			keys[i] = piKey(kt, r.IntN(2*n))
		}
		if sorted {
			slices.SortFunc(keys, value.Compare)
		}
		for range r.IntN(4) {
			keys[r.IntN(n)] = nil // a null key (unsorted from then on, bounds still hold)
		}
		rows := make([][]any, n)
		for i := range rows {
			var name any
			if r.IntN(5) > 0 {
				name = fmt.Sprintf("name %d", r.IntN(100))
			}
			var k2 any
			if r.IntN(7) > 0 {
				k2 = r.Int64N(10)
			}
			rows[i] = []any{keys[i], k2, name, []byte{byte(i), byte(i >> 8), byte(r.Uint32())}}
			if wide {
				var d, dec any
				if r.IntN(4) > 0 {
					d = r.NormFloat64()
				}
				if r.IntN(4) > 0 {
					dec = value.Decimal{Unscaled: big.NewInt(r.Int64N(1e12) - 5e11), Scale: 2}
				}
				rows[i] = append(rows[i], int64(i), d, dec)
			}
		}
		opts := WriteOptions{Schema: schema, RowGroupRows: int64(100 + r.IntN(1000)), PageBytes: []int{256, 512, 1024, 4096}[r.IntN(4)]}
		if trial%5 != 0 {
			opts.BloomFilterColumns = []string{"k"} // and 64-byte page bounds
		}
		mem := newPQMemStore()
		store := &countingStore{Store: mem}
		add := pqWrite(t, mem, opts, rows)
		if trial%3 == 2 {
			// As other writers write: dictionary-encoded pages.
			b := piDictReencode(t, mem.objects[add.Path], opts.PageBytes)
			mem.objects[add.Path], add.Size = b, int64(len(b))
		}
		md := pqMetadata(schema, nil, nil)
		if r.IntN(2) == 0 {
			del := roaring64.New()
			for range r.IntN(n / 4) {
				del.Add(uint64(r.IntN(n)))
			}
			dvs, err := WriteDeletionVectors(ctx, mem, "", []*roaring64.Bitmap{del})
			if err != nil {
				t.Fatal(err)
			}
			add.DeletionVector = &dvs[0]
		}
		var vals []any
		nvals := 1 + r.IntN(6) // a sparse batch
		if trial%7 == 0 {
			nvals = 1 + r.IntN(n/5) // a dense one
		}
		backfill := trial%7 == 3 // a dense one of keys mostly new to the file
		if backfill {
			nvals = n / 3
		}
		for range nvals {
			if backfill || r.IntN(3) == 0 {
				vals = append(vals, piKey(kt, r.IntN(2*n))) // maybe absent
			} else if k := keys[r.IntN(n)]; k != nil {
				vals = append(vals, k)
			}
		}
		slices.SortFunc(vals, value.Compare)
		cols := [][]string{{"k", "k2", "name", "_order"}, {"_order", "k"}, {"k"}}[r.IntN(3)]
		if wide && r.IntN(3) > 0 {
			cols = append(slices.Clone(cols), []string{"seq", "d", "dec"}[r.IntN(3):]...)
		}
		kcol := slices.Index(cols, "k")

		var want []piRow
		all, _ := piRead(t, store, md, add, ReadOptions{Columns: cols})
		for _, x := range all {
			if x.row[kcol] != nil && slices.ContainsFunc(vals, func(v any) bool { return value.Compare(v, x.row[kcol]) == 0 }) {
				want = append(want, x)
			}
		}
		flt := &RowGroupFilter{Column: "k", Values: vals, Keep: func(lo, hi any) bool {
			return slices.ContainsFunc(vals, func(v any) bool { return value.Compare(v, lo) >= 0 && value.Compare(v, hi) <= 0 })
		}}
		got, st := piRead(t, store, md, add, ReadOptions{Columns: cols, RowGroupFilter: flt, OnlyValues: true})
		sparse += st.Sparse
		dense += st.Dense
		stored += st.Stored
		byValue += st.ByValue
		narrowed += st.Narrowed
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d (sorted %v, %v keys, %d rows, %d values, columns %v): OnlyValues read %d rows, the full read has %d matching\ngot  %v\nwant %v",
				trial, sorted, kt, n, len(vals), cols, len(got), len(want), got, want)
		}
	}
	t.Logf("%d row groups read through the page index (%d narrowed by their bloom filter), %d whole; of the key's pages, %d tested as stored, %d value by value", sparse, narrowed, dense, stored, byValue)
	if narrowed < 10 {
		t.Fatalf("%d row groups narrowed by their bloom filter: the trials must exercise it", narrowed)
	}
	if sparse < 100 {
		t.Fatalf("%d row groups read through the page index, %d whole: the trials must exercise the page index", sparse, dense)
	}
	// Pages with a null key are tested value by value: both ways must be
	// exercised.
	if stored < 100 || byValue < 10 {
		t.Fatalf("of the key's pages, %d tested as stored, %d value by value: the trials must exercise both tests", stored, byValue)
	}
}

// piSortedUUIDs returns n random UUID strings, sorted.
func piSortedUUIDs(r *rand.Rand, n int) []any {
	keys := make([]any, n)
	for i := range keys {
		keys[i] = blUUID(r)
	}
	slices.SortFunc(keys, value.Compare)
	return keys
}

// TestOnlyValuesReadsFewPagesOfASortedFile looks up 20 keys (UUIDs) in a
// key-sorted file of 200 000 rows with small pages: the read through the
// page index decodes a few pages of each row group and fetches a small
// share of what the row-group read fetches.
func TestOnlyValuesReadsFewPagesOfASortedFile(t *testing.T) {
	schema := piSchema(value.String)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	keys := piSortedUUIDs(r, n)
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{keys[i], int64(i), fmt.Sprintf("name %d", r.IntN(1000)), []byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, 3, 4, 5}}
	}
	mem := newPQMemStore()
	store := &countingStore{Store: mem}
	add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 4096, BloomFilterColumns: []string{"k"}}, rows)
	md := pqMetadata(schema, nil, nil)
	var vals []any
	for range 20 {
		vals = append(vals, keys[r.IntN(n)])
	}
	slices.SortFunc(vals, value.Compare)
	flt := &RowGroupFilter{Column: "k", Values: vals}
	cols := []string{"k", "_order"}
	got, st := piRead(t, store, md, add, ReadOptions{Columns: cols, RowGroupFilter: flt, OnlyValues: true})
	sparse := store.read.Swap(0)
	all, _ := piRead(t, store, md, add, ReadOptions{Columns: cols, RowGroupFilter: flt})
	dense := store.read.Load()
	var matched int
	for _, x := range all {
		if slices.Contains(vals, x.row[0]) {
			matched++
		}
	}
	if len(got) != matched || matched < 20 {
		t.Fatalf("read %d rows, want %d", len(got), matched)
	}
	t.Logf("%d keys: %d pages decoded in %d row groups, %d bytes fetched through the page index, %d through row groups (file %d bytes)", len(vals), st.Pages, st.Sparse, sparse, dense, add.Size)
	// A key lies in one page of k (or two, across a page boundary) and
	// one of _order.
	if st.Sparse != 2 || st.Pages > 4*len(vals) {
		t.Fatalf("%d row groups read through the page index decoding %d pages, want 2 decoding at most %d", st.Sparse, st.Pages, 4*len(vals))
	}
	if sparse*3 > dense {
		t.Fatalf("the page-index read fetched %d bytes, the row-group read %d: want at least 3x fewer", sparse, dense)
	}
}

// TestOnlyValuesReadsThePagesOfTheKeysTheBloomFilterMayHold looks up a
// backfill's batch in a key-sorted file of 100 000 UUID keys: 5 000 keys
// the file does not hold, random over its key range, and 10 it holds.
// Nearly every page's bounds hold a key looked for, but the bloom filter
// rules out the absent ones, and with them the pages only they selected:
// the read decodes the pages of the 10 keys. The same file without a
// filter decodes nearly all of them.
func TestOnlyValuesReadsThePagesOfTheKeysTheBloomFilterMayHold(t *testing.T) {
	schema := piSchema(value.String)
	r := rand.New(rand.NewPCG(7, 8))
	const n, absent, present = 100_000, 5000, 10
	keys := piSortedUUIDs(r, n)
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{keys[i], int64(i), nil, []byte{byte(i), byte(i >> 8), byte(i >> 16)}}
	}
	var vals []any
	for range absent {
		vals = append(vals, blUUID(r))
	}
	want := map[string]bool{}
	for range present {
		k := keys[r.IntN(n)]
		vals = append(vals, k)
		want[k.(string)] = true
	}
	slices.SortFunc(vals, value.Compare)
	md := pqMetadata(schema, nil, nil)
	read := func(t *testing.T, bloom []string) ([]piRow, parquetfile.ReadStats, int) {
		mem := newPQMemStore()
		add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 4096, BloomFilterColumns: bloom}, rows)
		pages := 0
		f, err := parquet.OpenFile(bytes.NewReader(mem.objects[add.Path]), add.Size)
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range f.RowGroups() {
			oi, err := rg.ColumnChunks()[0].OffsetIndex()
			if err != nil {
				t.Fatal(err)
			}
			pages += oi.NumPages()
		}
		flt := &RowGroupFilter{Column: "k", Values: vals}
		got, st := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k", "_order"}, RowGroupFilter: flt, OnlyValues: true})
		return got, st, pages
	}
	t.Run("with a bloom filter, the pages of the keys held", func(t *testing.T) {
		got, st, pages := read(t, []string{"k"})
		if len(got) != present {
			t.Fatalf("read %d rows, want the %d held", len(got), present)
		}
		for _, x := range got {
			if !want[x.row[0].(string)] {
				t.Fatalf("read key %v, not looked for", x.row[0])
			}
		}
		t.Logf("%d of %d key pages' worth decoded (with the order's)", st.Pages, pages)
		// A key's page of k (two across a boundary) and of _order, and a
		// few false positives of the filter.
		if st.Pages > 4*present+8 {
			t.Fatalf("decoded %d pages of a file of %d key pages, want at most %d: the filter's ruling out must narrow the pages", st.Pages, pages, 4*present+8)
		}
	})
	t.Run("without one, nearly every page", func(t *testing.T) {
		got, st, pages := read(t, nil)
		if len(got) != present {
			t.Fatalf("read %d rows, want the %d held", len(got), present)
		}
		if st.Pages < pages*9/10 {
			t.Fatalf("decoded %d pages of %d: the keys looked for must fall on nearly every page, or the test above proves nothing", st.Pages, pages)
		}
	})
}

// TestOnlyValuesOfAnotherGoTypeReturnEveryRow: values of another Go type
// than the column's (a batch read before the column was widened) compare
// by another rule than value.Compare, so the read returns every row and
// leaves the matching to the caller.
func TestOnlyValuesOfAnotherGoTypeReturnEveryRow(t *testing.T) {
	schema := piSchema(value.Long)
	var rows [][]any
	for i := range 1000 {
		rows = append(rows, []any{int64(i), nil, nil, nil})
	}
	mem := newPQMemStore()
	add := pqWrite(t, mem, WriteOptions{Schema: schema, PageBytes: 512}, rows)
	md := pqMetadata(schema, nil, nil)
	got, _ := piRead(t, &countingStore{Store: mem}, md, add, ReadOptions{Columns: []string{"k"}, RowGroupFilter: &RowGroupFilter{Column: "k", Values: []any{int32(5)}}, OnlyValues: true})
	if len(got) != len(rows) {
		t.Fatalf("read %d rows, want all %d", len(got), len(rows))
	}
}

// piDictReencode writes the rows of the Parquet file src (of top-level
// leaves) again with every column dictionary-encoded, as Spark writes,
// in pages of about pageBytes and row groups of fzGroupRows.
func piDictReencode(t *testing.T, src []byte, pageBytes int) []byte {
	t.Helper()
	schema := fzSchemaOf(t, src, func(fld parquet.Field) parquet.Node { return parquet.Encoded(fld, &parquet.RLEDictionary) })
	b := fzReencode(t, src, schema, parquet.DataPageVersion(1), parquet.PageBufferSize(pageBytes))
	g, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Metadata().RowGroups[0].Columns {
		if c.MetaData.DictionaryPageOffset == 0 {
			t.Fatalf("column %v re-encoded without a dictionary", c.MetaData.PathInSchema)
		}
	}
	return b
}

// BenchmarkOnlyValuesLookup looks up 2000 random keys of a key-sorted
// file of 2M rows (long keys, 8 KiB pages, as a state file of the merge
// holds them) through the page index, reading the key, a payload and the
// order column: the read of a random batch's lookups, where each page
// read holds one key looked for among about a thousand.
func BenchmarkOnlyValuesLookup(b *testing.B) {
	const n, probes = 2_000_000, 2000
	schema := piSchema(value.Long)
	mem := objstore.NewMemory()
	add := pqWriteRows(b, mem, WriteOptions{Schema: schema, PageBytes: 8 << 10, BloomFilterColumns: []string{"k"}}, n, func(i int) []any {
		return []any{int64(i) * 3, int64(i % 10), fmt.Sprintf("name %d", i%1000), []byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, 3, 4, 5}}
	})
	md := pqMetadata(schema, nil, nil)
	r := rand.New(rand.NewPCG(3, 3))
	var vals []any
	for range probes {
		vals = append(vals, int64(r.IntN(n))*3)
	}
	slices.SortFunc(vals, value.Compare)
	vals = slices.CompactFunc(vals, func(a, b any) bool { return value.Compare(a, b) == 0 })
	flt := &RowGroupFilter{Column: "k", Values: vals}
	opts := ReadOptions{Columns: []string{"k", "name", "_order"}, RowGroupFilter: flt, OnlyValues: true}
	benchLookups(b, mem, md, add, opts, len(vals))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(vals)), "ns/key")
}

// BenchmarkOnlyValuesLookupDenseUUIDs looks up 20,000 random keys of a
// key-sorted file of 1M rows whose key is a UUID string (8 KiB pages, as
// a state file): 2% of its rows, so that every page read holds about
// twenty keys looked for, as in the merge of a random batch of 100,000
// changes into a table of 5M rows.
func BenchmarkOnlyValuesLookupDenseUUIDs(b *testing.B) {
	const n, probes = 1_000_000, 20_000
	schema := piSchema(value.String)
	uuid := func(i int) string {
		h := uint64(i)*0x9E3779B97F4A7C15 + 1
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), uint16(i), uint64(i)*7919)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = uuid(i)
	}
	slices.Sort(keys)
	mem := objstore.NewMemory()
	add := pqWriteRows(b, mem, WriteOptions{Schema: schema, PageBytes: 8 << 10, BloomFilterColumns: []string{"k"}}, n, func(i int) []any {
		return []any{keys[i], int64(i % 10), fmt.Sprintf("name %d", i%1000), []byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, 3, 4, 5}}
	})
	md := pqMetadata(schema, nil, nil)
	r := rand.New(rand.NewPCG(3, 3))
	var vals []any
	for range probes {
		vals = append(vals, keys[r.IntN(n)])
	}
	slices.SortFunc(vals, value.Compare)
	vals = slices.CompactFunc(vals, func(a, b any) bool { return value.Compare(a, b) == 0 })
	flt := &RowGroupFilter{Column: "k", Values: vals}
	opts := ReadOptions{Columns: []string{"k", "_order"}, RowGroupFilter: flt, OnlyValues: true}
	benchLookups(b, mem, md, add, opts, len(vals))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
}

// BenchmarkOnlyValuesLookupNewUUIDs looks up 11,000 keys in a key-sorted
// file of 1M UUID keys (8 KiB pages, as a state file), of which 2% are in
// it: a backfill's batch of 1M keys into a table of 90M rows, scaled down.
// The keys are mostly new to the table and random over its key range, so
// that nearly every page's bounds hold one.
func BenchmarkOnlyValuesLookupNewUUIDs(b *testing.B) {
	const n, probes, held = 1_000_000, 11_000, 220
	schema := piSchema(value.String)
	r := rand.New(rand.NewPCG(5, 5))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = blUUID(r)
	}
	slices.Sort(keys)
	mem := objstore.NewMemory()
	add := pqWriteRows(b, mem, WriteOptions{Schema: schema, PageBytes: 8 << 10, BloomFilterColumns: []string{"k"}}, n, func(i int) []any {
		return []any{keys[i], int64(i % 10), nil, []byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, 3, 4, 5}}
	})
	md := pqMetadata(schema, nil, nil)
	vals := make([]any, 0, probes)
	for range probes - held {
		vals = append(vals, blUUID(r))
	}
	for _, i := range r.Perm(n)[:held] {
		vals = append(vals, keys[i])
	}
	slices.SortFunc(vals, value.Compare)
	flt := &RowGroupFilter{Column: "k", Values: vals}
	opts := ReadOptions{Columns: []string{"k", "_order"}, RowGroupFilter: flt, OnlyValues: true}
	benchLookups(b, mem, md, add, opts, held)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(vals)), "ns/key")
}

// benchLookups reads add with opts b.N times, failing unless each read
// finds want rows.
func benchLookups(b *testing.B, store objstore.Store, md Metadata, add Add, opts ReadOptions, want int) {
	b.Helper()
	var found int
	for b.Loop() {
		found = 0
		err := ReadFileAt(context.Background(), store, md, add, opts, func(int64, []any) error {
			found++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if found != want {
		b.Fatalf("found %d of %d keys", found, want)
	}
}
