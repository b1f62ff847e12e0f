package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	// index (that of parquet-go before v0.32.1 for a decimal of more than
	// 18 digits with a page of nulls, or a damaged one), or such a
	// decimal's chunk statistics with the unsigned bounds of those
	// releases (see unsignedDecimalStats). Their pages, checked, were
	// decoded and written anew, with metadata of their own.
	// RowGroupsDecoded counts them too.
	RowGroupsNotCopied int
}

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
// position. Each row group is masked (dropMask), then appended as it is,
// re-encoded without its dropped rows, or left out (appendGroup).
func rewriteByRowGroup(ctx context.Context, store objstore.Store, name string, md Metadata, add Add, opts RewriteOptions, byPosition bool) (RewriteResult, bool, error) {
	src, ok, err := openRowGroupSource(ctx, store, name, md, add, opts, byPosition)
	if err != nil || !ok {
		return RewriteResult{}, false, err
	}
	rw, ok, err := src.output(ctx, store, md)
	if err != nil || !ok {
		return RewriteResult{}, false, err
	}
	var res RewriteResult
	var base int64
	var dropped []bool
	for g, rg := range src.f.RowGroups() {
		if err := ctx.Err(); err != nil {
			rw.abort()
			return RewriteResult{}, false, err
		}
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		var drops, dels int64
		if dropped, drops, dels, err = src.dropMask(ctx, g, rg, base, dropped); err != nil {
			rw.abort()
			return RewriteResult{}, false, fmt.Errorf("row group %d: read keys: %w", g, err)
		}
		res.Dropped += drops
		res.Deleted += dels
		if err := src.appendGroup(rw, g, rg, dropped, drops+dels, &res); err != nil {
			rw.abort()
			return RewriteResult{}, false, fmt.Errorf("row group %d: %w", g, err)
		}
		base += n
	}
	if res.Adds, err = rw.close(); err != nil {
		return RewriteResult{}, false, err
	}
	return res, true, nil
}

// rowGroupSource is a source file of the row-group path, opened and found
// to qualify, with what its row groups are masked and summarised with.
type rowGroupSource struct {
	opts       RewriteOptions
	byPosition bool
	schema     value.StructType
	isPart     map[string]bool
	// dataFields are the schema's fields stored in the file, one flat leaf
	// each; partVals the file's partition values.
	dataFields []value.Field
	partVals   map[string]any

	ra   *parquetfile.File
	f    *parquet.File
	root *parquetfile.TreeNode
	// Key assemblers find the dropped rows (one output column per
	// opts.Keys); the chunk-bound converters summarise what is copied.
	keys         *parquetfile.Assembly
	bounds       *chunkBounds
	filterBounds *parquetfile.RowGroupBounds
	deleted      deletedRows
}

// openRowGroupSource opens the source of the row-group path; ok is false
// when it does not qualify: column mapping, a schema other than the
// output's, nested columns, a file not written by dsdelta.
func openRowGroupSource(ctx context.Context, store objstore.Store, name string, md Metadata, add Add, opts RewriteOptions, byPosition bool) (*rowGroupSource, bool, error) {
	src := &rowGroupSource{opts: opts, byPosition: byPosition}
	if ok, err := src.qualify(md, add); err != nil || !ok {
		return nil, false, err
	}
	ra, err := parquetfile.Open(ctx, store, name, add.Size)
	if err != nil {
		return nil, false, err
	}
	f := ra.Parquet()
	// Only dsdelta's files are copied verbatim: their footers carry exact
	// null counts and untruncated chunk bounds.
	if !parquetfile.WrittenByDsdelta(f.Metadata().CreatedBy) {
		return nil, false, nil
	}
	root, nleaves, err := parquetfile.Tree(f.Metadata().Schema)
	if err != nil {
		return nil, false, err
	}
	if nleaves != len(src.dataFields) {
		return nil, false, nil
	}
	src.ra, src.f, src.root = ra, f, root

	mode := ColumnMappingNone
	src.keys = parquetfile.NewAssembly(nleaves, readNaming(mode))
	for _, k := range opts.Keys {
		fld, _ := src.schema.Field(k)
		if src.isPart[fld.Name] {
			src.keys.Constant(src.partVals[fld.Name])
			continue
		}
		p := childField(root, fld, mode)
		if p == nil {
			return nil, false, nil
		}
		if err = src.keys.Column(fld.Type, p); err != nil {
			return nil, false, nil
		}
	}
	if src.bounds, err = newChunkBounds(root, src.dataFields, add); err != nil {
		return nil, false, nil
	}
	if flt := opts.RowGroupFilter; flt != nil && flt.Keep != nil {
		if fld, ok := src.schema.Field(flt.Column); ok && !src.isPart[fld.Name] {
			src.filterBounds = parquetfile.NewRowGroupBounds(f, root, fld, readNaming(mode))
		}
	}
	if src.deleted, err = loadDeletedRows(ctx, store, add, f.NumRows()); err != nil {
		return nil, false, err
	}
	return src, true, nil
}

