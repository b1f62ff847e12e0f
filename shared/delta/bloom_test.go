package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// bfRowGroupRows is the row group size of the bloom filter tests' files, a
// multiple of the writer's batch so that every row group holds exactly as
// many rows and row i is in row group i/bfRowGroupRows.
const bfRowGroupRows = 256

// bfSchema has a column of each type the filters hash differently, and
// the row's index to tell which row group a row read came from.
func bfSchema() value.StructType {
	f := func(name string, t value.Type) value.Field { return value.Field{Name: name, Type: t, Nullable: true} }
	return value.StructType{Fields: []value.Field{
		f("id", value.String), f("n", value.Long), f("k", value.Integer), f("s", value.Short),
		f("day", value.Date), f("ts", value.Timestamp), f("bin", value.Binary), f("row", value.Long),
	}}
}

var bfColumns = []string{"id", "n", "k", "s", "day", "ts", "bin"}

func bfRow(r *rand.Rand, i int) []any {
	var id uuid.UUID
	for j := range id {
		id[j] = byte(r.Uint32())
	}
	return []any{id.String(), r.Int64(), r.Int32(), int16(r.Uint32()), value.Days(r.Int32N(40000)),
		value.Micros(r.Int64()), []byte(id.String()[:8]), int64(i)}
}

// bfRows returns n random rows and the generator, seeded.
func bfRows(seed1, seed2 uint64, n int) (*rand.Rand, [][]any) {
	r := rand.New(rand.NewPCG(seed1, seed2))
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = bfRow(r, i)
	}
	return r, rows
}

// bfWrite writes rows as one data file with bloom filters on cols.
func bfWrite(t testing.TB, store *pqMemStore, rows [][]any, cols []string, bits uint) (Metadata, Add) {
	t.Helper()
	return bfWriteWith(t, store, rows, WriteOptions{Schema: bfSchema(), RowGroupRows: bfRowGroupRows,
		BloomFilterColumns: cols, BloomFilterBitsPerValue: bits})
}

// bfWriteWith writes rows as one data file of schema bfSchema with wo.
func bfWriteWith(t testing.TB, store *pqMemStore, rows [][]any, wo WriteOptions) (Metadata, Add) {
	t.Helper()
	schema := bfSchema()
	w, err := NewFileWriter(context.Background(), store, wo)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return Metadata{ID: "bloom", Format: Format{Provider: "parquet"}, SchemaString: schema.SchemaString()}, add
}

// bfReadGroups reads the file with a filter on col for values and returns
// the row groups read.
func bfReadGroups(t testing.TB, store *pqMemStore, md Metadata, add Add, flt *RowGroupFilter) map[int]bool {
	t.Helper()
	read := map[int]bool{}
	err := ReadFile(context.Background(), store, md, add, ReadOptions{Columns: []string{"row"}, RowGroupFilter: flt}, func(r []any) error {
		read[int(r[0].(int64))/bfRowGroupRows] = true
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	return read
}

func TestBloomFilterNeverSkipsARowGroupHoldingAValue(t *testing.T) {
	schema := bfSchema()
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 14))
		rows := make([][]any, (8+r.IntN(8))*bfRowGroupRows+r.IntN(bfRowGroupRows))
		for i := range rows {
			rows[i] = bfRow(r, i)
		}
		store := newPQMemStore()
		// Few bits per value: false positives are common, and must never
		// hide that a true positive was missed.
		md, add := bfWrite(t, store, rows, bfColumns, uint(4+r.IntN(30)))
		for _, col := range bfColumns {
			t.Run(fmt.Sprintf("seed %d: column %s", seed, col), func(t *testing.T) {
				c := schema.Index(col)
				want := map[int]bool{}
				var values []any
				for range 1 + r.IntN(12) {
					i := r.IntN(len(rows))
					want[i/bfRowGroupRows] = true
					values = append(values, rows[i][c])
				}
				for range r.IntN(300) {
					values = append(values, bfRow(r, 0)[c])
				}
				r.Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
				got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: col, Values: values})
				for g := range want {
					if !got[g] {
						t.Errorf("row group %d holds a wanted value and was skipped", g)
					}
				}
			})
		}
	}
}

