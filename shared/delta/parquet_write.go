package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Sentinel errors of the data-file writer.
var (
	// ErrValueType is returned when a row value is not the Go representation
	// of its column's type (see package value), or a non-nullable column
	// holds nil: parquetfile.ErrValueType.
	ErrValueType = parquetfile.ErrValueType
	// ErrPartitionValue is returned when a row's partition column differs
	// from the partition values of the file being written.
	ErrPartitionValue = errors.New("row does not belong to the file's partition")
	// ErrWriterClosed is returned when a closed or aborted writer is used.
	ErrWriterClosed = errors.New("file writer is closed")
)

// Compression is a Parquet compression codec for data files.
type Compression string

// Supported codecs. The name appears in the file name as Spark writes it
// (part-…-c000.snappy.parquet).
const (
	CompressionSnappy Compression = "snappy"
	CompressionZstd   Compression = "zstd"
	CompressionGzip   Compression = "gzip"
	CompressionNone   Compression = "none"
)

// DefaultRowGroupBytes is the default buffered size of a row group. A row
// group is the unit a merge's copy-on-write rewrite decodes (RewriteFile
// copies the others verbatim) and what reader and writer buffer, so it is
// kept well below the 128 MiB files are rolled at.
const DefaultRowGroupBytes = 16 << 20

// DefaultRowGroupRows caps the rows of a row group (DuckDB's default row
// group size). Narrow rows reach it long before DefaultRowGroupBytes: a
// merge that touches a few keys re-encodes at most this many rows per
// touched row group, and readers prune at this granularity by key bounds.
const DefaultRowGroupRows = 122_880

// WriteOptions configure one data file.
type WriteOptions struct {
	// Schema is the table schema. Rows passed to Write carry one value per
	// field, partition columns included.
	Schema value.StructType
	// PartitionColumns are the table's partition columns (top-level names);
	// they are not stored in the file.
	PartitionColumns []string
	// PartitionValues are this file's partition values, typed as in package
	// value (nil = null), one per partition column. Every row's partition
	// columns must equal them (ErrPartitionValue otherwise).
	PartitionValues map[string]any
	// Dir is an optional directory under the table root (no URI encoding,
	// no trailing slash) that goes before the partition directories.
	Dir string
	// FileName replaces the generated "part-00000-<uuid>-c000.<codec>.parquet".
	FileName string
	// Compression defaults to snappy.
	Compression Compression
	// RowGroupBytes is the buffered (uncompressed) size at which a row group
	// is flushed; memory use is bounded by it. Default DefaultRowGroupBytes.
	RowGroupBytes int64
	// RowGroupRows is the row count at which a row group is flushed, whatever
	// its size. Default DefaultRowGroupRows.
	RowGroupRows int64
	// StatsColumns is how many leaf columns get statistics, -1 meaning
	// all; 0 leaves the choice to Configuration.
	StatsColumns int
	// Configuration is the table's properties: its
	// delta.dataSkippingStatsColumns or delta.dataSkippingNumIndexedCols
	// choose the columns with statistics as Spark's writer does
	// (statscols.go); without them, the first DefaultStatsColumns leaves.
	Configuration map[string]string
	// DataChange is copied to the add action.
	DataChange bool
	// ColumnMappingMode is the table's delta.columnMapping.mode; with "name"
	// or "id" columns, stats and partition values use physical names and
	// Parquet fields carry the column ids.
	ColumnMappingMode string
	// BloomFilterColumns are top-level primitive columns (logical names)
	// that get a Parquet split-block bloom filter in every row group, for
	// readers to skip the row groups that cannot hold a value they look
	// for (RowGroupFilter.Values). Partition columns are ignored.
	BloomFilterColumns []string
	// BloomFilterBitsPerValue sizes those filters; 0 means
	// DefaultBloomFilterBitsPerValue.
	BloomFilterBitsPerValue uint
	// PageBytes is the buffered (uncompressed) size at which a data page of
	// a column is flushed, for every column (parquet-go has no per-column
	// page size); 0 means parquet-go's 256 KiB. Small pages let a reader
	// that filters by the page index (ReadOptions.OnlyValues) read little
	// of a column; each page costs a header and an entry in each index.
	// With it set, the byte-array page bounds of BloomFilterColumns keep
	// parquetfile.LookupBoundBytes bytes.
	PageBytes int
	// ValueArrays, when set, lends WriteInOrder its arrays of values and
	// takes them back, for the next file written with it to reuse.
	ValueArrays *ValueArrays

	// withoutBloomFilters are columns of BloomFilterColumns that get no
	// filter after all: a rewrite that would otherwise re-encode the row
	// groups it copies (see RewriteOptions.CopyWithoutBloomFilters). They
	// keep the page-index bounds of BloomFilterColumns.
	withoutBloomFilters []string
}

