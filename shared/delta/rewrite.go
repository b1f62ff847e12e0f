package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// RewriteOptions configure RewriteFile.
type RewriteOptions struct {
	// Write configures the output files. Write.Schema is the schema the rows
	// are written with and Write.PartitionColumns must be the table's;
	// Write.PartitionValues is ignored (the source file's are kept).
	Write WriteOptions
	// TargetFileBytes rolls the output into a new file once a file reaches
	// it; 0 or less writes a single file.
	TargetFileBytes int64
	// Keys name the columns of Write.Schema whose values Drop receives.
	Keys []string
	// Drop reports whether the row with these key values (one per Keys
	// entry, in the Go representation of package value) is left out. It
	// must not keep the slice.
	Drop func(key []any) bool
	// DropRows are physical row positions (the indexes a deletion vector
	// marks) of rows left out besides those Drop reports: a merge that
	// replaces some rows of a key and keeps others names them by position.
	// With Drop set, RowGroupFilter must keep the row groups that hold
	// them; without Drop no key is read, and the row groups that hold
	// none are copied verbatim whatever RowGroupFilter says.
	DropRows *roaring64.Bitmap
	// Conform maps a row read with the table metadata's schema onto
	// Write.Schema; nil when no mapping is needed. Row groups copied
	// verbatim are not conformed: that path requires both schemas to be
	// equal.
	Conform func(row []any) []any
	// RowGroupFilter, when set, tells which row groups can hold a dropped
	// row: a row group it rejects (see RowGroupFilter for when bounds are
	// used) is copied verbatim without reading its key columns. Keep must
	// return true for any range that can hold a key Drop reports. Files
	// read row by row ignore it.
	RowGroupFilter *RowGroupFilter
	// CopyWithoutBloomFilters leaves a filter of Write.BloomFilterColumns
	// out of the output when a row group the rewrite copies verbatim lacks
	// it (a file written before its table's files had filters): parquet-go
	// splices a chunk only when it carries the filter the writer would
	// build, and re-encodes every column of the row group otherwise, which
	// makes a clustered merge into such a file several times slower. The
	// output then has no filter, as its source had none; readers probe the
	// files that have one. A merge sets it; compaction, which is where a
	// table's files gain their filters, does not.
	CopyWithoutBloomFilters bool
}

// RewriteResult is what RewriteFile wrote.
type RewriteResult struct {
	// Adds are the files written, none when every row was dropped.
	Adds []Add
	// Rows kept and Dropped rows (those Drop reported).
	Rows, Dropped int64
	// Deleted counts the rows the source's deletion vector had deleted
	// already: they are left out too, and Drop never sees them. Rows,
	// Dropped and Deleted add up to the source's physical rows.
	Deleted int64
	// RowGroupsCopied counts source row groups appended to the output
	// without decoding their rows (no row of them was dropped or deleted);
	// RowGroupsDecoded counts those read row by row. A file rewritten
	// without the copy path (schema change, nested columns, column
	// mapping, a file not written by dsdelta) counts none of either.
	RowGroupsCopied, RowGroupsDecoded int
	// Reencoded counts the kept rows that were decoded and written again
	// (all of them on the row path, those of decoded row groups on the
	// row-group path): the work a rewrite does beyond copying bytes.
	Reencoded int64
	// RowGroupsNotCopied counts the row groups that would have been
	// copied but for metadata that must not be copied: a malformed page
	// index (parquet-go's for a decimal of more than 18 digits with a page
	// of nulls, or a damaged one), or such a decimal's chunk statistics
	// with parquet-go's unsigned bounds (see parquetfile/decimalindex.go and
	// chunkBounds.unsignedDecimalBounds). Their pages, checked, were
	// decoded and written anew, with metadata of their own.
	// RowGroupsDecoded counts them too.
	RowGroupsNotCopied int
}

// dsdeltaCreatedBy prefixes the created_by of the Parquet files FileWriter
// writes. Only such files are copied verbatim: their footers are known to
// carry exact null counts and untruncated chunk bounds.
const dsdeltaCreatedBy = "dsdelta"

