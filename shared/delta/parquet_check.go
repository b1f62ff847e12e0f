package delta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// ErrCorruptParquet is returned when a Parquet file (a data file or a
// checkpoint) is malformed: its footer, column chunk metadata or page
// headers contradict each other or the file's size.
//
// parquet-go trusts these fields: a corrupt length or a corrupt LZ4 page
// made it allocate gigabytes or loop until the process died, so a bad file
// in a lake hung every merge of its table until the function's timeout.
// The checks here run before parquet-go sees the fields, cost a few header
// decodes per page, and turn such a file into this error. What they cannot
// see without decoding values, a page parquet-go panics on, is recovered
// where the pages are read (colStream, copyKeptValuesSafely,
// writeRowGroupSafely) and becomes this error too, naming the column.
var ErrCorruptParquet = errors.New("corrupt parquet file")

// maxParquetPageBytes bounds the uncompressed size a page header may
// declare: parquet-go allocates it before decompressing. Writers cut pages
// at about a megabyte and a page only outgrows that by one oversized value,
// far below this bound.
const maxParquetPageBytes = 1 << 30

// parquetTailBytes is how much of a file's end openParquet reads at once:
// the footer of most files fits, so opening costs one ranged read.
const parquetTailBytes = 64 << 10

func corruptParquet(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptParquet, fmt.Sprintf(format, args...))
}

// checkParquetTail checks the last 8 bytes of a Parquet file of the given
// size (the footer length and the magic) and returns the offset where the
// footer starts. parquet-go allocates the footer length before reading it.
func checkParquetTail(tail []byte, size int64) (int64, error) {
	if size < 12 || len(tail) < 8 {
		return 0, corruptParquet("%d bytes is too short for a parquet file", size)
	}
	t := tail[len(tail)-8:]
	if string(t[4:]) != "PAR1" {
		return 0, corruptParquet("no PAR1 magic at the end of the file (encrypted footers are not supported)")
	}
	footer := int64(binary.LittleEndian.Uint32(t[:4]))
	if footer == 0 || footer > size-12 {
		return 0, corruptParquet("footer length %d does not fit in a file of %d bytes", footer, size)
	}
	return size - 8 - footer, nil
}

// checkParquetMetadata checks what the footer of f (which starts at
// footerStart) says about its row groups against the file: every column
// chunk lies within the data before the footer and its counts are not
// negative. Pages are checked by a pageChecker when they are read.
func checkParquetMetadata(f *parquet.File, footerStart int64) error {
	md := f.Metadata()
	leaves := len(f.Schema().Columns())
	kinds, err := leafKinds(f)
	if err != nil {
		return err
	}
	for g := range md.RowGroups {
		rg := &md.RowGroups[g]
		if rg.NumRows < 0 {
			return corruptParquet("row group %d has %d rows", g, rg.NumRows)
		}
		if len(rg.Columns) != leaves {
			return corruptParquet("row group %d has %d column chunks, the schema %d leaf columns", g, len(rg.Columns), leaves)
		}
		for c := range rg.Columns {
			if _, _, err := columnChunkRange(rg, c, footerStart); err != nil {
				return fmt.Errorf("row group %d: %w", g, err)
			}
			if err := checkChunkBounds(&rg.Columns[c].MetaData.Statistics, kinds[c]); err != nil {
				return fmt.Errorf("row group %d: column chunk %d: %w", g, c, err)
			}
			// Page indexes are read (with lengths parquet-go allocates)
			// when a rewrite copies a row group verbatim.
			cc := &rg.Columns[c]
			for _, ix := range []struct {
				name string
				off  int64
				n    int32
			}{{"column index", cc.ColumnIndexOffset, cc.ColumnIndexLength}, {"offset index", cc.OffsetIndexOffset, cc.OffsetIndexLength}} {
				if ix.off != 0 && (ix.off < 4 || ix.n < 0 || int64(ix.n) > footerStart-ix.off) {
					return corruptParquet("row group %d: column chunk %d has a %s of %d bytes at offset %d, beyond the footer at %d", g, c, ix.name, ix.n, ix.off, footerStart)
				}
			}
		}
	}
	return nil
}

// leafKinds returns the physical kind of each leaf column of f, in column
// order. parquet-go types a leaf by its logical type first, and a leaf
// whose footer says LIST, MAP or VARIANT (a group's annotation) gets a
// type whose Kind panics: when comparing schemas, reading chunk bounds or
// decoding pages.
func leafKinds(f *parquet.File) ([]parquet.Kind, error) {
	var kinds []parquet.Kind
	var walk func(c *parquet.Column) error
	walk = func(c *parquet.Column) error {
		if !c.Leaf() {
			for _, ch := range c.Columns() {
				if err := walk(ch); err != nil {
					return err
				}
			}
			return nil
		}
		k, ok := kindOf(c.Type())
		if !ok {
			return corruptParquet("leaf column %q has the type %s, which has no physical kind", c.Name(), c.Type())
		}
		kinds = append(kinds, k)
		return nil
	}
	if err := walk(f.Root()); err != nil {
		return nil, err
	}
	return kinds, nil
}