// FileWriter streams rows into one Parquet data file of a Delta table and
// returns its add action. It buffers at most one row group in memory: the
// file is uploaded while it is written. Call Close to finish the file or
// Abort to discard it; a FileWriter is not safe for concurrent use.
type FileWriter struct {
	opts     WriteOptions
	name     string // object name relative to the table root
	partVals map[string]*string
	partIdx  []int // row positions of partition columns
	partType []value.Type
	partSer  []*string
	// partSeen is, per partition column, a value of it already found to
	// render as partSer (nil until one is).
	partSeen []any
	dataIdx  []int // row positions of data columns
	root     []*parquetfile.Node
	numLeaf  int
	// flat: every data column is a leaf (writeFlat applies).
	flat     bool
	leafVals [][]parquet.Value
	// colBatch holds the rows written since the last hand-over to
	// parquet-go (nbatch of them) column by column: whole rows of each
	// leaf column, as parquet-go's WriteRows would split them.
	colBatch [][]parquet.Value
	nbatch   int
	pw       *parquetfile.Writer
	stats    *statsCollector
	rows     int64
	rgStart  int64 // pw.Size() when the current row group started
	rgRows   int64 // w.rows when the current row group started
	closed   bool
	err      error
	// footer are the stats roots read from the footer at Close.
	footer []footerStat
}

// writeBatchRows is how many rows are handed to parquet-go at once, and
// how often the row group's size is checked. A page ends only between two
// hand-overs; the batch is in memory anyway, so a page of wide rows does
// not hold more than the batch did.
const writeBatchRows = 128

// NewFileWriter starts a data file in store, which is rooted at the table.
func NewFileWriter(ctx context.Context, store objstore.Store, opts WriteOptions) (*FileWriter, error) {
	if err := validColumnMappingMode(opts.ColumnMappingMode); err != nil {
		return nil, fmt.Errorf("new data file: %w", err)
	}
	if opts.Compression == "" {
		opts.Compression = CompressionSnappy
	}
	if opts.RowGroupBytes <= 0 {
		opts.RowGroupBytes = DefaultRowGroupBytes
	}
	if opts.RowGroupRows <= 0 {
		opts.RowGroupRows = DefaultRowGroupRows
	}
	codec, suffix, err := parquetfile.WriteCodec(string(opts.Compression))
	if err != nil {
		return nil, fmt.Errorf("new data file: %w", err)
	}
	filters, err := bloomFilterColumns(opts)
	if err != nil {
		return nil, fmt.Errorf("new data file: %w", err)
	}
	w := &FileWriter{opts: opts, partVals: map[string]*string{}}
	mode := opts.ColumnMappingMode
	isPart := map[string]bool{}
	var partKeys []string
	for _, c := range opts.PartitionColumns {
		i := opts.Schema.Index(c)
		if i < 0 {
			return nil, fmt.Errorf("new data file: partition column %q is not in the schema", c)
		}
		f := opts.Schema.Fields[i]
		v, ok := opts.PartitionValues[c]
		if !ok {
			return nil, fmt.Errorf("new data file: no value for partition column %q", c)
		}
		ser, err := FormatPartitionValue(f.Type, v)
		if err != nil {
			return nil, fmt.Errorf("new data file: partition column %q: %w", c, err)
		}
		key := PhysicalName(f, mode)
		w.partVals[key] = ser
		partKeys = append(partKeys, key)
		w.partIdx = append(w.partIdx, i)
		w.partType = append(w.partType, f.Type)
		w.partSer = append(w.partSer, ser)
		isPart[c] = true
	}
	var fields []value.Field
	for i, f := range opts.Schema.Fields {
		if !isPart[f.Name] {
			w.dataIdx = append(w.dataIdx, i)
			fields = append(fields, f)
		}
	}
	schema, err := parquetfile.NewSchema(fields, columnNaming(mode))
	if err != nil {
		return nil, fmt.Errorf("new data file: %w", err)
	}
	w.root, w.numLeaf = schema.Columns, schema.Leaves
	w.partSeen = make([]any, len(w.partIdx))
	w.flat = true
	for _, n := range w.root {
		w.flat = w.flat && n.Kind == parquetfile.LeafNode
	}
	w.leafVals = make([][]parquet.Value, w.numLeaf)
	w.colBatch = make([][]parquet.Value, w.numLeaf)
	for i := range w.colBatch {
		w.colBatch[i] = make([]parquet.Value, 0, writeBatchRows)
	}
	spec, err := writeStatsSpec(opts)
	if err != nil {
		return nil, fmt.Errorf("new data file: %w", err)
	}
	w.stats = newStatsCollector(opts.Schema, w.dataIdx, spec, mode)
	w.statsFromFooter()

	file := opts.FileName
	if file == "" {
		file = "part-00000-" + uuid.NewString() + "-c000" + suffix + ".parquet"
	}
	dir := opts.Dir
	if len(partKeys) > 0 {
		pd := partitionDir(partKeys, w.partVals)
		if dir != "" {
			dir += "/" + pd
		} else {
			dir = pd
		}
	}
	w.name = file
	if dir != "" {
		w.name = dir + "/" + file
	}

	bits := opts.BloomFilterBitsPerValue
	if bits == 0 {
		bits = DefaultBloomFilterBitsPerValue
	}
	w.pw = parquetfile.NewWriter(ctx, store, w.name, schema.Parquet, parquetfile.WriterOptions{
		Codec:     codec,
		CreatedBy: "dsdelta", Version: "1",
		PageBytes:               opts.PageBytes,
		LookupColumns:           lookupColumns(opts),
		BloomFilterColumns:      filters,
		BloomFilterBitsPerValue: bits,
	})
	return w, nil
}

