package parquetfile

import (
	"context"
	"fmt"
	"io"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// flatBatchRows is how many rows a flat read decodes, column after column,
// before it hands them out. It divides 4096, so the context is checked
// before the same rows as in the generic read.
const flatBatchRows = 256

// flatReader reads the row groups of a file whose output columns are all
// constants or top-level primitive leaves (a flat schema: no struct, list
// or map), a batch of rows at a time, one column after another, straight
// from the decoded pages. The generic record assembly (asm.read over
// colStream), which peeks and consumes the levels of one value at a time
// for every column of every row, took most of the CPU of reading a flat
// file; for a flat column every value is one row and its definition level
// alone says whether it is null, so none of that is needed. Values are
// converted by the leaves' own conversions (conv, or asm.str and asm.i64
// that conv calls), so both reads hand out the same values; package
// delta's tests (parquet_read_flat_test.go) compare the two row for row.
type flatReader struct {
	cols    []flatCol
	streams []*colStream // by leaf, as the generic read has them: what to prefetch
	// keep says rows are kept (ReadSpec.KeepRows): a batch's rows are
	// then cut from one slab, otherwise each is allocated as the generic
	// read does and scratch holds the batch.
	keep    bool
	scratch []any
}

// flatCol is one output column of a flat read: a constant or a leaf.
type flatCol struct {
	constant any
	leaf     *flatLeaf // nil for a constant
}

// newFlatReader returns the flat reader of the output columns out (whose
// leaves are streams), or nil when one of them is not a constant or a
// top-level leaf, or two read the same leaf.
func newFlatReader(out []*asm, streams []*colStream, keep bool) *flatReader {
	r := &flatReader{cols: make([]flatCol, len(out)), streams: streams, keep: keep}
	seen := map[*colStream]bool{}
	for k, a := range out {
		switch {
		case a.kind == asmConst:
			r.cols[k] = flatCol{constant: a.constant}
		// A top-level leaf is null where its one definition level is
		// below its maximum: 0 for a required leaf, 1 for an optional one.
		case a.kind == asmLeaf && a.stream != nil && !seen[a.stream] && a.nullDef == a.maxDef && a.maxDef <= 1:
			seen[a.stream] = true
			r.cols[k] = flatCol{leaf: &flatLeaf{leaf: a.stream.leaf, name: a.stream.name, maxDef: byte(a.maxDef), conv: a.conv, str: a.str, i64: a.i64}}
		default:
			return nil
		}
	}
	return r
}

// readGroup reads row group g (rg) of f as readRowGroupAt does: the rows
// of physical positions base, base+1, ..., but those deleted marks, to fn.
func (r *flatReader) readGroup(ctx context.Context, ra *File, f *parquet.File, g int, rg parquet.RowGroup, base int64, deleted *roaring64.Bitmap, fn func(int64, []any) error) error {
	err := loadRowGroup(ra, f, g, r.streams)
	defer ra.Release()
	if err != nil {
		return err
	}
	chunks := rg.ColumnChunks()
	defer r.close()
	for _, c := range r.cols {
		if c.leaf == nil {
			continue
		}
		if c.leaf.leaf >= len(chunks) {
			return fmt.Errorf("row group has %d column chunks, schema needs column %d", len(chunks), c.leaf.leaf)
		}
		if err := c.leaf.open(chunks[c.leaf.leaf]); err != nil {
			return err
		}
	}
	nc := len(r.cols)
	n := rg.NumRows()
	for start := int64(0); start < n; start += flatBatchRows {
		if start%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		m := int(min(flatBatchRows, n-start))
		var batch []any
		if r.keep {
			batch = make([]any, m*nc)
		} else {
			if len(r.scratch) < m*nc {
				r.scratch = make([]any, flatBatchRows*nc)
			}
			batch = r.scratch[:m*nc]
		}
		// The rows before the first a column fails to decode are handed
		// out, then the error of the leftmost column failing there, as the
		// generic read, row by row, would.
		good, bad := m, error(nil)
		for k, c := range r.cols {
			if c.leaf == nil {
				for i := k; i < len(batch); i += nc {
					batch[i] = c.constant
				}
				continue
			}
			if done, err := c.leaf.read(batch[k:], nc, m); err != nil && done < good {
				good, bad = done, err
			}
		}
		for i := range good {
			pos := base + start + int64(i)
			if deleted != nil && deleted.Contains(uint64(pos)) {
				continue
			}
			row := batch[i*nc : (i+1)*nc : (i+1)*nc]
			if !r.keep {
				row = append(make([]any, 0, nc), row...)
			}
			if err := fn(pos, row); err != nil {
				return err
			}
		}
		if bad != nil {
			return fmt.Errorf("row %d: %w", base+start+int64(good), bad)
		}
	}
	return nil
}

func (r *flatReader) close() {
	for _, c := range r.cols {
		if c.leaf != nil {
			c.leaf.close()
		}
	}
}

// flatLeaf reads the values of one top-level primitive leaf column chunk,
// a page at a time, from the page's typed values.
type flatLeaf struct {
	leaf   int    // column index, and name, for errors
	name   string //
	maxDef byte
	conv   func(parquet.Value) (any, error)
	// str, when set, is conv from a byte array's bytes (see asm.str): a
	// string leaf's byte arrays skip the parquet.Value.
	str func([]byte) any
	// i64, when set, is conv from an INT64 leaf's integer (see asm.i64).
	i64 func(int64) any

	pages parquet.Pages
	page  parquet.Page
	// The current page: its rows, the next one, its definition levels (nil
	// when every row has a value) and the next value of a row that has one.
	rows, row int
	defs      []byte
	val, nval int
	mode      flatMode
	i32       []int32
	ints64    []int64
	f32       []float32
	f64       []float64
	data      []byte   // byte arrays: the values, one after another
	offsets   []uint32 // byte arrays: where each starts, and the end
	size      int      // fixed-length byte arrays: the length
	dict      parquet.Dictionary
	idx       []int32 // dictionary-encoded: the indexes
	// shared are the values of a string or INT64 leaf's dictionary
	// (sharedDict, the chunk's), converted the first time a page uses
	// them: the rows that repeat an entry share its value, as runs of
	// repeatedStrings do. Those values are immutable (strings, integers,
	// timestamps); binary values and decimals, which a caller may change,
	// are converted for every row.
	sharedDict parquet.Dictionary
	shared     []any
	vals       []parquet.Value // flatValues: the page's values, by row
}

// flatMode is how a page's values are held.
type flatMode int

const (
	flatInt32 flatMode = iota
	flatInt64
	flatFloat
	flatDouble
	flatBytes
	flatFixed
	flatDict
	// flatValues holds the page's values with their levels, as parquet-go
	// reads them one by one: the pages of other kinds (booleans, INT96).
	flatValues
)

// open starts reading chunk c, turning a panic of parquet-go on a corrupt
// chunk into an error naming the column.
func (l *flatLeaf) open(c parquet.ColumnChunk) (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.pages, err = nil, Corruptf("column %d (%s): open pages: %v", l.leaf, l.name, p)
		}
	}()
	l.pages = c.Pages()
	l.rows, l.row = 0, 0
	l.sharedDict, l.shared = nil, nil
	return nil
}

