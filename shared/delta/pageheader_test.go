package delta

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// decodePageHeader is parquet-go's decoding of the page header at the start
// of b, as checkRun did before fastPageHeader.
func decodePageHeader(b []byte) (format.PageHeader, int, error) {
	var proto thrift.CompactProtocol
	rd := proto.NewReaderFromBytes(b)
	var h format.PageHeader
	err := thrift.NewDecoder(rd).Decode(&h)
	return h, rd.BytesRead(), err
}

// pageHeaderSeeds are the page headers of data files of every kind the
// tests write: v1 and v2 data pages, dictionary pages, Spark's (with page
// statistics, which fastPageHeader leaves to the decoder).
func pageHeaderSeeds(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	files := fzSeeds(t)
	for _, b := range files {
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, rg := range f.Metadata().RowGroups {
			for _, c := range rg.Columns {
				pos := c.MetaData.DataPageOffset
				if c.MetaData.DictionaryPageOffset != 0 {
					pos = c.MetaData.DictionaryPageOffset
				}
				end := pos + c.MetaData.TotalCompressedSize
				for pos < end {
					h, n, err := decodePageHeader(b[pos:end])
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, bytes.Clone(b[pos:pos+int64(n)]))
					pos += int64(n) + int64(h.CompressedPageSize)
				}
			}
		}
	}
	return out
}

// TestFastPageHeaderReadsTheHeadersWeWrite: every page header of the
// test files, our writer's v1 and v2 data pages and dictionary pages, is
// read by fastPageHeader (not left to the decoder), to the decoder's
// values and length.
func TestFastPageHeaderReadsTheHeadersWeWrite(t *testing.T) {
	seeds := pageHeaderSeeds(t)
	kinds := map[format.PageType]int{}
	for i, b := range seeds {
		want, wn, err := decodePageHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		got, n, ok := fastPageHeader(b)
		if !ok {
			t.Fatalf("header %d (% x) left to the decoder", i, b)
		}
		if n != wn || !reflect.DeepEqual(got, want) {
			t.Fatalf("header %d: read %+v in %d bytes, the decoder %+v in %d", i, got, n, want, wn)
		}
		if got.DataPageHeaderV2.Valid {
			kinds[-1]++
		} else {
			kinds[got.Type]++
		}
	}
	if kinds[format.DataPage] == 0 || kinds[format.DictionaryPage] == 0 || kinds[-1] == 0 {
		t.Fatalf("headers read by kind %v: want v1 and v2 data pages and dictionary pages", kinds)
	}
}

// FuzzFastPageHeaderAgreesWithTheDecoder: whatever fastPageHeader reads,
// parquet-go's decoder reads to the same values and length.
func FuzzFastPageHeaderAgreesWithTheDecoder(f *testing.F) {
	for _, b := range pageHeaderSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, n, ok := fastPageHeader(b)
		if !ok {
			return
		}
		want, wn, err := decodePageHeader(b)
		if err != nil {
			t.Fatalf("fastPageHeader read %+v from % x, which the decoder refuses: %v", got, b, err)
		}
		if n != wn || !reflect.DeepEqual(got, want) {
			t.Fatalf("% x: fastPageHeader read %+v in %d bytes, the decoder %+v in %d", b, got, n, want, wn)
		}
	})
}
