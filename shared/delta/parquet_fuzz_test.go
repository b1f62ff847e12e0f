package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The data-file fuzz targets mutate small data files and read or rewrite
// them as a merge does. Their input is a schema selector (fzSchemaOurs for
// files FileWriter writes, fzSchemaSpark for the data-reader-primitives
// fixture's schema) and the file's bytes. Such an input is 10-30 KB, and
// go's minimisation of each input that finds new coverage is quadratic in
// its length: run them by hand with -fuzzminimizetime=100x, as
// scripts/fuzz.sh does, or a time limit (60s by default) is spent
// minimising and no input is executed.
const (
	fzSchemaOurs  = 0
	fzSchemaSpark = 1
	fzRows        = 60
	fzGroupRows   = 20
)

// fzSparkSchema is the schema of the data-reader-primitives fixture table,
// spelled out so that saved inputs do not depend on the fixture's presence.
const fzSparkSchema = `{"type":"struct","fields":[{"name":"as_int","type":"integer","nullable":true,"metadata":{}},{"name":"as_long","type":"long","nullable":true,"metadata":{}},{"name":"as_byte","type":"byte","nullable":true,"metadata":{}},{"name":"as_short","type":"short","nullable":true,"metadata":{}},{"name":"as_boolean","type":"boolean","nullable":true,"metadata":{}},{"name":"as_float","type":"float","nullable":true,"metadata":{}},{"name":"as_double","type":"double","nullable":true,"metadata":{}},{"name":"as_string","type":"string","nullable":true,"metadata":{}},{"name":"as_binary","type":"binary","nullable":true,"metadata":{}},{"name":"as_big_decimal","type":"decimal(1,0)","nullable":true,"metadata":{}}]}`

// fzTable returns the metadata, the key column and the write schema of the
// table a fuzz input's file belongs to.
func fzTable(kind uint8) (Metadata, string, value.StructType) {
	if kind%2 == fzSchemaSpark {
		schema, err := value.ParseSchema(fzSparkSchema)
		if err != nil {
			panic(err)
		}
		return Metadata{ID: "fuzz", Format: Format{Provider: "parquet"}, SchemaString: fzSparkSchema}, "as_long", schema
	}
	return pqMetadata(rwSchema(), nil, nil), "id", rwSchema()
}

