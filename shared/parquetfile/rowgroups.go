package parquetfile

import (
	"slices"
	"strings"
	"sync"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// RowGroupFilter selects Parquet row groups by the bounds of one column
// recorded in the file footer's column-chunk statistics (see
// ReadSpec.Filter).
//
// Bounds are used only where they order exactly as value.Compare does:
// byte, short, integer, long, date and timestamp columns stored as signed
// INT32/INT64 (any timestamp unit), and string columns in files written by
// dsdelta (CreatedByDsdelta: parquet-go records untruncated chunk bounds).
// A row group with any other column type, or missing bounds, is always
// kept.
type RowGroupFilter struct {
	// Column is the caller's name of the column; Read is given its field
	// (ReadSpec.FilterField).
	Column string
	// Keep reports whether a row group whose non-null values of Column all
	// lie within [min, max] may hold a wanted row. min and max are in the
	// Go representation of the column's type in the reader's schema. Rows
	// whose Column is null go with their row group: a caller looking for
	// null values must not filter.
	Keep func(min, max any) bool
	// Values, when set, are the values of Column a caller looks for, in
	// the Go representation of its type, never null, and best sorted by
	// value.Compare: a row group Keep keeps is still skipped when its
	// bloom filter of Column (see Writer) proves
	// none of them present. Sorted values are probed only where the row
	// group's bounds can hold them, so fewer false positives add up. Row
	// groups without a filter are judged by their bounds alone (see
	// bloom.go).
	Values []any

	// memo keeps what Values cost to prepare (sorted, in sets, hashed),
	// for all the files one filter reads: a merge's lookup reads many
	// files with the same thousands of keys.
	memo filterMemo
}

// filterMemo is RowGroupFilter's cache, shared by the goroutines reading
// files with one filter.
type filterMemo struct {
	mu      sync.Mutex
	matches map[matchKey]*valueMatch
	hashes  map[string]*bloomHashes
}

type matchKey struct {
	typ string
	col int
}

// bloomHashes are Values hashed as one kind of column stores them.
type bloomHashes struct {
	hashes []uint64
	ok     bool // every value hashed
	sorted bool // Values sorted by value.Compare
}

// match returns newValueMatch(fld, col, f.Values), made once per type and
// column position.
func (f *RowGroupFilter) match(fld value.Field, col int) *valueMatch {
	f.memo.mu.Lock()
	defer f.memo.mu.Unlock()
	k := matchKey{fld.Type.String(), col}
	if m, ok := f.memo.matches[k]; ok {
		return m
	}
	if f.memo.matches == nil {
		f.memo.matches = map[matchKey]*valueMatch{}
	}
	m := newValueMatch(fld, col, f.Values)
	f.memo.matches[k] = m
	return m
}

// hashed returns Values hashed by hash, made once per kind of hash (see
// bloomHasher).
func (f *RowGroupFilter) hashed(kind string, hash func(any) (uint64, bool)) *bloomHashes {
	f.memo.mu.Lock()
	defer f.memo.mu.Unlock()
	if h, ok := f.memo.hashes[kind]; ok {
		return h
	}
	if f.memo.hashes == nil {
		f.memo.hashes = map[string]*bloomHashes{}
	}
	h := &bloomHashes{hashes: make([]uint64, len(f.Values)), ok: true, sorted: slices.IsSortedFunc(f.Values, value.Compare)}
	for i, v := range f.Values {
		if h.hashes[i], h.ok = hash(v); !h.ok {
			break
		}
	}
	f.memo.hashes[kind] = h
	return h
}

// RowGroupBounds reads the footer bounds of one leaf column, converted to
// the Go representation of a type of package value.
type RowGroupBounds struct {
	leaf int
	conv func(parquet.Value) (any, error)
}

// CreatedByDsdelta prefixes the created_by of the Parquet files dsdelta
// writes: their footers are known to carry exact null counts and
// untruncated chunk bounds.
const CreatedByDsdelta = "dsdelta"

// WrittenByDsdelta reports whether a file's created_by (its footer's) is
// dsdelta's (CreatedByDsdelta).
func WrittenByDsdelta(createdBy string) bool { return strings.HasPrefix(createdBy, CreatedByDsdelta) }

// NewRowGroupBounds returns how to read the bounds of field fld in f (its
// node in f's schema tree root found by naming), or nil when they cannot
// be trusted for value.Compare's order.
func NewRowGroupBounds(f *parquet.File, root *TreeNode, fld value.Field, naming Naming) *RowGroupBounds {
	p := root.Field(fld, naming)
	if p == nil || !p.IsLeaf() || p.Repetition() == format.Repeated {
		return nil
	}
	phys, _ := p.El.Type.Get()
	if it, ok := p.El.LogicalType.Value.(*format.IntType); ok && !it.IsSigned {
		return nil // unsigned order
	}
	if ct, ok := p.El.ConvertedType.Get(); ok && ct >= deprecated.Uint8 && ct <= deprecated.Uint64 {
		return nil
	}
	switch fld.Type {
	case value.Byte, value.Short, value.Integer, value.Long, value.Date:
		if phys != format.Int32 && phys != format.Int64 {
			return nil
		}
	case value.Timestamp, value.TimestampNTZ:
		// INT96 bounds have no defined order. INT64 in millis or nanos
		// converts monotonically to micros, so converted bounds still
		// bound the converted values.
		if phys != format.Int64 {
			return nil
		}
	case value.String:
		// Other writers may truncate byte-array statistics (or, in old
		// files, order them signed); parquet-go as dsdelta uses it keeps
		// the exact page bounds, and verbatim row-group copies clone them.
		if phys != format.ByteArray || !WrittenByDsdelta(f.Metadata().CreatedBy) {
			return nil
		}
	default:
		return nil
	}
	conv, err := Converter(fld.Type, &p.El, nil)
	if err != nil {
		return nil
	}
	return &RowGroupBounds{leaf: p.Leaf, conv: conv}
}

// Keep applies filter to the bounds of row group rg; a row group without
// usable bounds (b nil) is kept.
func (b *RowGroupBounds) Keep(rg parquet.RowGroup, filter *RowGroupFilter) bool {
	if filter == nil || filter.Keep == nil {
		return true
	}
	min, max, ok := b.minMax(rg)
	return !ok || filter.Keep(min, max)
}

// minMax returns the bounds of row group rg, converted; ok is false when
// they are missing or not usable.
func (b *RowGroupBounds) minMax(rg parquet.RowGroup) (min, max any, ok bool) {
	if b == nil {
		return nil, nil, false
	}
	chunks := rg.ColumnChunks()
	if b.leaf >= len(chunks) {
		return nil, nil, false
	}
	fc, ok := chunks[b.leaf].(*parquet.FileColumnChunk)
	if !ok {
		return nil, nil, false
	}
	lo, hi, ok := fc.Bounds()
	if !ok || lo.IsNull() || hi.IsNull() {
		return nil, nil, false
	}
	var err error
	if min, err = b.conv(lo); err != nil {
		return nil, nil, false
	}
	if max, err = b.conv(hi); err != nil {
		return nil, nil, false
	}
	return min, max, true
}