// RewriteFile copies the rows of one data file of the table described by md
// into new data files, leaving out the rows whose key values opts.Drop
// reports — the copy-on-write step of a merge. Its cost follows the rows
// dropped, not the file: a Parquet row group of the source with no dropped
// row is appended to the output as is (only its key columns are read), and
// parquet-go splices its compressed pages verbatim; the other row groups are
// decoded and their kept rows re-encoded. Files that cannot be copied that
// way (deletion vector, column mapping, nested columns, a schema that
// differs from Write.Schema, a file not written by dsdelta) are read row by
// row as ReadFile does. Memory holds about one row group of the source and
// one of the output. The caller removes the source file.
func RewriteFile(ctx context.Context, store objstore.Store, md Metadata, add Add, opts RewriteOptions) (RewriteResult, error) {
	name, err := decodeAddPath(add.Path)
	if err != nil {
		return RewriteResult{}, fmt.Errorf("rewrite data file %s: %w", add.Path, err)
	}
	keyPos := make([]int, len(opts.Keys))
	for i, k := range opts.Keys {
		if keyPos[i] = opts.Write.Schema.Index(k); keyPos[i] < 0 {
			return RewriteResult{}, fmt.Errorf("rewrite data file %s: key %w %q", name, ErrUnknownColumn, k)
		}
	}
	// Without Drop, the dropped rows are known by position alone: no key
	// is read.
	byPosition := opts.Drop == nil
	if opts.Drop == nil {
		opts.Drop = func([]any) bool { return false }
	}
	if flt := opts.RowGroupFilter; flt != nil && opts.Write.Schema.Index(flt.Column) < 0 {
		return RewriteResult{}, fmt.Errorf("rewrite data file %s: row group filter: %w %q", name, ErrUnknownColumn, flt.Column)
	}
	res, ok, err := rewriteByRowGroup(ctx, store, name, md, add, opts, byPosition)
	if err != nil {
		return RewriteResult{}, fmt.Errorf("rewrite data file %s: %w", name, err)
	}
	if ok {
		return res, nil
	}
	res, err = rewriteByRow(ctx, store, md, add, opts, keyPos)
	if err != nil {
		return RewriteResult{}, fmt.Errorf("rewrite data file %s: %w", name, err)
	}
	return res, nil
}

// rewriteByRow is the general path: every row is decoded, conformed and,
// unless dropped, written again.
func rewriteByRow(ctx context.Context, store objstore.Store, md Metadata, add Add, opts RewriteOptions, keyPos []int) (RewriteResult, error) {
	var res RewriteResult
	target := opts.TargetFileBytes
	if target <= 0 {
		target = 1<<63 - 1
	}
	w := NewRollingWriter(ctx, store, opts.Write, target)
	key := make([]any, len(keyPos))
	err := ReadFileAt(ctx, store, md, add, ReadOptions{}, func(pos int64, row []any) error {
		if opts.Conform != nil {
			row = opts.Conform(row)
		}
		for i, p := range keyPos {
			key[i] = row[p]
		}
		if opts.Drop(key) || opts.DropRows != nil && opts.DropRows.Contains(uint64(pos)) {
			res.Dropped++
			return nil
		}
		res.Rows++
		return w.Write(row)
	})
	if err != nil {
		w.Abort()
		return RewriteResult{}, err
	}
	if res.Adds, err = w.Close(); err != nil {
		return RewriteResult{}, err
	}
	res.Reencoded = res.Rows
	if add.DeletionVector != nil {
		// ReadFile left out every row the vector marks.
		res.Deleted = add.DeletionVector.Cardinality
	}
	return res, nil
}

