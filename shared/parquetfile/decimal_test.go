package parquetfile

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Tests of parquet-go's handling of decimals of more than 18 digits,
// stored as FIXED_LEN_BYTE_ARRAY. Before v0.32.1 (parquet-go #595) it
// ordered them as unsigned bytes, so that page and chunk bounds put -5
// above 3, and its column index left out the bounds of a page of nulls;
// package delta wrote such columns without page bounds and with a column
// index of its own. Since v0.32.1 it gets both right and delta leaves
// them to it: these tests fail if it stops doing so. Files written before
// keep their bounds, which delta still tells apart (unsignedDecimalStats)
// and reads without the column index where it is short
// (delta/testdata/parquet-go-v0.32.0).

// TestParquetGoOrdersWideDecimalsAsSignedValues: a decimal's sort order is
// "signed comparison of the represented value" (LogicalTypes.md, DECIMAL).
func TestParquetGoOrdersWideDecimalsAsSignedValues(t *testing.T) {
	typ := parquet.Decimal(2, 25, parquet.FixedLenByteArrayType(11)).Type()
	values := []int64{-1 << 62, -5, -1, 0, 3, 1 << 62}
	for i, x := range values {
		for j, y := range values {
			a := parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(x), 11))
			b := parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(y), 11))
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := typ.Compare(a, b); sign(got) != want {
				t.Fatalf("parquet-go compares %d with %d as %d, want %d", x, y, got, want)
			}
		}
	}
}

// TestParquetGoBoundsEveryPageOfAWideDecimal: its column index has a bound
// per page, empty for a page of nulls (parquet.thrift, null_pages: "writers
// have to set the corresponding entries in min_values and max_values to
// byte[0], so that all lists have the same length"), and a page of both
// signs is bounded by its signed extremes.
func TestParquetGoBoundsEveryPageOfAWideDecimal(t *testing.T) {
	typ := parquet.Decimal(2, 25, parquet.FixedLenByteArrayType(11)).Type()
	v := func(x int64) parquet.Value { return parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(x), 11)) }
	ix := typ.NewColumnIndexer(16)
	ix.IndexPage(10, 10, parquet.Value{}, parquet.Value{})
	ix.IndexPage(10, 0, v(-5), v(3))
	ix.IndexPage(10, 2, v(7), v(9))
	ci := ix.ColumnIndex()
	if len(ci.NullPages) != 3 || len(ci.MinValues) != 3 || len(ci.MaxValues) != 3 {
		t.Fatalf("column index of %d pages with %d min and %d max bounds", len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues))
	}
	if !ci.NullPages[0] || ci.NullPages[1] || ci.NullPages[2] || len(ci.MinValues[0]) != 0 || len(ci.MaxValues[0]) != 0 {
		t.Fatalf("null pages %v, first bounds % x, % x", ci.NullPages, ci.MinValues[0], ci.MaxValues[0])
	}
	if !bytes.Equal(ci.MinValues[1], v(-5).ByteArray()) || !bytes.Equal(ci.MaxValues[1], v(3).ByteArray()) {
		t.Fatalf("page of -5 and 3 bounded by % x, % x", ci.MinValues[1], ci.MaxValues[1])
	}
	if ci.BoundaryOrder == format.Descending {
		t.Fatalf("boundary order %v for pages -5..3, 7..9", ci.BoundaryOrder)
	}
}

// TestCompareDecimalBytesIsTheOrderOfTheValues, of one length or two.
func TestCompareDecimalBytesIsTheOrderOfTheValues(t *testing.T) {
	values := []*big.Int{
		new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 90)), big.NewInt(-1 << 40), big.NewInt(-256),
		big.NewInt(-5), big.NewInt(-1), big.NewInt(0), big.NewInt(3), big.NewInt(255), big.NewInt(1 << 40),
		new(big.Int).Lsh(big.NewInt(1), 90),
	}
	for _, x := range values {
		for _, y := range values {
			for _, sizes := range [][2]int{{16, 16}, {12, 16}, {16, 12}} {
				a, b := TwosComplement(x, sizes[0]), TwosComplement(y, sizes[1])
				if got, want := CompareDecimalBytes(a, b), x.Cmp(y); got != want {
					t.Errorf("CompareDecimalBytes(%v in %d bytes, %v in %d) = %d, want %d", x, sizes[0], y, sizes[1], got, want)
				}
			}
		}
	}
	if CompareDecimalBytes(nil, TwosComplement(big.NewInt(-1), 4)) != 1 || CompareDecimalBytes(nil, []byte{0, 0}) != 0 {
		t.Error("an empty value is not zero")
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
