package delta

import (
	"fmt"
	"slices"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Parquet split-block bloom filters
// (https://github.com/apache/parquet-format/blob/master/BloomFilter.md):
// the writer puts one in each column chunk of the columns
// WriteOptions.BloomFilterColumns names; the reader (parquetfile.Read)
// skips a row group when the filter of RowGroupFilter.Column proves that
// none of RowGroupFilter.Values is in it.

// DefaultBloomFilterBitsPerValue is the size of a bloom filter per row when
// WriteOptions.BloomFilterBitsPerValue is 0.
//
// The usual 10 bits (about 1% false positives per probe) suit a reader
// probing for one value. A merge probes a row group for every key of its
// batch, and the row group is read when any probe passes: with K keys
// absent from it, the chance it is read anyway is 1-(1-p)^K. At 10 bits
// (p ≈ 1.3%) a batch of 1 000 keys reads every row group, so the filters
// would be pure cost. A split-block filter of 32 bits per value has
// p ≈ 3.6e-5: a 1 000-key batch reads 3.6% of the row groups that hold
// none of its keys, a 10 000-key batch 30%. That is 4 bytes per row, about
// a tenth of a UUID key column, read in one request per file (the filters
// are written together before the footer).
const DefaultBloomFilterBitsPerValue = 32

// bloomFilterColumns returns the columns (names in the file) of
// opts.BloomFilterColumns that get a Parquet split-block bloom filter: not
// partition columns, nor those withoutBloomFilters leaves out. A column
// the schema lacks, or one that is not primitive, is an error.
func bloomFilterColumns(opts WriteOptions) ([]string, error) {
	var cols []string
	for _, name := range opts.BloomFilterColumns {
		f, ok := opts.Schema.Field(name)
		if !ok {
			return nil, fmt.Errorf("bloom filter: %w %q", ErrUnknownColumn, name)
		}
		if isPartitionColumn(opts.PartitionColumns, f.Name) || slices.Contains(opts.withoutBloomFilters, name) {
			continue
		}
		switch f.Type.(type) {
		case value.StructType, value.ArrayType, value.MapType:
			return nil, fmt.Errorf("bloom filter: column %q is not of a primitive type", name)
		}
		cols = append(cols, PhysicalName(f, opts.ColumnMappingMode))
	}
	return cols, nil
}

func isPartitionColumn(parts []string, name string) bool {
	for _, p := range parts {
		if p == name {
			return true
		}
	}
	return false
}