func TestBloomFilterSkipsMostRowGroupsWithoutTheValues(t *testing.T) {
	const groups = 40
	r, rows := bfRows(1, 2, groups*bfRowGroupRows)
	store := newPQMemStore()
	md, add := bfWrite(t, store, rows, []string{"id", "n"}, 0)
	hit := 7 * bfRowGroupRows
	for _, tc := range []struct {
		col    string
		values []any
	}{
		{"id", []any{rows[hit][0]}},
		{"n", []any{rows[hit][1]}},
	} {
		t.Run("200 absent values of "+tc.col+" and one present", func(t *testing.T) {
			c := bfSchema().Index(tc.col)
			values := tc.values
			for range 200 {
				values = append(values, bfRow(r, 0)[c])
			}
			// At 32 bits per value a row group passes 200 absent probes
			// with probability 1-(1-3.6e-5)^200 = 0.7%.
			got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: tc.col, Values: values})
			if !got[hit/bfRowGroupRows] {
				t.Fatalf("the row group holding the value was skipped")
			}
			if len(got) > 4 {
				t.Errorf("read %d of %d row groups, want the one holding the value and few false positives", len(got), groups)
			}
		})
	}
	t.Run("the pages of skipped row groups are not read", func(t *testing.T) {
		var skipped []int
		for g := range groups {
			if g != hit/bfRowGroupRows {
				skipped = append(skipped, g)
			}
		}
		values := []any{rows[hit][0]}
		got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "id", Values: values})
		var corrupt []int
		for _, g := range skipped {
			if !got[g] {
				corrupt = append(corrupt, g)
			}
		}
		rgCorrupt(t, store, add, corrupt)
		if err := ReadFile(context.Background(), store, md, add, ReadOptions{}, func([]any) error { return nil }); err == nil {
			t.Fatal("an unfiltered read of the corrupted row groups succeeded: the test proves nothing")
		}
		again := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "id", Values: values})
		if len(again) != len(got) {
			t.Errorf("read %d row groups after corrupting the skipped ones, %d before", len(again), len(got))
		}
	})
}

func TestBloomFilterComesAfterTheBoundsCheck(t *testing.T) {
	_, rows := bfRows(3, 4, 10*bfRowGroupRows)
	for i := range rows {
		rows[i][1] = int64(i) // n follows the row: row group bounds are disjoint
	}
	rows[1900][1] = int64(-1) // 1900 is absent, yet within row group 7's bounds
	store := newPQMemStore()
	md, add := bfWrite(t, store, rows, []string{"n"}, 0)
	// Bounds keep row groups 1 (300) and 7 (1900), the filter drops 7.
	values := []any{int64(300), int64(1900)}
	keep := func(lo, hi any) bool {
		return value.Compare(lo, int64(300)) <= 0 && value.Compare(hi, int64(300)) >= 0 ||
			value.Compare(lo, int64(1900)) <= 0 && value.Compare(hi, int64(1900)) >= 0
	}
	got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "n", Keep: keep, Values: values})
	if len(got) != 1 || !got[1] {
		t.Errorf("read row groups %v, want only 1 (bounds reject all but 1 and 7, the filter rejects 7)", got)
	}
}

func TestFilesWithoutBloomFiltersReadAsBefore(t *testing.T) {
	r, rows := bfRows(5, 6, 6*bfRowGroupRows)
	absent := []any{bfRow(r, 0)[0], bfRow(r, 0)[0]}
	for _, tc := range []struct {
		name string
		cols []string
		col  string
	}{
		{"a file without filters reads every row group", nil, "id"},
		{"a column without a filter reads every row group", []string{"n"}, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			md, add := bfWrite(t, store, rows, tc.cols, 0)
			got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: tc.col, Values: absent})
			if len(got) != 6 {
				t.Errorf("read %d row groups, want all 6", len(got))
			}
		})
	}
	t.Run("values of another Go type than the column's never skip", func(t *testing.T) {
		store := newPQMemStore()
		md, add := bfWrite(t, store, rows, []string{"n"}, 0)
		got := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "n", Values: []any{int64(1), int32(2)}})
		if len(got) != 6 {
			t.Errorf("read %d row groups, want all 6", len(got))
		}
	})
}