// rewriteByRowGroup is the row-group path; ok is false, with nothing
// written, when the file does not qualify for it. byPosition tells that
// only opts.DropRows drop rows: a row group none of whose positions it
// holds is copied without reading its keys, and the others are masked by
// position.
func rewriteByRowGroup(ctx context.Context, store objstore.Store, name string, md Metadata, add Add, opts RewriteOptions, byPosition bool) (RewriteResult, bool, error) {
	if ColumnMappingMode(md) != ColumnMappingNone {
		return RewriteResult{}, false, nil
	}
	if m := opts.Write.ColumnMappingMode; m != "" && m != ColumnMappingNone {
		return RewriteResult{}, false, nil
	}
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return RewriteResult{}, false, err
	}
	if !value.Equal(schema, opts.Write.Schema) || !slices.Equal(md.PartitionColumns, opts.Write.PartitionColumns) {
		return RewriteResult{}, false, nil
	}
	isPart := map[string]bool{}
	for _, c := range md.PartitionColumns {
		isPart[c] = true
	}
	var dataFields []value.Field
	for _, f := range schema.Fields {
		if isPart[f.Name] {
			continue
		}
		switch f.Type.(type) {
		case value.Primitive, value.DecimalType:
		default:
			return RewriteResult{}, false, nil // nested: summaries need one leaf per field
		}
		dataFields = append(dataFields, f)
	}
	partVals := map[string]any{}
	for _, c := range md.PartitionColumns {
		f, _ := schema.Field(c)
		v, err := ParsePartitionValue(f.Type, add.PartitionValues[c])
		if err != nil {
			return RewriteResult{}, false, nil // let the row path report it
		}
		partVals[c] = v
	}

	ra, err := parquetfile.Open(ctx, store, name, add.Size)
	if err != nil {
		return RewriteResult{}, false, err
	}
	f := ra.Parquet()
	if !strings.HasPrefix(f.Metadata().CreatedBy, dsdeltaCreatedBy) {
		return RewriteResult{}, false, nil
	}
	root, nleaves, err := parquetTree(f.Metadata().Schema)
	if err != nil {
		return RewriteResult{}, false, err
	}
	if nleaves != len(dataFields) {
		return RewriteResult{}, false, nil
	}

	// Key assemblers find the dropped rows; the chunk-bound converters
	// summarise what is copied.
	mode := ColumnMappingNone
	keys := &asmBuilder{mode: mode, streams: make([]*colStream, nleaves)}
	keyOut := make([]*asm, len(opts.Keys))
	for i, k := range opts.Keys {
		fld, _ := schema.Field(k)
		if isPart[fld.Name] {
			keyOut[i] = &asm{kind: asmConst, constant: partVals[fld.Name]}
			continue
		}
		p := root.child(fld, mode)
		if p == nil {
			return RewriteResult{}, false, nil
		}
		if keyOut[i], err = keys.build(fld.Type, p, false); err != nil {
			return RewriteResult{}, false, nil
		}
	}
	bounds, err := newChunkBounds(root, dataFields, add)
	if err != nil {
		return RewriteResult{}, false, nil
	}
	var filterBounds *rowGroupBounds
	if flt := opts.RowGroupFilter; flt != nil && flt.Keep != nil {
		if fld, ok := schema.Field(flt.Column); ok && !isPart[fld.Name] {
			filterBounds = newRowGroupBounds(f, root, fld, mode)
		}
	}

	deleted, err := loadDeletedRows(ctx, store, add, f.NumRows())
	if err != nil {
		return RewriteResult{}, false, err
	}
	// copied tells, before any key is read, that row group g of n rows
	// from base will be copied verbatim: no row of it is deleted, and
	// neither a position nor (its bounds rule it out) a key of it dropped.
	copied := func(g int, rg parquet.RowGroup, base, n int64) bool {
		if deleted.countIn(base, n) > 0 {
			return false
		}
		if byPosition {
			return (deletedRows{opts.DropRows}).countIn(base, n) == 0
		}
		return opts.RowGroupFilter != nil && !filterBounds.keep(rg, opts.RowGroupFilter)
	}

	wo := opts.Write
	wo.PartitionValues = partVals
	if len(md.PartitionColumns) == 0 {
		wo.PartitionValues = nil
	}
	if opts.CopyWithoutBloomFilters {
		wo.withoutBloomFilters = filtersMissingFromCopies(f, root, schema, wo.BloomFilterColumns, copied)
	}
	rw := &rewriter{ctx: ctx, store: store, opts: wo, target: opts.TargetFileBytes, filterLeaves: bloomFilterLeaves(root, schema, wo)}
	// The first output file decides whether this file qualifies: its
	// Parquet schema must equal the source's for chunks to be copied.
	if err := rw.open(); err != nil {
		return RewriteResult{}, false, err
	}
	if !parquet.EqualNodes(rw.w.parquetSchema(), f.Schema()) {
		rw.abort()
		return RewriteResult{}, false, nil
	}

	var res RewriteResult
	var base int64
	var dropped []bool
	for g, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			rw.abort()
			return RewriteResult{}, false, err
		}
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		dropped = slices.Grow(dropped[:0], int(n))[:0]
		drops, dels := int64(0), deleted.countIn(base, n)
		var err error
		if byPosition {
			if (deletedRows{opts.DropRows}).countIn(base, n) > 0 {
				for i := base; i < base+n; i++ {
					d := deleted.has(i)
					if !d && opts.DropRows.Contains(uint64(i)) {
						d = true
						drops++
					}
					dropped = append(dropped, d)
				}
			} else if dels > 0 {
				dropped = deleted.mask(dropped, base, n)
			}
		} else if filterBounds.keep(rg, opts.RowGroupFilter) {
			// Keys are read for every row, deleted ones included, so the
			// mask lines up with the row group; Drop sees live rows only.
			err = readRowGroup(ctx, ra, f, g, rg, keys.streams, keyOut, base, nil, func(key []any) error {
				if deleted.has(base + int64(len(dropped))) {
					dropped = append(dropped, true)
					return nil
				}
				d := opts.Drop(key) || opts.DropRows != nil && opts.DropRows.Contains(uint64(base+int64(len(dropped))))
				if d {
					drops++
				}
				dropped = append(dropped, d)
				return nil
			})
		} else if dels > 0 {
			dropped = deleted.mask(dropped, base, n)
		}
		if err != nil {
			rw.abort()
			return RewriteResult{}, false, fmt.Errorf("row group %d: read keys: %w", g, err)
		}
		res.Dropped += drops
		res.Deleted += dels
		drops += dels
		switch {
		case drops == n:
			// Nothing of this row group remains.
		case drops == 0:
			// Copied verbatim: parquet-go splices the pages and their
			// indexes, and the chunks' statistics. Where those must not
			// be copied as they are, the row group is written anew, with
			// metadata of its own.
			copied := !bounds.unsignedDecimalBounds(&f.Metadata().RowGroups[g])
			var err error
			if copied {
				var leaves []leafSummary
				if leaves, err = bounds.summarise(rg); err != nil {
					rw.abort()
					return RewriteResult{}, false, fmt.Errorf("row group %d: %w", g, err)
				}
				err = rw.appendRowGroup(ra, f, g, true, func(w *FileWriter) error { return w.writeRowGroup(rg, leaves) })
				copied = !errors.Is(err, errNotCopied)
			}
			if !copied {
				dropped = append(dropped[:0], make([]bool, n)...)
				err = rw.appendRowGroup(ra, f, g, false, func(w *FileWriter) error { return w.writeRowGroupKept(rg, dropped, bounds) })
			}
			if err != nil {
				rw.abort()
				return RewriteResult{}, false, fmt.Errorf("row group %d: %w", g, err)
			}
			res.Rows += n
			if copied {
				res.RowGroupsCopied++
			} else {
				res.Reencoded += n
				res.RowGroupsDecoded++
				res.RowGroupsNotCopied++
			}
		default:
			err := rw.appendRowGroup(ra, f, g, false, func(w *FileWriter) error { return w.writeRowGroupKept(rg, dropped, bounds) })
			if err != nil {
				rw.abort()
				return RewriteResult{}, false, fmt.Errorf("row group %d: %w", g, err)
			}
			res.Rows += n - drops
			res.Reencoded += n - drops
			res.RowGroupsDecoded++
		}
		base += n
	}
	if res.Adds, err = rw.close(); err != nil {
		return RewriteResult{}, false, err
	}
	return res, true, nil
}

