package parquetfile

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
	"github.com/parquet-go/parquet-go/format"
)

// Sparse reads through the Parquet page index
// (https://github.com/apache/parquet-format/blob/master/PageIndex.md).
//
// A read with ReadSpec.OnlyValues wants the few rows whose filter column
// holds one of a batch of values. In a file sorted by that column, the
// column index (each page's min and max) tells which pages can hold them,
// and the offset index (each page's location and first row) where those
// pages are: the read fetches and decodes only them, then only the pages
// of the other columns that hold the matched rows. The page bounds are a
// filter only: pages of an unsorted file have wide, overlapping bounds and
// are all read, and every value of a page read is tested.

// valueMatch tests the values of a ReadSpec.OnlyValues read against the
// values looked for.
type valueMatch struct {
	// col is the filter column's position in the read's output columns,
	// typ its type.
	col int
	typ value.Type
	// values are the values looked for, sorted by value.Compare, without
	// duplicates.
	values []any
	strs   map[string]struct{} // string columns
	// strList is values as strings, for a string column.
	strList []string
	others  map[any]struct{} // other columns
}

// lookedFor is a sorted list of values looked for: all those of a
// valueMatch, or those a row group's bloom filter may hold (see
// sparseReader.narrow).
type lookedFor struct {
	values []any
	strs   []string // values as strings, for a string column
}

// list returns all the values m looks for.
func (m *valueMatch) list() lookedFor {
	return lookedFor{values: m.values, strs: m.strList}
}

// subset returns vals, values m looks for sorted by value.Compare
// (duplicates allowed), as a list.
func (m *valueMatch) subset(vals []any) lookedFor {
	vals = slices.CompactFunc(vals, func(a, b any) bool { return value.Compare(a, b) == 0 })
	l := lookedFor{values: vals}
	if m.strList != nil {
		l.strs = make([]string, len(vals))
		for i, v := range vals {
			l.strs[i] = v.(string)
		}
	}
	return l
}

// slice returns l's values i to j.
func (l lookedFor) slice(i, j int) lookedFor {
	out := lookedFor{values: l.values[i:j]}
	if l.strs != nil {
		out.strs = l.strs[i:j]
	}
	return out
}

// goTypeOf is the Go type a value of type t reads as, for the types
// OnlyValues filters on; nil for the others.
func goTypeOf(t value.Type) reflect.Type {
	switch t {
	case value.Byte:
		return reflect.TypeFor[int8]()
	case value.Short:
		return reflect.TypeFor[int16]()
	case value.Integer:
		return reflect.TypeFor[int32]()
	case value.Long:
		return reflect.TypeFor[int64]()
	case value.Date:
		return reflect.TypeFor[value.Days]()
	case value.Timestamp:
		return reflect.TypeFor[value.Micros]()
	case value.TimestampNTZ:
		return reflect.TypeFor[value.LocalMicros]()
	case value.String:
		return reflect.TypeFor[string]()
	}
	return nil
}

// newValueMatch returns the test of OnlyValues for field fld, at position
// col of the output, or nil (every row returned) when fld is not of a type
// OnlyValues filters on or a value is not of fld's Go type: a batch read
// before a column was widened compares its values by another rule than
// value.Compare, so the caller must see every row.
func newValueMatch(fld value.Field, col int, values []any) *valueMatch {
	gt := goTypeOf(fld.Type)
	if gt == nil {
		return nil
	}
	for _, v := range values {
		if v == nil || reflect.TypeOf(v) != gt {
			return nil
		}
	}
	sorted := slices.Clone(values)
	slices.SortFunc(sorted, value.Compare)
	sorted = slices.CompactFunc(sorted, func(a, b any) bool { return value.Compare(a, b) == 0 })
	m := &valueMatch{col: col, typ: fld.Type, values: sorted}
	if fld.Type == value.String {
		m.strs = make(map[string]struct{}, len(sorted))
		m.strList = make([]string, len(sorted))
		for i, v := range sorted {
			m.strs[v.(string)] = struct{}{}
			m.strList[i] = v.(string)
		}
	} else {
		m.others = make(map[any]struct{}, len(sorted))
		for _, v := range sorted {
			m.others[v] = struct{}{}
		}
	}
	return m
}

// has reports whether v, a value of the filter column as read, is one of
// the values looked for.
func (m *valueMatch) has(v any) bool {
	if v == nil {
		return false
	}
	if m.strs != nil {
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, ok = m.strs[s]
		return ok
	}
	_, ok := m.others[v]
	return ok
}