// close releases the current page and closes the pages; a reader that
// panicked while decoding may panic again, which is ignored: the read
// already failed.
func (l *flatLeaf) close() {
	defer func() { _ = recover() }()
	l.release()
	if l.pages != nil {
		p := l.pages
		l.pages = nil
		p.Close()
	}
}

func (l *flatLeaf) release() {
	if l.page != nil {
		p := l.page
		l.page, l.defs, l.data, l.offsets, l.i32, l.ints64, l.f32, l.f64, l.idx, l.dict = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
		parquet.Release(p)
	}
}

// read converts the next m rows' values into dst[0], dst[stride], ...,
// dst[(m-1)*stride] (nil for a null). It returns how many it converted:
// fewer than m only with an error, that of the first row it could not
// convert. parquet-go decodes pages here and panics on some corrupt ones
// (the checks of pageChecker do not decode values); the panic becomes an
// error naming the column.
func (l *flatLeaf) read(dst []any, stride, m int) (done int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Corruptf("column %d (%s): decode pages: %v", l.leaf, l.name, p)
		}
	}()
	o := 0
	for done < m {
		if l.row == l.rows {
			if err := l.nextPage(); err != nil {
				return done, fmt.Errorf("column chunk ended early: %w", err)
			}
			continue
		}
		k := min(m-done, l.rows-l.row)
		switch {
		case l.mode == flatValues:
			for range k {
				var x any
				if v := l.vals[l.row]; v.DefinitionLevel() >= int(l.maxDef) && !v.IsNull() {
					if x, err = l.conv(v); err != nil {
						return done, err
					}
				}
				dst[o] = x
				o += stride
				l.row++
				done++
			}
		case l.defs == nil:
			for range k {
				x, err := l.value()
				if err != nil {
					return done, err
				}
				dst[o] = x
				o += stride
				l.row++
				done++
			}
		default:
			for range k {
				var x any
				if l.defs[l.row] == l.maxDef {
					if x, err = l.value(); err != nil {
						return done, err
					}
				}
				dst[o] = x
				o += stride
				l.row++
				done++
			}
		}
	}
	return done, nil
}