// qualify reads the table's schema and the file's partition values, and
// reports whether they allow the row-group path.
func (src *rowGroupSource) qualify(md Metadata, add Add) (bool, error) {
	if ColumnMappingMode(md) != ColumnMappingNone {
		return false, nil
	}
	if m := src.opts.Write.ColumnMappingMode; m != "" && m != ColumnMappingNone {
		return false, nil
	}
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		return false, err
	}
	if !value.Equal(schema, src.opts.Write.Schema) || !slices.Equal(md.PartitionColumns, src.opts.Write.PartitionColumns) {
		return false, nil
	}
	src.schema = schema
	src.isPart = map[string]bool{}
	for _, c := range md.PartitionColumns {
		src.isPart[c] = true
	}
	for _, f := range schema.Fields {
		if src.isPart[f.Name] {
			continue
		}
		switch f.Type.(type) {
		case value.Primitive, value.DecimalType:
		default:
			return false, nil // nested: summaries need one leaf per field
		}
		src.dataFields = append(src.dataFields, f)
	}
	src.partVals = map[string]any{}
	for _, c := range md.PartitionColumns {
		f, _ := schema.Field(c)
		v, err := ParsePartitionValue(f.Type, add.PartitionValues[c])
		if err != nil {
			return false, nil // let the row path report it
		}
		src.partVals[c] = v
	}
	return true, nil
}

// output opens the rewriter of the source's rows; ok is false, with
// nothing written, when the first output file's Parquet schema differs
// from the source's, as chunks are copied only between equal schemas.
func (src *rowGroupSource) output(ctx context.Context, store objstore.Store, md Metadata) (*rewriter, bool, error) {
	wo := src.opts.Write
	wo.PartitionValues = src.partVals
	if len(md.PartitionColumns) == 0 {
		wo.PartitionValues = nil
	}
	if src.opts.CopyWithoutBloomFilters {
		wo.withoutBloomFilters = filtersMissingFromCopies(src.f, src.root, src.schema, wo.BloomFilterColumns, src.copiedVerbatim)
	}
	rw := &rewriter{ctx: ctx, store: store, opts: wo, target: src.opts.TargetFileBytes, filterLeaves: bloomFilterLeaves(src.root, src.schema, wo)}
	if err := rw.open(); err != nil {
		return nil, false, err
	}
	if !parquet.EqualNodes(rw.w.parquetSchema(), src.f.Schema()) {
		rw.abort()
		return nil, false, nil
	}
	return rw, true, nil
}

// copiedVerbatim tells, before any key is read, that row group g of n
// rows from base will be copied verbatim: no row of it is deleted, and
// neither a position nor (its bounds rule it out) a key of it dropped.
func (src *rowGroupSource) copiedVerbatim(g int, rg parquet.RowGroup, base, n int64) bool {
	if src.deleted.countIn(base, n) > 0 {
		return false
	}
	if src.byPosition {
		return (deletedRows{src.opts.DropRows}).countIn(base, n) == 0
	}
	return src.opts.RowGroupFilter != nil && !src.filterBounds.Keep(rg, src.opts.RowGroupFilter)
}

