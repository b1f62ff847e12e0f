package parquetfile

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/bloom"
	"github.com/parquet-go/parquet-go/bloom/xxhash"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// maxBloomFilterBytes bounds the bitset a bloom filter header may declare.
// The reader allocates the bitset; 128 MiB is the largest filter parquet-mr
// and Arrow write, and far more than one of a row group of dsdelta's (a
// few hundred KiB).
const maxBloomFilterBytes = 128 << 20

// maxBloomHeaderBytes is how much is read to decode a bloom filter header
// whose length the column metadata does not give (writers before Parquet
// 2.10 left bloom_filter_length out): the header is four small fields.
const maxBloomHeaderBytes = 64

// BloomFilters hands fn the split-block bloom filter of leaf column leaf
// in each row group g that keep[g] keeps and that has one
// (https://github.com/apache/parquet-format/blob/master/BloomFilter.md).
// The filters are fetched with one prefetch (they lie together when
// dsdelta wrote them), checked and released before BloomFilters returns:
// fn must not keep the filter. Row groups without a filter, or with one of
// an algorithm, hash or compression the spec does not define as
// split-block, xxHash and uncompressed, are not handed to fn. What a
// filter may span is bounded by the footer: Open checked the declared
// lengths against it, and a header's declared bitset is checked here.
func (r *File) BloomFilters(leaf int, keep []bool, fn func(g int, f bloom.SplitBlockFilter)) error {
	md := r.pf.Metadata()
	footerStart := r.pages.footerStart
	type span struct {
		g        int
		off, end int64
	}
	var spans []span
	var ranges [][2]int64
	for g := range md.RowGroups {
		if !keep[g] || leaf >= len(md.RowGroups[g].Columns) {
			continue
		}
		cm := &md.RowGroups[g].Columns[leaf].MetaData
		off := cm.BloomFilterOffset
		if off <= 0 {
			continue
		}
		end := off + int64(cm.BloomFilterLength)
		if cm.BloomFilterLength <= 0 {
			end = min(off+maxBloomHeaderBytes, footerStart)
		}
		if off < 4 || end > footerStart || end <= off {
			return Corruptf("row group %d: bloom filter at offset %d does not fit before the footer at %d", g, off, footerStart)
		}
		spans = append(spans, span{g, off, end})
		ranges = append(ranges, [2]int64{off, end})
	}
	if len(spans) == 0 {
		return nil
	}
	if err := r.Prefetch(ranges); err != nil {
		return fmt.Errorf("read bloom filters: %w", err)
	}
	defer r.Release()
	for _, s := range spans {
		data, err := r.Bytes(s.off, s.end)
		if err != nil {
			return fmt.Errorf("row group %d: read bloom filter: %w", s.g, err)
		}
		hdr, n, err := bloomHeader(data)
		if err != nil {
			return fmt.Errorf("row group %d: bloom filter: %w", s.g, err)
		}
		if !splitBlockFilter(hdr) {
			continue
		}
		size := int64(hdr.NumBytes)
		if size <= 0 || size%bloom.BlockSize != 0 || size > maxBloomFilterBytes {
			return Corruptf("row group %d: bloom filter bitset of %d bytes", s.g, size)
		}
		bits := data[n:]
		if int64(len(bits)) < size {
			// Only the header was fetched (no bloom_filter_length).
			if size > footerStart-s.off-int64(n) {
				return Corruptf("row group %d: bloom filter bitset of %d bytes at offset %d does not fit before the footer at %d", s.g, size, s.off, footerStart)
			}
			if bits, err = r.Bytes(s.off+int64(n), s.off+int64(n)+size); err != nil {
				return fmt.Errorf("row group %d: read bloom filter: %w", s.g, err)
			}
		}
		fn(s.g, bloom.MakeSplitBlockFilter(bits[:size]))
	}
	return nil
}

// bloomHeader decodes the BloomFilterHeader at the start of b and returns
// its length in bytes. The Thrift scan comes first, as for a footer.
func bloomHeader(b []byte) (format.BloomFilterHeader, int, error) {
	var h format.BloomFilterHeader
	s := thriftScan{b: b}
	if err := s.structure(0); err != nil {
		return h, 0, Corruptf("bloom filter header: %v", err)
	}
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[:s.pos], &h); err != nil {
		return h, 0, Corruptf("bloom filter header: %v", err)
	}
	return h, s.pos, nil
}