// lookupColumns are the columns (names in the file) of
// opts.BloomFilterColumns, which readers look values up in: their page
// bounds are kept long (parquetfile.LookupBoundBytes).
func lookupColumns(opts WriteOptions) []string {
	var cols []string
	for _, name := range opts.BloomFilterColumns {
		if f, ok := opts.Schema.Field(name); ok {
			cols = append(cols, PhysicalName(f, opts.ColumnMappingMode))
		}
	}
	return cols
}

// Name returns the object name of the file relative to the table root.
func (w *FileWriter) Name() string { return w.name }

// Rows returns the number of rows written so far.
func (w *FileWriter) Rows() int64 { return w.rows }

// BytesWritten estimates the file size so far: bytes already flushed plus
// the uncompressed size of the buffered row group, so it over-estimates
// until Close. Use it to roll files at a target size.
func (w *FileWriter) BytesWritten() int64 {
	w.flushBatch()
	return w.pw.Size()
}

// Write appends one row: one value per schema field in schema order, in the
// Go representation of package value. The row is not retained.
func (w *FileWriter) Write(row []any) error {
	if err := w.writable(); err != nil {
		return err
	}
	if err := w.checkRow(row, w.rows); err != nil {
		return err
	}
	if w.flat {
		if err := w.writeFlat(row); err != nil {
			return err
		}
	} else {
		for i := range w.leafVals {
			w.leafVals[i] = w.leafVals[i][:0]
		}
		for k, n := range w.root {
			if err := n.Shred(w.leafVals, row[w.dataIdx[k]], 0, 0); err != nil {
				return fmt.Errorf("write %s row %d: column %q: %w", w.name, w.rows, w.opts.Schema.Fields[w.dataIdx[k]].Name, err)
			}
		}
		for i, vals := range w.leafVals {
			w.colBatch[i] = append(w.colBatch[i], vals...)
		}
	}
	w.stats.add(row)
	return w.rowWritten()
}

// inOrderMaxBytes bounds the arrays of values WriteInOrder converts a
// file's rows into: a part of a staged file holds up to 128 MiB of events
// (by their estimate), and the arrays of a wide table's part of numbers
// could be larger than its events. A variable for tests.
var inOrderMaxBytes int64 = 64 << 20