// storedTest tests the stored values of a leaf of physical type phys for
// values of m it looks for, without converting them: as they lie in a
// page (its INT64 or INT32 array, or its byte arrays' bytes and offsets),
// or one parquet.Value at a time. It rules out most values other than
// those looked for and never a match: for strings it is exact, and it is
// made for integer columns only where the conversion keeps the low 32
// bits of the stored value (long, integer and date columns, stored as
// INT32 or INT64), not where it truncates (byte, short) or scales
// (timestamps). The caller tests the values it passes exactly.
//
// Boxing every value read to test it cost a third of a lookup; testing a
// parquet.Value made of every value of every page read (24 bytes each,
// through two calls) a quarter of the CPU of a random batch's lookups in
// a 10M-row table, where each of thousands of pages holds one key looked
// for among a thousand values.
//
// Strings are found by a cursor in the sorted values looked for within the
// page's bounds, not in a set of every value looked for: the pages of a
// sorted file hold their values in order, so each stored value costs a
// comparison or two (most differ from the cursor's value in the first
// bytes), where a set lookup hashed all its bytes and missed the cache in
// a map of the whole batch's keys. Under random updates of a 10M-row table
// with a UUID key, where every page of the key column holds dozens of the
// batch's keys, those lookups were a fifth of the lookups' CPU. A value
// before the cursor's (an unsorted file) is found by binary search.
type storedTest struct {
	phys format.Type
	// The stored values looked for: a list when few (a page of a sorted
	// file has one or two values within its bounds: they are compared one
	// by one, cheaper than hashing), a set when many.
	i64   []int64
	set64 map[int64]struct{}
	i32   []int32
	set32 map[int32]struct{}
	// strs are the strings looked for, sorted; cur the cursor in them.
	strs []string
	cur  int
}

// storedTest returns the test of the stored values of a leaf of physical
// type phys for the values of m from lo to hi, or nil for a leaf it does
// not test.
func (m *valueMatch) storedTest(phys format.Type, lo, hi int) *storedTest {
	return m.storedTestOf(phys, m.list().slice(lo, hi))
}

// storedTestOf is storedTest of the values of l, values m looks for.
func (m *valueMatch) storedTestOf(phys format.Type, l lookedFor) *storedTest {
	const few = 8
	t := &storedTest{phys: phys}
	vals := l.values
	switch {
	case m.strs != nil && phys == format.ByteArray:
		t.strs = l.strs
	case phys == format.Int64 && m.typ == value.Long:
		t.i64, t.set64 = storedKeys(vals, few, func(x int64) int64 { return x })
	case phys == format.Int32 && (m.typ == value.Long || m.typ == value.Integer || m.typ == value.Date):
		// The low 32 bits of the value looked for.
		t.i32, t.set32 = storedKeys(vals, few, func(x int64) int32 { return int32(x) })
	default:
		return nil
	}
	return t
}

// storedKeys maps the values looked for to stored values by key, as a list
// when they are few and a set otherwise.
func storedKeys[T comparable](vals []any, few int, key func(int64) T) ([]T, map[T]struct{}) {
	if len(vals) > few {
		set := make(map[T]struct{}, len(vals))
		for _, v := range vals {
			set[key(reflect.ValueOf(v).Int())] = struct{}{}
		}
		return nil, set
	}
	list := make([]T, len(vals))
	for i, v := range vals {
		list[i] = key(reflect.ValueOf(v).Int())
	}
	return list, nil
}

// has tests one stored value (not null).
func (t *storedTest) has(v parquet.Value) bool {
	switch t.phys {
	case format.Int64:
		return holds(v.Int64(), t.i64, t.set64)
	case format.Int32:
		return holds(v.Int32(), t.i32, t.set32)
	}
	return t.hasBytes(v.ByteArray())
}

// hasBytes tests a stored byte array: it moves the cursor to the first
// string looked for not before b, galloping forward from it, or searching
// from the start when b comes before the string ahead of the cursor.
func (t *storedTest) hasBytes(b []byte) bool {
	strs, i := t.strs, t.cur
	if i > 0 && string(b) <= strs[i-1] {
		i = sort.Search(i, func(k int) bool { return strs[k] >= string(b) })
	} else {
		step := 1
		for i+step <= len(strs) && strs[i+step-1] < string(b) {
			i += step
			step *= 2
		}
		hi := min(i+step, len(strs))
		i += sort.Search(hi-i, func(k int) bool { return strs[i+k] >= string(b) })
	}
	t.cur = i
	return i < len(strs) && strs[i] == string(b)
}

// holds reports whether x is in list or set.
func holds[T comparable](x T, list []T, set map[T]struct{}) bool {
	if set != nil {
		_, ok := set[x]
		return ok
	}
	for _, c := range list {
		if x == c {
			return true
		}
	}
	return false
}

// scan appends to out the offsets of the values of page p (of rows rows)
// that the test passes, and reports whether it could read them: the page
// must hold one stored value per row (no null, no repetition) and not be
// dictionary-encoded.
func (t *storedTest) scan(p parquet.Page, rows int, out []int64) ([]int64, bool) {
	if p.Dictionary() != nil || len(p.RepetitionLevels()) > 0 || p.NumNulls() != 0 || p.NumValues() != int64(rows) {
		return out, false
	}
	data := p.Data()
	switch {
	case t.phys == format.Int64 && data.Kind() == encoding.Int64:
		vals := data.Int64()
		if len(vals) != rows {
			return out, false
		}
		return scanStored(vals, t.i64, t.set64, out), true
	case t.phys == format.Int32 && data.Kind() == encoding.Int32:
		vals := data.Int32()
		if len(vals) != rows {
			return out, false
		}
		return scanStored(vals, t.i32, t.set32, out), true
	case t.phys == format.ByteArray && data.Kind() == encoding.ByteArray:
		b, offs := data.ByteArray()
		if len(offs) != rows+1 {
			return out, false
		}
		for j := range rows {
			if t.hasBytes(b[offs[j]:offs[j+1]]) {
				out = append(out, int64(j))
			}
		}
		return out, true
	}
	return out, false
}

