package delta

import (
	"github.com/parquet-go/parquet-go/format"
)

// A page header (PageHeader in parquet.thrift, compact protocol:
// https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md)
// is checked before every page a read or a rewrite takes, a copy of a
// large row group's thousands of them included. parquet-go's decoder
// fills the struct by reflection, at about 1.7 us a header: 23 ms of the
// 60 ms a rewrite spent copying 17 row groups verbatim. fastPageHeader
// reads the headers dsdelta writes, and any alike, directly: the fields
// checkRun uses, and the page statistics parquet-go writes in every data
// page header (a null count, at least). A header it does not read so (an
// unknown or repeated field, a field of another type, an empty bound, a
// number past its type, a required field missing) is left to parquet-go's
// decoder,
// whose verdict stands: fastPageHeader accepts only what the decoder
// reads to the same values (FuzzFastPageHeaderAgreesWithTheDecoder).

// fastPageHeader reads the page header at the start of b. It returns the
// header, its length in bytes, and false when it leaves b to the decoder.
func fastPageHeader(b []byte) (format.PageHeader, int, bool) {
	var h format.PageHeader
	r := compactReader{b: b}
	seen, ok := r.each(8, func(id, typ int) bool {
		var ok bool
		switch id {
		case 1, 2, 3, 4:
			var v int32
			if v, ok = r.i32(typ); ok {
				*[...]*int32{2: &h.UncompressedPageSize, 3: &h.CompressedPageSize, 4: &h.CRC, 1: (*int32)(&h.Type)}[id] = v
			}
		case 5:
			h.DataPageHeader.V, ok = r.dataPageHeader(typ)
			h.DataPageHeader.Valid = ok
		case 7:
			h.DictionaryPageHeader.V, ok = r.dictionaryPageHeader(typ)
			h.DictionaryPageHeader.Valid = ok
		case 8:
			h.DataPageHeaderV2.V, ok = r.dataPageHeaderV2(typ)
			h.DataPageHeaderV2.Valid = ok
		}
		return ok // 6, the index page header, is left to the decoder
	})
	if !ok || seen&(1<<1|1<<2|1<<3) != 1<<1|1<<2|1<<3 {
		return format.PageHeader{}, 0, false
	}
	return h, r.pos, true
}

// compactReader reads the compact protocol's field headers and integers,
// reporting false for anything fastPageHeader does not read.
type compactReader struct {
	b   []byte
	pos int
}

const (
	compactTrue   = 1
	compactFalse  = 2
	compactI32    = 5
	compactI64    = 6
	compactBinary = 8
	compactStruct = 12
)

// field reads a field header with a short id delta from *last: its id and
// type, type 0 for the stop byte.
func (r *compactReader) field(last *int) (id, typ int, ok bool) {
	if r.pos >= len(r.b) {
		return 0, 0, false
	}
	c := r.b[r.pos]
	r.pos++
	if c == 0 {
		return 0, 0, true
	}
	delta := int(c >> 4)
	if delta == 0 { // a long field id: left to the decoder
		return 0, 0, false
	}
	*last += delta
	return *last, int(c & 0x0f), true
}

// i32 reads an i32 field's zigzag varint.
func (r *compactReader) i32(typ int) (int32, bool) {
	if typ != compactI32 {
		return 0, false
	}
	u, ok := r.uvarint(5)
	if !ok || u > 0xffffffff {
		return 0, false
	}
	return int32(uint32(u>>1) ^ -uint32(u&1)), true
}

// i64 reads an i64 field's zigzag varint.
func (r *compactReader) i64(typ int) (int64, bool) {
	if typ != compactI64 {
		return 0, false
	}
	u, ok := r.uvarint(9) // 63 bits: longer ones are the decoder's
	if !ok {
		return 0, false
	}
	return int64(u>>1) ^ -int64(u&1), true
}

// uvarint reads a varint of at most max bytes.
func (r *compactReader) uvarint(max int) (uint64, bool) {
	var u uint64
	for k := 0; k < max; k++ {
		if r.pos >= len(r.b) {
			return 0, false
		}
		c := r.b[r.pos]
		r.pos++
		u |= uint64(c&0x7f) << (7 * k)
		if c < 0x80 {
			return u, true
		}
	}
	return 0, false
}