// fzSeeds returns valid data files to mutate: fzRows rows of rwSchema
// (strings, decimals of both physical kinds, timestamps, nullable columns)
// written by FileWriter, then split into row groups of fzGroupRows by
// parquet-go with FileWriter's options (one page per column chunk), with
// small pages (several per column chunk), with dictionary-encoded byte
// arrays, with v2 data pages and with bloom filters.
func fzSeeds(t testing.TB) [][]byte {
	t.Helper()
	ctx := context.Background()
	store := newPQMemStore()
	w, err := NewFileWriter(ctx, store, WriteOptions{Schema: rwSchema(), DataChange: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range fzRows {
		if err := w.Write(rwRow(i, "eu")); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := store.objects[add.Path]
	// The file's schema sets each leaf's encoding, so dictionary-encoded
	// byte arrays take a schema that says so.
	dict := fzDictionaryByteArrays(t, src)
	var seeds [][]byte
	for _, opts := range [][]parquet.WriterOption{
		{parquet.DataPageVersion(1)},
		{parquet.DataPageVersion(1), parquet.PageBufferSize(200)},
		{dict, parquet.DataPageVersion(1), parquet.PageBufferSize(200)},
		{dict, parquet.DataPageVersion(2), parquet.PageBufferSize(200)},
		{parquet.DataPageVersion(1), parquet.PageBufferSize(200),
			parquet.BloomFilters(parquet.SplitBlockFilter(10, "id"), parquet.SplitBlockFilter(DefaultBloomFilterBitsPerValue, "name")),
			parquet.DeferBloomFiltersWithBuffers(parquet.NewBufferPool())},
	} {
		seeds = append(seeds, fzReencode(t, src, opts...))
	}
	return seeds
}

// fzDictionaryByteArrays returns the option that makes parquet-go write
// the byte arrays of the Parquet file src (of top-level leaves)
// dictionary-encoded, its other leaves as they are.
func fzDictionaryByteArrays(t testing.TB, src []byte) parquet.WriterOption {
	t.Helper()
	return fzSchemaOf(t, src, func(fld parquet.Field) parquet.Node {
		if fld.Type().Kind() == parquet.ByteArray {
			return parquet.Encoded(fld, &parquet.RLEDictionary)
		}
		return fld
	})
}

// fzSchemaOf returns the schema of the Parquet file src (of top-level
// leaves), each field's node made by node.
func fzSchemaOf(t testing.TB, src []byte, node func(parquet.Field) parquet.Node) *parquet.Schema {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var fields []parquet.Field
	for _, fld := range f.Schema().Fields() {
		fields = append(fields, parquetfile.NamedField(fld.Name(), node(fld)))
	}
	return parquet.NewSchema("spark_schema", parquetfile.NewGroup(fields...))
}

// fzReencode writes the rows of the Parquet file src again in row groups
// of fzGroupRows, row by row so that small pages are cut, keeping
// dsdelta's created_by so that RewriteFile still copies its row groups.
func fzReencode(t testing.TB, src []byte, opts ...parquet.WriterOption) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(src), int64(len(src)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	// The file's schema unless opts give another (a later option wins).
	opts = append([]parquet.WriterOption{f.Schema()}, append(opts, parquet.Compression(&snappy.Codec{}),
		parquet.DataPageStatistics(false), parquet.CreatedBy("dsdelta", "1", ""))...)
	pw := parquet.NewWriter(&out, opts...)
	var rows []parquet.Row
	for _, rg := range f.RowGroups() {
		more := make([]parquet.Row, rg.NumRows())
		r := rg.Rows()
		n, err := r.ReadRows(more)
		r.Close()
		if int64(n) != rg.NumRows() || (err != nil && n == 0) {
			t.Fatalf("read %d of %d rows: %v", n, rg.NumRows(), err)
		}
		rows = append(rows, more...)
	}
	for i, row := range rows {
		if _, err := pw.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
		if (i+1)%fzGroupRows == 0 {
			if err := pw.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// fzSparkSeeds returns the data files of the data-reader-primitives fixture.
func fzSparkSeeds(t testing.TB) [][]byte {
	t.Helper()
	dir := fixture.Path(t, "delta", "data-reader-primitives")
	paths, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var seeds [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// fzStore puts b in a memory store as the table's one data file.
func fzStore(t *testing.T, b []byte) (objstore.Store, Add) {
	t.Helper()
	store := objstore.NewMemory()
	const name = "part-00000-fuzz-c000.snappy.parquet"
	if _, err := store.Write(context.Background(), name, bytes.NewReader(b), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return store, Add{Path: name, Size: int64(len(b)), DataChange: true}
}

// fzCheckErr fails on an error of a corrupt file that does not say it is
// corrupt and which file it is: a merge reports such an error as is.
// ckWithin returns a panic as an error starting "panic: ".
func fzCheckErr(t *testing.T, err error, name string) {
	t.Helper()
	if err != nil && strings.HasPrefix(err.Error(), "panic: ") {
		t.Fatalf("a corrupt file made the read %v", err)
	}
	if err != nil && !strings.Contains(err.Error(), name) {
		t.Fatalf("error does not name the file %s: %v", name, err)
	}
}

// fzBloom, set in a fuzz input's kind, asks the rewrite for a bloom filter
// on the key column, as the merge does: a source chunk with an equal
// filter is copied with it, others are re-encoded.
const fzBloom = 2

func fzAddSeeds(f *testing.F) {
	for _, b := range fzSeeds(f) {
		f.Add(uint8(fzSchemaOurs), b)
		f.Add(uint8(fzSchemaOurs|fzBloom), b)
	}
	for _, b := range fzSparkSeeds(f) {
		f.Add(uint8(fzSchemaSpark), b)
	}
}

// FuzzReadDataFile reads every row of a mutated data file, then the row
// groups its bloom filters (if any) keep for two keys, then the rows of
// those keys through the page index, of the key and of every column (the
// other columns' pages read where they store the matched rows): it must
// return the rows or an error within a bound, never panic or hang.
// testdata/fuzz/FuzzReadDataFile holds the inputs that once crashed it.
func FuzzReadDataFile(f *testing.F) {
	fzAddSeeds(f)
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		md, key, _ := fzTable(kind)
		store, add := fzStore(t, b)
		flt := &RowGroupFilter{Column: key, Values: []any{int64(5), int64(7)}}
		for _, opts := range []ReadOptions{{}, {RowGroupFilter: flt}, {Columns: []string{key}, RowGroupFilter: flt, OnlyValues: true}, {RowGroupFilter: flt, OnlyValues: true}} {
			err := ckWithin(t, func() error {
				return ReadFile(context.Background(), store, md, add, opts, func([]any) error { return nil })
			})
			fzCheckErr(t, err, add.Path)
		}
	})
}

// FuzzRewriteDataFile rewrites a mutated data file dropping a few keys, so
// that the first row group of a dsdelta file is re-encoded column by
// column and the others are copied verbatim (a Spark file goes row by
// row): it must succeed or return an error within a bound, never panic or
// hang, and what it writes must pass the checks its input passed (a
// verbatim copy must not carry a corrupt page index or statistic into the
// table). testdata/fuzz/FuzzRewriteDataFile holds the inputs that once
// crashed it or were copied with their corruption.
func FuzzRewriteDataFile(f *testing.F) {
	fzAddSeeds(f)
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		md, key, schema := fzTable(kind)
		store, add := fzStore(t, b)
		var bloom []string
		if kind&fzBloom != 0 {
			bloom = []string{key}
		}
		var res RewriteResult
		err := ckWithin(t, func() error {
			var err error
			res, err = RewriteFile(context.Background(), store, md, add, RewriteOptions{
				Write: WriteOptions{Schema: schema, DataChange: true, BloomFilterColumns: bloom},
				Keys:  []string{key},
				Drop: func(k []any) bool {
					id, ok := k[0].(int64)
					return ok && (id == 5 || id == 7)
				},
			})
			return err
		})
		fzCheckErr(t, err, add.Path)
		if err != nil {
			return
		}
		for _, out := range res.Adds {
			if err := ckWithin(t, func() error { return fzCheckOutput(store, out) }); err != nil {
				t.Fatalf("the rewrite of a file it accepted wrote %s, which fails the checks: %v", out.Path, err)
			}
		}
	})
}

// fzCheckOutput runs every check of the guard on a data file a rewrite
// wrote (footer, pages, page index), then uses its page index as a reader
// filtering pages would: parquet-go decodes the bounds of each page, and a
// page header must start where the offset index says a page does.
func fzCheckOutput(store objstore.Store, a Add) error {
	ctx := context.Background()
	name, err := decodeAddPath(a.Path)
	if err != nil {
		return err
	}
	ra, err := parquetfile.Open(ctx, store, name, a.Size)
	if err != nil {
		return err
	}
	f := ra.Parquet()
	for g, rg := range f.Metadata().RowGroups {
		if err := ra.Prefetch(chunkRanges(rg, true)); err != nil {
			return err
		}
		for c := range rg.Columns {
			if err := ra.CheckPages(g, c); err != nil {
				return err
			}
			if err := ra.CheckPageIndex(g, c); err != nil {
				return err
			}
		}
		ra.Release()
	}
	b, err := objstore.ReadAll(ctx, store, name)
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			ci, err := cc.ColumnIndex()
			if err != nil {
				continue // no column index
			}
			for i := range ci.NumPages() {
				ci.MinValue(i)
				ci.MaxValue(i)
			}
			if err := fzCheckPageLocations(b, cc); err != nil {
				return fmt.Errorf("column %d: %w", cc.Column(), err)
			}
		}
	}
	return nil
}

// fzCheckPageLocations decodes the page header at each location of cc's
// offset index in b, the file's bytes: a reader filtering pages by the
// index seeks there. (Reading the pages would check their contents too,
// which a verbatim copy carries over unread.)
func fzCheckPageLocations(b []byte, cc parquet.ColumnChunk) error {
	oi, err := cc.OffsetIndex()
	if err != nil {
		return nil // no offset index
	}
	for i := range oi.NumPages() {
		off, size := oi.Offset(i), oi.CompressedPageSize(i)
		if off < 0 || size <= 0 || off > int64(len(b))-size {
			return fmt.Errorf("page %d of %d bytes at offset %d is outside the file of %d bytes", i, size, off, len(b))
		}
		var h format.PageHeader
		r := new(thrift.CompactProtocol).NewReaderFromBytes(b[off : off+size])
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			return fmt.Errorf("page %d at offset %d: header: %w", i, off, err)
		}
		if (h.Type != format.DataPage && h.Type != format.DataPageV2) || int64(r.BytesRead())+int64(h.CompressedPageSize) != size {
			return fmt.Errorf("page %d at offset %d is a %s page of %d bytes, the offset index says %d", i, off, h.Type, int64(r.BytesRead())+int64(h.CompressedPageSize), size)
		}
	}
	return nil
}

// TestFuzzSeedsAreValidAndExerciseBothRewritePaths guards the fuzz targets'
// starting points: valid files whose rewrite decodes one row group and
// copies the others, several pages per column chunk.
func TestFuzzSeedsAreValidAndExerciseBothRewritePaths(t *testing.T) {
	for i, b := range fzSeeds(t) {
		store, add := fzStore(t, b)
		md, _, schema := fzTable(fzSchemaOurs)
		var n int
		if err := ReadFile(context.Background(), store, md, add, ReadOptions{}, func([]any) error { n++; return nil }); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if n != fzRows {
			t.Fatalf("seed %d: read %d rows, want %d", i, n, fzRows)
		}
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			// The most data pages of a column chunk of the first row group
			// (a dictionary's indexes of 20 rows fit one).
			most := 0
			for _, c := range f.RowGroups()[0].ColumnChunks() {
				pages := 0
				p := c.Pages()
				for {
					pg, err := p.ReadPage()
					if err != nil {
						break
					}
					parquet.Release(pg)
					pages++
				}
				p.Close()
				most = max(most, pages)
			}
			if most < 2 {
				t.Errorf("seed %d: at most %d pages in a column chunk, want several", i, most)
			}
		}
		res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
			Write: WriteOptions{Schema: schema, DataChange: true},
			Keys:  []string{"id"},
			Drop:  func(k []any) bool { return k[0] == int64(5) },
		})
		if err != nil {
			t.Fatalf("seed %d: rewrite: %v", i, err)
		}
		if res.RowGroupsDecoded != 1 || res.RowGroupsCopied != fzRows/fzGroupRows-1 || res.Rows != fzRows-1 {
			t.Errorf("seed %d: decoded %d and copied %d row groups keeping %d rows, want 1, %d and %d", i, res.RowGroupsDecoded, res.RowGroupsCopied, res.Rows, fzRows/fzGroupRows-1, fzRows-1)
		}
	}
}