// storedValues appends to dst the values of page p at offsets offs
// (ascending, within the page) of a leaf of maximum definition level
// maxDef, as the page's value reader hands them out (a null with its
// level, a byte array pointing into the page), read from the page's
// stored values where they lie rather than all of them made into
// parquet.Values first: a sparse read wants a few rows of each page of
// the other columns. It reports false for a page it does not read this
// way (repetition levels; boolean or INT96 values; a dictionary whose
// indexes are not INT32).
func storedValues(p parquet.Page, offs []int64, maxDef, leaf int, dst []parquet.Value) ([]parquet.Value, bool) {
	if len(p.RepetitionLevels()) > 0 {
		return dst, false
	}
	data := p.Data()
	dict := p.Dictionary()
	kind := data.Kind()
	if dict != nil && kind != encoding.Int32 {
		return dst, false
	}
	var n int // the page's stored values
	switch kind {
	case encoding.Int32:
		n = len(data.Int32())
	case encoding.Int64:
		n = len(data.Int64())
	case encoding.Float:
		n = len(data.Float())
	case encoding.Double:
		n = len(data.Double())
	case encoding.ByteArray:
		_, o := data.ByteArray()
		n = max(len(o)-1, 0)
	case encoding.FixedLenByteArray:
		b, size := data.FixedLenByteArray()
		if size <= 0 {
			return dst, false
		}
		n = len(b) / size
	default:
		return dst, false
	}
	defs := p.DefinitionLevels()
	if defs == nil && int64(n) != p.NumValues() || defs != nil && len(defs) != int(p.NumValues()) {
		return dst, false
	}
	vi, at := 0, 0 // the stored value of row at
	for _, r := range offs {
		if r < 0 || r >= p.NumValues() {
			return dst, false
		}
		if defs != nil {
			for ; at < int(r); at++ {
				if int(defs[at]) == maxDef {
					vi++
				}
			}
			if d := int(defs[r]); d != maxDef {
				dst = append(dst, parquet.Value{}.Level(0, d, leaf))
				continue
			}
		} else {
			vi = int(r)
		}
		if vi >= n {
			return dst, false
		}
		var v parquet.Value
		switch kind {
		case encoding.Int32:
			i := data.Int32()[vi]
			if dict != nil {
				if i < 0 || int(i) >= dict.Len() {
					return dst, false
				}
				v = dict.Index(i)
			} else {
				v = parquet.Int32Value(i)
			}
		case encoding.Int64:
			v = parquet.Int64Value(data.Int64()[vi])
		case encoding.Float:
			v = parquet.FloatValue(data.Float()[vi])
		case encoding.Double:
			v = parquet.DoubleValue(data.Double()[vi])
		case encoding.ByteArray:
			b, o := data.ByteArray()
			v = parquet.ByteArrayValue(b[o[vi]:o[vi+1]])
		case encoding.FixedLenByteArray:
			b, size := data.FixedLenByteArray()
			v = parquet.FixedLenByteArrayValue(b[vi*size : (vi+1)*size])
		}
		dst = append(dst, v.Level(0, maxDef, leaf))
	}
	return dst, true
}

// scanStored appends to out the offsets of vals in list or set: the hot
// loop of a lookup, with the usual single value looked for compared
// inline.
func scanStored[T comparable](vals, list []T, set map[T]struct{}, out []int64) []int64 {
	if set == nil && len(list) == 1 {
		c := list[0]
		for j, x := range vals {
			if x == c {
				out = append(out, int64(j))
			}
		}
		return out
	}
	for j, x := range vals {
		if holds(x, list, set) {
			out = append(out, int64(j))
		}
	}
	return out
}

// span returns the values in [lo, hi] as l.values[i:j]; a nil hi has no
// upper bound.
func (l lookedFor) span(lo, hi any) (i, j int) {
	if l.strs != nil {
		// Strings compare as strings: value.Compare's type switch on
		// every probe was most of the pages' selection.
		if slo, ok := lo.(string); ok {
			if shi, ok := hi.(string); ok || hi == nil {
				i, _ = slices.BinarySearch(l.strs, slo)
				j = len(l.strs)
				if hi != nil {
					j = i + sort.Search(len(l.strs)-i, func(k int) bool { return l.strs[i+k] > shi })
				}
				return i, j
			}
		}
	}
	i = sort.Search(len(l.values), func(i int) bool { return value.Compare(l.values[i], lo) >= 0 })
	j = len(l.values)
	if hi != nil {
		j = i + sort.Search(len(l.values)-i, func(k int) bool { return value.Compare(l.values[i+k], hi) > 0 })
	}
	return i, j
}