// writable is why the file takes no more rows, if it does not: it is
// closed, or an earlier write failed.
func (w *FileWriter) writable() error {
	if w.closed {
		return ErrWriterClosed
	}
	return w.err
}

// checkRow checks that row (number n of the file) has a value per column
// and the file's partition values.
func (w *FileWriter) checkRow(row []any, n int64) error {
	if len(row) != len(w.opts.Schema.Fields) {
		return fmt.Errorf("write %s row %d: %d values for %d columns", w.name, n, len(row), len(w.opts.Schema.Fields))
	}
	for k, i := range w.partIdx {
		if w.partSeen[k] != nil && partValueSame(row[i], w.partSeen[k]) {
			continue // the value this file's rows were checked to hold
		}
		ser, err := FormatPartitionValue(w.partType[k], row[i])
		if err != nil {
			return fmt.Errorf("write %s row %d: column %q: %w", w.name, n, w.opts.Schema.Fields[i].Name, err)
		}
		if !equalSer(ser, w.partSer[k]) {
			return fmt.Errorf("write %s row %d: column %q: %w", w.name, n, w.opts.Schema.Fields[i].Name, ErrPartitionValue)
		}
		w.partSeen[k] = row[i]
	}
	return nil
}

// rowWritten counts a row whose values are in the column batches, and
// hands a full batch to parquet-go, ending the row group where it is
// full.
func (w *FileWriter) rowWritten() error {
	w.nbatch++
	w.rows++
	if w.nbatch < writeBatchRows {
		return nil
	}
	if err := w.flushBatch(); err != nil {
		return err
	}
	return w.endFullRowGroup()
}

// endFullRowGroup ends the row group when it is full, by size or rows;
// the rows written are parquet-go's already.
func (w *FileWriter) endFullRowGroup() error {
	if w.pw.Size()-w.rgStart >= w.opts.RowGroupBytes || w.rows-w.rgRows >= w.opts.RowGroupRows {
		if err := w.pw.Flush(); err != nil {
			w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
			return w.err
		}
		w.rgStart, w.rgRows = w.pw.Size(), w.rows
	}
	return nil
}