// TestCorruptDataFilesFailWithAnErrorNotAPanic covers the root causes the
// fuzz targets found: each corrupt footer field made parquet-go panic (on
// the rewrite path, or on the read path with a row group filter) and must
// now fail the read and the rewrite with parquetfile.ErrCorrupt naming the file
// and the reason.
func TestCorruptDataFilesFailWithAnErrorNotAPanic(t *testing.T) {
	seed := fzSeeds(t)[1]
	md, _, schema := fzTable(fzSchemaOurs)
	for _, tt := range []struct {
		name    string
		corrupt func(*format.FileMetaData)
		reason  string
	}{
		// parquet-go types the leaf as a LIST, whose Kind panics in
		// EqualNodes (rewrite) and FileColumnChunk.Bounds.
		{"a LIST annotation on a leaf column is rejected", func(md *format.FileMetaData) {
			md.Schema[3].LogicalType.Value = &format.ListType{}
		}, "no physical kind"},
		// FileColumnChunk.Bounds panics decoding a 16-byte INT64.
		{"a chunk bound wider than its column's type is rejected", func(md *format.FileMetaData) {
			md.RowGroups[1].Columns[0].MetaData.Statistics.MinValue = make([]byte, 16)
		}, "min bound of 16 bytes for a INT64 column"},
		// parquet-go copies the deprecated bounds of a spliced row group
		// into the output, where older readers of signed columns use them.
		{"a deprecated chunk bound wider than its column's type is rejected", func(md *format.FileMetaData) {
			md.RowGroups[1].Columns[0].MetaData.Statistics.Max = make([]byte, 3)
		}, "deprecated max bound of 3 bytes for a INT64 column"},
	} {
		b := ckEditFooter(t, seed, tt.corrupt)
		for _, op := range []struct {
			name string
			run  func(store objstore.Store, add Add) error
		}{
			{"read with a row group filter", func(store objstore.Store, add Add) error {
				flt := &RowGroupFilter{Column: "id", Keep: func(min, max any) bool { return true }}
				return ReadFile(context.Background(), store, md, add, ReadOptions{RowGroupFilter: flt}, func([]any) error { return nil })
			}},
			{"rewrite", func(store objstore.Store, add Add) error {
				_, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
					Write: WriteOptions{Schema: schema, DataChange: true},
					Keys:  []string{"id"},
					Drop:  func(k []any) bool { return k[0] == int64(5) },
				})
				return err
			}},
		} {
			t.Run(tt.name+" by a "+op.name, func(t *testing.T) {
				store, add := fzStore(t, b)
				err := ckWithin(t, func() error { return op.run(store, add) })
				if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), add.Path) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %v, want parquetfile.ErrCorrupt naming %s and %q", err, add.Path, tt.reason)
				}
			})
		}
	}
}