// filtersMissingFromCopies returns the columns of cols (bloom filter
// columns, logical names) whose chunk lacks a bloom filter in a row group
// of f that copied says is copied verbatim.
func filtersMissingFromCopies(f *parquet.File, root *pqNode, schema value.StructType, cols []string, copied func(g int, rg parquet.RowGroup, base, n int64) bool) []string {
	if len(cols) == 0 {
		return nil
	}
	var missing []string
	meta := f.Metadata().RowGroups
	for _, name := range cols {
		fld, ok := schema.Field(name)
		if !ok {
			continue // NewFileWriter reports it
		}
		p := bloomFilterLeaf(root, fld)
		if p == nil {
			continue
		}
		var base int64
		for g, rg := range f.RowGroups() {
			n := rg.NumRows()
			cols := meta[g].Columns
			if n > 0 && (p.leaf >= len(cols) || cols[p.leaf].MetaData.BloomFilterOffset <= 0) && copied(g, rg, base, n) {
				missing = append(missing, name)
				break
			}
			base += n
		}
	}
	return missing
}

// bloomFilterLeaf is the leaf of fld in a file of the row-group path,
// nil for a partition column or a nested one (no filter either way).
func bloomFilterLeaf(root *pqNode, fld value.Field) *pqNode {
	p := root.child(fld, ColumnMappingNone)
	if p == nil || !p.isLeaf() {
		return nil
	}
	return p
}

