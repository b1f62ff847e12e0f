package delta

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// A column's statistics in add.stats (PROTOCOL.md "Per-file Statistics":
// minValues, maxValues and nullCount of each leaf) are what parquet-go already computes
// for the footer: it takes the bounds and null count of every page it
// writes (for the column index), and keeps the column chunk's. For a
// top-level leaf whose Parquet order is the Delta order of its type, the
// file's statistics are those of its row groups' column chunks, read once
// at Close instead of comparing every value of every row a second time.
//
// Parquet's order is the Delta order for strings (unsigned bytes, as Go
// compares strings), integers, dates, timestamps and decimals stored as
// INT32 or INT64 (signed). Decimals stored as FIXED_LEN_BYTE_ARRAY had
// their bounds taken as unsigned bytes by parquet-go before v0.32.1 (a
// negative value sorted above every positive one); it orders them signed
// now, so their footer bounds could be taken too, a saving not made yet.
// Floats' are not, whose NaN and signed zeros Spark orders its own way:
// those, wide decimals, and nested columns keep their statistics row by
// row.

// boundsAsDelta reports whether the page and chunk bounds parquet-go takes
// of a leaf of type t (one hasMinMax holds) are its Delta min and max: not
// for floats, nor for decimals of more than 18 digits (FIXED_LEN_BYTE_ARRAY).
// What a file's statistics and a rewrite's summaries read from parquet-go
// rests on it.
func boundsAsDelta(t value.Type) bool {
	if dt, ok := t.(value.DecimalType); ok {
		return dt.Precision <= 18
	}
	return t != value.Float && t != value.Double
}

// footerStat is one stats root taken from the footer.
type footerStat struct {
	node  *statsNode
	field value.Field // its schema field, a top-level leaf
}

// fromFooter reports whether a top-level leaf of type t takes its
// statistics from the footer: its null count always, and its bounds when
// it has any (hasMinMax) and parquet-go's are its Delta ones.
func fromFooter(t value.Type) bool {
	return !hasMinMax(t) || boundsAsDelta(t)
}

// statsFromFooter moves the stats roots that are top-level leaves of a
// type fromFooter holds out of the rows' way: Close reads them from the
// footer. Called before any row is written.
func (w *FileWriter) statsFromFooter() {
	leaf := make(map[int]bool, len(w.root)) // schema indexes of top-level leaves
	for k, n := range w.root {
		leaf[w.dataIdx[k]] = n.Kind == parquetfile.LeafNode
	}
	var perRow []*statsNode
	for _, s := range w.stats.roots {
		if !leaf[s.index] || s.children != nil || !fromFooter(s.typ) {
			perRow = append(perRow, s)
			continue
		}
		w.footer = append(w.footer, footerStat{node: s, field: w.opts.Schema.Fields[s.index]})
	}
	w.stats.perRow = perRow
}

// statsFromRows takes every stats root row by row again: for a file that
// copies row groups of other files (writeRowGroup), whose summaries stand
// for rows it does not see. Called before any row is written.
func (w *FileWriter) statsFromRows() {
	w.footer = nil
	w.stats.perRow = w.stats.roots
}

// addFooterStats adds the statistics of the file's column chunks, as
// parquet-go wrote them in the footer, to the roots taken from it: a bound
// is read as a reader reads one (parquetfile.PlainBound, then the leaf's
// converter).
func (w *FileWriter) addFooterStats(md *format.FileMetaData) error {
	root, _, err := parquetfile.Tree(md.Schema)
	if err != nil {
		return err
	}
	type leaf struct {
		index int
		phys  format.Type
		conv  func(parquet.Value) (any, error)
	}
	leaves := make([]leaf, len(w.footer))
	for i, f := range w.footer {
		p := childField(root, f.field, w.opts.ColumnMappingMode)
		if p == nil || !p.IsLeaf() {
			return fmt.Errorf("column %q is not a leaf of the file written", f.field.Name)
		}
		l := leaf{index: p.Leaf}
		if f.node.minMax {
			l.phys, _ = p.El.Type.Get()
			if l.conv, err = parquetfile.Converter(f.field.Type, &p.El, nil); err != nil {
				return err
			}
		}
		leaves[i] = l
	}
	bound := func(l leaf, b []byte) (any, bool) {
		if b == nil {
			return nil, false
		}
		v, err := parquetfile.PlainBound(l.phys, b)
		if err != nil {
			return nil, false
		}
		x, err := l.conv(v)
		return x, err == nil
	}
	for g, rg := range md.RowGroups {
		for i, f := range w.footer {
			l := leaves[i]
			if l.index >= len(rg.Columns) {
				return fmt.Errorf("row group %d has %d columns, no leaf %d", g, len(rg.Columns), l.index)
			}
			st := rg.Columns[l.index].MetaData.Statistics
			s := leafSummary{nulls: st.NullCount}
			if s.nulls < 0 || s.nulls > rg.NumRows {
				return fmt.Errorf("row group %d, leaf %d: null count %d of %d rows", g, l.index, s.nulls, rg.NumRows)
			}
			if s.nulls < rg.NumRows && f.node.minMax {
				lo, okLo := bound(l, st.MinValue)
				hi, okHi := bound(l, st.MaxValue)
				if !okLo || !okHi {
					s.unbounded = true // no bounds written: none claimed
				} else {
					s.min, s.max = lo, hi
				}
			}
			f.node.addSummary(s)
		}
	}
	return nil
}