// value converts the page's next value.
func (l *flatLeaf) value() (any, error) {
	j := l.val
	if j >= l.nval {
		return nil, Corruptf("column %d (%s): page has %d values, its definition levels more", l.leaf, l.name, l.nval)
	}
	l.val++
	var v parquet.Value
	switch l.mode {
	case flatInt32:
		v = parquet.Int32Value(l.i32[j])
	case flatInt64:
		if l.i64 != nil {
			return l.i64(l.ints64[j]), nil
		}
		v = parquet.Int64Value(l.ints64[j])
	case flatFloat:
		v = parquet.FloatValue(l.f32[j])
	case flatDouble:
		v = parquet.DoubleValue(l.f64[j])
	case flatBytes:
		b := l.data[l.offsets[j]:l.offsets[j+1]]
		if l.str != nil {
			return l.str(b), nil
		}
		v = parquet.ByteArrayValue(b)
	case flatFixed:
		b := l.data[j*l.size : (j+1)*l.size]
		if l.str != nil {
			return l.str(b), nil
		}
		v = parquet.FixedLenByteArrayValue(b)
	case flatDict:
		i := l.idx[j]
		if uint(i) < uint(len(l.shared)) {
			if x := l.shared[i]; x != nil {
				return x, nil
			}
			x, err := l.conv(l.dict.Index(i))
			if err == nil {
				l.shared[i] = x
			}
			return x, err
		}
		v = l.dict.Index(i)
	}
	return l.conv(v)
}

// nextPage moves to the chunk's next page.
func (l *flatLeaf) nextPage() error {
	l.release()
	if l.pages == nil {
		return io.ErrUnexpectedEOF
	}
	p, err := l.pages.ReadPage()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	l.page = p
	l.row, l.val = 0, 0
	l.rows = int(p.NumValues())
	l.defs = p.DefinitionLevels()
	if len(p.RepetitionLevels()) > 0 || (l.defs == nil) != (l.maxDef == 0) || (l.defs != nil && len(l.defs) != l.rows) {
		return l.readValues()
	}
	if d := p.Dictionary(); d != nil {
		l.mode, l.dict = flatDict, d
		if (l.str != nil || l.i64 != nil) && d != l.sharedDict {
			l.sharedDict, l.shared = d, make([]any, d.Len())
		}
		data := p.Data()
		if data.Kind() != encoding.Int32 {
			return l.readValues()
		}
		l.idx = data.Int32()
		l.nval = len(l.idx)
		return nil
	}
	data := p.Data()
	switch data.Kind() {
	case encoding.Int32:
		l.i32 = typedValues(l, flatInt32, data.Int32())
	case encoding.Int64:
		l.ints64 = typedValues(l, flatInt64, data.Int64())
	case encoding.Float:
		l.f32 = typedValues(l, flatFloat, data.Float())
	case encoding.Double:
		l.f64 = typedValues(l, flatDouble, data.Double())
	case encoding.ByteArray:
		l.mode = flatBytes
		l.data, l.offsets = data.ByteArray()
		l.nval = max(len(l.offsets)-1, 0)
	case encoding.FixedLenByteArray:
		l.data, l.size = data.FixedLenByteArray()
		if l.size <= 0 {
			return l.readValues()
		}
		l.mode, l.nval = flatFixed, len(l.data)/l.size
	default:
		return l.readValues()
	}
	return nil
}

// typedValues sets l's page to hold the values vals as mode says, and
// returns them.
func typedValues[T any](l *flatLeaf, mode flatMode, vals []T) []T {
	l.mode, l.nval = mode, len(vals)
	return vals
}

// readValues reads the current page's values as parquet-go hands them
// out one by one, with their levels.
func (l *flatLeaf) readValues() error {
	l.mode = flatValues
	l.vals = l.vals[:0]
	vr := l.page.Values()
	var buf [64]parquet.Value
	for {
		n, err := vr.ReadValues(buf[:])
		l.vals = append(l.vals, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrNoProgress
		}
	}
	l.rows = len(l.vals)
	return nil
}