// WriteInOrder writes n rows: row(order[0]), row(order[1]), ... (order is
// a permutation of 0..n-1; nil writes them as they come). Of a flat
// schema, it makes and converts the rows in index order first, each
// column's values into an array of n, and then writes the arrays in
// order. A caller whose rows' values lie in memory in index order and are
// written sorted by something else (a staged part, sorted by key) then
// reads each value where it lies, in turn, instead of jumping across its
// memory for every row; the jumps are left to the compact arrays, put in
// order one column at a time. The arrays hold n values per column, and one
// column more while they are ordered, at most inOrderMaxBytes: past that,
// and for other schemas, the rows are made and written one by one in
// order. After an error the file can only be aborted.
func (w *FileWriter) WriteInOrder(n int, order []int32, row func(i int) ([]any, error)) error {
	if !w.flat || int64(n)*int64(len(w.colBatch)+1)*int64(unsafe.Sizeof(parquet.Value{})) > inOrderMaxBytes {
		for j := range n {
			i := j
			if order != nil {
				i = int(order[j])
			}
			r, err := row(i)
			if err == nil {
				err = w.Write(r)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := w.writable(); err != nil {
		return err
	}
	cols := make([][]parquet.Value, len(w.colBatch))
	for c := range cols {
		cols[c] = w.opts.ValueArrays.get(n)
	}
	var sorted []parquet.Value // the ordering's spare array
	written := false           // every value was handed over, and cleared
	defer func() {
		for _, vals := range cols {
			if !written {
				clear(vals)
			}
			w.opts.ValueArrays.put(vals)
		}
		w.opts.ValueArrays.put(sorted) // cleared once ordering is done
	}()
	// The rows are taken a block at a time and converted a column at a
	// time: the block's values stay in the caches across its columns, and
	// each column's values are stored one after another rather than into
	// all the arrays at once for every row.
	nf := len(w.opts.Schema.Fields)
	blk := make([]any, inOrderBlock*nf)
	for i0 := 0; i0 < n; i0 += inOrderBlock {
		m := min(inOrderBlock, n-i0)
		var rowErr error
		for j := range m {
			r, err := row(i0 + j)
			if err == nil {
				err = w.checkRow(r, int64(i0+j))
			}
			if err != nil {
				m, rowErr = j, err // the rows before it are converted first
				break
			}
			copy(blk[j*nf:(j+1)*nf], r) // row may reuse its array
			w.stats.add(r)
		}
		if err := w.convertBlock(cols, blk[:m*nf], i0); err != nil {
			w.err = err
			return err
		}
		if rowErr != nil {
			w.err = rowErr
			return rowErr
		}
	}
	clear(blk)
	if order != nil {
		// Each column is put in order whole, one after the other: the
		// jumps stay within one column's array, which the caches hold,
		// rather than across all of them for every batch of rows.
		sorted = w.opts.ValueArrays.get(n)
		for c, vals := range cols {
			for j, i := range order {
				sorted[j] = vals[i]
			}
			cols[c], sorted = sorted, vals
		}
		clear(sorted)
	}
	// A batch at a time, column by column, as rowWritten hands batches
	// over (so that row groups end where rows written one by one would
	// end them). A whole batch goes to parquet-go straight from the
	// arrays, which hold its values in order already; a batch begun by
	// Write, or left for Write to finish, is made up in the column
	// batches.
	cws := w.pw.ColumnWriters()
	for j := 0; j < n; {
		m := min(n-j, writeBatchRows-w.nbatch)
		if m < writeBatchRows {
			for c, vals := range cols {
				w.colBatch[c] = append(w.colBatch[c], vals[j:j+m]...)
				clear(vals[j : j+m])
			}
			// rowWritten counts the batch's last row, and flushes.
			w.nbatch += m - 1
			w.rows += int64(m - 1)
			if err := w.rowWritten(); err != nil {
				return err
			}
			j += m
			continue
		}
		for c, vals := range cols {
			if _, err := cws[c].WriteRowValues(vals[j : j+m]); err != nil {
				w.err = fmt.Errorf("write %s: %w", w.name, err)
				return w.err
			}
			clear(vals[j : j+m]) // let go of the values' bytes
		}
		w.rows += int64(m)
		j += m
		if err := w.endFullRowGroup(); err != nil {
			return err
		}
	}
	written = true
	return nil
}

// ValueArrays lends FileWriter.WriteInOrder the arrays it converts a
// file's rows into (a value per row and column: 24 MB for a staged part of
// 50,000 rows and 20 columns) and takes them back, cleared, for the next
// file's. Made for each file, such arrays came as fresh pages: under a
// memory limit the runtime returns freed ones to the system, so each part
// faulted its arrays in and zeroed them again. Staging a backfill of 20
// files two at a time, the arrays taken again cut staging's CPU time by a
// tenth. A sync.Pool holds them: the collector drops those no file asks
// for again, and Drop lets them all go at once. The zero value is ready;
// safe for concurrent use.
type ValueArrays struct {
	pool atomic.Pointer[sync.Pool]
	// given, when set (by tests), sees each array given back, before the
	// pool takes it: what a pool keeps is not the pool's to promise.
	given func([]parquet.Value)
}

// get returns an array of n zero values; a nil *ValueArrays makes one.
func (a *ValueArrays) get(n int) []parquet.Value {
	if a != nil {
		if p, ok := a.current().Get().(*[]parquet.Value); ok && cap(*p) >= n {
			return (*p)[:n]
		}
	}
	return make([]parquet.Value, n)
}

// put takes back an array of zero values.
func (a *ValueArrays) put(vals []parquet.Value) {
	if a != nil && cap(vals) > 0 {
		if a.given != nil {
			a.given(vals)
		}
		vals = vals[:0]
		a.current().Put(&vals)
	}
}

// Drop lets go of the arrays held, for the process to use the memory
// otherwise (a merge after the files are staged); arrays lent meanwhile
// come back to a new pool.
func (a *ValueArrays) Drop() { a.pool.Store(new(sync.Pool)) }

// current is the pool arrays are taken from and given back to.
func (a *ValueArrays) current() *sync.Pool {
	for {
		if p := a.pool.Load(); p != nil {
			return p
		}
		a.pool.CompareAndSwap(nil, new(sync.Pool))
	}
}

// inOrderBlock is how many rows WriteInOrder converts a column at a time.
const inOrderBlock = 256

// convertBlock converts the rows in blk (a row of len(Schema.Fields) values
// after another), rows i0, i0+1, ... of a WriteInOrder, into their places
// in the column arrays, a column at a time. Of several values that do not
// convert, the error is that of the first in row order, as converting row
// after row reports it.
func (w *FileWriter) convertBlock(cols [][]parquet.Value, blk []any, i0 int) error {
	nf := len(w.opts.Schema.Fields)
	m := len(blk) / max(nf, 1)
	for k, nd := range w.root {
		col := cols[nd.Leaf][i0 : i0+m]
		di := w.dataIdx[k]
		for j := range col {
			if err := w.flatValue(&col[j], k, nd, blk[j*nf+di], int64(i0+j)); err != nil {
				// The block again, row after row, for the first.
				var v parquet.Value
				for j := range m {
					for k, nd := range w.root {
						if err := w.flatValue(&v, k, nd, blk[j*nf+w.dataIdx[k]], int64(i0+j)); err != nil {
							return err
						}
					}
				}
				return err
			}
		}
	}
	return nil
}

// writeFlat is Write's shredding for a schema of leaves only: each value
// goes straight to its column's batch, one value per row and column, so a
// row that fails part-way is taken back by cutting every column to the
// rows before it.
func (w *FileWriter) writeFlat(row []any) error {
	for k, n := range w.root {
		w.colBatch[n.Leaf] = append(w.colBatch[n.Leaf], parquet.Value{})
		batch := w.colBatch[n.Leaf]
		if err := w.flatValue(&batch[len(batch)-1], k, n, row[w.dataIdx[k]], w.rows); err != nil {
			w.unwriteFlat()
			return err
		}
	}
	return nil
}

// flatValue converts v, the value of row r's k-th column (leaf n), to its
// Parquet value in dst. The levels are set in place: a Value is copied
// once, not through Level's returns.
func (w *FileWriter) flatValue(dst *parquet.Value, k int, n *parquetfile.Node, v any, r int64) error {
	if v == nil {
		if !n.Optional {
			return fmt.Errorf("write %s row %d: column %q: %w: null in non-nullable %v", w.name, r, w.opts.Schema.Fields[w.dataIdx[k]].Name, ErrValueType, n.Type)
		}
		*dst = parquet.Value{}
		dst.SetColumnIndex(n.Leaf)
		return nil
	}
	pv, err := n.Convert(v)
	if err != nil {
		return fmt.Errorf("write %s row %d: column %q: %w", w.name, r, w.opts.Schema.Fields[w.dataIdx[k]].Name, err)
	}
	*dst = pv
	dst.SetDefinitionLevel(n.DefLevel)
	dst.SetColumnIndex(n.Leaf)
	return nil
}

// unwriteFlat drops the values of a row writeFlat did not finish.
func (w *FileWriter) unwriteFlat() {
	for i := range w.colBatch {
		if len(w.colBatch[i]) > w.nbatch {
			clear(w.colBatch[i][w.nbatch:])
			w.colBatch[i] = w.colBatch[i][:w.nbatch]
		}
	}
}

// partValueSame tells whether a partition value is one already checked,
// without rendering it: values that render alike exactly when they are
// equal compare with ==; anything else (floats, whose zeros differ in
// sign, a decimal's *big.Int, bytes) is rendered again.
func partValueSame(v, seen any) bool {
	switch v.(type) {
	case string, bool, int8, int16, int32, int64, value.Days, value.Micros, value.LocalMicros:
		return v == seen
	}
	return false
}

// parquetSchema returns the Parquet schema of the file being written.
func (w *FileWriter) parquetSchema() *parquet.Schema { return w.pw.Schema() }

// flushedForRowGroup readies the writer for a row group written whole: the
// rows written one by one so far are handed to parquet-go first.
func (w *FileWriter) flushedForRowGroup() error {
	if err := w.writable(); err != nil {
		return err
	}
	return w.flushBatch()
}

// writeRowGroup appends every row of rg, a row group of another Parquet
// file whose schema equals this file's (parquet.EqualNodes), as a row group
// of its own. parquet-go splices its compressed pages verbatim when the
// source's codec, encodings and page version match this writer's, and
// re-encodes it otherwise. The rows are not seen, so leaves summarises them
// for the statistics, one entry per leaf column.
func (w *FileWriter) writeRowGroup(rg parquet.RowGroup, leaves []leafSummary) error {
	if err := w.copiesRowGroups(); err != nil {
		return err
	}
	if err := w.flushedForRowGroup(); err != nil {
		return err
	}
	if err := w.pw.WriteRowGroup(rg); err != nil {
		w.err = fmt.Errorf("write %s: copy row group: %w", w.name, err)
		return w.err
	}
	n := rg.NumRows()
	w.stats.addSummary(n, leaves)
	w.rows += n
	w.rgStart, w.rgRows = w.pw.Size(), w.rows
	return nil
}

// copiesRowGroups readies the statistics for a copied row group, which
// brings its own summary: the file's statistics are taken row by row from
// now on (statsFromRows). A file that has read them from its footer for
// rows already written cannot take that summary: the caller was to call
// statsFromRows first.
func (w *FileWriter) copiesRowGroups() error {
	if len(w.footer) == 0 {
		return nil
	}
	if w.rows > 0 || w.nbatch > 0 {
		w.err = fmt.Errorf("write %s: a row group copied after rows whose statistics come from the footer", w.name)
		return w.err
	}
	w.statsFromRows()
	return nil
}

// writeRowGroupKept appends the rows of rg, a row group of another Parquet
// file whose schema equals this file's and whose leaves are flat (one value
// per row), that dropped does not mark, as a row group of its own. It copies
// column by column: each chunk's values are decoded and written to this
// file's column writers without assembling rows, so a kept row costs a
// decode and an encode of its values and no Go value per field. bounds
// turns the kept values' extremes, taken in Delta's order, into the
// statistics (see exactbounds.go).
func (w *FileWriter) writeRowGroupKept(rg parquet.RowGroup, dropped []bool, bounds *chunkBounds) error {
	if err := w.copiesRowGroups(); err != nil {
		return err
	}
	if err := w.flushedForRowGroup(); err != nil {
		return err
	}
	if w.rows > w.rgRows {
		// Rows written one by one form a row group of their own.
		if err := w.pw.Flush(); err != nil {
			w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
			return w.err
		}
	}
	chunks := rg.ColumnChunks()
	cols := w.pw.ColumnWriters()
	if len(chunks) != len(cols) || len(chunks) != len(bounds.types) {
		return fmt.Errorf("write %s: row group has %d column chunks, file has %d columns", w.name, len(chunks), len(cols))
	}
	if int64(len(dropped)) != rg.NumRows() {
		return fmt.Errorf("write %s: drop mask of %d rows for a row group of %d", w.name, len(dropped), rg.NumRows())
	}
	// Columns are independent until the row group is flushed: each has its
	// own pages to read and its own column writer (parquet-go's shared
	// buffers are pools), so they are copied on all cores.
	leaves := make([]leafSummary, len(chunks))
	counts := make([]int64, len(chunks))
	errs := make([]error, len(chunks))
	next := make(chan int, len(chunks))
	for k := range chunks {
		next <- k
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(chunks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]parquet.Value, 4096)
			out := make([]parquet.Value, 0, len(buf))
			for k := range next {
				counts[k], errs[k] = copyKeptValuesSafely(chunks[k], cols[k], dropped, bounds, k, buf, out, &leaves[k])
			}
		}()
	}
	wg.Wait()
	var kept int64
	for k, err := range errs {
		if err != nil {
			w.err = fmt.Errorf("write %s: column %d: %w", w.name, k, err)
			return w.err
		}
		if k > 0 && counts[k] != kept {
			w.err = fmt.Errorf("write %s: column %d has %d kept values, column 0 has %d", w.name, k, counts[k], kept)
			return w.err
		}
		kept = counts[k]
	}
	if err := w.pw.Flush(); err != nil {
		w.err = fmt.Errorf("write %s: flush row group: %w", w.name, err)
		return w.err
	}
	w.stats.addSummary(kept, leaves)
	w.rows += kept
	w.rgStart, w.rgRows = w.pw.Size(), w.rows
	return nil
}

// copyKeptValuesSafely is copyKeptValues with a panic of parquet-go (on a
// corrupt page it decodes) turned into the column's error: a panic on this
// worker goroutine would end the process.
func copyKeptValuesSafely(c parquet.ColumnChunk, cw *parquet.ColumnWriter, dropped []bool, bounds *chunkBounds, k int, buf, out []parquet.Value, s *leafSummary) (n int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, parquetfile.Corruptf("copy values: %v", p)
		}
	}()
	return copyKeptValues(c, cw, dropped, bounds, k, buf, out, s)
}