// binary reads a binary field: a copy of its bytes, which must not be
// empty (the decoder's empty value is its own).
func (r *compactReader) binary(typ int) ([]byte, bool) {
	if typ != compactBinary {
		return nil, false
	}
	n, ok := r.uvarint(5)
	if !ok || n == 0 || n > uint64(len(r.b)-r.pos) {
		return nil, false
	}
	b := append([]byte(nil), r.b[r.pos:r.pos+int(n)]...)
	r.pos += int(n)
	return b, true
}

// statistics reads a Statistics struct.
func (r *compactReader) statistics(typ int) (format.Statistics, bool) {
	var st format.Statistics
	if typ != compactStruct {
		return st, false
	}
	_, ok := r.each(6, func(id, t int) bool {
		var ok bool
		if id == 3 || id == 4 { // null and distinct counts
			*[...]*int64{3: &st.NullCount, 4: &st.DistinctCount}[id], ok = r.i64(t)
		} else { // max, min, max_value, min_value
			*[...]*[]byte{1: &st.Max, 2: &st.Min, 5: &st.MaxValue, 6: &st.MinValue}[id], ok = r.binary(t)
		}
		return ok
	})
	return st, ok
}

// each reads a struct's fields up to its stop byte, handing each field's
// id and type to read, which reads its value. It reports the fields read,
// and false for an id past maxID, a repeated one, or when read does.
func (r *compactReader) each(maxID int, read func(id, typ int) bool) (seen uint, ok bool) {
	last := 0
	for {
		id, typ, ok := r.field(&last)
		switch {
		case !ok:
			return 0, false
		case typ == 0: // stop
			return seen, true
		case id < 1 || id > maxID || seen&(1<<id) != 0 || !read(id, typ):
			return 0, false
		}
		seen |= 1 << id
	}
}

// boolean reads a bool field, whose value its type holds.
func boolean(typ int) (v, ok bool) {
	switch typ {
	case compactTrue:
		return true, true
	case compactFalse:
		return false, true
	}
	return false, false
}

// fields reads a struct of i32 fields 1..n into vals (and, for the one
// named by boolID, a bool, and for statsID, statistics into *st), all of
// ids required set.
func (r *compactReader) fields(typ int, vals []int32, boolID, statsID int, st *format.Statistics, required uint) (b bool, hasBool, ok bool) {
	if typ != compactStruct {
		return false, false, false
	}
	seen, ok := r.each(max(len(vals), boolID, statsID), func(id, t int) bool {
		var ok bool
		switch {
		case id == boolID:
			b, ok = boolean(t)
			hasBool = ok
		case id == statsID:
			*st, ok = r.statistics(t)
		case id <= len(vals):
			vals[id-1], ok = r.i32(t)
		}
		return ok // a field of a later format is the decoder's
	})
	return b, hasBool, ok && seen&required == required
}

func (r *compactReader) dataPageHeader(typ int) (format.DataPageHeader, bool) {
	var v [4]int32
	var st format.Statistics
	if _, _, ok := r.fields(typ, v[:], 0, 5, &st, 1<<1|1<<2|1<<3|1<<4); !ok {
		return format.DataPageHeader{}, false
	}
	return format.DataPageHeader{NumValues: v[0], Encoding: format.Encoding(v[1]), DefinitionLevelEncoding: format.Encoding(v[2]), RepetitionLevelEncoding: format.Encoding(v[3]), Statistics: st}, true
}

func (r *compactReader) dictionaryPageHeader(typ int) (format.DictionaryPageHeader, bool) {
	var v [2]int32
	sorted, _, ok := r.fields(typ, v[:], 3, 0, nil, 1<<1|1<<2)
	if !ok {
		return format.DictionaryPageHeader{}, false
	}
	return format.DictionaryPageHeader{NumValues: v[0], Encoding: format.Encoding(v[1]), IsSorted: sorted}, true
}

func (r *compactReader) dataPageHeaderV2(typ int) (format.DataPageHeaderV2, bool) {
	var v [6]int32
	var st format.Statistics
	compressed, has, ok := r.fields(typ, v[:], 7, 8, &st, 1<<1|1<<2|1<<3|1<<4|1<<5|1<<6)
	if !ok {
		return format.DataPageHeaderV2{}, false
	}
	h := format.DataPageHeaderV2{NumValues: v[0], NumNulls: v[1], NumRows: v[2], Encoding: format.Encoding(v[3]), DefinitionLevelsByteLength: v[4], RepetitionLevelsByteLength: v[5], Statistics: st}
	if has {
		h.IsCompressed.V, h.IsCompressed.Valid = compressed, true
	}
	return h, true
}
