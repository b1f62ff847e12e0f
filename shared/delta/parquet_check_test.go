package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ckRow is the one-column row of the Parquet files the corruption tests
// start from; ckDictRow dictionary-encodes the column.
type (
	ckRow struct {
		S *string `parquet:"s,optional"`
	}
	ckDictRow struct {
		S *string `parquet:"s,optional,dict"`
	}
)

// ckFile writes a valid Parquet file of one optional string column in one
// row group, compressed with codec.
func ckFile(t *testing.T, codec compress.Codec, dict bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	if dict {
		w := parquet.NewGenericWriter[ckDictRow](&buf, parquet.Compression(codec))
		var rows []ckDictRow
		for i := range 100 {
			s := fmt.Sprintf("value %d", i%7)
			rows = append(rows, ckDictRow{S: &s})
		}
		if _, err = w.Write(rows); err == nil {
			err = w.Close()
		}
	} else {
		w := parquet.NewGenericWriter[ckRow](&buf, parquet.Compression(codec))
		var rows []ckRow
		for i := range 100 {
			s := strings.Repeat(fmt.Sprintf("value %d ", i), 3)
			rows = append(rows, ckRow{S: &s})
		}
		if _, err = w.Write(rows); err == nil {
			err = w.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ckSplit splits a Parquet file into what precedes its footer and the
// decoded footer.
func ckSplit(t *testing.T, b []byte) ([]byte, *format.FileMetaData) {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[len(b)-8-n:len(b)-8], &md); err != nil {
		t.Fatal(err)
	}
	return b[:len(b)-8-n], &md
}

// ckJoin is the inverse of ckSplit.
func ckJoin(t *testing.T, data []byte, md *format.FileMetaData) []byte {
	t.Helper()
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), data...), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// ckEditFooter changes the footer of b.
func ckEditFooter(t *testing.T, b []byte, edit func(*format.FileMetaData)) []byte {
	data, md := ckSplit(t, b)
	edit(md)
	return ckJoin(t, data, md)
}

// ckEditPage changes the header of the first page of type typ (DataPage
// standing for either version) of the only column chunk of b (and, through body, its bytes), keeping the file
// consistent: the page's CRC and every offset after it follow.
func ckEditPage(t *testing.T, b []byte, typ format.PageType, edit func(h *format.PageHeader, body []byte) []byte) []byte {
	t.Helper()
	data, md := ckSplit(t, b)
	cm := &md.RowGroups[0].Columns[0].MetaData
	pos := cm.DataPageOffset
	if cm.DictionaryPageOffset != 0 {
		pos = cm.DictionaryPageOffset
	}
	for {
		var h format.PageHeader
		r := new(thrift.CompactProtocol).NewReaderFromBytes(data[pos:])
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			t.Fatal(err)
		}
		bodyAt := pos + int64(r.BytesRead())
		end := bodyAt + int64(h.CompressedPageSize)
		if h.Type != typ && !(typ == format.DataPage && h.Type == format.DataPageV2) {
			pos = end
			continue
		}
		body := edit(&h, append([]byte(nil), data[bodyAt:end]...))
		if h.CRC != 0 {
			h.CRC = int32(crc32.ChecksumIEEE(body))
		}
		head, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
		if err != nil {
			t.Fatal(err)
		}
		page := append(head, body...)
		delta := int64(len(page)) - (end - pos)
		out := append(append(append([]byte(nil), data[:pos]...), page...), data[end:]...)
		cm.TotalCompressedSize += delta
		if cm.DataPageOffset > pos {
			cm.DataPageOffset += delta
		}
		cc := &md.RowGroups[0].Columns[0]
		if cc.ColumnIndexOffset > pos {
			cc.ColumnIndexOffset += delta
		}
		if cc.OffsetIndexOffset > pos {
			cc.OffsetIndexOffset += delta
		}
		return ckJoin(t, out, md)
	}
}

// ckWithin runs decode, failing the test if it has not returned within
// ten seconds (or before the test's deadline): a regression to a reader
// that spins must fail the suite, not hang it.
func ckWithin(t *testing.T, decode func() error) error {
	t.Helper()
	wait := 10 * time.Second
	if d, ok := t.Deadline(); ok && time.Until(d)/2 < wait {
		wait = time.Until(d) / 2
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("panic: %v", p)
			}
		}()
		done <- decode()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatalf("decoding did not return within %v", wait)
		return nil
	}
}

