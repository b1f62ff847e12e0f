package delta

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// The bounds a rewrite writes into add.stats are the exact extremes of the
// rows it keeps (PROTOCOL.md "Per-file Statistics": without tightBounds,
// or with it true, minValues and maxValues are values present in the
// file). Readers prune by them, and Spark answers MIN and MAX from them, so
// bounds of rows a rewrite dropped would be wrong answers, not just weak
// pruning.
//
// An earlier release took the bounds of floats, doubles and decimals of
// more than 18 digits (the leaves whose Parquet bounds are not their Delta
// ones, see boundsAsDelta) from the source file's add.stats, which the
// dropped rows may have set. Marking such a file tightBounds false would
// be the cheaper fix, but a reader then also loses its null counts (they
// only say "all" or "none" with wide bounds) and Spark its MIN/MAX
// answers. Exact bounds cost little:
//   - a row group re-encoded (writeRowGroupKept) has every kept value in
//     hand: its extremes are taken in Delta's order as the values pass;
//   - a row group copied verbatim has chunk statistics: for a float or
//     double they are its exact bounds when no value is NaN, which the
//     source's add.stats proves by having both bounds (a NaN leaves the
//     max out, see leafJSON); otherwise the output leaves the column's
//     bounds out;
//   - a decimal of more than 18 digits has no chunk bounds in the files
//     of releases before parquet-go v0.32.1 (or bounds in unsigned order,
//     see unsignedDecimalStats): that one column chunk is decoded, from
//     memory (appendRowGroup fetched it), while the others are spliced.

// chunkBounds turns the values or footer statistics of a source's row
// groups into the leaf summaries of its data columns.
type chunkBounds struct {
	types []value.Type
	conv  []func(parquet.Value) (any, error)
	// floatsBounded marks the floats and doubles whose chunk bounds are
	// exact: the source's add.stats bounds them, so none is NaN.
	floatsBounded []bool
	// kept is what a copy of the kept rows takes of each leaf's values
	// (FileWriter.writeRowGroupKept).
	kept []parquetfile.KeptLeaf
}

func newChunkBounds(root *parquetfile.TreeNode, fields []value.Field, add Add) (*chunkBounds, error) {
	b := &chunkBounds{
		types:         make([]value.Type, len(fields)),
		conv:          make([]func(parquet.Value) (any, error), len(fields)),
		floatsBounded: make([]bool, len(fields)),
		kept:          make([]parquetfile.KeptLeaf, len(fields)),
	}
	st, stErr := ParseStats(add.Stats)
	for k, f := range fields {
		p := childField(root, f, ColumnMappingNone)
		if p == nil || p.Leaf != k {
			return nil, fmt.Errorf("column %q is not leaf %d", f.Name, k)
		}
		b.types[k] = f.Type
		b.kept[k] = parquetfile.KeptLeaf{Bounds: hasMinMax(f.Type), WideDecimal: wideDecimal(f.Type), Float: f.Type == value.Float || f.Type == value.Double}
		if !hasMinMax(f.Type) {
			continue
		}
		if f.Type == value.Float || f.Type == value.Double {
			_, _, ok := st.MinMax(f.Name, f.Type)
			b.floatsBounded[k] = stErr == nil && ok
		}
		conv, err := parquetfile.Converter(f.Type, &p.El, nil)
		if err != nil {
			return nil, err
		}
		b.conv[k] = conv
	}
	return b, nil
}

// unsignedDecimalBounds reports whether a row group's chunk statistics
// have bounds for a leaf whose Parquet bounds may not be its Delta ones, a
// decimal of more than 18 digits, that are not in the values' order.
// parquet-go before v0.32.1 took them in the order of unsigned bytes, so
// files that older releases wrote have them (see unsignedDecimalStats),
// and a copy of the row group would keep them. (Floats' are in the right
// order; whether they may be taken is floatsBounded.)
func (b *chunkBounds) unsignedDecimalBounds(rg *format.RowGroup) bool {
	for k, t := range b.types {
		if wideDecimal(t) && k < len(rg.Columns) && unsignedDecimalStats(&rg.Columns[k].MetaData.Statistics) {
			return true
		}
	}
	return false
}

// unsignedDecimalStats reports whether st, the chunk statistics of a
// decimal stored as FIXED_LEN_BYTE_ARRAY, has bounds that are not in the
// signed order of its values (LogicalTypes.md, DECIMAL). parquet-go before
// v0.32.1 took them as unsigned bytes, in which every negative value sorts
// above every positive one. Such bounds are wrong exactly when the chunk
// holds values of both signs, and then their least is not negative and
// their greatest is: min > max. Of one sign, both orders agree, and the
// bounds are right whichever release wrote them. One bound without the
// other is taken as wrong too.
func unsignedDecimalStats(st *format.Statistics) bool {
	disordered := func(lo, hi []byte) bool {
		if lo == nil && hi == nil {
			return false
		}
		return lo == nil || hi == nil || parquetfile.CompareDecimalBytes(lo, hi) > 0
	}
	return disordered(st.MinValue, st.MaxValue) || disordered(st.Min, st.Max)
}

// wideDecimal reports whether t is a decimal stored as a
// FIXED_LEN_BYTE_ARRAY, more than 18 digits.
func wideDecimal(t value.Type) bool {
	dt, ok := t.(value.DecimalType)
	return ok && dt.Precision > 18
}

// summarise summarises each leaf of rg, a row group copied verbatim, from
// its chunk statistics, and a wide decimal from its values.
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
		t := b.types[k]
		switch {
		case s.nulls == n || !hasMinMax(t):
			continue
		case wideDecimal(t):
			if err := b.decodeExtremes(fc, k, s); err != nil {
				return nil, fmt.Errorf("column %d: %w", k, err)
			}
			continue
		case !boundsAsDelta(t) && !b.floatsBounded[k]:
			s.unbounded = true
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

// decodeExtremes sets the bounds of s from the values of c, leaf k, a
// flat column chunk; its null count is set already.
func (b *chunkBounds) decodeExtremes(c parquet.ColumnChunk, k int, s *leafSummary) error {
	e := b.extremes(k, c.Type())
	pages := c.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 1024)
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read page: %w", err)
		}
		vr := p.Values()
		for {
			n, rerr := vr.ReadValues(buf)
			for _, v := range buf[:n] {
				if !v.IsNull() {
					e.Add(v)
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				parquet.Release(p)
				return fmt.Errorf("read values: %w", rerr)
			}
		}
		e.EndPage()
		parquet.Release(p)
	}
	return b.setBounds(k, &e, s)
}

// extremes is the running least and greatest non-null values of leaf k
// of a row group, in Delta's order.
func (b *chunkBounds) extremes(k int, typ parquet.Type) parquetfile.Extremes {
	return parquetfile.NewExtremes(typ, b.kept[k].WideDecimal, b.kept[k].Float)
}

// setBounds sets the bounds of s, which has a non-null value, from e.
func (b *chunkBounds) setBounds(k int, e *parquetfile.Extremes, s *leafSummary) error {
	lo, hi, ok := e.Bounds()
	if e.NaN() || !ok {
		// Spark orders NaN above every number; the row path leaves such a
		// column's max out, and a summary its bounds both.
		s.unbounded = true
		return nil
	}
	var err error
	if s.min, err = b.conv[k](lo); err != nil {
		return fmt.Errorf("min: %w", err)
	}
	if s.max, err = b.conv[k](hi); err != nil {
		return fmt.Errorf("max: %w", err)
	}
	return nil
}
