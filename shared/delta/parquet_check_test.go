package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
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

// ckFooterListBomb makes the schema list of b's footer declare 2^31-1
// elements: parquet-go allocated them before reading any, and the Go
// runtime died with "out of memory".
func ckFooterListBomb(t *testing.T, b []byte) []byte {
	t.Helper()
	data, md := ckSplit(t, b)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	if err != nil {
		t.Fatal(err)
	}
	// Field 1 (version, i32) takes two bytes; field 2 (schema) is a list
	// of structs whose header holds its size when below 15.
	if footer[0] != 0x15 || footer[2] != 0x19 || footer[3]&0x0f != 0x0c || footer[3]>>4 == 0x0f {
		t.Fatalf("unexpected footer start % x", footer[:4])
	}
	bomb := append([]byte{0x15, footer[1], 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07}, footer[4:]...)
	out := append(append([]byte(nil), data...), bomb...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(bomb)))
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
		declared := h.CompressedPageSize
		body := edit(&h, append([]byte(nil), data[bodyAt:end]...))
		if h.CompressedPageSize == declared {
			h.CompressedPageSize = int32(len(body))
		}
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

// ckMaxAllocBytes bounds what decoding one file may allocate in the
// corruption tests and the fuzz targets: their valid files cost a few MiB;
// the allocation bombs kept among the fuzz seeds cost gigabytes before the
// guard stopped them.
const ckMaxAllocBytes = 512 << 20

// ckWithin runs decode, failing the test if it has not returned within
// ten seconds (or before the test's deadline): a regression to a reader
// that spins must fail the suite, not hang it. It also fails the test when
// decode allocated more than ckMaxAllocBytes: a reader that sizes buffers
// by a corrupt length must fail it too, not wait for a machine with less
// memory. (No test of the package runs in parallel, so the process's
// allocations are decode's.)
func ckWithin(t *testing.T, decode func() error) error {
	t.Helper()
	before := ckHeapAllocs()
	defer func() {
		if n := ckHeapAllocs() - before; n > ckMaxAllocBytes {
			t.Fatalf("decoding allocated %d MiB, more than the %d MiB a file this size may cost", n>>20, ckMaxAllocBytes>>20)
		}
	}()
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

// ckHeapAllocs returns the bytes the process has allocated on the heap
// so far.
func ckHeapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
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
		{"a zstd file with a dictionary page decodes", &parquet.Zstd, true},
		{"a gzip file with a dictionary page decodes", &parquet.Gzip, true},
		{"a brotli file decodes", &parquet.Brotli, false},
		{"a brotli file with a dictionary page decodes", &parquet.Brotli, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := ckDecode(t, ckFile(t, tt.codec, tt.dict)); err != nil {
				t.Fatalf("valid file rejected: %v", err)
			}
		})
	}
}

// Other writers frame their pages in ways parquet-go's encoder does not:
// each must pass the checks, which read the frames rather than decode them
// where they can.
func TestValidCompressedPagesOfOtherWritersPassTheChecks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		codec compress.Codec
		body  func(t *testing.T, raw []byte) []byte
	}{
		{"a zstd page without a frame content size (a streaming encoder's)", &parquet.Zstd, func(t *testing.T, raw []byte) []byte {
			return ckZstdStream(t, raw)
		}},
		{"a zstd page in two frames", &parquet.Zstd, func(t *testing.T, raw []byte) []byte {
			return append(ckZstdAll(t, raw[:len(raw)/3]), ckZstdAll(t, raw[len(raw)/3:])...)
		}},
		{"a zstd page in a frame with a checksum", &parquet.Zstd, func(t *testing.T, raw []byte) []byte {
			return ckZstdAll(t, raw, zstd.WithEncoderCRC(true))
		}},
		{"a zstd page after a skippable frame", &parquet.Zstd, func(t *testing.T, raw []byte) []byte {
			skip := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'}
			return append(skip, ckZstdAll(t, raw)...)
		}},
		{"a zstd page of two frames, one without a content size", &parquet.Zstd, func(t *testing.T, raw []byte) []byte {
			return append(ckZstdAll(t, raw[:len(raw)/2]), ckZstdStream(t, raw[len(raw)/2:])...)
		}},
		{"a gzip page of two members", &parquet.Gzip, func(t *testing.T, raw []byte) []byte {
			return append(ckGzip(t, raw[:len(raw)/2]), ckGzip(t, raw[len(raw)/2:])...)
		}},
	} {
		t.Run(tt.name+" decodes", func(t *testing.T) {
			b := ckEditPage(t, ckFile(t, tt.codec, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				return ckRecompress(t, tt.codec, h, body, func(raw []byte) []byte { return tt.body(t, raw) })
			})
			if err := ckDecode(t, b); err != nil {
				t.Fatalf("valid file rejected: %v", err)
			}
		})
	}
}