// filter wraps fn so that only the rows m matches reach it; a nil m passes
// every row.
func (m *valueMatch) filter(fn func(int64, []any) error) func(int64, []any) error {
	if m == nil {
		return fn
	}
	return func(pos int64, row []any) error {
		if !m.has(row[m.col]) {
			return nil
		}
		return fn(pos, row)
	}
}

// ReadStats counts how the row groups of reads went: a test that wants to
// know reads with a context WithReadStats made.
type ReadStats struct {
	Sparse int // row groups read through the page index
	Dense  int // row groups read whole
	Pages  int // pages decoded through the page index
	// The filter column's pages decoded through the page index, tested
	// as stored (storedTest) or value by value.
	Stored, ByValue int
	// Narrowed counts the row groups read through the page index for
	// only the values their bloom filter may hold.
	Narrowed int
}

type readStatsKey struct{}

// WithReadStats returns ctx whose reads count into st.
func WithReadStats(ctx context.Context, st *ReadStats) context.Context {
	return context.WithValue(ctx, readStatsKey{}, st)
}

// countRead records that a row group was read sparsely (decoding pages
// pages) or not.
func countRead(ctx context.Context, sparse bool, pages int) {
	st, ok := ctx.Value(readStatsKey{}).(*ReadStats)
	switch {
	case !ok:
	case sparse:
		st.Sparse++
		st.Pages += pages
	default:
		st.Dense++
	}
}

// countNarrowed records n row groups narrowed by their bloom filter.
func countNarrowed(ctx context.Context, n int) {
	if st, ok := ctx.Value(readStatsKey{}).(*ReadStats); ok {
		st.Narrowed += n
	}
}

// countTested records how many pages of the filter column were tested as
// stored and value by value.
func countTested(ctx context.Context, stored, byValue int) {
	if st, ok := ctx.Value(readStatsKey{}).(*ReadStats); ok {
		st.Stored += stored
		st.ByValue += byValue
	}
}

// sparseCol is one output column of a sparse read: a constant, or a
// top-level leaf that is not repeated (one value per row).
type sparseCol struct {
	constant any
	leaf     int // -1 for a constant
	maxDef   int
	conv     func(parquet.Value) (any, error)
}

// sparseReader reads the row groups of one file through the page index.
type sparseReader struct {
	ra    *File
	f     *parquet.File
	m     *valueMatch
	conv  func(parquet.Value) (any, error) // of the filter leaf's bounds
	leaf  int                              // the filter column's leaf
	phys  format.Type                      // its physical type
	cols  []sparseCol
	index []groupIndex // per row group; nil entries are read densely
	vals  []parquet.Value
	// spans holds, for each row group and selected page (aligned with
	// selectPages' result), the values its bounds can hold, as a range of
	// the row group's list (lookedFor).
	spans [][][2]int
	// bounds holds the bounds (min, max) of the pages selectPages chose,
	// aligned with them, for narrow.
	bounds [][][2]any
	// narrowed holds, for the row groups narrow narrowed, the values
	// looked for that their bloom filter may hold.
	narrowed []*lookedFor
}

// lookedFor returns the values looked for in row group g: those its bloom
// filter may hold when narrow was told them, else all.
func (s *sparseReader) lookedFor(g int) lookedFor {
	if s.narrowed != nil && s.narrowed[g] != nil {
		return *s.narrowed[g]
	}
	return s.m.list()
}

// groupIndex is the page index of the leaves a sparse read of one row
// group needs.
type groupIndex struct {
	ci *format.ColumnIndex         // of the filter leaf
	oi map[int]*format.OffsetIndex // by leaf
}