// copyKeptValues writes the values of the rows of one flat column chunk
// that dropped does not mark to cw and summarises them in s. It returns the number of values
// written.
func copyKeptValues(c parquet.ColumnChunk, cw *parquet.ColumnWriter, dropped []bool, bounds *chunkBounds, k int, buf, out []parquet.Value, s *leafSummary) (int64, error) {
	minMax := hasMinMax(bounds.types[k])
	ext := bounds.extremes(k, c.Type())
	var row, written int64
	pages := c.Pages()
	defer pages.Close()
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read page: %w", err)
		}
		vr := p.Values()
		for {
			n, rerr := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				if row >= int64(len(dropped)) {
					parquet.Release(p)
					return 0, fmt.Errorf("more values than the row group's %d rows: not a flat column", len(dropped))
				}
				if !dropped[row] {
					if v.IsNull() {
						s.nulls++
					} else if minMax {
						ext.Add(v)
					}
					out = append(out, v)
				}
				row++
			}
			if len(out) > 0 {
				if _, err := cw.WriteRowValues(out); err != nil {
					parquet.Release(p)
					return 0, fmt.Errorf("write values: %w", err)
				}
				written += int64(len(out))
				out = out[:0]
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				parquet.Release(p)
				return 0, fmt.Errorf("read values: %w", rerr)
			}
		}
		ext.EndPage() // the extremes' values point into the page
		parquet.Release(p)
	}
	if row != int64(len(dropped)) {
		return 0, fmt.Errorf("%d values for a row group of %d rows", row, len(dropped))
	}
	if s.nulls == written || !minMax {
		return written, nil
	}
	return written, bounds.setBounds(k, &ext, s)
}

