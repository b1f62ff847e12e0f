package parquetfile

import (
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/value"
)

// ReadSpec says what Read makes of a file's rows: plain inputs, whatever
// table format decided them.
type ReadSpec struct {
	// Fields are the output columns, in order: a row holds one value of
	// each, in the Go representation of package value. A field the file
	// lacks reads as null.
	Fields []value.Field
	// Naming finds a field's Parquet node among its parent's children
	// (TreeNode.Child): by field id where it gives one (not 0), then by
	// name, then by name ignoring case, as Spark finds one. Nested fields
	// are found by it too.
	Naming Naming
	// Constants holds the values of the output columns (by position in
	// Fields) that are not read from the file: a partition column's.
	Constants map[int]any
	// Deleted marks the physical row positions not returned (a deletion
	// vector's rows).
	Deleted *roaring64.Bitmap
	// Filter, when set, skips the row groups whose footer bounds of
	// FilterField (a top-level field of the file, output or not) cannot
	// hold a wanted row, and those its bloom filters prove without any of
	// Filter.Values (see RowGroupFilter): their pages are not read and
	// none of their rows is returned.
	Filter      *RowGroupFilter
	FilterField value.Field
	// OnlyValues returns only the rows whose FilterField (one of Fields)
	// equals one of Filter.Values, and reads through the Parquet page
	// index where the file has one (see pageindex.go): of that column
	// only the pages whose bounds can hold a value, of the other columns
	// only the pages of the rows it matched. It applies to byte, short,
	// integer, long, date, timestamp and string columns, with Values of
	// the column's Go type; otherwise every row is returned, as without
	// it.
	OnlyValues bool
	// KeepRows says that the caller keeps most of the rows it is handed,
	// whole: the reader then copies strings and binary values into shared
	// blocks and boxes them from shared slabs (Kept: value.Arena,
	// value.Boxes), a few allocations per thousand values instead of two
	// per value, and the rows of a flat read (see flatReader) are cut
	// from one slab per batch of rows.
	KeepRows bool
	// FromRow skips the rows before this physical position: the row
	// groups that end at or before it are not read, and rows before it in
	// a row group that is read are not returned.
	FromRow int64
	// Assemble reads every row through the generic record assembly, even
	// of a flat schema (see flatReader): for tests comparing the two.
	Assemble bool
}

// Read streams the rows of file ra that spec says, one row group at a
// time, fetching only the leaf columns of the output fields, and tells fn
// each row's physical position (its 0-based index in the file): rows
// spec.Deleted marks, rows before spec.FromRow and the rows of row groups
// spec.Filter skips are not returned but still counted. fn may keep the
// row; returning an error stops the read with that error.
func Read(ctx context.Context, ra *File, spec ReadSpec, fn func(pos int64, row []any) error) error {
	f := ra.Parquet()
	root, nleaves, err := Tree(f.Metadata().Schema)
	if err != nil {
		return err
	}

	// One assembler per output column: constants for the given ones and
	// columns the file lacks, column readers for the rest.
	a := NewAssembly(nleaves, spec.Naming)
	if spec.KeepRows {
		a.b.kept = new(Kept)
	}
	if err := a.outputs(root, spec.Fields, spec.Constants); err != nil {
		return err
	}

	var bounds *RowGroupBounds
	var probe *bloomProbe
	if flt := spec.Filter; flt != nil && (flt.Keep != nil || len(flt.Values) > 0) {
		bounds = NewRowGroupBounds(f, root, spec.FilterField, spec.Naming)
		probe = newBloomProbe(f, root, spec.FilterField, spec.Naming, flt)
	}
	keep := make([]bool, len(f.RowGroups()))
	var end int64 // physical index past the row group's last row
	for g, rg := range f.RowGroups() {
		end += rg.NumRows()
		keep[g] = end > spec.FromRow && bounds.Keep(rg, spec.Filter)
	}
	if from := spec.FromRow; from > 0 {
		all := fn
		fn = func(pos int64, row []any) error {
			if pos < from {
				return nil
			}
			return all(pos, row)
		}
	}
	var sparse *sparseReader
	if spec.OnlyValues && spec.Filter != nil {
		fld := spec.FilterField
		col := slices.IndexFunc(spec.Fields, func(f value.Field) bool { return f.Name == fld.Name })
		if col < 0 {
			return fmt.Errorf("only values: column %q is not among the columns read", fld.Name)
		}
		match := spec.Filter.match(fld, col)
		if sparse, err = newSparseReader(ra, f, match, bounds, a.out, keep); err != nil {
			return err
		}
		fn = match.filter(fn)
	}
	pages, narrowed, err := selectPages(ra, sparse, probe, bounds, keep)
	if err != nil {
		return err
	}
	countNarrowed(ctx, narrowed)

	var flat *flatReader
	if !spec.Assemble {
		flat = newFlatReader(a.out, a.b.streams, spec.KeepRows)
	}
	var base int64 // physical index of the row group's first row
	for g, rg := range f.RowGroups() {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := rg.NumRows()
		if !keep[g] {
			// base still advances: deletion vectors index physical rows.
			base += n
			continue
		}
		var err error
		decoded := 0
		if pages[g] != nil {
			decoded, err = sparse.readGroup(ctx, g, pages[g], base, spec.Deleted, fn)
		} else if flat != nil {
			err = flat.readGroup(ctx, ra, f, g, rg, base, spec.Deleted, fn)
		} else {
			err = readRowGroupAt(ctx, ra, f, g, rg, a.b.streams, a.out, base, spec.Deleted, fn)
		}
		countRead(ctx, pages[g] != nil, decoded)
		if err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
		base += n
	}
	return nil
}

// Field finds the child of p holding field f, named and numbered by naming
// (see Child).
func (p *TreeNode) Field(f value.Field, naming Naming) *TreeNode {
	return p.Child(naming(f))
}

// selectPages returns the pages to read of the row groups keep keeps that
// are read through the page index (nil for the others), and clears keep
// for the row groups their bloom filters rule out. A row group read through
// the page index is probed when the filter costs fewer bytes than the key
// pages its bounds select (in a sorted file, few keys select few small
// pages; a filter costs 4 bytes per row), and then only the pages that
// hold a value the filter may hold are read (narrowed counts those row
// groups). Without a page index, every row group the bounds keep is
// probed.
func selectPages(ra *File, sparse *sparseReader, probe *bloomProbe, bounds *RowGroupBounds, keep []bool) (pages [][]int, narrowed int, err error) {
	pages = make([][]int, len(keep))
	probed := slices.Clone(keep) // the row groups the bloom filters judge
	for g := range keep {
		if !keep[g] {
			continue
		}
		sel, total, ok, err := sparse.selectPages(g)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			pages[g] = sel
			probed[g] = probe.worth(ra, g, sparse.pageBytes(g, sel), 2*len(sel) > total)
		}
	}
	judged := slices.Clone(probed)
	var pass [][]any
	if sparse != nil {
		pass = make([][]any, len(keep))
	}
	if err := probe.filter(ra, bounds, probed, pass); err != nil {
		return nil, 0, err
	}
	for g := range keep {
		if !judged[g] {
			continue
		}
		keep[g] = probed[g]
		if keep[g] && pages[g] != nil && pass[g] != nil {
			pages[g] = sparse.narrow(g, pass[g], pages[g])
			narrowed++
		}
	}
	return pages, narrowed, nil
}