// bloomFilterLeaves are the leaves of the source whose chunks the output
// written with wo has a bloom filter on: parquet-go reads the source's
// filter of such a chunk it copies (to check it and copy it), so it is
// fetched with the chunk.
func bloomFilterLeaves(root *pqNode, schema value.StructType, wo WriteOptions) []int {
	var leaves []int
	for _, name := range wo.BloomFilterColumns {
		fld, ok := schema.Field(name)
		if !ok || slices.Contains(wo.withoutBloomFilters, name) {
			continue
		}
		if p := bloomFilterLeaf(root, fld); p != nil {
			leaves = append(leaves, p.leaf)
		}
	}
	return leaves
}

// deletedRows are the physical row indexes a data file's deletion vector
// marks; the zero value marks none.
type deletedRows struct{ bm *roaring64.Bitmap }

// loadDeletedRows reads the deletion vector of add, a file of numRows
// physical rows. A vector marking a row past the end is corrupt: its
// cardinality would no longer count the rows it removes.
func loadDeletedRows(ctx context.Context, store objstore.Store, add Add, numRows int64) (deletedRows, error) {
	if add.DeletionVector == nil {
		return deletedRows{}, nil
	}
	bm, err := loadDeletionVector(ctx, store, *add.DeletionVector)
	if err != nil {
		return deletedRows{}, err
	}
	if !bm.IsEmpty() && bm.Maximum() >= uint64(numRows) {
		return deletedRows{}, fmt.Errorf("%w: marks row %d of a file of %d rows", ErrDeletionVector, bm.Maximum(), numRows)
	}
	return deletedRows{bm}, nil
}

// has reports whether row i is deleted.
func (d deletedRows) has(i int64) bool { return d.bm != nil && d.bm.Contains(uint64(i)) }

// countIn counts the deleted rows among the n rows from base: from the
// bitmap's ranks, without visiting them.
func (d deletedRows) countIn(base, n int64) int64 {
	if d.bm == nil || n <= 0 {
		return 0
	}
	c := d.bm.Rank(uint64(base + n - 1))
	if base > 0 {
		c -= d.bm.Rank(uint64(base - 1))
	}
	return int64(c)
}

// mask appends to dst, for each of the n rows from base, whether it is
// deleted.
func (d deletedRows) mask(dst []bool, base, n int64) []bool {
	for i := range n {
		dst = append(dst, d.has(base+i))
	}
	return dst
}