func TestBloomFiltersAreStandardParquet(t *testing.T) {
	_, rows := bfRows(7, 8, 5*bfRowGroupRows)
	store := newPQMemStore()
	_, add := bfWrite(t, store, rows, []string{"id", "n"}, 10)
	f, _ := rwRowGroups(t, store, add)
	idLeaf, nLeaf := 0, 1
	var next int64
	for g, rg := range f.RowGroups() {
		chunks := rg.ColumnChunks()
		for leaf, cc := range chunks {
			bf := cc.(*parquet.FileColumnChunk).BloomFilter()
			if (leaf == idLeaf || leaf == nLeaf) != (bf != nil) {
				t.Fatalf("row group %d column %d: bloom filter %v", g, leaf, bf != nil)
			}
		}
		// parquet-go's own reader finds every value written.
		for i := g * bfRowGroupRows; i < (g+1)*bfRowGroupRows; i++ {
			ok, err := chunks[idLeaf].(*parquet.FileColumnChunk).BloomFilter().Check(parquet.ByteArrayValue([]byte(rows[i][0].(string))))
			if err != nil || !ok {
				t.Fatalf("row %d: id not in parquet-go's view of the filter (%v)", i, err)
			}
			ok, err = chunks[nLeaf].(*parquet.FileColumnChunk).BloomFilter().Check(parquet.Int64Value(rows[i][1].(int64)))
			if err != nil || !ok {
				t.Fatalf("row %d: n not in parquet-go's view of the filter (%v)", i, err)
			}
		}
		// The metadata gives offset and length, and the filters lie
		// together, so a reader fetches them in one request.
		for _, leaf := range []int{idLeaf, nLeaf} {
			cm := f.Metadata().RowGroups[g].Columns[leaf].MetaData
			if cm.BloomFilterOffset <= 0 || cm.BloomFilterLength <= 0 {
				t.Fatalf("row group %d column %d: bloom_filter_offset %d, bloom_filter_length %d", g, leaf, cm.BloomFilterOffset, cm.BloomFilterLength)
			}
			if next != 0 && cm.BloomFilterOffset != next {
				t.Errorf("row group %d column %d: filter at %d, the previous one ends at %d", g, leaf, cm.BloomFilterOffset, next)
			}
			next = cm.BloomFilterOffset + int64(cm.BloomFilterLength)
			// 10 bits per value: 256 values take 320 bytes of bitset.
			if cm.BloomFilterLength < 320 || cm.BloomFilterLength > 320+32 {
				t.Errorf("row group %d column %d: filter of %d bytes, want 320 of bitset and a small header", g, leaf, cm.BloomFilterLength)
			}
		}
	}
}

func TestRewrittenFilesKeepTheirBloomFilters(t *testing.T) {
	_, rows := bfRows(9, 10, 6*bfRowGroupRows)
	store := newPQMemStore()
	md, add := bfWrite(t, store, rows, []string{"id"}, 0)
	// Drop one row of row group 2: the others are copied verbatim, row
	// group 2 is re-encoded column by column.
	drop := rows[2*bfRowGroupRows+5][0]
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: bfSchema(), RowGroupRows: bfRowGroupRows, BloomFilterColumns: []string{"id"}},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return k[0] == drop },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Adds) != 1 || res.RowGroupsCopied != 5 || res.RowGroupsDecoded != 1 {
		t.Fatalf("rewrite: %d files, %d row groups copied, %d decoded; want 1, 5, 1", len(res.Adds), res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	out := res.Adds[0]
	f, _ := rwRowGroups(t, store, out)
	for g := range f.Metadata().RowGroups {
		if f.Metadata().RowGroups[g].Columns[0].MetaData.BloomFilterOffset <= 0 {
			t.Errorf("row group %d of the rewritten file has no filter", g)
		}
	}
	// Every kept key is found by its filter.
	for i, row := range rows {
		if row[0] == drop || i%7 != 0 {
			continue
		}
		found := false
		err := ReadFile(context.Background(), store, md, out, ReadOptions{Columns: []string{"id"}, RowGroupFilter: &RowGroupFilter{Column: "id", Values: []any{row[0]}}}, func(got []any) error {
			found = found || got[0] == row[0]
			return nil
		})
		if err != nil || !found {
			t.Fatalf("row %d not found through the rewritten file's filters (%v)", i, err)
		}
	}
}

// bfHeader re-encodes the bloom filter header of row group 0's first
// column in place with NumBytes set to n (overwriting the bitset's first
// bytes), and drops bloom_filter_length from the footer so that the reader
// goes by the header.
func bfHeader(t *testing.T, b []byte, n int32) []byte {
	t.Helper()
	b = bytes.Clone(b)
	_, md := ckSplit(t, b)
	off := md.RowGroups[0].Columns[0].MetaData.BloomFilterOffset
	var h format.BloomFilterHeader
	var proto thrift.CompactProtocol
	if err := thrift.NewDecoder(proto.NewReaderFromBytes(b[off:])).Decode(&h); err != nil {
		t.Fatal(err)
	}
	h.NumBytes = n
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[off:], enc)
	return ckEditFooter(t, b, func(md *format.FileMetaData) { md.RowGroups[0].Columns[0].MetaData.BloomFilterLength = 0 })
}

