package parquetfile

import (
	"fmt"

	"github.com/parquet-go/parquet-go/bloom"
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