// ckRecompress returns the body of the page of header h compressed by
// recompress instead of codec: the values of a v2 page, its levels left as
// they are (stored uncompressed), or the whole body of a v1 page.
func ckRecompress(t *testing.T, codec compress.Codec, h *format.PageHeader, body []byte, recompress func(raw []byte) []byte) []byte {
	t.Helper()
	levels := len(ckReplaceValues(h, body, nil))
	raw, err := codec.Decode(nil, body[levels:])
	if err != nil || levels+len(raw) != int(h.UncompressedPageSize) {
		t.Fatalf("decoded %d bytes of %d: %v", levels+len(raw), h.UncompressedPageSize, err)
	}
	return ckReplaceValues(h, body, recompress(raw))
}

// ckReplaceValues returns the body of the page of header h with its
// compressed bytes replaced by values: the levels of a v2 page stay.
func ckReplaceValues(h *format.PageHeader, body, values []byte) []byte {
	levels := 0
	if h.Type == format.DataPageV2 {
		levels = int(h.DataPageHeaderV2.V.RepetitionLevelsByteLength + h.DataPageHeaderV2.V.DefinitionLevelsByteLength)
	}
	return append(body[:levels:levels], values...)
}

// ckZstdAll compresses raw into one zstd frame, which declares its content
// size, as parquet-go's encoder does.
func ckZstdAll(t *testing.T, raw []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(raw, nil)
}

// ckZstdStream compresses raw into one zstd frame that does not declare
// its content size (Frame_Content_Size absent, a window descriptor
// instead), as streaming encoders write it.
func ckZstdStream(t *testing.T, raw []byte) []byte {
	t.Helper()
	b := ckZstdAll(t, raw)
	fhd := b[4]
	single := fhd&(1<<5) != 0
	at := 5
	if !single {
		at++ // window descriptor
	}
	dict := b[at : at+[]int{0, 1, 2, 4}[fhd&3]]
	at += len(dict)
	fcs := []int{0, 2, 4, 8}[fhd>>6]
	if fcs == 0 && single {
		fcs = 1
	}
	at += fcs
	// Keep the checksum and dictionary flags; a 4 MiB window holds the
	// whole content, which the matches of a single-segment frame may span.
	out := append([]byte(nil), b[:4]...)
	out = append(out, fhd&0x07, 12<<3)
	out = append(out, dict...)
	return append(out, b[at:]...)
}

