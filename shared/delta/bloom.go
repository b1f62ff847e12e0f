package delta

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom"
	"github.com/parquet-go/parquet-go/bloom/xxhash"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Parquet split-block bloom filters
// (https://github.com/apache/parquet-format/blob/master/BloomFilter.md):
// the writer puts one in each column chunk of the columns
// WriteOptions.BloomFilterColumns names; the reader skips a row group when
// the filter of RowGroupFilter.Column proves that none of
// RowGroupFilter.Values is in it.

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

// bloomProbe tests the row groups of one file against the bloom filters of
// one column: the hashes of the values a reader looks for, as the Parquet
// spec hashes them (xxHash64 of the value's plain encoding, without a
// byte array's length prefix).
type bloomProbe struct {
	leaf   int
	values []any
	hashes []uint64 // of values
	// sorted tells that values are sorted by value.Compare: a row group is
	// then probed only with the values within its bounds. A merge's lookup
	// probes each row group with up to every key of its batch, and the
	// chance of a false positive grows with the probes: files written in
	// key order have row groups of narrow bounds, and only the few keys
	// within them count.
	sorted bool
}

// newBloomProbe returns the probe of values (of schema field fld) against
// f's bloom filters, or nil when the filters cannot be used: no values,
// no leaf column for fld, or a leaf whose physical type is not the one
// dsdelta writes for fld's type (a widened column's older files, an
// INT96 or millisecond timestamp), where the values' plain encoding would
// not be what the writer hashed. A nil probe keeps every row group.
func newBloomProbe(f *parquet.File, root *parquetfile.TreeNode, fld value.Field, mode string, flt *RowGroupFilter) *bloomProbe {
	if len(flt.Values) == 0 {
		return nil
	}
	p := childField(root, fld, mode)
	if p == nil || !p.IsLeaf() || p.Repetition() == format.Repeated || !hasBloomFilters(f, p.Leaf) {
		return nil
	}
	hash, kind := bloomHasher(fld.Type, p)
	if hash == nil {
		return nil
	}
	h := flt.hashed(kind, hash)
	if !h.ok {
		return nil
	}
	return &bloomProbe{leaf: p.Leaf, values: flt.Values, hashes: h.hashes, sorted: h.sorted}
}

// probes returns the hashes of the values that the bounds of row group rg
// can hold: all of them when the values are not sorted or the bounds not
// usable.
func (b *bloomProbe) probes(rg parquet.RowGroup, bounds *rowGroupBounds) []uint64 {
	if !b.sorted {
		return b.hashes
	}
	lo, hi, ok := bounds.minMax(rg)
	if !ok {
		return b.hashes
	}
	i := sort.Search(len(b.values), func(i int) bool { return value.Compare(b.values[i], lo) >= 0 })
	j := sort.Search(len(b.values), func(j int) bool { return value.Compare(b.values[j], hi) > 0 })
	return b.hashes[i:max(i, j)]
}

// hasBloomFilters reports whether a column chunk of leaf has a bloom
// filter: files written without filters cost no hashing.
func hasBloomFilters(f *parquet.File, leaf int) bool {
	for _, rg := range f.Metadata().RowGroups {
		if leaf < len(rg.Columns) && rg.Columns[leaf].MetaData.BloomFilterOffset > 0 {
			return true
		}
	}
	return false
}

// bloomHasher returns the hash of a value of Delta type t (in its Go
// representation) as stored in leaf p, or nil when t is not stored in p as
// dsdelta stores it, and the kind of hash it is: two leaves of one kind
// hash a value alike. The hasher reports false for a value of another Go
// type.
func bloomHasher(t value.Type, p *parquetfile.TreeNode) (func(any) (uint64, bool), string) {
	phys, _ := p.El.Type.Get()
	return leafHasher(t, p), phys.String() + "/" + t.String()
}

// leafHasher is bloomHasher's hash.
func leafHasher(t value.Type, p *parquetfile.TreeNode) func(any) (uint64, bool) {
	phys, ok := p.El.Type.Get()
	if !ok {
		return nil
	}
	if it, ok := p.El.LogicalType.Value.(*format.IntType); ok && !it.IsSigned {
		return nil
	}
	if ct, ok := p.El.ConvertedType.Get(); ok && ct >= deprecated.Uint8 && ct <= deprecated.Uint64 {
		return nil
	}
	h := bloom.XXH64{}
	switch {
	case phys == format.ByteArray && t == value.String:
		return func(v any) (uint64, bool) {
			s, ok := v.(string)
			return xxhash.Sum64([]byte(s)), ok
		}
	case phys == format.ByteArray && t == value.Binary:
		return func(v any) (uint64, bool) {
			b, ok := v.([]byte)
			return xxhash.Sum64(b), ok
		}
	case phys == format.Int32:
		// Narrow integers and dates are stored sign-extended to INT32.
		switch t {
		case value.Byte:
			return func(v any) (uint64, bool) { x, ok := v.(int8); return h.Sum64Uint32(uint32(int32(x))), ok }
		case value.Short:
			return func(v any) (uint64, bool) { x, ok := v.(int16); return h.Sum64Uint32(uint32(int32(x))), ok }
		case value.Integer:
			return func(v any) (uint64, bool) { x, ok := v.(int32); return h.Sum64Uint32(uint32(x)), ok }
		case value.Date:
			return func(v any) (uint64, bool) { x, ok := v.(value.Days); return h.Sum64Uint32(uint32(x)), ok }
		}
	case phys == format.Int64:
		switch {
		case t == value.Long:
			return func(v any) (uint64, bool) { x, ok := v.(int64); return h.Sum64Uint64(uint64(x)), ok }
		case t == value.Timestamp && microTimestamp(p):
			return func(v any) (uint64, bool) { x, ok := v.(value.Micros); return h.Sum64Uint64(uint64(x)), ok }
		case t == value.TimestampNTZ && microTimestamp(p):
			return func(v any) (uint64, bool) { x, ok := v.(value.LocalMicros); return h.Sum64Uint64(uint64(x)), ok }
		}
	}
	return nil
}

// microTimestamp reports whether an INT64 leaf holds microseconds.
func microTimestamp(p *parquetfile.TreeNode) bool {
	if ts, ok := p.El.LogicalType.Value.(*format.TimestampType); ok {
		_, micros := ts.Unit.Value.(*format.MicroSeconds)
		return micros
	}
	ct, ok := p.El.ConvertedType.Get()
	return ok && ct == deprecated.TimestampMicros
}

// filter clears keep[g] for the row groups g whose bloom filter of the
// probe's column proves none of the probe's values (within its bounds, see
// probes) in it. File.BloomFilters fetches the filters of the kept row
// groups with one prefetch and checks them; row groups without a
// split-block filter stay kept.
func (b *bloomProbe) filter(pf *parquetfile.File, bounds *rowGroupBounds, keep []bool) error {
	if b == nil {
		return nil
	}
	rgs := pf.Parquet().RowGroups()
	return pf.BloomFilters(b.leaf, keep, func(g int, f bloom.SplitBlockFilter) {
		if !anyIn(f, b.probes(rgs[g], bounds)) {
			keep[g] = false
		}
	})
}

// anyIn reports whether filter f may hold one of the hashes.
func anyIn(f bloom.SplitBlockFilter, hashes []uint64) bool {
	for _, h := range hashes {
		if f.Check(h) {
			return true
		}
	}
	return false
}
