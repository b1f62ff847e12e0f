package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// ErrUnknownColumn is returned when ReadOptions.Columns names a column the
// table schema does not have.
var ErrUnknownColumn = errors.New("unknown column")

// ErrSchemaMismatch is returned when a data file's Parquet schema cannot
// hold the table schema's type for a column: parquetfile.ErrSchemaMismatch.
var ErrSchemaMismatch = parquetfile.ErrSchemaMismatch

// ReadOptions select what ReadFile returns.
type ReadOptions struct {
	// Columns projects the rows onto these top-level columns (logical
	// names), in this order; nil means every column of the table schema.
	Columns []string
	// RowGroupFilter, when set, skips the Parquet row groups whose footer
	// bounds of its column cannot hold a wanted row: their pages are not
	// read and none of their rows is returned. Its Column is the logical
	// name of a top-level column of the table schema; a partition
	// column's row groups are all kept.
	RowGroupFilter *RowGroupFilter
	// OnlyValues returns only the rows whose RowGroupFilter.Column (one of
	// Columns) equals one of RowGroupFilter.Values, and reads through the
	// Parquet page index where a file has one (see
	// parquetfile.ReadSpec.OnlyValues): of that column only the pages
	// whose bounds can hold a value, of the other columns only the pages
	// of the rows it matched. It applies to byte, short, integer, long,
	// date, timestamp and string columns that are not partition columns,
	// with Values of the column's Go type; otherwise every row is
	// returned, as without it.
	OnlyValues bool
	// KeepRows says that the caller keeps most of the rows it is handed,
	// whole, as a merge keeps a staged part's (see
	// parquetfile.ReadSpec.KeepRows). A block stays alive while any value
	// cut from it does, so a caller that keeps a few values of many rows
	// leaves it unset.
	KeepRows bool
	// FromRow skips the rows before this physical position (see
	// ReadFileAt): the row groups that end at or before it are not read,
	// and rows before it in a row group that is read are not returned. A
	// caller that reads a sorted file in ranges, a row group past the
	// range's end at a time, starts the next range where the last one
	// stopped decoding.
	FromRow int64
	// Opened, when set, is the data file as OpenFile opened it: its
	// footer is not read and checked again. A caller that reads a file
	// several times (a merge reads a staged part once per key-range step)
	// opens it once. It must be the add's file, and is read by one read at
	// a time.
	Opened *OpenedFile

	// assemble reads every row through the generic record assembly, even
	// of a flat schema (parquetfile.ReadSpec.Assemble): for tests
	// comparing the two.
	assemble bool
}

// RowGroupFilter selects Parquet row groups by the bounds of one column
// recorded in the file footer's column-chunk statistics, and by its bloom
// filters (see WriteOptions.BloomFilterColumns); its Column is the logical
// name of a top-level column of the table schema, and a partition column
// is never filtered. See parquetfile.RowGroupFilter.
type RowGroupFilter = parquetfile.RowGroupFilter

// ReadFile streams the logical rows of one data file of the table described
// by md: one value per selected column, in the Go representation of package
// value. Columns are matched by name (by physical name or field id under
// column mapping); columns missing from the file read as null; partition
// columns come from add.partitionValues; rows marked in the file's deletion
// vector are skipped. It reads one row group at a time, fetching only the
// selected columns, and nothing of a row group opts.RowGroupFilter rejects.
// fn may keep the row; returning an error stops the read with that error.
func ReadFile(ctx context.Context, store objstore.Store, md Metadata, add Add, opts ReadOptions, fn func(row []any) error) error {
	return ReadFileAt(ctx, store, md, add, opts, func(_ int64, row []any) error { return fn(row) })
}

// OpenedFile is a data file opened for several reads (ReadOptions.Opened).
type OpenedFile struct {
	name string
	ra   *parquetfile.File
}

// OpenFile opens add's data file in store: reads and checks its footer.
func OpenFile(ctx context.Context, store objstore.Store, add Add) (*OpenedFile, error) {
	name, err := decodeAddPath(add.Path)
	if err != nil {
		return nil, err
	}
	ra, err := parquetfile.Open(ctx, store, name, add.Size)
	if err != nil {
		return nil, fmt.Errorf("read data file %s: %w", name, err)
	}
	ra.DropBuffer() // the footer's read buffer (see readFile)
	return &OpenedFile{name: name, ra: ra}, nil
}

// ReadFileAt is ReadFile that also tells fn each row's position: its
// 0-based physical index in the Parquet file, the row index a deletion
// vector marks (PROTOCOL.md "Deletion Vectors"). Rows already deleted by
// add's vector and the rows of row groups opts.RowGroupFilter skips are
// not returned but still counted.
func ReadFileAt(ctx context.Context, store objstore.Store, md Metadata, add Add, opts ReadOptions, fn func(pos int64, row []any) error) error {
	name, err := decodeAddPath(add.Path)
	if err != nil {
		return err
	}
	if err := readFile(ctx, store, name, md, add, opts, fn); err != nil {
		return fmt.Errorf("read data file %s: %w", name, err)
	}
	return nil
}