func TestHostileBloomFiltersAreRejected(t *testing.T) {
	_, rows := bfRows(11, 12, 3*bfRowGroupRows)
	store := newPQMemStore()
	md, add := bfWrite(t, store, rows, []string{"id"}, 0)
	name, _ := decodeAddPath(add.Path)
	valid := store.objects[name]
	probe := &RowGroupFilter{Column: "id", Values: []any{rows[0][0]}}
	for _, tc := range []struct {
		name   string
		edit   func(t *testing.T) []byte
		reason string
	}{
		{"a bloom_filter_length beyond the footer", func(t *testing.T) []byte {
			return ckEditFooter(t, valid, func(md *format.FileMetaData) { md.RowGroups[0].Columns[0].MetaData.BloomFilterLength = 1 << 30 })
		}, "bloom filter of 1073741824 bytes"},
		{"a negative bloom_filter_length", func(t *testing.T) []byte {
			return ckEditFooter(t, valid, func(md *format.FileMetaData) { md.RowGroups[1].Columns[0].MetaData.BloomFilterLength = -5 })
		}, "bloom filter of -5 bytes"},
		{"a bloom_filter_offset inside the magic", func(t *testing.T) []byte {
			return ckEditFooter(t, valid, func(md *format.FileMetaData) { md.RowGroups[1].Columns[0].MetaData.BloomFilterOffset = 2 })
		}, "at offset 2"},
		{"a header declaring a gigantic bitset", func(t *testing.T) []byte { return bfHeader(t, valid, 1<<30) }, "bitset of 1073741824 bytes"},
		{"a header declaring a bitset past the footer", func(t *testing.T) []byte { return bfHeader(t, valid, 64<<20) }, "does not fit before the footer"},
		{"a header declaring a bitset of no whole block", func(t *testing.T) []byte { return bfHeader(t, valid, 33) }, "bitset of 33 bytes"},
	} {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			edited := tc.edit(t)
			store.objects[name] = edited
			defer func() { store.objects[name] = valid }()
			sized := add
			sized.Size = int64(len(edited))
			err := ckWithin(t, func() error {
				return ReadFile(context.Background(), store, md, sized, ReadOptions{RowGroupFilter: probe}, func([]any) error { return nil })
			})
			if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("ReadFile: %v, want %v naming %q", err, parquetfile.ErrCorrupt, tc.reason)
			}
		})
	}
}

func TestSortedValuesProbeOnlyTheRowGroupsWhoseBoundsHoldThem(t *testing.T) {
	_, rows := bfRows(13, 14, 8*bfRowGroupRows)
	for i := range rows {
		rows[i][1] = int64(i) // n follows the row: row group bounds are disjoint
	}
	store := newPQMemStore()
	// One bit per value: a row group's filter is a single saturated block
	// that passes nearly every probe.
	md, add := bfWrite(t, store, rows, []string{"n"}, 1)
	var values []any
	for i := range 300 {
		values = append(values, int64(len(rows)+i)) // beyond every row group's bounds
	}
	keepAll := func(lo, hi any) bool { return true }
	sorted := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "n", Keep: keepAll, Values: values})
	if len(sorted) != 0 {
		t.Errorf("sorted values: read %d row groups, want none (no value lies within any row group's bounds)", len(sorted))
	}
	slices.Reverse(values)
	unsorted := bfReadGroups(t, store, md, add, &RowGroupFilter{Column: "n", Keep: keepAll, Values: values})
	if len(unsorted) < 6 {
		t.Errorf("unsorted values: read %d row groups, want nearly all 8 (every value probes every saturated filter)", len(unsorted))
	}
}