// chunkRanges are the byte ranges of a row group's column chunks and, with
// indexes, of their column and offset indexes.
func chunkRanges(meta format.RowGroup, indexes bool) [][2]int64 {
	var ranges [][2]int64
	for _, c := range meta.Columns {
		cm := c.MetaData
		start := cm.DataPageOffset
		if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < start {
			start = cm.DictionaryPageOffset
		}
		ranges = append(ranges, [2]int64{start, start + cm.TotalCompressedSize})
		if !indexes {
			continue
		}
		if c.ColumnIndexOffset > 0 {
			ranges = append(ranges, [2]int64{c.ColumnIndexOffset, c.ColumnIndexOffset + int64(c.ColumnIndexLength)})
		}
		if c.OffsetIndexOffset > 0 {
			ranges = append(ranges, [2]int64{c.OffsetIndexOffset, c.OffsetIndexOffset + int64(c.OffsetIndexLength)})
		}
	}
	return ranges
}

// rewriter writes the output of the row-group path, rolling files at the
// target size.
type rewriter struct {
	ctx    context.Context
	store  objstore.Store
	opts   WriteOptions
	target int64
	w      *FileWriter
	adds   []Add
	// filterLeaves are the leaves whose source bloom filters a verbatim
	// copy reads (bloomFilterLeaves).
	filterLeaves []int
}

func (r *rewriter) open() error {
	if r.w != nil {
		return nil
	}
	w, err := NewFileWriter(r.ctx, r.store, r.opts)
	if err != nil {
		return err
	}
	w.statsFromRows() // it copies row groups, with their summaries
	r.w = w
	return nil
}

// errNotCopied is why appendRowGroup did not copy a row group whose page
// index is malformed: nothing of it is written, and its pages can be
// written anew.
var errNotCopied = errors.New("the row group's page index is not copied")

// appendRowGroup appends row group g of f through write, then rolls the
// file at the target size. The row group's column chunks (and, with
// indexes, the page indexes parquet-go copies with verbatim pages) are
// fetched in a few ranged reads first, so write reads from memory.
func (r *rewriter) appendRowGroup(ra *parquetfile.File, f *parquet.File, g int, indexes bool, write func(*FileWriter) error) error {
	if err := r.open(); err != nil {
		return err
	}
	meta := f.Metadata().RowGroups[g]
	ranges := chunkRanges(meta, indexes)
	if indexes {
		for _, c := range r.filterLeaves {
			if c >= len(meta.Columns) {
				continue // no such chunk, no filter to fetch
			}
			if cm := meta.Columns[c].MetaData; cm.BloomFilterOffset > 0 && cm.BloomFilterLength > 0 {
				ranges = append(ranges, [2]int64{cm.BloomFilterOffset, cm.BloomFilterOffset + int64(cm.BloomFilterLength)})
			}
		}
	}
	if err := ra.Prefetch(ranges); err != nil {
		return err
	}
	defer ra.Release()
	for c := range meta.Columns {
		if err := ra.CheckPages(g, c); err != nil {
			return err
		}
		if !indexes {
			continue
		}
		if err := ra.CheckPageIndex(g, c); err != nil {
			if errors.Is(err, parquetfile.ErrCorrupt) {
				return fmt.Errorf("%w: %w", errNotCopied, err)
			}
			return err
		}
	}
	if err := write(r.w); err != nil {
		return err
	}
	return r.maybeRoll()
}

func (r *rewriter) maybeRoll() error {
	if r.target <= 0 || r.w == nil || r.w.BytesWritten() < r.target {
		return nil
	}
	return r.roll()
}

func (r *rewriter) roll() error {
	w := r.w
	r.w = nil
	if w.Rows() == 0 {
		w.Abort()
		return nil
	}
	a, err := w.Close(r.ctx)
	if err != nil {
		return err
	}
	r.adds = append(r.adds, a)
	return nil
}

func (r *rewriter) close() ([]Add, error) {
	if r.w != nil {
		if err := r.roll(); err != nil {
			return nil, err
		}
	}
	return r.adds, nil
}

func (r *rewriter) abort() {
	if r.w != nil {
		r.w.Abort()
		r.w = nil
	}
}