// readFile resolves what the read of add's data file takes (the table's
// columns and how column mapping names them, partition values, the
// deletion vector, the row group filter's column) and reads it through
// parquetfile.Read.
func readFile(ctx context.Context, store objstore.Store, name string, md Metadata, add Add, opts ReadOptions, fn func(pos int64, row []any) error) error {
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return err
	}
	mode := ColumnMappingMode(md)
	cols, err := projection(schema, opts.Columns)
	if err != nil {
		return err
	}
	isPart := map[string]bool{}
	for _, c := range md.PartitionColumns {
		isPart[c] = true
	}
	spec := parquetfile.ReadSpec{Naming: readNaming(mode), KeepRows: opts.KeepRows, FromRow: opts.FromRow, Assemble: opts.assemble}
	if add.DeletionVector != nil {
		if spec.Deleted, err = loadDeletionVector(ctx, store, *add.DeletionVector); err != nil {
			return err
		}
	}

	ra, err := openForRead(ctx, store, name, add.Size, opts.Opened)
	if err != nil {
		return err
	}
	if opts.Opened != nil {
		// A file held open between reads holds no read buffer: a merge
		// holds every part of its batch open.
		defer ra.DropBuffer()
	}
	if spec.Fields, spec.Constants, err = outputColumns(schema, cols, isPart, mode, add.PartitionValues); err != nil {
		return err
	}
	if flt := opts.RowGroupFilter; flt != nil {
		fld, ok := schema.Field(flt.Column)
		if !ok && (flt.Keep != nil || len(flt.Values) > 0) {
			return fmt.Errorf("row group filter: %w %q", ErrUnknownColumn, flt.Column)
		}
		if opts.OnlyValues && !slices.ContainsFunc(cols, func(i int) bool { return schema.Fields[i].Name == flt.Column }) {
			return fmt.Errorf("only values: column %q is not among the columns read", flt.Column)
		}
		if ok && !isPart[fld.Name] {
			spec.Filter, spec.FilterField, spec.OnlyValues = flt, fld, opts.OnlyValues
		}
	}
	return parquetfile.Read(ctx, ra, spec, fn)
}

// outputColumns returns the fields of the output columns cols of schema,
// and the values of the partition columns among them (from partVals, by
// output column).
func outputColumns(schema value.StructType, cols []int, isPart map[string]bool, mode string, partVals map[string]*string) ([]value.Field, map[int]any, error) {
	fields := make([]value.Field, len(cols))
	var consts map[int]any
	for k, i := range cols {
		fld := schema.Fields[i]
		fields[k] = fld
		if !isPart[fld.Name] {
			continue
		}
		raw, ok := partVals[PhysicalName(fld, mode)]
		if !ok {
			raw = partVals[fld.Name]
		}
		v, err := ParsePartitionValue(fld.Type, raw)
		if err != nil {
			return nil, nil, fmt.Errorf("partition column %q: %w", fld.Name, err)
		}
		if consts == nil {
			consts = map[int]any{}
		}
		consts[k] = v
	}
	return fields, consts, nil
}

// projection returns the positions in schema of the columns names (every
// column when names is nil).
func projection(schema value.StructType, names []string) ([]int, error) {
	cols := make([]int, 0, len(schema.Fields))
	if names == nil {
		for i := range schema.Fields {
			cols = append(cols, i)
		}
		return cols, nil
	}
	for _, c := range names {
		i := schema.Index(c)
		if i < 0 {
			return nil, fmt.Errorf("%w %q", ErrUnknownColumn, c)
		}
		cols = append(cols, i)
	}
	return cols, nil
}

// openForRead returns the data file name as opened (the read's context
// set), or opens it.
func openForRead(ctx context.Context, store objstore.Store, name string, size int64, opened *OpenedFile) (*parquetfile.File, error) {
	if opened == nil {
		return parquetfile.Open(ctx, store, name, size)
	}
	if opened.name != name {
		return nil, fmt.Errorf("read with the opened file %s", opened.name)
	}
	opened.ra.SetContext(ctx)
	return opened.ra, nil
}

// readNaming finds the Parquet field of a schema field under column
// mapping mode mode: by field id in id mode, then by (physical) name,
// then by name ignoring case as Spark does (parquetfile.TreeNode.Child).
func readNaming(mode string) parquetfile.Naming {
	return func(f value.Field) (string, int) {
		id := 0
		if mode == ColumnMappingID {
			id = int(columnID(f))
		}
		return PhysicalName(f, mode), id
	}
}

// childField finds the Parquet field of p holding schema field f under
// column mapping mode mode (see readNaming).
func childField(p *parquetfile.TreeNode, f value.Field, mode string) *parquetfile.TreeNode {
	return p.Child(readNaming(mode)(f))
}

// FileRowCount returns the logical rows of a data file: its numRecords stat
// when present, else the row count in its Parquet footer (one ranged read),
// minus the rows its deletion vector marks.
func FileRowCount(ctx context.Context, store objstore.Store, add Add) (int64, error) {
	var dvRows int64
	if add.DeletionVector != nil {
		dvRows = add.DeletionVector.Cardinality
	}
	if st, err := ParseStats(add.Stats); err == nil && strings.Contains(add.Stats, `"numRecords"`) {
		return st.NumRecords - dvRows, nil
	}
	name, err := decodeAddPath(add.Path)
	if err != nil {
		return 0, err
	}
	f, err := parquetfile.Open(ctx, store, name, add.Size)
	if err != nil {
		return 0, fmt.Errorf("row count of %s: %w", name, err)
	}
	return f.Parquet().NumRows() - dvRows, nil
}