func TestBloomFilterColumnsMustBePrimitiveColumnsOfTheSchema(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.String}, {Name: "region", Type: value.String},
		{Name: "tags", Type: value.ArrayType{Element: value.String, ContainsNull: true}, Nullable: true},
	}}
	for _, tc := range []struct {
		name    string
		cols    []string
		wantErr string
		filters int
	}{
		{"an unknown column is refused", []string{"nope"}, "unknown column", 0},
		{"an array column is refused", []string{"tags"}, "not of a primitive type", 0},
		{"a partition column gets no filter: it is not in the file", []string{"region"}, "", 0},
		{"a data column gets one", []string{"id", "region"}, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			w, err := NewFileWriter(context.Background(), store, WriteOptions{Schema: schema, PartitionColumns: []string{"region"},
				PartitionValues: map[string]any{"region": "eu"}, BloomFilterColumns: tc.cols})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewFileWriter: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write([]any{"a", "eu", nil}); err != nil {
				t.Fatal(err)
			}
			add, err := w.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			f, _ := rwRowGroups(t, store, add)
			n := 0
			for _, cc := range f.Metadata().RowGroups[0].Columns {
				if cc.MetaData.BloomFilterOffset > 0 {
					n++
				}
			}
			if n != tc.filters {
				t.Errorf("%d column chunks with a filter, want %d", n, tc.filters)
			}
		})
	}
}

// TestRewriteCopiesRowGroupsOfAFileWithoutFilters rewrites a file written
// without bloom filters or PageBytes, with a filter asked on id and
// PageBytes set, so that a row group copied verbatim keeps the source's
// page bounds of id (truncated to parquet-go's 16 bytes) while a
// re-encoded one holds the whole 36-byte UUID (parquetfile.LookupBoundBytes). With
// CopyWithoutBloomFilters, the row groups the drop filter rules out are
// copied and the output has no filter; without it, or when no row group is
// known to be copied before the keys are read, every row group gets one.
func TestRewriteCopiesRowGroupsOfAFileWithoutFilters(t *testing.T) {
	_, rows := bfRows(11, 12, 6*bfRowGroupRows)
	const target = int64(2*bfRowGroupRows + 5)
	for _, tc := range []struct {
		name          string
		sourceFilters []string
		copyWithout   bool
		byBounds      bool
		wantFilters   bool
		wantVerbatim  bool
	}{
		{name: "option set, no source filter", copyWithout: true, byBounds: true, wantFilters: false, wantVerbatim: true},
		{name: "option unset, no source filter", byBounds: true, wantFilters: true, wantVerbatim: false},
		{name: "option set, source filtered", sourceFilters: []string{"id"}, copyWithout: true, byBounds: true, wantFilters: true, wantVerbatim: true},
		{name: "option set, no row group known copied", copyWithout: true, wantFilters: true, wantVerbatim: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			md, add := bfWrite(t, store, rows, tc.sourceFilters, 0)
			opts := RewriteOptions{
				Write:                   WriteOptions{Schema: bfSchema(), RowGroupRows: bfRowGroupRows, BloomFilterColumns: []string{"id"}, PageBytes: 1 << 10},
				Keys:                    []string{"row"},
				Drop:                    func(k []any) bool { return k[0] == target },
				CopyWithoutBloomFilters: tc.copyWithout,
			}
			if tc.byBounds {
				opts.RowGroupFilter = &RowGroupFilter{Column: "row", Keep: func(min, max any) bool { return min.(int64) <= target && target <= max.(int64) }}
			}
			res, err := RewriteFile(context.Background(), store, md, add, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Adds) != 1 || res.RowGroupsCopied != 5 || res.RowGroupsDecoded != 1 || res.Dropped != 1 {
				t.Fatalf("rewrite: %d files, %d row groups copied, %d decoded, %d rows dropped; want 1, 5, 1, 1", len(res.Adds), res.RowGroupsCopied, res.RowGroupsDecoded, res.Dropped)
			}
			f, _ := rwRowGroups(t, store, res.Adds[0])
			for g, rg := range f.RowGroups() {
				if has := f.Metadata().RowGroups[g].Columns[0].MetaData.BloomFilterOffset > 0; has != tc.wantFilters {
					t.Errorf("row group %d has a filter on id: %v, want %v", g, has, tc.wantFilters)
				}
				ci, err := rg.ColumnChunks()[0].ColumnIndex()
				if err != nil {
					t.Fatal(err)
				}
				// Row group 2 of the source lost a row: it is re-encoded
				// whatever the option.
				bound := len(ci.MinValue(0).ByteArray())
				verbatim := bound < 36
				if want := tc.wantVerbatim && g != 2; verbatim != want {
					t.Errorf("row group %d has a page bound of id of %d bytes: copied verbatim %v, want %v", g, bound, verbatim, want)
				}
			}
			got := pqRead(t, store, md, res.Adds[0], ReadOptions{})
			if len(got) != len(rows)-1 {
				t.Fatalf("read %d rows, want %d", len(got), len(rows)-1)
			}
			for i, j := 0, 0; i < len(rows); i++ {
				if int64(i) == target {
					continue
				}
				if !pqEqual(got[j], rows[i]) {
					t.Fatalf("row %d = %v, want %v", j, got[j], rows[i])
				}
				j++
			}
		})
	}
}