// newSparseReader returns the sparse reader of a file whose output columns
// are out, or nil when the file cannot be read sparsely: an output column
// is not a constant or a top-level leaf, or the filter column's page bounds
// do not order as value.Compare (see NewRowGroupBounds). keep tells the row
// groups the read wants; their page indexes are fetched with one prefetch.
func newSparseReader(ra *File, f *parquet.File, m *valueMatch, bounds *RowGroupBounds, out []*asm, keep []bool) (*sparseReader, error) {
	if m == nil || bounds == nil {
		return nil, nil
	}
	s := &sparseReader{ra: ra, f: f, m: m, conv: bounds.conv, leaf: bounds.leaf}
	for _, a := range out {
		switch a.kind {
		case asmConst:
			s.cols = append(s.cols, sparseCol{constant: a.constant, leaf: -1})
		case asmLeaf:
			s.cols = append(s.cols, sparseCol{leaf: a.stream.leaf, maxDef: a.maxDef, conv: a.conv})
		default:
			return nil, nil
		}
	}
	if c := s.cols[m.col]; c.leaf != s.leaf {
		return nil, nil
	}
	phys, ok := leafType(f, s.leaf)
	if !ok {
		return nil, nil
	}
	s.phys = phys
	leaves := s.leaves()
	md := f.Metadata()
	var ranges [][2]int64
	for g, rg := range md.RowGroups {
		if !keep[g] {
			continue
		}
		for _, l := range leaves {
			if l >= len(rg.Columns) {
				return nil, nil
			}
			cc := &rg.Columns[l]
			if cc.OffsetIndexOffset > 0 {
				ranges = append(ranges, [2]int64{cc.OffsetIndexOffset, cc.OffsetIndexOffset + int64(cc.OffsetIndexLength)})
			}
			if l == s.leaf && cc.ColumnIndexOffset > 0 {
				ranges = append(ranges, [2]int64{cc.ColumnIndexOffset, cc.ColumnIndexOffset + int64(cc.ColumnIndexLength)})
			}
		}
	}
	if len(ranges) == 0 {
		return nil, nil
	}
	for _, r := range ranges {
		if r[0] < 4 || r[1] > ra.FooterStart() || r[1] < r[0] {
			return nil, Corruptf("page index at [%d, %d) does not fit before the footer at %d", r[0], r[1], ra.FooterStart())
		}
	}
	if err := ra.Prefetch(ranges); err != nil {
		return nil, fmt.Errorf("read page index: %w", err)
	}
	defer ra.Release()
	s.index = make([]groupIndex, len(md.RowGroups))
	for g := range md.RowGroups {
		if !keep[g] {
			continue
		}
		gi := groupIndex{oi: map[int]*format.OffsetIndex{}}
		usable := true
		for _, l := range leaves {
			ci, oi, err := ra.PageIndex(g, l, l == s.leaf)
			if err != nil {
				return nil, fmt.Errorf("row group %d: %w", g, err)
			}
			if oi == nil || (l == s.leaf && ci == nil) || !startsAtFirstPage(&md.RowGroups[g].Columns[l].MetaData, oi) {
				usable = false
				break
			}
			if l == s.leaf {
				gi.ci = ci
			}
			// parquet-go decoded it, and seeks to a row through it.
			gi.oi[l] = oi
		}
		if usable {
			s.index[g] = gi
		}
	}
	return s, nil
}

// startsAtFirstPage reports whether an offset index's first page is the
// column chunk's first data page, holding its first row: a sparse read
// then knows every page, and reads the dictionary page, if any, from the
// chunk's start to it.
func startsAtFirstPage(cm *format.ColumnMetaData, oi *format.OffsetIndex) bool {
	return len(oi.PageLocations) > 0 && oi.PageLocations[0].Offset == cm.DataPageOffset && oi.PageLocations[0].FirstRowIndex == 0
}

// leafType returns the physical type of leaf column leaf.
func leafType(f *parquet.File, leaf int) (format.Type, bool) {
	n := -1
	for _, el := range f.Metadata().Schema {
		nc, _ := el.NumChildren.Get()
		if t, ok := el.Type.Get(); ok && nc == 0 {
			if n++; n == leaf {
				return t, true
			}
		}
	}
	return 0, false
}

// leaves returns the distinct leaves the read outputs, the filter leaf
// first.
func (s *sparseReader) leaves() []int {
	out := []int{s.leaf}
	for _, c := range s.cols {
		if c.leaf >= 0 && !slices.Contains(out, c.leaf) {
			out = append(out, c.leaf)
		}
	}
	return out
}

// bound decodes a page bound of the filter column from the column index
// (PLAIN-encoded, without a byte array's length). A byte array max of
// only 0xFF bytes may be a truncated bound parquet-go could not round up
// (it truncates to 16 bytes and increments): it bounds nothing, and nil
// is returned for it.
func (s *sparseReader) bound(b []byte, isMax bool) (any, error) {
	if s.phys == format.ByteArray && isMax && len(b) > 0 && !slices.ContainsFunc(b, func(c byte) bool { return c != 0xFF }) {
		return nil, nil
	}
	v, err := PlainBound(s.phys, b)
	if err != nil {
		return nil, err
	}
	return s.conv(v)
}

// PlainBound reads a bound as parquet-go writes them in column chunk
// statistics and in the column index: PLAIN-encoded, a byte array without
// its length. Only the physical types those bounds are read of here.
func PlainBound(phys format.Type, b []byte) (parquet.Value, error) {
	switch phys {
	case format.Int32:
		if len(b) != 4 {
			return parquet.Value{}, Corruptf("INT32 bound of %d bytes", len(b))
		}
		return parquet.Int32Value(int32(binary.LittleEndian.Uint32(b))), nil
	case format.Int64:
		if len(b) != 8 {
			return parquet.Value{}, Corruptf("INT64 bound of %d bytes", len(b))
		}
		return parquet.Int64Value(int64(binary.LittleEndian.Uint64(b))), nil
	case format.ByteArray:
		return parquet.ByteArrayValue(b), nil
	}
	return parquet.Value{}, Corruptf("bounds of physical type %v", phys)
}

// pageRows returns the rows [first, end) of page i of a row group of n
// rows.
func pageRows(oi *format.OffsetIndex, i int, n int64) (int64, int64) {
	first := oi.PageLocations[i].FirstRowIndex
	if i+1 < len(oi.PageLocations) {
		return first, oi.PageLocations[i+1].FirstRowIndex
	}
	return first, n
}

// pageOf returns the page of oi holding row r.
func pageOf(oi *format.OffsetIndex, r int64) int {
	return sort.Search(len(oi.PageLocations), func(i int) bool { return oi.PageLocations[i].FirstRowIndex > r }) - 1
}