// kindOf returns t.Kind(), ok false when the type has none (it panics).
func kindOf(t parquet.Type) (k parquet.Kind, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return t.Kind(), true
}

// checkChunkBounds checks that the column chunk bounds in st have the
// width of the column's kind: parquet-go panics decoding a bound of
// another width (FileColumnChunk.Bounds, read by row group filters and
// by rewrites for the statistics of copied row groups).
func checkChunkBounds(st *format.Statistics, kind parquet.Kind) error {
	width := 0
	switch kind {
	case parquet.Boolean:
		width = 1
	case parquet.Int32, parquet.Float:
		width = 4
	case parquet.Int64, parquet.Double:
		width = 8
	case parquet.Int96:
		width = 12
	default:
		return nil // byte arrays have any length
	}
	for _, b := range []struct {
		name string
		v    []byte
	}{{"min", st.MinValue}, {"max", st.MaxValue}} {
		if b.v != nil && len(b.v) != width {
			return corruptParquet("%s bound of %d bytes for a %s column", b.name, len(b.v), kind)
		}
	}
	return nil
}

// columnChunkRange returns the byte range [start, end) of column chunk c of
// rg, checked to lie within the file's data (before footerStart).
func columnChunkRange(rg *format.RowGroup, c int, footerStart int64) (int64, int64, error) {
	if c >= len(rg.Columns) {
		return 0, 0, corruptParquet("no column chunk %d in a row group of %d", c, len(rg.Columns))
	}
	cc := &rg.Columns[c]
	cm := &cc.MetaData
	if cc.FilePath != "" {
		return 0, 0, corruptParquet("column chunk %d is in another file (%q)", c, cc.FilePath)
	}
	// parquet-go starts at the dictionary page offset whenever it is set.
	start := cm.DataPageOffset
	if cm.DictionaryPageOffset != 0 {
		start = cm.DictionaryPageOffset
	}
	switch {
	case cm.NumValues < 0:
		return 0, 0, corruptParquet("column chunk %d has %d values", c, cm.NumValues)
	case start < 4 || cm.DataPageOffset < start:
		return 0, 0, corruptParquet("column chunk %d has pages at offsets %d (dictionary) and %d (data)", c, cm.DictionaryPageOffset, cm.DataPageOffset)
	case cm.TotalCompressedSize <= 0 || cm.TotalCompressedSize > footerStart-start:
		return 0, 0, corruptParquet("column chunk %d of %d bytes at offset %d does not fit before the footer at %d", c, cm.TotalCompressedSize, start, footerStart)
	case cm.DataPageOffset >= start+cm.TotalCompressedSize:
		return 0, 0, corruptParquet("column chunk %d has its data page at %d, past its end at %d", c, cm.DataPageOffset, start+cm.TotalCompressedSize)
	}
	return start, start + cm.TotalCompressedSize, nil
}

// pageChecker checks the page headers of the column chunks of one file
// before parquet-go decodes their pages.
type pageChecker struct {
	f           *parquet.File
	footerStart int64
	// codecs holds the codec of each leaf column as parquet-go decodes it:
	// with the codec of the column's first chunk, whatever later chunks say.
	codecs  []format.CompressionCodec
	scratch []byte // LZ4 pages are decoded into it
}

func newPageChecker(f *parquet.File, footerStart int64) *pageChecker {
	pc := &pageChecker{f: f, footerStart: footerStart}
	var walk func(c *parquet.Column)
	walk = func(c *parquet.Column) {
		if c.Leaf() {
			i := c.Index()
			for len(pc.codecs) <= i {
				pc.codecs = append(pc.codecs, format.Uncompressed)
			}
			// A file without row groups leaves the codec unset, which
			// parquet-go reads as uncompressed.
			if codec := c.Compression(); codec != nil {
				pc.codecs[i] = codec.CompressionCodec()
			}
			return
		}
		for _, ch := range c.Columns() {
			walk(ch)
		}
	}
	walk(f.Root())
	return pc
}

