package parquetfile

import (
	"math"

	"github.com/parquet-go/parquet-go"
)

// Extremes takes the least and greatest of a column's non-null values, as
// they pass, in the order of their values: parquet-go's for most types,
// signed for a wide decimal's two's complement bytes (compared here, as
// parquet-go before v0.32.1 compared them unsigned), with NaN apart for
// floats. The zero value is not ready: see NewExtremes.
type Extremes struct {
	typ         parquet.Type
	wide, float bool
	lo, hi      parquet.Value
	have, nan   bool
	// loInPage and hiInPage: lo or hi points into the current page.
	loInPage, hiInPage bool
}

// NewExtremes returns the extremes of values of typ, a decimal of more
// than 18 digits stored as FIXED_LEN_BYTE_ARRAY (wideDecimal), or a float
// or double (float).
func NewExtremes(typ parquet.Type, wideDecimal, float bool) Extremes {
	return Extremes{typ: typ, wide: wideDecimal, float: float}
}

// Add takes v, a non-null value, into the extremes.
func (e *Extremes) Add(v parquet.Value) {
	if e.float && isNaNParquet(v) {
		e.nan = true
		return
	}
	switch {
	case !e.have:
		e.lo, e.hi, e.have = v, v, true
		e.loInPage, e.hiInPage = true, true
	case e.compare(v, e.lo) < 0:
		e.lo, e.loInPage = v, true
	case e.compare(v, e.hi) > 0:
		e.hi, e.hiInPage = v, true
	}
}

func (e *Extremes) compare(a, b parquet.Value) int {
	if e.wide {
		return CompareDecimalBytes(a.ByteArray(), b.ByteArray())
	}
	return e.typ.Compare(a, b)
}

// EndPage detaches the extremes from the page about to be released: the
// values point into it. Cloned once per page, since key-sorted data sets a
// new maximum on nearly every row.
func (e *Extremes) EndPage() {
	if e.loInPage {
		e.lo, e.loInPage = e.lo.Clone(), false
	}
	if e.hiInPage {
		e.hi, e.hiInPage = e.hi.Clone(), false
	}
}

// Bounds returns the least and greatest value added but NaN; ok is false
// when there is none.
func (e *Extremes) Bounds() (lo, hi parquet.Value, ok bool) { return e.lo, e.hi, e.have }

// NaN reports whether a NaN was added.
func (e *Extremes) NaN() bool { return e.nan }

func isNaNParquet(v parquet.Value) bool {
	switch v.Kind() {
	case parquet.Float:
		return math.IsNaN(float64(v.Float()))
	case parquet.Double:
		return math.IsNaN(v.Double())
	}
	return false
}