// bfReadLog records the ranges read from a pqMemStore.
type bfReadLog struct {
	*pqMemStore
	mu    sync.Mutex
	reads map[string][][2]int64
}

func (s *bfReadLog) NewReader(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.reads[name] = append(s.reads[name], [2]int64{off, n})
	s.mu.Unlock()
	return s.pqMemStore.NewReader(ctx, name, off, n)
}

// TestRewriteFetchesTheFiltersItCopiesWithTheirChunks: parquet-go reads
// the bloom filter of a chunk it copies twice (its header, to check it is
// the filter the writer would build, then the whole to copy it); both
// come from the row group's prefetch, which reads the filter whole (with
// its neighbours), not by parts.
func TestRewriteFetchesTheFiltersItCopiesWithTheirChunks(t *testing.T) {
	// Row groups of a few hundred KiB: the filters, written together
	// before the footer, lie further from most chunks than the prefetch
	// bridges (prefetchGapBytes).
	const rgRows = 4096
	_, rows := bfRows(13, 14, 6*rgRows)
	store := &bfReadLog{pqMemStore: newPQMemStore(), reads: map[string][][2]int64{}}
	wo := WriteOptions{Schema: bfSchema(), RowGroupRows: rgRows, BloomFilterColumns: []string{"id"}}
	md, add := bfWriteWith(t, store.pqMemStore, rows, wo)
	const target = int64(4*rgRows + 1)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write:                   wo,
		Keys:                    []string{"row"},
		Drop:                    func(k []any) bool { return k[0] == target },
		RowGroupFilter:          &RowGroupFilter{Column: "row", Keep: func(min, max any) bool { return min.(int64) <= target && target <= max.(int64) }},
		CopyWithoutBloomFilters: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowGroupsCopied != 5 || res.RowGroupsDecoded != 1 {
		t.Fatalf("copied %d and decoded %d row groups, want 5 and 1", res.RowGroupsCopied, res.RowGroupsDecoded)
	}
	src, _ := rwRowGroups(t, store.pqMemStore, add)
	var filters [][2]int64
	for _, rg := range src.Metadata().RowGroups {
		cm := rg.Columns[0].MetaData
		filters = append(filters, [2]int64{cm.BloomFilterOffset, int64(cm.BloomFilterLength)})
	}
	name, _ := decodeAddPath(add.Path)
	size := int64(len(store.objects[name]))
	for _, r := range store.reads[name] {
		if r[0]+r[1] >= size {
			continue // the footer's neighbourhood, read when the file is opened
		}
		for _, f := range filters {
			overlaps := r[0] < f[0]+f[1] && f[0] < r[0]+r[1]
			if overlaps && (r[0] > f[0] || r[0]+r[1] < f[0]+f[1]) {
				t.Errorf("read of %d bytes at %d takes part of the filter of %d bytes at %d", r[1], r[0], f[1], f[0])
			}
		}
	}
	out, _ := rwRowGroups(t, store.pqMemStore, res.Adds[0])
	for g := range out.Metadata().RowGroups {
		if out.Metadata().RowGroups[g].Columns[0].MetaData.BloomFilterOffset <= 0 {
			t.Errorf("row group %d of the rewritten file has no filter", g)
		}
	}
}
