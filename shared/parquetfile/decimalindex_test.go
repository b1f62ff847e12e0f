package parquetfile

import (
	"bytes"
	"math/big"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestDecimalIndexerMarksOnlyPagesOfNullsAsNull: a page with values whose
// bounds parquet-go did not take (SkipPageBounds hands null ones) is not a
// page of nulls, which readers would skip: its bounds hold every value.
func TestDecimalIndexerMarksOnlyPagesOfNullsAsNull(t *testing.T) {
	const size, precision = 11, 25
	ix := decimalBytesType{parquet.FixedLenByteArrayType(size), precision}.NewColumnIndexer(16)
	pos := TwosComplement(big.NewInt(7), size)
	ix.IndexPage(10, 10, parquet.Value{}, parquet.Value{})                                        // nulls only
	ix.IndexPage(10, 2, parquet.Value{}, parquet.Value{})                                         // values, no bounds
	ix.IndexPage(10, 0, parquet.FixedLenByteArrayValue(pos), parquet.FixedLenByteArrayValue(pos)) // one value, 7
	ci := ix.ColumnIndex()
	if !slices.Equal(ci.NullPages, []bool{true, false, false}) || !slices.Equal(ci.NullCounts, []int64{10, 2, 0}) {
		t.Fatalf("null pages %v, null counts %v", ci.NullPages, ci.NullCounts)
	}
	m := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(precision), nil), big.NewInt(1))
	lo, hi := TwosComplement(new(big.Int).Neg(m), size), TwosComplement(m, size)
	if len(ci.MinValues[0]) != 0 || len(ci.MaxValues[0]) != 0 ||
		!bytes.Equal(ci.MinValues[1], lo) || !bytes.Equal(ci.MaxValues[1], hi) ||
		!bytes.Equal(ci.MinValues[2], pos) || !bytes.Equal(ci.MaxValues[2], pos) {
		t.Fatalf("bounds %x, %x", ci.MinValues, ci.MaxValues)
	}
	ix.Reset()
	if ci := ix.ColumnIndex(); len(ci.NullPages) != 0 || len(ci.MinValues) != 0 {
		t.Fatalf("after Reset: %+v", ci)
	}
}