// ckZstdRLE returns a zstd frame of n bytes (n > 0) of zeros in RLE blocks
// of 128 KiB, four bytes each: a decompression bomb, declaring its content
// size or not.
func ckZstdRLE(n int64, contentSize bool) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd}
	if contentSize {
		b = append(b, 3<<6, 7<<3) // an 8-byte content size; a 128 KiB window
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	} else {
		b = append(b, 0, 7<<3)
	}
	for n > 0 {
		size := min(n, 128<<10)
		n -= size
		h := uint32(size)<<3 | 1<<1
		if n == 0 {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

func ckGzip(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCompressedPagesCannotAllocatePastTheirDeclaredSize feeds pages of a
// few bytes that inflate to a gigabyte: parquet-go decompresses a page
// until its stream ends, growing the buffer as it goes, and sizes it by a
// zstd frame's content size, so each allocated gigabytes before the guard
// (ckWithin fails a decode that allocates more than ckMaxAllocBytes).
func TestCompressedPagesCannotAllocatePastTheirDeclaredSize(t *testing.T) {
	const bomb = 1 << 30
	for _, tt := range []struct {
		name   string
		codec  compress.Codec
		body   func(t *testing.T) []byte
		reason string
	}{
		{"gzip members inflating to a gigabyte", &parquet.Gzip, func(t *testing.T) []byte {
			member := ckGzip(t, make([]byte, 16<<20))
			return bytes.Repeat(member, bomb/(16<<20))
		}, "gzip data decodes to more than"},
		{"zstd blocks inflating to a gigabyte in a frame without a content size", &parquet.Zstd, func(t *testing.T) []byte {
			return ckZstdRLE(bomb, false)
		}, "zstd data decodes to more than"},
		{"a zstd frame declaring and inflating to a gigabyte", &parquet.Zstd, func(t *testing.T) []byte {
			return ckZstdRLE(bomb, true)
		}, "zstd frames declare 1073741824 bytes"},
		{"a zstd frame of a megabyte declaring 16 GiB", &parquet.Zstd, func(t *testing.T) []byte {
			b := ckZstdRLE(1<<20, true)
			binary.LittleEndian.PutUint64(b[6:], 16<<30)
			return b
		}, "declares 17179869184 bytes"},
	} {
		t.Run("a page of "+tt.name+" is rejected without inflating it", func(t *testing.T) {
			b := ckEditPage(t, ckFile(t, tt.codec, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				return ckReplaceValues(h, body, tt.body(t))
			})
			err := ckDecode(t, b)
			if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want parquetfile.ErrCorrupt with %q", err, tt.reason)
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
		if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), "footer length 4294967280") {
			t.Fatalf("err = %v, want parquetfile.ErrCorrupt naming the footer length", err)
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
		if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), "lz4") {
			t.Fatalf("err = %v, want parquetfile.ErrCorrupt about lz4 data", err)
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
		{"a gzip page inflating past its declared size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Gzip, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize--
				return body
			})
		}, "gzip data decodes to more than"},
		{"a gzip page inflating to less than its declared size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Gzip, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize++
				return body
			})
		}, "the header says"},
		{"a gzip page that is not gzip data is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Gzip, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				return ckReplaceValues(h, body, []byte("not gzip data"))
			})
		}, "gzip: invalid header"},
		{"a brotli page inflating past its declared size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Brotli, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize--
				return body
			})
		}, "brotli data decodes to more than"},
		{"a zstd frame whose content size is not the page's is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Zstd, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				h.UncompressedPageSize++
				return body
			})
		}, "zstd frames declare"},
		{"a zstd page without a content size inflating past its declared size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Zstd, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				body = ckRecompress(t, &parquet.Zstd, h, body, func(raw []byte) []byte { return ckZstdStream(t, raw) })
				h.UncompressedPageSize--
				return body
			})
		}, "zstd data does not decode into the"},
		{"a zstd page without a content size inflating to less than its declared size is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Zstd, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				body = ckRecompress(t, &parquet.Zstd, h, body, func(raw []byte) []byte { return ckZstdStream(t, raw) })
				h.UncompressedPageSize++
				return body
			})
		}, "the header says"},
		{"a page that is not zstd data is rejected", func(t *testing.T) []byte {
			return ckEditPage(t, ckFile(t, &parquet.Zstd, false), format.DataPage, func(h *format.PageHeader, body []byte) []byte {
				return ckReplaceValues(h, body, []byte("not zstd data"))
			})
		}, "zstd"},
		{"a footer list longer than the footer is rejected before parquet-go allocates it", func(t *testing.T) []byte {
			return ckFooterListBomb(t, snappyFile(t))
		}, "list of 2147483647 elements"},
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
			if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want parquetfile.ErrCorrupt with %q", err, tt.reason)
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
		{"a footer list longer than the footer fails the open", func(t *testing.T) []byte {
			return ckFooterListBomb(t, ckFile(t, &parquet.Snappy, false))
		}, "list of 2147483647 elements"},
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
			if !errors.Is(err, parquetfile.ErrCorrupt) || !strings.Contains(err.Error(), "part-0.parquet") || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want parquetfile.ErrCorrupt naming part-0.parquet and %q", err, tt.reason)
			}
		})
	}
	t.Run("a footer larger than the first read of the file's end is read whole", func(t *testing.T) {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[ckRow](&buf, parquet.KeyValueMetadata("padding", strings.Repeat("x", 3*parquetfile.TailBytes)))
		s := "only row"
		if _, err := w.Write([]ckRow{{S: &s}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if n := binary.LittleEndian.Uint32(b[len(b)-8:]); n <= parquetfile.TailBytes {
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

// BenchmarkParquetGuard measures what the guard adds to reading a data
// file: the footer checks and the page checks of every column chunk, from
// memory, for each codec FileWriter writes (read the ns/op beside
// BenchmarkReadFile's).
func BenchmarkParquetGuard(b *testing.B) {
	ctx := context.Background()
	for _, codec := range []Compression{CompressionSnappy, CompressionZstd, CompressionGzip} {
		store := newPQMemStore()
		add := pqCDCFile(b, store, WriteOptions{Compression: codec}, pqBenchRows)
		name, err := decodeAddPath(add.Path)
		if err != nil {
			b.Fatal(err)
		}
		data := store.objects[name]
		b.Run("codec="+string(codec), func(b *testing.B) {
			b.SetBytes(add.Size)
			for range b.N {
				ra, err := parquetfile.Open(ctx, store, name, add.Size)
				if err != nil {
					b.Fatal(err)
				}
				for g, rg := range ra.Parquet().Metadata().RowGroups {
					for c := range rg.Columns {
						start, end, err := ra.ChunkRange(g, c)
						if err != nil {
							b.Fatal(err)
						}
						if err := ra.CheckRun(g, c, start, data[start:end]); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