// dropMask sets dropped, reused, to whether each row of row group g (from
// row base) is left out, reading its keys only where a key may be
// dropped. It counts the rows dropped by key or position (drops) and
// those the deletion vector deleted (dels); when neither leaves any row
// out, dropped may be empty.
func (src *rowGroupSource) dropMask(ctx context.Context, g int, rg parquet.RowGroup, base int64, dropped []bool) (_ []bool, drops, dels int64, err error) {
	n := rg.NumRows()
	dropped = slices.Grow(dropped[:0], int(n))[:0]
	dels = src.deleted.countIn(base, n)
	opts := src.opts
	switch {
	case src.byPosition:
		if (deletedRows{opts.DropRows}).countIn(base, n) > 0 {
			for i := base; i < base+n; i++ {
				d := src.deleted.has(i)
				if !d && opts.DropRows.Contains(uint64(i)) {
					d = true
					drops++
				}
				dropped = append(dropped, d)
			}
		} else if dels > 0 {
			dropped = src.deleted.mask(dropped, base, n)
		}
	case src.filterBounds.Keep(rg, opts.RowGroupFilter):
		// Keys are read for every row, deleted ones included, so the
		// mask lines up with the row group; Drop sees live rows only.
		err = src.keys.ReadRowGroup(ctx, src.ra, g, rg, base, nil, func(key []any) error {
			if src.deleted.has(base + int64(len(dropped))) {
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
	case dels > 0:
		dropped = src.deleted.mask(dropped, base, n)
	}
	return dropped, drops, dels, err
}

// appendGroup appends row group g to rw without the out rows dropped
// marks, and counts it in res: left out when nothing of it remains,
// re-encoded when some rows go, copied verbatim otherwise (copyGroup).
func (src *rowGroupSource) appendGroup(rw *rewriter, g int, rg parquet.RowGroup, dropped []bool, out int64, res *RewriteResult) error {
	n := rg.NumRows()
	switch {
	case out == n:
		return nil // nothing of this row group remains
	case out > 0:
		if err := rw.appendRowGroup(src.ra, src.f, g, false, func(w *FileWriter) error { return w.writeRowGroupKept(rg, dropped, src.bounds) }); err != nil {
			return err
		}
		res.Rows += n - out
		res.Reencoded += n - out
		res.RowGroupsDecoded++
		return nil
	}
	copied, err := src.copyGroup(rw, g, rg, dropped)
	if err != nil {
		return err
	}
	res.Rows += n
	if copied {
		res.RowGroupsCopied++
	} else {
		res.Reencoded += n
		res.RowGroupsDecoded++
		res.RowGroupsNotCopied++
	}
	return nil
}

// copyGroup appends row group g, all of whose rows are kept, verbatim:
// parquet-go splices the pages and their indexes, and the chunks'
// statistics. Where those must not be copied as they are, the row group
// is written anew, with metadata of its own, and copied is false. dropped
// is a buffer to reuse.
func (src *rowGroupSource) copyGroup(rw *rewriter, g int, rg parquet.RowGroup, dropped []bool) (copied bool, err error) {
	copied = !src.bounds.unsignedDecimalBounds(&src.f.Metadata().RowGroups[g])
	if copied {
		// Summarised once the chunks are fetched: a wide decimal's bounds
		// are read from its values (see exactbounds.go).
		err = rw.appendRowGroup(src.ra, src.f, g, true, func(w *FileWriter) error {
			leaves, err := src.bounds.summarise(rg)
			if err != nil {
				return err
			}
			return w.writeRowGroup(rg, leaves)
		})
		if !errors.Is(err, errNotCopied) {
			return true, err
		}
	}
	kept := append(dropped[:0], make([]bool, rg.NumRows())...)
	err = rw.appendRowGroup(src.ra, src.f, g, false, func(w *FileWriter) error { return w.writeRowGroupKept(rg, kept, src.bounds) })
	return false, err
}

// filtersMissingFromCopies returns the columns of cols (bloom filter
// columns, logical names) whose chunk lacks a bloom filter in a row group
// of f that copied says is copied verbatim.
func filtersMissingFromCopies(f *parquet.File, root *parquetfile.TreeNode, schema value.StructType, cols []string, copied func(g int, rg parquet.RowGroup, base, n int64) bool) []string {
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
			if n > 0 && (p.Leaf >= len(cols) || cols[p.Leaf].MetaData.BloomFilterOffset <= 0) && copied(g, rg, base, n) {
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
func bloomFilterLeaf(root *parquetfile.TreeNode, fld value.Field) *parquetfile.TreeNode {
	p := childField(root, fld, ColumnMappingNone)
	if p == nil || !p.IsLeaf() {
		return nil
	}
	return p
}

// bloomFilterLeaves are the leaves of the source whose chunks the output
// written with wo has a bloom filter on: parquet-go reads the source's
// filter of such a chunk it copies (to check it and copy it), so it is
// fetched with the chunk.
func bloomFilterLeaves(root *parquetfile.TreeNode, schema value.StructType, wo WriteOptions) []int {
	var leaves []int
	for _, name := range wo.BloomFilterColumns {
		fld, ok := schema.Field(name)
		if !ok || slices.Contains(wo.withoutBloomFilters, name) {
			continue
		}
		if p := bloomFilterLeaf(root, fld); p != nil {
			leaves = append(leaves, p.Leaf)
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