// pageWant is a page of one leaf a sparse read fetches.
type pageWant struct {
	leaf, page int
}

// selectPages returns the pages of row group g's filter column whose
// bounds can hold a value looked for (an empty, non-nil slice when none
// can), and how many pages the column has. ok is false when the row group
// has no usable page index: it is then read whole.
//
// Reading the selected pages beats reading the row group whole even when
// they are all of its pages: only the matched rows are assembled, where a
// whole read makes every row (measured: a tenth of the CPU for 1 000 keys
// in 1M rows of 8 KiB pages, half of it with 256 KiB pages, where every
// page holds a key).
func (s *sparseReader) selectPages(g int) (pages []int, total int, ok bool, err error) {
	if s == nil || s.index[g].ci == nil {
		return nil, 0, false, nil
	}
	gi := s.index[g]
	ci, koi := gi.ci, gi.oi[s.leaf]
	looked := s.lookedFor(g)
	pages = []int{}
	var spans [][2]int
	var bounds [][2]any
	if s.spans == nil {
		s.spans = make([][][2]int, len(s.index))
		s.bounds = make([][][2]any, len(s.index))
	}
	for i := range koi.PageLocations {
		if ci.NullPages[i] {
			continue
		}
		lo, err := s.bound(ci.MinValues[i], false)
		if err != nil {
			return nil, 0, false, fmt.Errorf("row group %d: column index: page %d: %w", g, i, err)
		}
		hi, err := s.bound(ci.MaxValues[i], true)
		if err != nil {
			return nil, 0, false, fmt.Errorf("row group %d: column index: page %d: %w", g, i, err)
		}
		if a, b := looked.span(lo, hi); b > a {
			pages = append(pages, i)
			spans = append(spans, [2]int{a, b})
			bounds = append(bounds, [2]any{lo, hi})
		}
	}
	s.spans[g], s.bounds[g] = spans, bounds
	return pages, len(koi.PageLocations), true, nil
}

// pageBytes returns the bytes of the filter column's pages of row group g
// (see selectPages), as stored.
func (s *sparseReader) pageBytes(g int, pages []int) int64 {
	koi := s.index[g].oi[s.leaf]
	var n int64
	for _, i := range pages {
		n += int64(koi.PageLocations[i].CompressedPageSize)
	}
	return n
}

// narrow tells that of the values looked for, row group g's bloom filter
// may hold only vals (sorted by value.Compare, duplicates allowed), and
// returns the pages of g to read for them: those of selected, the pages
// selectPages chose for all the values, whose bounds hold one of vals. A
// batch's keys are random over a table's key range: until the table has
// many more pages than the batch has keys, nearly every page's bounds hold
// one, and where most keys are new to the table (a backfill) the filter
// rules most of them out, and with them the pages they alone selected.
func (s *sparseReader) narrow(g int, vals []any, selected []int) []int {
	if s.narrowed == nil {
		s.narrowed = make([]*lookedFor, len(s.index))
	}
	l := s.m.subset(vals)
	s.narrowed[g] = &l
	pages := []int{}
	var spans [][2]int
	for k, i := range selected {
		b := s.bounds[g][k]
		if lo, hi := l.span(b[0], b[1]); hi > lo {
			pages = append(pages, i)
			spans = append(spans, [2]int{lo, hi})
		}
	}
	s.spans[g], s.bounds[g] = spans, nil
	return pages
}

// readGroup reads pages (see selectPages) of row group g, of rows base,
// base+1, ..., and tells fn the rows whose filter column matches and
// that deleted does not mark. It returns how many pages it decoded.
func (s *sparseReader) readGroup(ctx context.Context, g int, pages []int, base int64, deleted *roaring64.Bitmap, fn func(int64, []any) error) (decoded int, err error) {
	if len(pages) == 0 {
		return 0, nil
	}
	gi := s.index[g]
	rows, keys, err := s.matchRows(ctx, g, pages, base, gi)
	decoded = len(pages)
	if err != nil || len(rows) == 0 {
		return decoded, err
	}
	if err := ctx.Err(); err != nil {
		return decoded, err
	}
	colVals, n, err := s.otherColumns(g, gi, rows, keys, base)
	decoded += n
	if err != nil {
		return decoded, err
	}
	for k, r := range rows {
		pos := base + r
		if deleted != nil && deleted.Contains(uint64(pos)) {
			continue
		}
		row := make([]any, len(s.cols))
		for i, c := range s.cols {
			if c.leaf < 0 {
				row[i] = c.constant
			} else {
				row[i] = colVals[c.leaf][k]
			}
		}
		if err := fn(pos, row); err != nil {
			return decoded, err
		}
	}
	return decoded, nil
}

