package parquetfile

import (
	"math/big"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/value"
)

// The column index (parquet-format PageIndex.md; ColumnIndex in
// parquet.thrift) of a decimal of more than 18 digits, stored as a
// FIXED_LEN_BYTE_ARRAY of its two's complement, big-endian.
//
// parquet-go's indexer for such a column (v0.32) has two faults:
//   - it adds no bound for a page of nulls only, so a chunk with such a
//     page has fewer bounds than pages. parquet.thrift, null_pages: "If
//     true, a page contains only null values, and writers have to set the
//     corresponding entries in min_values and max_values to byte[0], so
//     that all lists have the same length." Our reader refused such an
//     index as corrupt, and other readers may too;
//   - it takes a page's bounds in the order of unsigned bytes, where a
//     decimal's is "signed comparison of the represented value"
//     (LogicalTypes.md, DECIMAL, sort order): a page of -5 and 3 got min
//     3 and max -5, and a reader filtering pages by the index skips pages
//     that hold the rows it wants.
//
// decimalIndexer writes one entry per page, empty for a page of nulls, and
// bounds that hold every value of the page in signed order (when it is
// given a page's bounds, see below). A page's
// unsigned bounds are its signed ones when its values are all of one sign
// (two's complement keeps the order within a sign); when they are not,
// its bounds are the least and greatest values of the column's precision
// (bounds "must still be valid values within the column's logical type"),
// which hold everything. The boundary order is UNORDERED, always true.
//
// The column chunk's statistics in the footer are the least and greatest
// of the pages' bounds by the type's Compare, of unsigned bytes too, and
// from unsigned page bounds no order finds a page's signed least value: a
// reader pruning row groups by them skips ones that hold the rows it
// wants (min 1.00, max -5.00 for -5, 3 and 1; "WHERE d < 0" finds none).
// So the pages' bounds are not taken at all (WideDecimalOptions): the
// chunk's statistics keep their null count, without min and max, which
// they may omit, and the column index has the precision's limits for
// every page of values. Nothing prunes such a column by its Parquet
// bounds, and nothing is missed; add.stats takes its bounds row by row
// (boundsAsDelta), for Delta's data skipping.

// DecimalNode is the leaf of a decimal of more than 18 digits, with
// decimalIndexer as its column indexer.
func DecimalNode(dt value.DecimalType) parquet.Node {
	return parquet.Decimal(dt.Scale, dt.Precision, decimalBytesType{parquet.FixedLenByteArrayType(DecimalBytes(dt.Precision)), dt.Precision})
}

// decimalBytesType is the FIXED_LEN_BYTE_ARRAY type of such a decimal,
// with decimalIndexer as its column indexer.
type decimalBytesType struct {
	parquet.Type
	precision int
}

func (t decimalBytesType) NewColumnIndexer(int) parquet.ColumnIndexer {
	size := t.Length()
	m := new(big.Int).Sub(DecimalLimit(t.precision), big.NewInt(1))
	return &decimalIndexer{size: size, least: TwosComplement(new(big.Int).Neg(m), size), greatest: TwosComplement(m, size)}
}

// decimalIndexer is the column indexer of a decimalBytesType leaf.
type decimalIndexer struct {
	size int
	// The least and greatest values of the column's precision, the bounds
	// of a page whose own cannot be told (never changed: pages share them).
	least, greatest []byte
	nullPages       []bool
	nullCounts      []int64
	min, max        [][]byte
}

func (i *decimalIndexer) Reset() {
	i.nullPages, i.nullCounts, i.min, i.max = i.nullPages[:0], i.nullCounts[:0], i.min[:0], i.max[:0]
}

func (i *decimalIndexer) IndexPage(numValues, numNulls int64, min, max parquet.Value) {
	null := numValues == numNulls
	i.nullPages = append(i.nullPages, null)
	i.nullCounts = append(i.nullCounts, numNulls)
	lo, hi := []byte{}, []byte{}
	if !null {
		lo, hi = i.bounds(min.ByteArray(), max.ByteArray())
	}
	i.min, i.max = append(i.min, lo), append(i.max, hi)
}

func (i *decimalIndexer) ColumnIndex() format.ColumnIndex {
	return format.ColumnIndex{
		NullPages:     append([]bool(nil), i.nullPages...),
		NullCounts:    append([]int64(nil), i.nullCounts...),
		MinValues:     append([][]byte(nil), i.min...),
		MaxValues:     append([][]byte(nil), i.max...),
		BoundaryOrder: format.Unordered,
	}
}

// bounds returns the signed bounds of a page of values whose bounds in
// unsigned order are lo and hi (copies: parquet-go's may point into its
// buffers).
func (i *decimalIndexer) bounds(lo, hi []byte) ([]byte, []byte) {
	if len(lo) == i.size && len(hi) == i.size && lo[0]&0x80 == hi[0]&0x80 {
		return append([]byte(nil), lo...), append([]byte(nil), hi...)
	}
	// Non-negative values sort first unsigned: the page holds both signs.
	// Or it has no bounds (SkipPageBounds, as WideDecimalOptions sets, has
	// parquet-go pass null ones), or bounds of another width, which no
	// value of the type has.
	return i.least, i.greatest
}

// WideDecimalOptions are the writer options of schema's decimals stored as
// FIXED_LEN_BYTE_ARRAY: their pages' bounds are not taken (see above).
func WideDecimalOptions(schema *parquet.Schema) []parquet.WriterOption {
	var opts []parquet.WriterOption
	for _, path := range schema.Columns() {
		if wideDecimalLeaf(schema, path) {
			opts = append(opts, parquet.SkipPageBounds(path...))
		}
	}
	return opts
}

// wideDecimalLeaf reports whether the leaf at path of schema is a decimal
// stored as FIXED_LEN_BYTE_ARRAY.
func wideDecimalLeaf(schema *parquet.Schema, path []string) bool {
	leaf, ok := schema.Lookup(path...)
	if !ok {
		return false
	}
	t := leaf.Node.Type()
	lt := t.LogicalType()
	if t.Kind() != parquet.FixedLenByteArray || lt == nil {
		return false
	}
	_, ok = lt.Value.(*format.DecimalType)
	return ok
}