func ckDecode(t *testing.T, b []byte) error {
	t.Helper()
	return ckWithin(t, func() error { return decodeCheckpoint(b, func(*Action) {}) })
}

func TestValidParquetFilesPassTheChecks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		codec compress.Codec
		dict  bool
	}{
		{"an uncompressed file decodes", &parquet.Uncompressed, false},
		{"a snappy file decodes", &parquet.Snappy, false},
		{"a snappy file with a dictionary page decodes", &parquet.Snappy, true},
		{"a zstd file decodes", &parquet.Zstd, false},
		{"a gzip file decodes", &parquet.Gzip, false},
		{"an lz4 file decodes", &parquet.Lz4Raw, false},
		{"an lz4 file with a dictionary page decodes", &parquet.Lz4Raw, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := ckDecode(t, ckFile(t, tt.codec, tt.dict)); err != nil {
				t.Fatalf("valid file rejected: %v", err)
			}
		})
	}
}

// The two inputs the fuzzer found spinning in parquet-go, each reduced to
// the one field that causes it.
func TestCorruptParquetRootCausesFailFast(t *testing.T) {
	t.Run("a footer length beyond the file is rejected before parquet-go allocates it", func(t *testing.T) {
		// parquet.OpenFile allocated the declared length (up to 4 GiB)
		// before reading it: seconds per attempt, or the process's memory.
		b := ckFile(t, &parquet.Snappy, false)
		binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
		err := ckDecode(t, b)
		if !errors.Is(err, ErrCorruptParquet) || !strings.Contains(err.Error(), "footer length 4294967280") {
			t.Fatalf("err = %v, want ErrCorruptParquet naming the footer length", err)
		}
	})
	t.Run("snappy pages declared as lz4 are rejected instead of decoded forever", func(t *testing.T) {
		// parquet-go's lz4 codec retries every failed block with a buffer
		// twice as large, forever: a corrupt block (here, snappy bytes)
		// grew the buffer until memory ran out.
		b := ckEditFooter(t, ckFile(t, &parquet.Snappy, false), func(md *format.FileMetaData) {
			md.RowGroups[0].Columns[0].MetaData.Codec = format.Lz4Raw
		})
		err := ckDecode(t, b)
		if !errors.Is(err, ErrCorruptParquet) || !strings.Contains(err.Error(), "lz4") {
			t.Fatalf("err = %v, want ErrCorruptParquet about lz4 data", err)
		}
	})
}

func TestCorruptParquetIsRejectedWithTheReason(t *testing.T) {
	snappyFile := func(t *testing.T) []byte { return ckFile(t, &parquet.Snappy, false) }
	for _, tt := range []struct {
		name    string
		corrupt func(t *testing.T) []byte
		reason  string
	}{
		{"a file too short for a footer is rejected", func(t *testing.T) []byte { return []byte("PAR1PAR1") }, "too short"},
		{"a file without the trailing magic is rejected", func(t *testing.T) []byte {
			b := snappyFile(t)
			return b[:len(b)-1]
		}, "no PAR1 magic"},
		{"a column chunk running into the footer is rejected", func(t *testing.T) []byte {
			return ckEditFooter(t, snappyFile(t), func(md *format.FileMetaData) {
				md.RowGroups[0].Columns[0].MetaData.TotalCompressedSize += 1 << 20
			})
		}, "does not fit before the footer"},
		{"a column chunk starting inside the magic is rejected", func(t *testing.T) []byte {
			return ckEditFooter(t, snappyFile(t), func(md *format.FileMetaData) {
				md.RowGroups[0].Columns[0].MetaData.DataPageOffset = 1
			})
		}, "has pages at offsets"},
		{"a page larger than its column chunk is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, snappyFile(t), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.CompressedPageSize = 1 << 30
				return body
			})
		}, "does not fit in the column chunk"},
		{"a page declaring a gigantic uncompressed size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, snappyFile(t), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize = 2_000_000_000
				return body
			})
		}, "uncompressed size 2000000000 is out of range"},
		{"a snappy page whose data decodes to another size than declared is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, snappyFile(t), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize += 1000
				return body
			})
		}, "snappy data decodes to"},
		{"an lz4 page claiming more than lz4 can expand to is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Lz4Raw, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize = 1 << 29
				return body
			})
		}, "cannot decode to"},
		{"a dictionary of more values than its bytes hold is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Snappy, true), format.DictionaryPage, func(h *format.PageHeader, body []byte) []byte {
				h.DictionaryPageHeader.V.NumValues = 1 << 30
				return body
			})
		}, "dictionary of 1073741824 values"},
		{"pages holding more values than their column chunk are rejected", func(t *testing.T) []byte {
			return ckEditFooter(t, snappyFile(t), func(md *format.FileMetaData) {
				md.RowGroups[0].Columns[0].MetaData.NumValues = 10
			})
		}, "more values than the column chunk's 10"},
		{"a column index beyond the footer is rejected", func(t *testing.T) []byte {
			return ckEditFooter(t, snappyFile(t), func(md *format.FileMetaData) {
				md.RowGroups[0].Columns[0].ColumnIndexOffset = 4
				md.RowGroups[0].Columns[0].ColumnIndexLength = 1 << 30
			})
		}, "column index of 1073741824 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ckDecode(t, tt.corrupt(t))
			if !errors.Is(err, ErrCorruptParquet) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want ErrCorruptParquet with %q", err, tt.reason)
			}
		})
	}
}