// matchRows reads pages of row group g's filter column, whose rows start
// at physical position base, and returns the rows (indexes in the row
// group) whose value is looked for, with those values.
func (s *sparseReader) matchRows(ctx context.Context, g int, pages []int, base int64, gi groupIndex) (rows []int64, keys []any, err error) {
	want := make([]pageWant, len(pages))
	for k, i := range pages {
		want[k] = pageWant{s.leaf, i}
	}
	// The values each page's bounds can hold, tested first as stored.
	stored := make(map[int]*storedTest, len(pages))
	looked := s.lookedFor(g)
	for k, i := range pages {
		sp := s.spans[g][k]
		stored[i] = s.m.storedTestOf(s.phys, looked.slice(sp[0], sp[1]))
	}
	// A page of one stored value per row is tested as it lies; others
	// (nulls, dictionary encoding) value by value.
	var passed []int64
	var passedVals []parquet.Value
	scanned, byValue := 0, 0
	defer func() { countTested(ctx, scanned, byValue) }()
	scan := func(w pageWant, first int64, p parquet.Page) (bool, error) {
		t := stored[w.page]
		if t == nil {
			return false, nil
		}
		var ok bool
		if passed, ok = t.scan(p, int(p.NumValues()), passed[:0]); !ok {
			return false, nil
		}
		c := s.cols[s.m.col]
		if passedVals, ok = storedValues(p, passed, c.maxDef, s.leaf, passedVals[:0]); !ok {
			return false, nil
		}
		scanned++
		for k, j := range passed {
			x, err := c.value(passedVals[k])
			if err != nil {
				return true, fmt.Errorf("row %d: %w", base+first+j, err)
			}
			if s.m.has(x) {
				rows = append(rows, first+j)
				keys = append(keys, x)
			}
		}
		return true, nil
	}
	err = s.readPages(g, want, gi, scan, func(w pageWant, first int64, vals []parquet.Value) error {
		byValue++
		c := s.cols[s.m.col]
		t := stored[w.page]
		for j, v := range vals {
			if v.DefinitionLevel() < c.maxDef || v.IsNull() {
				continue // null keys match nothing
			}
			if t != nil && !t.has(v) {
				continue
			}
			x, err := c.value(v)
			if err != nil {
				return fmt.Errorf("row %d: %w", base+first+int64(j), err)
			}
			if s.m.has(x) {
				rows = append(rows, first+int64(j))
				keys = append(keys, x)
			}
		}
		return nil
	})
	return rows, keys, err
}

// otherColumns reads the pages of the other leaves the read outputs that
// hold rows (matched, with their filter column's values keys) of row
// group g, and returns every leaf's values of those rows, and how many
// pages it decoded.
func (s *sparseReader) otherColumns(g int, gi groupIndex, rows []int64, keys []any, base int64) (map[int][]any, int, error) {
	colVals := make(map[int][]any, len(s.cols))
	colVals[s.leaf] = keys
	var want []pageWant
	for _, l := range s.leaves()[1:] {
		oi := gi.oi[l]
		last := -1
		for _, r := range rows {
			if i := pageOf(oi, r); i != last {
				want = append(want, pageWant{l, i})
				last = i
			}
		}
		colVals[l] = make([]any, 0, len(rows))
	}
	if len(want) > 0 {
		var offs []int64
		var vals []parquet.Value
		take := func(w pageWant, first int64, p parquet.Page) (bool, error) {
			got := colVals[w.leaf]
			offs = offs[:0]
			for _, r := range rows[len(got):] {
				if r-first >= p.NumValues() {
					break
				}
				offs = append(offs, r-first)
			}
			c := s.leafCol(w.leaf)
			var ok bool
			if vals, ok = storedValues(p, offs, c.maxDef, w.leaf, vals[:0]); !ok {
				return false, nil
			}
			for i, v := range vals {
				x, err := c.value(v)
				if err != nil {
					return true, fmt.Errorf("row %d: %w", base+first+offs[i], err)
				}
				got = append(got, x)
			}
			colVals[w.leaf] = got
			return true, nil
		}
		err := s.readPages(g, want, gi, take, func(w pageWant, first int64, vals []parquet.Value) error {
			c := s.leafCol(w.leaf)
			got := colVals[w.leaf]
			for _, r := range rows[len(got):] {
				if r-first >= int64(len(vals)) {
					break
				}
				x, err := c.value(vals[r-first])
				if err != nil {
					return fmt.Errorf("row %d: %w", base+r, err)
				}
				got = append(got, x)
			}
			colVals[w.leaf] = got
			return nil
		})
		if err != nil {
			return nil, len(want), err
		}
	}
	for _, l := range s.leaves() {
		if len(colVals[l]) != len(rows) {
			return nil, len(want), Corruptf("row group %d: column chunk %d: pages hold %d of %d matched rows", g, l, len(colVals[l]), len(rows))
		}
	}
	return colVals, len(want), nil
}

// leafCol returns the output column reading leaf l.
func (s *sparseReader) leafCol(l int) sparseCol {
	for _, c := range s.cols {
		if c.leaf == l {
			return c
		}
	}
	return sparseCol{leaf: -1}
}

// value converts a value of the column's leaf as read into its Go value.
func (c sparseCol) value(v parquet.Value) (any, error) {
	if v.DefinitionLevel() < c.maxDef || v.IsNull() {
		return nil, nil
	}
	return c.conv(v)
}

