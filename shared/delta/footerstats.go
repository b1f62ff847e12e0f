package delta

import (
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/parquet-go/parquet-go/format"

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
// INT32 or INT64 (signed). It is not for decimals stored as
// FIXED_LEN_BYTE_ARRAY, whose page bounds parquet-go takes as unsigned
// bytes (a negative value sorts above every positive one), nor for floats,
// whose NaN and signed zeros Spark orders its own way: those, and nested
// columns, keep their statistics row by row.

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
	node   *statsNode
	leaf   int                        // the Parquet leaf column
	decode func(b []byte) (any, bool) // a bound's statistics bytes as a stats value
}

// footerDecoder is how a bound of a leaf of type t is read from its
// column chunk statistics (PLAIN encoding, without length prefix), when
// Parquet orders t as Delta does; nil otherwise.
func footerDecoder(t value.Type) func([]byte) (any, bool) {
	i32 := func(b []byte) (int32, bool) {
		if len(b) != 4 {
			return 0, false
		}
		return int32(binary.LittleEndian.Uint32(b)), true
	}
	i64 := func(b []byte) (int64, bool) {
		if len(b) != 8 {
			return 0, false
		}
		return int64(binary.LittleEndian.Uint64(b)), true
	}
	if hasMinMax(t) && !boundsAsDelta(t) {
		return nil
	}
	if dt, ok := t.(value.DecimalType); ok {
		if dt.Precision <= 9 { // INT32, see leafNode
			return func(b []byte) (any, bool) {
				x, ok := i32(b)
				return value.Decimal{Unscaled: big.NewInt(int64(x)), Scale: dt.Scale}, ok
			}
		}
		return func(b []byte) (any, bool) { // INT64
			x, ok := i64(b)
			return value.Decimal{Unscaled: big.NewInt(x), Scale: dt.Scale}, ok
		}
	}
	switch t {
	case value.String:
		return func(b []byte) (any, bool) { return string(b), true }
	case value.Byte:
		return func(b []byte) (any, bool) { x, ok := i32(b); return int8(x), ok }
	case value.Short:
		return func(b []byte) (any, bool) { x, ok := i32(b); return int16(x), ok }
	case value.Integer:
		return func(b []byte) (any, bool) { x, ok := i32(b); return x, ok }
	case value.Date:
		return func(b []byte) (any, bool) { x, ok := i32(b); return value.Days(x), ok }
	case value.Long:
		return func(b []byte) (any, bool) { x, ok := i64(b); return x, ok }
	case value.Timestamp:
		return func(b []byte) (any, bool) { x, ok := i64(b); return value.Micros(x), ok }
	case value.TimestampNTZ:
		return func(b []byte) (any, bool) { x, ok := i64(b); return value.LocalMicros(x), ok }
	case value.Boolean, value.Binary:
		// No bounds in add.stats (hasMinMax): only the null count.
		return func([]byte) (any, bool) { return nil, false }
	}
	return nil
}

// statsFromFooter moves the stats roots that are top-level leaves of a
// type footerDecoder reads out of the rows' way: Close reads them from the
// footer. Called before any row is written.
func (w *FileWriter) statsFromFooter() {
	leafOf := make(map[int]*wnode, len(w.root)) // schema index → its leaf
	for k, n := range w.root {
		if n.kind == wLeaf {
			leafOf[w.dataIdx[k]] = n
		}
	}
	var perRow []*statsNode
	for _, s := range w.stats.roots {
		n := leafOf[s.index]
		var decode func([]byte) (any, bool)
		if n != nil && s.children == nil {
			decode = footerDecoder(s.typ)
		}
		if decode == nil {
			perRow = append(perRow, s)
			continue
		}
		w.footer = append(w.footer, footerStat{node: s, leaf: n.leaf, decode: decode})
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
// parquet-go wrote them in the footer, to the roots taken from it.
func (w *FileWriter) addFooterStats(md *format.FileMetaData) error {
	for g, rg := range md.RowGroups {
		for _, f := range w.footer {
			if f.leaf >= len(rg.Columns) {
				return fmt.Errorf("row group %d has %d columns, no leaf %d", g, len(rg.Columns), f.leaf)
			}
			st := rg.Columns[f.leaf].MetaData.Statistics
			s := leafSummary{nulls: st.NullCount}
			if s.nulls < 0 || s.nulls > rg.NumRows {
				return fmt.Errorf("row group %d, leaf %d: null count %d of %d rows", g, f.leaf, s.nulls, rg.NumRows)
			}
			if s.nulls < rg.NumRows && f.node.minMax {
				lo, okLo := f.decode(st.MinValue)
				hi, okHi := f.decode(st.MaxValue)
				if st.MinValue == nil || st.MaxValue == nil || !okLo || !okHi {
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