// chunkBounds turns a row group's footer statistics into the leaf
// summaries of its data columns.
type chunkBounds struct {
	types []value.Type
	conv  []func(parquet.Value) (any, error)
	// fileMin/fileMax: the source file's bounds, used where the chunk's
	// cannot be (nil: unknown).
	fileMin, fileMax []any
	useFile          []bool
}

func newChunkBounds(root *pqNode, fields []value.Field, add Add) (*chunkBounds, error) {
	b := &chunkBounds{
		types:   make([]value.Type, len(fields)),
		conv:    make([]func(parquet.Value) (any, error), len(fields)),
		fileMin: make([]any, len(fields)),
		fileMax: make([]any, len(fields)),
		useFile: make([]bool, len(fields)),
	}
	st, stErr := ParseStats(add.Stats)
	for k, f := range fields {
		p := root.child(f, ColumnMappingNone)
		if p == nil || p.leaf != k {
			return nil, fmt.Errorf("column %q is not leaf %d", f.Name, k)
		}
		b.types[k] = f.Type
		if !hasMinMax(f.Type) {
			continue
		}
		// parquet-go orders FIXED_LEN_BYTE_ARRAY bounds as unsigned bytes,
		// wrong for negative decimals, and its float bounds do not say
		// whether a NaN was seen: take the source file's bounds for those.
		if !boundsAsDelta(f.Type) {
			b.useFile[k] = true
			if stErr == nil {
				if lo, hi, ok := st.MinMax(f.Name, f.Type); ok {
					b.fileMin[k], b.fileMax[k] = lo, hi
				}
			}
			continue
		}
		conv, err := converter(f.Type, p, nil)
		if err != nil {
			return nil, err
		}
		b.conv[k] = conv
	}
	return b, nil
}

// unsignedDecimalBounds reports whether a row group's chunk statistics
// have bounds for a leaf whose Parquet bounds are not its Delta ones, a
// decimal of more than 18 digits: parquet-go's, in unsigned order (files
// written before parquetfile.WideDecimalOptions), which a copy of
// the row group would keep. (Floats' are in the right order; what they do
// not tell is taken from the source's add.stats, see useFile.)
func (b *chunkBounds) unsignedDecimalBounds(rg *format.RowGroup) bool {
	for k, t := range b.types {
		if _, ok := t.(value.DecimalType); !ok || boundsAsDelta(t) || k >= len(rg.Columns) {
			continue
		}
		if st := &rg.Columns[k].MetaData.Statistics; st.MinValue != nil || st.MaxValue != nil || st.Min != nil || st.Max != nil {
			return true
		}
	}
	return false
}

func (b *chunkBounds) summarise(rg parquet.RowGroup) ([]leafSummary, error) {
	chunks := rg.ColumnChunks()
	if len(chunks) != len(b.types) {
		return nil, fmt.Errorf("row group has %d column chunks, schema has %d columns", len(chunks), len(b.types))
	}
	n := rg.NumRows()
	out := make([]leafSummary, len(chunks))
	for k, c := range chunks {
		fc, ok := c.(*parquet.FileColumnChunk)
		if !ok {
			return nil, fmt.Errorf("column %d is not a file column chunk", k)
		}
		s := &out[k]
		s.nulls = fc.NullCount()
		if s.nulls < 0 || s.nulls > n {
			return nil, fmt.Errorf("column %d: null count %d of %d rows", k, s.nulls, n)
		}
		if s.nulls == n || !hasMinMax(b.types[k]) {
			continue
		}
		if b.useFile[k] {
			s.min, s.max = b.fileMin[k], b.fileMax[k]
			s.unbounded = s.min == nil || s.max == nil
			continue
		}
		lo, hi, ok := fc.Bounds()
		if !ok {
			s.unbounded = true
			continue
		}
		var err error
		if s.min, err = b.conv[k](lo); err != nil {
			return nil, fmt.Errorf("column %d: min: %w", k, err)
		}
		if s.max, err = b.conv[k](hi); err != nil {
			return nil, fmt.Errorf("column %d: max: %w", k, err)
		}
	}
	return out, nil
}
