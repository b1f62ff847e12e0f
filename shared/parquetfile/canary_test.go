package parquetfile

import (
	"math/big"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Canaries of the parquet-go faults this package works around: each fails
// once the library is fixed, for the workaround to be removed then.

// TestCanaryParquetGoOrdersWideDecimalsAsUnsignedBytes: parquet-go
// (v0.32.0) compares a decimal stored as FIXED_LEN_BYTE_ARRAY as unsigned
// bytes, so its page and chunk bounds put -5 above 3. When it fails,
// parquet-go orders them as signed values: drop WideDecimalOptions and the
// indexer of DecimalNode (decimalindex.go), and see whether delta's
// chunkBounds.unsignedDecimalBounds is still needed for files written
// before. v0.32.1 fixes it (parquet-go #595).
func TestCanaryParquetGoOrdersWideDecimalsAsUnsignedBytes(t *testing.T) {
	typ := parquet.Decimal(2, 25, parquet.FixedLenByteArrayType(11)).Type()
	neg := parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(-5), 11))
	pos := parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(3), 11))
	if typ.Compare(neg, pos) < 0 {
		t.Fatal("parquet-go orders wide decimals as signed values now: the workaround of decimalindex.go can go")
	}
}

// TestCanaryParquetGoLeavesPagesOfNullsUnbounded: parquet-go (v0.32.0)
// adds no min and max to the column index of a FIXED_LEN_BYTE_ARRAY
// decimal for a page of nulls only, so the index has fewer bounds than
// pages (decimalIndexer adds empty ones). When it fails, parquet-go's
// index has a bound per page: decimalIndexer can go (with the canary
// above). v0.32.1 fixes it (parquet-go #595).
func TestCanaryParquetGoLeavesPagesOfNullsUnbounded(t *testing.T) {
	typ := parquet.Decimal(2, 25, parquet.FixedLenByteArrayType(11)).Type()
	ix := typ.NewColumnIndexer(16)
	seven := parquet.FixedLenByteArrayValue(TwosComplement(big.NewInt(7), 11))
	ix.IndexPage(10, 10, parquet.Value{}, parquet.Value{})
	ix.IndexPage(10, 0, seven, seven)
	if ci := ix.ColumnIndex(); len(ci.MinValues) == len(ci.NullPages) && len(ci.MaxValues) == len(ci.NullPages) {
		t.Fatal("parquet-go bounds a page of nulls in a wide decimal's column index now: decimalIndexer can go")
	}
}