func equalSer(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (w *FileWriter) flushBatch() error {
	if w.nbatch == 0 || w.err != nil {
		return w.err
	}
	// Each column writer takes the batch's values of its leaf, whole rows
	// at a time, which is what parquet-go's WriteRows does after taking
	// every row apart again: rows are never assembled.
	for i, cw := range w.pw.ColumnWriters() {
		if _, err := cw.WriteRowValues(w.colBatch[i]); err != nil {
			w.err = fmt.Errorf("write %s: %w", w.name, err)
			return w.err
		}
		clear(w.colBatch[i]) // let go of the values' bytes
		w.colBatch[i] = w.colBatch[i][:0]
	}
	w.nbatch = 0
	return nil
}

// Close finishes the file and returns its add action (path URI-encoded and
// relative to the table root, size, modification time, partition values and
// stats).
func (w *FileWriter) Close(ctx context.Context) (Add, error) {
	if w.closed {
		return Add{}, ErrWriterClosed
	}
	w.closed = true
	err := w.flushBatch()
	var md *format.FileMetaData
	if err == nil {
		if md, err = w.pw.Finish(); err != nil {
			err = fmt.Errorf("write %s: %w", w.name, err)
		}
	}
	if err == nil && len(w.footer) > 0 {
		if err = w.addFooterStats(md); err != nil {
			err = fmt.Errorf("write %s: statistics: %w", w.name, err)
		}
	}
	if err != nil {
		w.pw.Abort(err)
		return Add{}, err
	}
	info, err := w.pw.Commit(ctx)
	if err != nil {
		return Add{}, fmt.Errorf("write %s: %w", w.name, err)
	}
	mod := info.Updated
	if mod.IsZero() {
		mod = time.Now()
	}
	return Add{
		Path:             encodeAddPath(w.name),
		PartitionValues:  w.partVals,
		Size:             info.Size,
		ModificationTime: mod.UnixMilli(),
		DataChange:       w.opts.DataChange,
		Stats:            w.stats.json(),
	}, nil
}

// Abort discards the file: the upload is cancelled so no object appears.
func (w *FileWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.pw.Abort(nil)
}
