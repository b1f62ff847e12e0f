package parquetfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ErrCorrupt is returned when a Parquet file (a data file or a
// checkpoint) is malformed: its footer, column chunk metadata, page
// headers, compressed pages or page index contradict each other or the
// file's size.
//
// parquet-go trusts these fields: a corrupt length, list size or LZ4 page,
// or a page inflating past its declared size, made it allocate gigabytes
// or loop until the process died, so a bad file in a lake hung every merge
// of its table until the function's timeout. The checks here run before
// parquet-go sees the fields and turn such a file into this error. They
// cost a few header decodes per page, plus a second inflation of gzip and
// brotli pages and of zstd frames that do not declare their size (none of
// which dsdelta writes by default). What they cannot see without decoding
// values, a page parquet-go panics on, is recovered where the pages are
// read (by the readers and writers of package delta) and becomes
// this error too, naming the column.
var ErrCorrupt = errors.New("corrupt parquet file")

// maxPageBytes bounds the uncompressed size a page header may
// declare: parquet-go allocates it before decompressing. Writers cut pages
// at about a megabyte and a page only outgrows that by one oversized value,
// far below this bound.
const maxPageBytes = 1 << 30

// TailBytes is how much of a file's end Open reads at once:
// the footer of most files fits, so opening costs one ranged read.
const TailBytes = 64 << 10

func Corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// checkTail checks the last 8 bytes of a Parquet file of the given
// size (the footer length and the magic) and returns the offset where the
// footer starts. parquet-go allocates the footer length before reading it.
func checkTail(tail []byte, size int64) (int64, error) {
	if size < 12 || len(tail) < 8 {
		return 0, Corruptf("%d bytes is too short for a parquet file", size)
	}
	t := tail[len(tail)-8:]
	if string(t[4:]) != "PAR1" {
		return 0, Corruptf("no PAR1 magic at the end of the file (encrypted footers are not supported)")
	}
	footer := int64(binary.LittleEndian.Uint32(t[:4]))
	if footer == 0 || footer > size-12 {
		return 0, Corruptf("footer length %d does not fit in a file of %d bytes", footer, size)
	}
	return size - 8 - footer, nil
}

// checkFooter checks the encoded footer of a Parquet file (between
// the offset checkTail returns and the last 8 bytes) before
// parquet-go decodes it: see checkThrift.
func checkFooter(footer []byte) error {
	if err := checkThrift(footer); err != nil {
		return Corruptf("footer: %v", err)
	}
	return nil
}

// checkMetadata checks what the footer of f (which starts at
// footerStart) says about its row groups against the file: every column
// chunk lies within the data before the footer and its counts are not
// negative. Pages are checked by a pageChecker when they are read.
func checkMetadata(f *parquet.File, footerStart int64) error {
	md := f.Metadata()
	leaves := len(f.Schema().Columns())
	kinds, err := leafKinds(f)
	if err != nil {
		return err
	}
	for g := range md.RowGroups {
		rg := &md.RowGroups[g]
		if rg.NumRows < 0 {
			return Corruptf("row group %d has %d rows", g, rg.NumRows)
		}
		if len(rg.Columns) != leaves {
			return Corruptf("row group %d has %d column chunks, the schema %d leaf columns", g, len(rg.Columns), leaves)
		}
		for c := range rg.Columns {
			if _, _, err := columnChunkRange(rg, c, footerStart); err != nil {
				return fmt.Errorf("row group %d: %w", g, err)
			}
			if err := checkChunkBounds(&rg.Columns[c].MetaData.Statistics, kinds[c]); err != nil {
				return fmt.Errorf("row group %d: column chunk %d: %w", g, c, err)
			}
			// Page indexes are read (with lengths parquet-go allocates)
			// when a rewrite copies a row group verbatim, and so are bloom
			// filters (parquet-go copies bloom_filter_length bytes; a
			// lookup reads them, see File.BloomFilters).
			cc := &rg.Columns[c]
			for _, ix := range []struct {
				name string
				off  int64
				n    int32
			}{
				{"column index", cc.ColumnIndexOffset, cc.ColumnIndexLength},
				{"offset index", cc.OffsetIndexOffset, cc.OffsetIndexLength},
				{"bloom filter", cc.MetaData.BloomFilterOffset, cc.MetaData.BloomFilterLength},
			} {
				if ix.off != 0 && (ix.off < 4 || ix.n < 0 || int64(ix.n) > footerStart-ix.off) {
					return Corruptf("row group %d: column chunk %d has a %s of %d bytes at offset %d, beyond the footer at %d", g, c, ix.name, ix.n, ix.off, footerStart)
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
			return Corruptf("leaf column %q has the type %s, which has no physical kind", c.Name(), c.Type())
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
// by rewrites for the statistics of copied row groups). The deprecated
// min and max are checked too: parquet-go copies them with the statistics
// of a row group it splices into a rewrite's output, where older readers
// of signed columns use them.
func checkChunkBounds(st *format.Statistics, kind parquet.Kind) error {
	err := checkBounds("", st.MinValue, st.MaxValue, kind)
	if err == nil {
		err = checkBounds("deprecated ", st.Min, st.Max, kind)
	}
	if err != nil {
		return Corruptf("%v", err)
	}
	return nil
}

// checkBounds checks that min and max, PLAIN-encoded bounds of a column of
// the given kind (nil when absent), have the width of the kind.
func checkBounds(prefix string, min, max []byte, kind parquet.Kind) error {
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
	}{{"min", min}, {"max", max}} {
		if b.v != nil && len(b.v) != width {
			return fmt.Errorf("%s%s bound of %d bytes for a %s column", prefix, b.name, len(b.v), kind)
		}
	}
	return nil
}

// columnChunkRange returns the byte range [start, end) of column chunk c of
// rg, checked to lie within the file's data (before footerStart).
func columnChunkRange(rg *format.RowGroup, c int, footerStart int64) (int64, int64, error) {
	if c >= len(rg.Columns) {
		return 0, 0, Corruptf("no column chunk %d in a row group of %d", c, len(rg.Columns))
	}
	cc := &rg.Columns[c]
	cm := &cc.MetaData
	if cc.FilePath != "" {
		return 0, 0, Corruptf("column chunk %d is in another file (%q)", c, cc.FilePath)
	}
	// parquet-go starts at the dictionary page offset whenever it is set.
	start := cm.DataPageOffset
	if cm.DictionaryPageOffset != 0 {
		start = cm.DictionaryPageOffset
	}
	switch {
	case cm.NumValues < 0:
		return 0, 0, Corruptf("column chunk %d has %d values", c, cm.NumValues)
	case start < 4 || cm.DataPageOffset < start:
		return 0, 0, Corruptf("column chunk %d has pages at offsets %d (dictionary) and %d (data)", c, cm.DictionaryPageOffset, cm.DataPageOffset)
	case cm.TotalCompressedSize <= 0 || cm.TotalCompressedSize > footerStart-start:
		return 0, 0, Corruptf("column chunk %d of %d bytes at offset %d does not fit before the footer at %d", c, cm.TotalCompressedSize, start, footerStart)
	case cm.DataPageOffset >= start+cm.TotalCompressedSize:
		return 0, 0, Corruptf("column chunk %d has its data page at %d, past its end at %d", c, cm.DataPageOffset, start+cm.TotalCompressedSize)
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
	codecs []format.CompressionCodec
	// kinds holds the physical kind of each leaf column.
	kinds []parquet.Kind
	// repeated tells, for each leaf column, that it has a repetition
	// level: a v1 data page's value count is not its row count.
	repeated []bool
	codecState
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
			for len(pc.repeated) <= i {
				pc.repeated = append(pc.repeated, false)
			}
			pc.repeated[i] = c.MaxRepetitionLevel() > 0
			return
		}
		for _, ch := range c.Columns() {
			walk(ch)
		}
	}
	walk(f.Root())
	pc.kinds, _ = leafKinds(f) // an error failed checkMetadata
	return pc
}

// check checks the pages of leaf column c of row group g, whose bytes
// chunk returns (from memory: the checkpoint, or a prefetched row group).
// Each page header must decode, fit in the chunk and declare sizes and
// counts parquet-go can act on without unbounded work: a bounded
// uncompressed size that the compressed bytes really decode to (see
// checkCompressed), and no more values than the chunk declares.
func (pc *pageChecker) check(g, c int, chunk func(start, end int64) ([]byte, error)) error {
	start, b, err := pc.chunkBytes(g, c, chunk)
	if err != nil {
		return err
	}
	return pc.checkRun(g, c, start, b)
}

// chunkBytes returns the bytes of column chunk c of row group g, which
// chunk returns, and the offset they start at.
func (pc *pageChecker) chunkBytes(g, c int, chunk func(start, end int64) ([]byte, error)) (int64, []byte, error) {
	start, end, err := columnChunkRange(&pc.f.Metadata().RowGroups[g], c, pc.footerStart)
	if err != nil {
		return 0, nil, err
	}
	b, err := chunk(start, end)
	if err != nil {
		return 0, nil, fmt.Errorf("column chunk %d: %w", c, err)
	}
	return start, b, nil
}

// checkRun checks the pages of b, a run of whole pages of leaf column c of
// row group g that starts at offset start: the whole chunk, or (a sparse
// read through the page index) its dictionary page or one data page. The
// values of the run must not pass the chunk's count.
func (pc *pageChecker) checkRun(g, c int, start int64, b []byte) error {
	rg := &pc.f.Metadata().RowGroups[g]
	codec := format.Uncompressed
	if c < len(pc.codecs) {
		codec = pc.codecs[c]
	}
	var proto thrift.CompactProtocol
	rd := proto.NewReaderFromBytes(nil)
	dec := thrift.NewDecoder(rd)
	var values int64
	for pos, page := 0, 0; pos < len(b); page++ {
		at := start + int64(pos)
		where := func(msg string, args ...any) error {
			return Corruptf("column chunk %d, page %d at offset %d: %s", c, page, at, fmt.Sprintf(msg, args...))
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
		case uncomp < 0 || uncomp > maxPageBytes:
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

// checkPageIndex checks the column index and offset index of column chunk
// c of row group g, whose bytes index returns, before parquet-go reads
// them: it does when a rewrite splices a row group into its output, and
// copies them there. Their lists must be no longer than their bytes (see
// checkThrift), the column index must have a min and a max of the column's
// width for each page that is not all nulls (parquet-go panics decoding
// one of another width), and the offset index must locate pages inside
// the chunk's data pages, starting at increasing rows of the row group:
// readers that filter pages by the index seek to these offsets.
func (pc *pageChecker) checkPageIndex(g, c int, index func(start, end int64) ([]byte, error)) error {
	_, oi, err := pc.pageIndex(g, c, index, true)
	if err != nil || oi == nil {
		return err
	}
	return pc.checkLocations(g, c, oi, index)
}

// checkLocations checks that oi, the offset index of column chunk c of row
// group g, locates the chunk's data pages, whose bytes chunk returns: one
// location a data page, in order, at the offset of its header and of its
// size header included, starting at the row the pages before it end (for
// a repeated column, whose v1 pages do not say their rows, at row 0 for
// the first page). The Parquet format's PageIndex.md defines them so: a
// reader filtering pages seeks to a location and skips rows by it, and a
// verbatim copy carries the index into its output as it is.
func (pc *pageChecker) checkLocations(g, c int, oi *format.OffsetIndex, chunk func(start, end int64) ([]byte, error)) error {
	start, b, err := pc.chunkBytes(g, c, chunk)
	if err != nil {
		return err
	}
	where := func(msg string, args ...any) error {
		return Corruptf("column chunk %d: offset index: %s", c, fmt.Sprintf(msg, args...))
	}
	repeated := c < len(pc.repeated) && pc.repeated[c]
	var proto thrift.CompactProtocol
	rd := proto.NewReaderFromBytes(nil)
	dec := thrift.NewDecoder(rd)
	page, row, rowKnown := 0, int64(0), true
	for pos := 0; pos < len(b); {
		at := start + int64(pos)
		var h format.PageHeader
		rd.ResetBytes(b[pos:])
		if err := dec.Decode(&h); err != nil {
			return where("page header at offset %d: %v", at, err)
		}
		size := int64(rd.BytesRead()) + int64(h.CompressedPageSize)
		if h.CompressedPageSize < 0 || size > int64(len(b)-pos) {
			return where("the page at offset %d does not fit in the column chunk", at)
		}
		pos += int(size)
		rows := int64(-1)
		switch h.Type {
		case format.DataPage:
			if !repeated {
				rows = int64(h.DataPageHeader.V.NumValues)
			}
		case format.DataPageV2:
			rows = int64(h.DataPageHeaderV2.V.NumRows)
		default:
			continue // not a data page: the index does not locate it
		}
		if page >= len(oi.PageLocations) {
			return where("%d pages, the column chunk has more data pages", len(oi.PageLocations))
		}
		loc := oi.PageLocations[page]
		switch {
		case loc.Offset != at || int64(loc.CompressedPageSize) != size:
			return where("page %d of %d bytes at offset %d, the column chunk's is of %d bytes at offset %d", page, loc.CompressedPageSize, loc.Offset, size, at)
		case rowKnown && loc.FirstRowIndex != row:
			return where("page %d has first row %d, the pages before it hold %d rows", page, loc.FirstRowIndex, row)
		}
		page++
		row += rows
		rowKnown = rowKnown && rows >= 0
	}
	if page != len(oi.PageLocations) {
		return where("%d pages, the column chunk %d data pages", len(oi.PageLocations), page)
	}
	return nil
}

// pageIndex is checkPageIndex returning the indexes it checked: nil where
// the column chunk has none. Without withColumnIndex it reads the offset
// index alone: a read that needs no page's bounds of the column does not
// fail on its column index (parquet-go before v0.32.1 wrote fewer bounds
// than pages for a decimal of more than 18 digits with a page of nulls,
// and files in lakes keep them).
func (pc *pageChecker) pageIndex(g, c int, index func(start, end int64) ([]byte, error), withColumnIndex bool) (*format.ColumnIndex, *format.OffsetIndex, error) {
	rg := &pc.f.Metadata().RowGroups[g]
	_, end, err := columnChunkRange(rg, c, pc.footerStart)
	if err != nil {
		return nil, nil, err
	}
	cc := &rg.Columns[c]
	var proto thrift.CompactProtocol
	decode := func(name string, off int64, n int32, v any) error {
		b, err := index(off, off+int64(n))
		if err != nil {
			return fmt.Errorf("column chunk %d: %s: %w", c, name, err)
		}
		if err = checkThrift(b); err == nil {
			err = thrift.Unmarshal(&proto, b, v)
		}
		if err != nil {
			return Corruptf("column chunk %d: %s: %v", c, name, err)
		}
		return nil
	}
	pages := -1
	var ci *format.ColumnIndex
	var oi *format.OffsetIndex
	if cc.ColumnIndexOffset != 0 && withColumnIndex {
		ci = new(format.ColumnIndex)
		if err := decode("column index", cc.ColumnIndexOffset, cc.ColumnIndexLength, ci); err != nil {
			return nil, nil, err
		}
		pages = len(ci.NullPages)
		if len(ci.MinValues) != pages || len(ci.MaxValues) != pages || (len(ci.NullCounts) != 0 && len(ci.NullCounts) != pages) {
			return nil, nil, Corruptf("column chunk %d: column index of %d pages with %d min and %d max bounds and %d null counts", c, pages, len(ci.MinValues), len(ci.MaxValues), len(ci.NullCounts))
		}
		kind := parquet.Kind(-1)
		if c < len(pc.kinds) {
			kind = pc.kinds[c]
		}
		for i, null := range ci.NullPages {
			if null {
				continue
			}
			if err := checkBounds("", ci.MinValues[i], ci.MaxValues[i], kind); err != nil {
				return nil, nil, Corruptf("column chunk %d: column index: page %d: %v", c, i, err)
			}
		}
	}
	if cc.OffsetIndexOffset != 0 {
		if oi, err = pc.offsetIndex(g, c, index, decode); err != nil {
			return nil, nil, err
		}
		where := func(msg string, args ...any) error {
			return Corruptf("column chunk %d: offset index: %s", c, fmt.Sprintf(msg, args...))
		}
		if pages >= 0 && len(oi.PageLocations) != pages {
			return nil, nil, where("%d pages, the column index %d", len(oi.PageLocations), pages)
		}
		data := cc.MetaData.DataPageOffset
		row := int64(-1)
		for i, loc := range oi.PageLocations {
			if loc.Offset < data || loc.CompressedPageSize <= 0 || loc.Offset > end-int64(loc.CompressedPageSize) {
				return nil, nil, where("page %d of %d bytes at offset %d is outside the data pages [%d, %d)", i, loc.CompressedPageSize, loc.Offset, data, end)
			}
			if loc.FirstRowIndex <= row || (rg.NumRows > 0 && loc.FirstRowIndex >= rg.NumRows) {
				return nil, nil, where("page %d has first row %d, after row %d, in a row group of %d rows", i, loc.FirstRowIndex, row, rg.NumRows)
			}
			row = loc.FirstRowIndex
		}
	}
	return ci, oi, nil
}

// offsetIndex decodes the offset index of column chunk c of row group g,
// whose bytes index returns, once: by parquet-go, which keeps it for
// seeking to a row (FilePages.SeekToRow) and for copying the row group,
// after checkThrift, as decode would. The locations are copied out of it
// for the checks; decode decodes a chunk parquet-go does not hold. An
// index these checks refuse stays in parquet-go's chunk, where only
// FilePages.SeekToRow looks, which only a sparse read of indexes that
// passed calls.
func (pc *pageChecker) offsetIndex(g, c int, index func(start, end int64) ([]byte, error), decode func(name string, off int64, n int32, v any) error) (*format.OffsetIndex, error) {
	cc := &pc.f.Metadata().RowGroups[g].Columns[c]
	oi := new(format.OffsetIndex)
	fc, ok := pc.f.RowGroups()[g].ColumnChunks()[c].(*parquet.FileColumnChunk)
	if !ok {
		return oi, decode("offset index", cc.OffsetIndexOffset, cc.OffsetIndexLength, oi)
	}
	b, err := index(cc.OffsetIndexOffset, cc.OffsetIndexOffset+int64(cc.OffsetIndexLength))
	if err != nil {
		return nil, fmt.Errorf("column chunk %d: offset index: %w", c, err)
	}
	if err := checkThrift(b); err != nil {
		return nil, Corruptf("column chunk %d: offset index: %v", c, err)
	}
	foi, err := fc.OffsetIndexFrom(bytesAt{cc.OffsetIndexOffset, b})
	if err != nil {
		return nil, Corruptf("column chunk %d: offset index: %v", c, err)
	}
	oi.PageLocations = make([]format.PageLocation, foi.NumPages())
	for i := range oi.PageLocations {
		oi.PageLocations[i] = format.PageLocation{Offset: foi.Offset(i), CompressedPageSize: int32(foi.CompressedPageSize(i)), FirstRowIndex: foi.FirstRowIndex(i)}
	}
	return oi, nil
}

// bytesAt reads the bytes b of a file, which start at offset off.
type bytesAt struct {
	off int64
	b   []byte
}

func (r bytesAt) ReadAt(p []byte, off int64) (int, error) {
	if off < r.off || off-r.off > int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off-r.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