// splitBlockFilter reports whether a header describes the only filter the
// spec defines: split-block, xxHash, uncompressed.
func splitBlockFilter(h format.BloomFilterHeader) bool {
	_, sb := h.Algorithm.Value.(*format.SplitBlockAlgorithm)
	_, xx := h.Hash.Value.(*format.XxHash)
	_, raw := h.Compression.Value.(*format.BloomFilterUncompressed)
	return sb && xx && raw
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
func newBloomProbe(f *parquet.File, root *TreeNode, fld value.Field, naming Naming, flt *RowGroupFilter) *bloomProbe {
	if len(flt.Values) == 0 {
		return nil
	}
	p := root.Field(fld, naming)
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

// probes returns the values that the bounds of row group rg can hold, as
// b.values[i:j] (and b.hashes[i:j]): all of them when the values are not
// sorted or the bounds not usable.
func (b *bloomProbe) probes(rg parquet.RowGroup, bounds *RowGroupBounds) (i, j int) {
	if !b.sorted {
		return 0, len(b.values)
	}
	lo, hi, ok := bounds.minMax(rg)
	if !ok {
		return 0, len(b.values)
	}
	i = sort.Search(len(b.values), func(i int) bool { return value.Compare(b.values[i], lo) >= 0 })
	j = sort.Search(len(b.values), func(j int) bool { return value.Compare(b.values[j], hi) > 0 })
	return i, max(i, j)
}

// worth reports whether probing row group g's bloom filter costs fewer
// bytes than reading pageBytes of its filter column's pages: always when
// the column metadata does not give the filter's length (writers before
// Parquet 2.10), then only when most pages are selected (most). A nil
// probe is never worth it.
func (b *bloomProbe) worth(pf *File, g int, pageBytes int64, most bool) bool {
	if b == nil {
		return false
	}
	rgs := pf.Parquet().Metadata().RowGroups
	if b.leaf >= len(rgs[g].Columns) {
		return false
	}
	cm := &rgs[g].Columns[b.leaf].MetaData
	if cm.BloomFilterOffset <= 0 {
		return false
	}
	if cm.BloomFilterLength <= 0 {
		return most
	}
	return pageBytes > int64(cm.BloomFilterLength)
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

// bloomHasher returns the hash of a value of type t (in its Go
// representation) as stored in leaf p, or nil when t is not stored in p as
// dsdelta stores it, and the kind of hash it is: two leaves of one kind
// hash a value alike. The hasher reports false for a value of another Go
// type.
func bloomHasher(t value.Type, p *TreeNode) (func(any) (uint64, bool), string) {
	phys, _ := p.El.Type.Get()
	return leafHasher(t, p), phys.String() + "/" + t.String()
}

// leafHasher is bloomHasher's hash.
func leafHasher(t value.Type, p *TreeNode) func(any) (uint64, bool) {
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
func microTimestamp(p *TreeNode) bool {
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
// split-block filter stay kept. When pass is not nil, pass[g] gets the
// values the filter of a kept row group g may hold, sorted by
// value.Compare (they are the values it must be read for), when it rules
// out at least a quarter of them; it stays nil otherwise, and for a row
// group without a filter.
func (b *bloomProbe) filter(pf *File, bounds *RowGroupBounds, keep []bool, pass [][]any) error {
	if b == nil {
		return nil
	}
	rgs := pf.Parquet().RowGroups()
	return pf.BloomFilters(b.leaf, keep, func(g int, f bloom.SplitBlockFilter) {
		i, j := b.probes(rgs[g], bounds)
		if pass == nil {
			if !anyIn(f, b.hashes[i:j]) {
				keep[g] = false
			}
			return
		}
		var in []any
		for k := i; k < j; k++ {
			if f.Check(b.hashes[k]) {
				in = append(in, b.values[k])
			}
		}
		if len(in) == 0 {
			keep[g] = false
			return
		}
		if 4*len(in) > 3*(j-i) {
			// Few ruled out: they rarely leave a page without a value
			// looked for, and narrowing costs a second selection.
			return
		}
		if !b.sorted {
			slices.SortFunc(in, value.Compare)
		}
		pass[g] = in
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