// TestACorruptPageIndexIsNotCopiedByTheRewrite corrupts the page index of
// a row group that a rewrite would copy: parquet-go splices its column and
// offset indexes into the output, so before the guard a rewrite either
// allocated what a corrupt list length said or wrote an output whose page
// index sends readers that filter by it to the wrong bytes. The guard
// keeps the index out: the row group, whose pages are sound, is decoded
// and written anew, and the output passes every check and holds the rows.
func TestACorruptPageIndexIsNotCopiedByTheRewrite(t *testing.T) {
	seed := fzSeeds(t)[1]
	md, _, schema := fzTable(fzSchemaOurs)
	readAll := func(store objstore.Store, adds ...Add) [][]any {
		t.Helper()
		var rows [][]any
		for _, a := range adds {
			if err := ReadFile(context.Background(), store, md, a, ReadOptions{}, func(r []any) error {
				rows = append(rows, r)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		return rows
	}
	var want [][]any
	for _, r := range readAll(fzStore(t, seed)) {
		if r[0] != int64(5) {
			want = append(want, r)
		}
	}
	for _, tt := range []struct {
		name    string
		corrupt func(t *testing.T, b []byte) []byte
		reason  string
	}{
		{"a column index bound wider than its column's type is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 0, func(ci *format.ColumnIndex, _ *format.OffsetIndex) {
				ci.MinValues[0] = make([]byte, 16)
			})
		}, "column index: page 0: min bound of 16 bytes for a INT64 column"},
		{"a column index with fewer bounds than pages is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 0, func(ci *format.ColumnIndex, _ *format.OffsetIndex) {
				ci.MaxValues = ci.MaxValues[:0]
			})
		}, "column index of 1 pages with 1 min and 0 max bounds"},
		{"a column index list longer than the index is rejected before parquet-go allocates it", func(t *testing.T, b []byte) []byte {
			return ckEditIndexBytes(t, b, 1, 0, func(ci []byte) []byte {
				// Field 1, null_pages, is a list of bools: 2^31-1 of them.
				if ci[0] != 0x19 || ci[1]>>4 == 0x0f {
					t.Fatalf("unexpected column index start % x", ci[:2])
				}
				return append([]byte{0x19, 0xf0 | ci[1]&0x0f, 0xff, 0xff, 0xff, 0xff, 0x07}, ci[2:]...)
			})
		}, "list of 2147483647 elements"},
		{"an offset index page beyond its column chunk is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 2, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[1].Offset += 1 << 20
			})
		}, "offset index: page 1 of"},
		{"an offset index page before its column chunk's data is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 0, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[0].Offset = 4
			})
		}, "offset index: page 0 of"},
		{"an offset index page starting past its row group's rows is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 0, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[len(oi.PageLocations)-1].FirstRowIndex = fzGroupRows
			})
		}, "first row 20"},
		{"an offset index page of another size than its page's is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 2, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[0].CompressedPageSize += 10 // the fuzzer's overlap of two pages
			})
		}, "offset index: page 0 of"},
		{"an offset index page starting inside another page is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 2, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[1].Offset--
				oi.PageLocations[1].CompressedPageSize++
			})
		}, "offset index: page 1 of"},
		{"an offset index missing a page is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 2, func(ci *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations = oi.PageLocations[:len(oi.PageLocations)-1]
				n := len(oi.PageLocations)
				ci.NullPages, ci.MinValues, ci.MaxValues = ci.NullPages[:n], ci.MinValues[:n], ci.MaxValues[:n]
				if len(ci.NullCounts) > n {
					ci.NullCounts = ci.NullCounts[:n]
				}
			})
		}, "the column chunk has more data pages"},
		{"an offset index page starting at a row its pages do not start at is rejected", func(t *testing.T, b []byte) []byte {
			return ckEditIndex(t, b, 1, 2, func(_ *format.ColumnIndex, oi *format.OffsetIndex) {
				oi.PageLocations[1].FirstRowIndex++
			})
		}, "the pages before it hold"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store, add := fzStore(t, tt.corrupt(t, seed))
			// The guard's reason, as a read of the index would give it.
			ra, err := parquetfile.Open(context.Background(), store, add.Path, add.Size)
			if err != nil {
				t.Fatal(err)
			}
			meta := ra.Parquet().Metadata().RowGroups[1]
			if err := ra.Prefetch(chunkRanges(meta, true)); err != nil {
				t.Fatal(err)
			}
			err = nil
			for c := range meta.Columns {
				if err = ra.CheckPageIndex(1, c); err != nil {
					break
				}
			}
			ra.Release()
			if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("page index of row group 1: %v, want parquetfile.ErrCorrupt and %q", err, tt.reason)
			}
			var res RewriteResult
			err = ckWithin(t, func() error {
				var err error
				res, err = RewriteFile(context.Background(), store, md, add, RewriteOptions{
					Write: WriteOptions{Schema: schema, DataChange: true},
					Keys:  []string{"id"},
					Drop:  func(k []any) bool { return k[0] == int64(5) },
				})
				return err
			})
			if err != nil {
				t.Fatalf("rewrite: %v", err)
			}
			if res.RowGroupsNotCopied != 1 {
				t.Fatalf("%d row groups written anew for their page index, want 1 (%+v)", res.RowGroupsNotCopied, res)
			}
			for _, out := range res.Adds {
				if err := ckWithin(t, func() error { return fzCheckOutput(store, out) }); err != nil {
					t.Fatalf("the rewrite wrote %s, which fails the checks: %v", out.Path, err)
				}
			}
			if got := readAll(store, res.Adds...); !reflect.DeepEqual(got, want) {
				t.Fatalf("the rewrite holds %d rows, want the %d of the source but id 5\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}
}

// ckEditIndex changes the column and offset indexes of column chunk c of
// row group g of b.
func ckEditIndex(t *testing.T, b []byte, g, c int, edit func(*format.ColumnIndex, *format.OffsetIndex)) []byte {
	t.Helper()
	data, md := ckSplit(t, b)
	cc := &md.RowGroups[g].Columns[c]
	var ci format.ColumnIndex
	var oi format.OffsetIndex
	proto := new(thrift.CompactProtocol)
	if err := thrift.Unmarshal(proto, data[cc.ColumnIndexOffset:cc.ColumnIndexOffset+int64(cc.ColumnIndexLength)], &ci); err != nil {
		t.Fatal(err)
	}
	if err := thrift.Unmarshal(proto, data[cc.OffsetIndexOffset:cc.OffsetIndexOffset+int64(cc.OffsetIndexLength)], &oi); err != nil {
		t.Fatal(err)
	}
	edit(&ci, &oi)
	cib, err := thrift.Marshal(proto, &ci)
	if err != nil {
		t.Fatal(err)
	}
	oib, err := thrift.Marshal(proto, &oi)
	if err != nil {
		t.Fatal(err)
	}
	data = append(append([]byte(nil), data...), cib...)
	cc.ColumnIndexOffset, cc.ColumnIndexLength = int64(len(data)-len(cib)), int32(len(cib))
	data = append(data, oib...)
	cc.OffsetIndexOffset, cc.OffsetIndexLength = int64(len(data)-len(oib)), int32(len(oib))
	return ckJoin(t, data, md)
}

// ckEditIndexBytes changes the encoded column index of column chunk c of
// row group g of b.
func ckEditIndexBytes(t *testing.T, b []byte, g, c int, edit func([]byte) []byte) []byte {
	t.Helper()
	data, md := ckSplit(t, b)
	cc := &md.RowGroups[g].Columns[c]
	ci := edit(slices.Clone(data[cc.ColumnIndexOffset : cc.ColumnIndexOffset+int64(cc.ColumnIndexLength)]))
	data = append(append([]byte(nil), data...), ci...)
	cc.ColumnIndexOffset, cc.ColumnIndexLength = int64(len(data)-len(ci)), int32(len(ci))
	return ckJoin(t, data, md)
}

// fzPanickyChunk is a column chunk whose pages panic when read, as
// parquet-go does on some corrupt pages the page checks cannot see
// without decoding values.
type fzPanickyChunk struct{ parquet.ColumnChunk }

func (c fzPanickyChunk) Pages() parquet.Pages { return fzPanickyPages{c.ColumnChunk.Pages()} }

type fzPanickyPages struct{ parquet.Pages }

func (fzPanickyPages) ReadPage() (parquet.Page, error) { panic("corrupt page") }

// fzPanickyRowGroup is a row group whose column chunk bad panics.
type fzPanickyRowGroup struct {
	parquet.RowGroup
	bad int
}

func (g fzPanickyRowGroup) ColumnChunks() []parquet.ColumnChunk {
	chunks := slices.Clone(g.RowGroup.ColumnChunks())
	chunks[g.bad] = fzPanickyChunk{chunks[g.bad]}
	return chunks
}

// Rows panics too: parquet-go copies a row group it cannot splice through
// its rows.
func (g fzPanickyRowGroup) Rows() parquet.Rows { return fzPanickyRows{g.RowGroup.Rows()} }

type fzPanickyRows struct{ parquet.Rows }

func (fzPanickyRows) ReadRows([]parquet.Row) (int, error) { panic("corrupt page") }

func TestAPanicDecodingPagesBecomesAnErrorOfTheColumn(t *testing.T) {
	seed := fzSeeds(t)[1]
	f, err := parquet.OpenFile(bytes.NewReader(seed), int64(len(seed)))
	if err != nil {
		t.Fatal(err)
	}
	rg := fzPanickyRowGroup{RowGroup: f.RowGroups()[0], bad: 2}

	t.Run("a column re-encoded on a worker goroutine fails the row group", func(t *testing.T) {
		root, _, err := parquetfile.Tree(f.Metadata().Schema)
		if err != nil {
			t.Fatal(err)
		}
		bounds, err := newChunkBounds(root, rwSchema().Fields, Add{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewFileWriter(context.Background(), newPQMemStore(), WriteOptions{Schema: rwSchema()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		dropped := make([]bool, rg.NumRows())
		dropped[3] = true
		err = ckWithin(t, func() error { return w.writeRowGroupKept(rg, dropped, bounds) })
		if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), "column 2") || !strings.Contains(err.Error(), "corrupt page") {
			t.Fatalf("err = %v, want parquetfile.ErrCorrupt naming column 2 and the panic", err)
		}
	})

	t.Run("a row group copied whole fails the copy", func(t *testing.T) {
		// Dictionary pages cannot be spliced into a file whose writer
		// does not dictionary-encode, so parquet-go decodes the rows.
		dict := fzSeeds(t)[2]
		fd, err := parquet.OpenFile(bytes.NewReader(dict), int64(len(dict)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewFileWriter(context.Background(), newPQMemStore(), WriteOptions{Schema: rwSchema()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		bad := fzPanickyRowGroup{RowGroup: fd.RowGroups()[0], bad: 2}
		err = ckWithin(t, func() error { return w.writeRowGroup(bad, make([]leafSummary, len(bad.ColumnChunks()))) })
		if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), "corrupt page") {
			t.Fatalf("err = %v, want parquetfile.ErrCorrupt with the panic", err)
		}
	})
}

func TestReadFileLetsAPanicOfTheCallbackThrough(t *testing.T) {
	store, add := fzStore(t, fzSeeds(t)[1])
	md, _, _ := fzTable(fzSchemaOurs)
	defer func() {
		if p := recover(); p != "caller bug" {
			t.Fatalf("recovered %v, want the callback's panic", p)
		}
	}()
	_ = ReadFile(context.Background(), store, md, add, ReadOptions{}, func([]any) error { panic("caller bug") })
	t.Fatal("ReadFile returned after its callback panicked")
}