// readPages fetches the pages want (sorted by leaf, then page) of row
// group g, with the dictionary page of each leaf that has one, checks
// them (see File.CheckRun) and hands each page's values to fn with
// the row index of its first value; or the page itself to raw, when raw is
// not nil and reports it read it.
func (s *sparseReader) readPages(g int, want []pageWant, gi groupIndex, raw func(w pageWant, first int64, p parquet.Page) (bool, error), fn func(w pageWant, first int64, vals []parquet.Value) error) error {
	md := s.f.Metadata()
	rg := &md.RowGroups[g]
	var ranges [][2]int64
	type run struct {
		leaf  int
		start int64
		end   int64
	}
	var runs []run
	lastLeaf := -1
	for _, w := range want {
		cm := &rg.Columns[w.leaf].MetaData
		if w.leaf != lastLeaf {
			lastLeaf = w.leaf
			start, _, err := s.ra.ChunkRange(g, w.leaf)
			if err != nil {
				return err
			}
			if start < cm.DataPageOffset {
				runs = append(runs, run{w.leaf, start, cm.DataPageOffset})
			}
		}
		loc := gi.oi[w.leaf].PageLocations[w.page]
		runs = append(runs, run{w.leaf, loc.Offset, loc.Offset + int64(loc.CompressedPageSize)})
	}
	for _, r := range runs {
		ranges = append(ranges, [2]int64{r.start, r.end})
	}
	if err := s.ra.Prefetch(ranges); err != nil {
		return err
	}
	defer s.ra.Release()
	for _, r := range runs {
		b, err := s.ra.Bytes(r.start, r.end)
		if err != nil {
			return err
		}
		if err := s.ra.CheckRun(g, r.leaf, r.start, b); err != nil {
			return err
		}
	}
	chunks := s.f.RowGroups()[g].ColumnChunks()
	var pages *parquet.FilePages
	defer func() {
		if pages != nil {
			closePages(pages)
		}
	}()
	lastLeaf = -1
	for _, w := range want {
		if w.leaf != lastLeaf {
			if pages != nil {
				closePages(pages)
			}
			fc, ok := chunks[w.leaf].(*parquet.FileColumnChunk)
			if !ok {
				return fmt.Errorf("column chunk %d is not a file column chunk", w.leaf)
			}
			pages = fc.PagesFrom(s.ra.Prefetched())
			lastLeaf = w.leaf
		}
		first, end := pageRows(gi.oi[w.leaf], w.page, rg.NumRows)
		var pageRaw func(parquet.Page) (bool, error)
		if raw != nil {
			pageRaw = func(p parquet.Page) (bool, error) { return raw(w, first, p) }
		}
		if err := s.decodePage(pages, w, first, end, pageRaw, func(vals []parquet.Value) error { return fn(w, first, vals) }); err != nil {
			return err
		}
	}
	return nil
}

// decodePage reads page w, holding rows [first, end), and hands it to raw
// (when not nil), or, when raw does not read it, its values to fn. Neither
// may keep what they are given: it points into the page, released when
// they return. A panic of parquet-go on a corrupt page becomes an error
// (File.CheckRun checked the headers, not the values).
func (s *sparseReader) decodePage(pages *parquet.FilePages, w pageWant, first, end int64, raw func(parquet.Page) (bool, error), fn func([]parquet.Value) error) (err error) {
	var p parquet.Page
	defer func() {
		if r := recover(); r != nil {
			err = Corruptf("column chunk %d: page %d: %v", w.leaf, w.page, r)
		}
		if p != nil {
			parquet.Release(p)
		}
	}()
	if err := pages.SeekToRow(first); err != nil {
		return Corruptf("column chunk %d: seek to page %d: %v", w.leaf, w.page, err)
	}
	if p, err = pages.ReadPage(); err != nil {
		p = nil
		return Corruptf("column chunk %d: page %d: %v", w.leaf, w.page, err)
	}
	if p.NumRows() != end-first || p.NumValues() != end-first {
		return Corruptf("column chunk %d: page %d holds %d values in %d rows, the offset index %d rows", w.leaf, w.page, p.NumValues(), p.NumRows(), end-first)
	}
	if raw != nil {
		if ok, err := raw(p); ok || err != nil {
			return err
		}
	}
	if cap(s.vals) < int(end-first) {
		s.vals = make([]parquet.Value, end-first)
	}
	vals := s.vals[:end-first]
	r := p.Values()
	for n := 0; n < len(vals); {
		k, err := r.ReadValues(vals[n:])
		n += k
		if err == io.EOF && n == len(vals) {
			break
		}
		if err != nil {
			return Corruptf("column chunk %d: page %d: %d of %d values: %v", w.leaf, w.page, n, len(vals), err)
		}
		if k == 0 {
			return Corruptf("column chunk %d: page %d: %d of %d values", w.leaf, w.page, n, len(vals))
		}
	}
	return fn(vals)
}

// closePages closes a page reader; one that panicked may panic again,
// which is ignored: the read already failed.
func closePages(p *parquet.FilePages) {
	defer func() { _ = recover() }()
	p.Close()
}
