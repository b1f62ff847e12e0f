package datastream

import (
	"math/big"

	"github.com/dsdelta/dsdelta/shared/value"
)

// slabs hands out the small slices of events (rows, key names and values,
// JSON sources, small decimals) cut from larger allocations, so that decoding allocates
// once per many events instead of once per slice: fewer allocations and
// fewer objects for the garbage collector to track. Each slice is capped at
// its length, so appending to it reallocates instead of overwriting a
// neighbour. A slab stays alive while any slice cut from it does; rows
// have their own slabs because UnifyJSON replaces them while the key
// values live on. A nil *slabs allocates each slice on its own.
type slabs struct {
	rows   []any
	kvals  []any
	ints   []smallBigInt
	knames []string
	srcs   []jsonSource
	kindsS []rawKind

	// Boxes for the payload values decoded most: timestamps, longs,
	// decimals and strings (nil-safe methods below), and the other
	// fixed-size types the Avro decoder boxes.
	micros value.Boxes[value.Micros]
	longs  value.Boxes[int64]
	decs   value.Boxes[value.Decimal]
	strs   value.Boxes[string]
	int32s value.Boxes[int32]
	days   value.Boxes[value.Days]
	local  value.Boxes[value.LocalMicros]
	dbls   value.Boxes[float64]
}

// Slab sizes, in elements: a few kilobytes each.
const (
	slabAnys    = 1024
	slabStrings = 256
	slabSources = 128
	slabKinds   = 4096
	// maxSlabbed is the largest slice cut from a slab; longer ones are
	// allocated on their own.
	maxSlabbed = 64
)

func cutAnys(slab *[]any, n int) []any {
	if n > maxSlabbed {
		return make([]any, n)
	}
	return value.Cut(slab, n, slabAnys)
}

// row returns a row of n nil values.
func (s *slabs) row(n int) []any {
	if s == nil {
		return make([]any, n)
	}
	return cutAnys(&s.rows, n)
}

// keys returns n nil key values.
func (s *slabs) keys(n int) []any {
	if s == nil {
		return make([]any, n)
	}
	return cutAnys(&s.kvals, n)
}

// names returns n empty key names.
func (s *slabs) names(n int) []string {
	if s == nil || n > maxSlabbed {
		return make([]string, n)
	}
	return value.Cut(&s.knames, n, slabStrings)
}

// smallBigInt is a big.Int with room for its words, so that a decimal of
// up to 18 digits needs no allocation of its own.
type smallBigInt struct {
	i big.Int
	w [2]big.Word
}

// bigInt returns a zero smallBigInt.
func (s *slabs) bigInt() *smallBigInt {
	if s == nil {
		return new(smallBigInt)
	}
	if len(s.ints) == 0 {
		s.ints = make([]smallBigInt, slabSources)
	}
	out := &s.ints[0]
	s.ints = s.ints[1:]
	return out
}

// kinds returns n zero kinds with room for c (c >= n).
func (s *slabs) kinds(n, c int) []rawKind {
	if s == nil || c > slabKinds/8 {
		return make([]rawKind, n, c)
	}
	return value.Cut(&s.kindsS, c, slabKinds)[:n]
}

// source returns a zero jsonSource.
func (s *slabs) source() *jsonSource {
	if s == nil {
		return &jsonSource{}
	}
	if len(s.srcs) == 0 {
		s.srcs = make([]jsonSource, slabSources)
	}
	out := &s.srcs[0]
	s.srcs = s.srcs[1:]
	return out
}

// Boxing of decoded values; a nil *slabs boxes as any(v) does.

func (s *slabs) boxMicros(v value.Micros) any {
	if s == nil {
		return v
	}
	return s.micros.Box(v)
}

func (s *slabs) boxLong(v int64) any {
	if s == nil {
		return v
	}
	return s.longs.Box(v)
}

func (s *slabs) boxDecimal(v value.Decimal) any {
	if s == nil {
		return v
	}
	return s.decs.Box(v)
}

func (s *slabs) boxString(v string) any {
	if s == nil {
		return v
	}
	return s.strs.Box(v)
}

// strArena copies the strings of events (payload text, uuids, ordering
// keys) into shared blocks (value.Arena) instead of one allocation each: a
// decoded file of short strings is then a few large objects for the
// garbage collector rather than millions of small ones. A nil *strArena
// allocates each string on its own.
type strArena struct {
	value.Arena
}

// string returns a string holding a copy of b.
func (a *strArena) string(b []byte) string {
	if a == nil {
		return string(b)
	}
	return a.String(b)
}

// unquoteSpan is unquote of a token scanString found plain or not.
func (a *strArena) unquoteSpan(tok []byte, plain bool) (string, error) {
	if plain {
		return a.string(tok[1 : len(tok)-1]), nil
	}
	return a.unquote(tok)
}

// unquote is the package's unquote, copying plain strings into the arena.
func (a *strArena) unquote(tok []byte) (string, error) {
	if body := tok[1 : len(tok)-1]; plainString(body) {
		return a.string(body), nil
	}
	var buf [256]byte
	out, err := appendUnquoted(buf[:0], tok)
	if err != nil {
		return "", err
	}
	return a.string(out), nil
}

// bytes returns a copy of b that cannot grow into a neighbour (appending to
// it reallocates).
func (a *strArena) bytes(b []byte) []byte {
	if a == nil {
		return append([]byte(nil), b...)
	}
	return a.Bytes(b)
}