func TestCorruptDataFileFailsWithItsNameAndReason(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{{Name: "s", Type: value.String, Nullable: true}}}
	md := pqMetadata(schema, nil, nil)
	for _, tt := range []struct {
		name    string
		corrupt func(t *testing.T) []byte
		reason  string
	}{
		{"a footer length beyond the file fails the open", func(t *testing.T) []byte {
			b := ckFile(t, &parquet.Snappy, false)
			binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
			return b
		}, "footer length"},
		{"snappy pages declared as lz4 fail the read", func(t *testing.T) []byte {
			return ckEditFooter(t, ckFile(t, &parquet.Snappy, false), func(md *format.FileMetaData) {
				md.RowGroups[0].Columns[0].MetaData.Codec = format.Lz4Raw
			})
		}, "lz4"},
		{"a page larger than its column chunk fails the read", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Snappy, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.CompressedPageSize = 1 << 30
				return body
			})
		}, "does not fit in the column chunk"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newPQMemStore()
			b := tt.corrupt(t)
			store.objects["part-0.parquet"] = b
			add := Add{Path: "part-0.parquet", Size: int64(len(b))}
			err := ckWithin(t, func() error {
				return ReadFile(context.Background(), store, md, add, ReadOptions{}, func([]any) error { return nil })
			})
			if !errors.Is(err, ErrCorruptParquet) || !strings.Contains(err.Error(), "part-0.parquet") || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want ErrCorruptParquet naming part-0.parquet and %q", err, tt.reason)
			}
		})
	}
	t.Run("a footer larger than the first read of the file's end is read whole", func(t *testing.T) {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[ckRow](&buf, parquet.KeyValueMetadata("padding", strings.Repeat("x", 3*parquetTailBytes)))
		s := "only row"
		if _, err := w.Write([]ckRow{{S: &s}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if n := binary.LittleEndian.Uint32(b[len(b)-8:]); n <= parquetTailBytes {
			t.Fatalf("footer of %d bytes fits in the first read; the test needs a larger one", n)
		}
		store := newPQMemStore()
		store.objects["part-0.parquet"] = b
		rows := pqRead(t, store, md, Add{Path: "part-0.parquet", Size: int64(len(b))}, ReadOptions{})
		if len(rows) != 1 || rows[0][0] != s {
			t.Fatalf("rows = %v, want [[%s]]", rows, s)
		}
	})
	t.Run("the uncorrupted file reads every row", func(t *testing.T) {
		store := newPQMemStore()
		b := ckFile(t, &parquet.Snappy, false)
		store.objects["part-0.parquet"] = b
		rows := pqRead(t, store, md, Add{Path: "part-0.parquet", Size: int64(len(b))}, ReadOptions{})
		if len(rows) != 100 || rows[99][0] != strings.Repeat("value 99 ", 3) {
			t.Fatalf("read %d rows, last %v", len(rows), rows[len(rows)-1])
		}
	})
}
