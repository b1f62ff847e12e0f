package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
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
	// ErrWriterClosed is returned when a closed or aborted writer is used:
	// parquetfile.ErrWriterClosed.
	ErrWriterClosed = parquetfile.ErrWriterClosed
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
	// rw converts, batches and writes the rows: the file's Parquet.
	rw    *parquetfile.RowWriter
	stats *statsCollector
	// footer are the stats roots read from the footer at Close.
	footer []footerStat
}

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
	w.root = schema.Columns
	w.partSeen = make([]any, len(w.partIdx))
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
	w.rw = parquetfile.NewRowWriter(ctx, store, w.name, schema, parquetfile.RowWriterOptions{
		WriterOptions: parquetfile.WriterOptions{
			Codec:     codec,
			CreatedBy: "dsdelta", Version: "1",
			PageBytes:               opts.PageBytes,
			LookupColumns:           lookupColumns(opts),
			BloomFilterColumns:      filters,
			BloomFilterBitsPerValue: bits,
		},
		Fields:        opts.Schema.Fields,
		Columns:       w.dataIdx,
		RowGroupBytes: opts.RowGroupBytes,
		RowGroupRows:  opts.RowGroupRows,
		ValueArrays:   opts.ValueArrays,
		Check:         w.checkRow,
		Seen:          w.stats.add,
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
func (w *FileWriter) Rows() int64 { return w.rw.Rows() }

// BytesWritten estimates the file size so far: bytes already flushed plus
// the uncompressed size of the buffered row group, so it over-estimates
// until Close. Use it to roll files at a target size.
func (w *FileWriter) BytesWritten() int64 { return w.rw.Size() }

// Write appends one row: one value per schema field in schema order, in the
// Go representation of package value. The row is not retained.
func (w *FileWriter) Write(row []any) error { return w.rw.Write(row) }

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

// WriteInOrder writes n rows: row(order[0]), row(order[1]), ... (order is
// a permutation of 0..n-1; nil writes them as they come). Of a flat
// schema, it makes and converts the rows in index order first, and writes
// their values in order after (parquetfile.RowWriter.WriteInOrder): a
// caller whose rows' values lie in memory in index order and are written
// sorted by something else (a staged part, sorted by key) reads each
// value where it lies, in turn. After an error the file can only be
// aborted.
func (w *FileWriter) WriteInOrder(n int, order []int32, row func(i int) ([]any, error)) error {
	return w.rw.WriteInOrder(n, order, row)
}

// ValueArrays lends FileWriter.WriteInOrder the arrays it converts a
// file's rows into and takes them back (see parquetfile.ValueArrays).
type ValueArrays = parquetfile.ValueArrays

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
func (w *FileWriter) parquetSchema() *parquet.Schema { return w.rw.Schema() }

// writeRowGroup appends every row of rg, a row group of another Parquet
// file whose schema equals this file's (parquet.EqualNodes), as a row group
// of its own (parquetfile.RowWriter.WriteRowGroup). The rows are not seen,
// so leaves summarises them for the statistics, one entry per leaf column.
func (w *FileWriter) writeRowGroup(rg parquet.RowGroup, leaves []leafSummary) error {
	if err := w.copiesRowGroups(); err != nil {
		return err
	}
	if err := w.rw.WriteRowGroup(rg); err != nil {
		return err
	}
	w.stats.addSummary(rg.NumRows(), leaves)
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
	if w.rw.Rows() > 0 {
		return w.rw.Fail(fmt.Errorf("write %s: a row group copied after rows whose statistics come from the footer", w.name))
	}
	w.statsFromRows()
	return nil
}

// writeRowGroupKept appends the rows of rg, a row group of another Parquet
// file whose schema equals this file's and whose leaves are flat (one value
// per row), that dropped does not mark, as a row group of its own
// (parquetfile.RowWriter.WriteRowGroupKept: column by column, without
// assembling rows). bounds turns the kept values' extremes, taken in
// Delta's order, into the statistics (see exactbounds.go).
func (w *FileWriter) writeRowGroupKept(rg parquet.RowGroup, dropped []bool, bounds *chunkBounds) error {
	if err := w.copiesRowGroups(); err != nil {
		return err
	}
	leaves := make([]leafSummary, len(bounds.kept))
	kept, err := w.rw.WriteRowGroupKept(rg, dropped, bounds.kept, func(k int, v *parquetfile.KeptValues) error {
		s := &leaves[k]
		s.nulls = v.Nulls
		if s.nulls == v.Values || v.Extremes == nil {
			return nil
		}
		return bounds.setBounds(k, v.Extremes, s)
	})
	if err != nil {
		return err
	}
	w.stats.addSummary(kept, leaves)
	return nil
}

func equalSer(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Close finishes the file and returns its add action (path URI-encoded and
// relative to the table root, size, modification time, partition values and
// stats).
func (w *FileWriter) Close(ctx context.Context) (Add, error) {
	if w.rw.Closed() {
		return Add{}, ErrWriterClosed
	}
	md, err := w.rw.Finish()
	if err == nil && len(w.footer) > 0 {
		if err = w.addFooterStats(md); err != nil {
			err = fmt.Errorf("write %s: statistics: %w", w.name, err)
		}
	}
	if err != nil {
		w.rw.Abort(err)
		return Add{}, err
	}
	info, err := w.rw.Commit(ctx)
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
	if w.rw.Closed() {
		return
	}
	w.rw.Abort(nil)
}