// check checks the pages of leaf column c of row group g, whose bytes
// chunk returns (from memory: the checkpoint, or a prefetched row group).
// Each page header must decode, fit in the chunk and declare sizes and
// counts parquet-go can act on without unbounded work: a bounded
// uncompressed size that the compressed bytes really decode to (checked
// from the Snappy preamble; by decoding LZ4, whose parquet-go decoder
// retries a corrupt block with ever larger buffers until memory runs out),
// and no more values than the chunk declares.
func (pc *pageChecker) check(g, c int, chunk func(start, end int64) ([]byte, error)) error {
	rg := &pc.f.Metadata().RowGroups[g]
	start, end, err := columnChunkRange(rg, c, pc.footerStart)
	if err != nil {
		return err
	}
	codec := format.Uncompressed
	if c < len(pc.codecs) {
		codec = pc.codecs[c]
	}
	b, err := chunk(start, end)
	if err != nil {
		return fmt.Errorf("column chunk %d: %w", c, err)
	}
	var proto thrift.CompactProtocol
	rd := proto.NewReaderFromBytes(nil)
	dec := thrift.NewDecoder(rd)
	var values int64
	for pos, page := 0, 0; pos < len(b); page++ {
		at := start + int64(pos)
		where := func(msg string, args ...any) error {
			return corruptParquet("column chunk %d, page %d at offset %d: %s", c, page, at, fmt.Sprintf(msg, args...))
		}
		var h format.PageHeader
		rd.ResetBytes(b[pos:])
		if err := dec.Decode(&h); err != nil {
			return where("page header: %v", err)
		}
		body := pos + rd.BytesRead()
		comp, uncomp := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		switch {
		case comp < 0 || comp > int64(len(b)-body):
			return where("compressed size %d does not fit in the column chunk", comp)
		case uncomp < 0 || uncomp > maxParquetPageBytes:
			return where("uncompressed size %d is out of range", uncomp)
		}
		data := b[body : body+int(comp)]
		pos = body + int(comp)

		var pageValues int64
		levels := 0 // level bytes of a v2 page, stored uncompressed
		compressed := true
		switch h.Type {
		case format.DataPage:
			if !h.DataPageHeader.Valid {
				return where("data page without its header")
			}
			pageValues = int64(h.DataPageHeader.V.NumValues)
		case format.DataPageV2:
			v2 := &h.DataPageHeaderV2
			if !v2.Valid {
				return where("data page v2 without its header")
			}
			pageValues = int64(v2.V.NumValues)
			lv := int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
			if v2.V.RepetitionLevelsByteLength < 0 || v2.V.DefinitionLevelsByteLength < 0 || lv > comp || lv > uncomp {
				return where("level lengths %d and %d do not fit in the page", v2.V.RepetitionLevelsByteLength, v2.V.DefinitionLevelsByteLength)
			}
			if v2.V.NumNulls < 0 || v2.V.NumNulls > v2.V.NumValues || v2.V.NumRows < 0 || v2.V.NumRows > v2.V.NumValues {
				return where("%d values with %d nulls in %d rows", v2.V.NumValues, v2.V.NumNulls, v2.V.NumRows)
			}
			levels = int(lv)
			compressed = !v2.V.IsCompressed.Valid || v2.V.IsCompressed.V
		case format.DictionaryPage:
			d := &h.DictionaryPageHeader
			if !d.Valid {
				return where("dictionary page without its header")
			}
			// parquet-go sizes the dictionary by its declared count; a
			// value takes at least a bit of the page's decoded bytes
			// (its stored bytes when the column is not compressed).
			decoded := uncomp
			if codec == format.Uncompressed {
				decoded = comp
			}
			if d.V.NumValues < 0 || int64(d.V.NumValues) > 8*decoded+8 {
				return where("dictionary of %d values in %d bytes", d.V.NumValues, decoded)
			}
		default:
			// Index pages and unknown types are skipped by readers.
			continue
		}
		if pageValues < 0 {
			return where("%d values", pageValues)
		}
		if values += pageValues; values > rg.Columns[c].MetaData.NumValues {
			return where("pages hold more values than the column chunk's %d", rg.Columns[c].MetaData.NumValues)
		}
		if !compressed {
			continue
		}
		if err := pc.checkCompressed(codec, data[levels:], uncomp-int64(levels)); err != nil {
			return where("%v", err)
		}
	}
	return nil
}

// checkCompressed checks that src, the compressed bytes of a page, decodes
// to want bytes, for the codecs whose decoders parquet-go trusts with sizes.
func (pc *pageChecker) checkCompressed(codec format.CompressionCodec, src []byte, want int64) error {
	switch codec {
	case format.Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %v", err)
		}
		if int64(n) != want {
			return fmt.Errorf("snappy data decodes to %d bytes, the header says %d", n, want)
		}
	case format.Lz4Raw:
		if len(src) == 0 {
			return nil
		}
		// A byte of an LZ4 block expands to 255 at most: a larger claim
		// is corrupt, and is rejected before sizing the buffer by it.
		if want > 255*int64(len(src))+16 {
			return fmt.Errorf("%d bytes of lz4 data cannot decode to %d", len(src), want)
		}
		// Decoding into want bytes succeeds when parquet-go's decoding into
		// alloc >= want bytes does.
		if int64(cap(pc.scratch)) < want {
			pc.scratch = make([]byte, want)
		}
		n, err := lz4.UncompressBlock(src, pc.scratch[:want])
		if err != nil {
			return fmt.Errorf("lz4 data does not decode into the %d bytes the header declares: %v", want, err)
		}
		if int64(n) != want {
			return fmt.Errorf("lz4 data decodes to %d bytes, the header says %d", n, want)
		}
	}
	return nil
}
