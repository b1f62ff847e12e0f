package datastream

import (
	"math/big"
	"unsafe"

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

	// Boxes for the payload values decoded most: timestamps, longs,
	// decimals and strings (nil-safe methods below), and the other
	// fixed-size types the Avro decoder boxes.
	micros boxes[value.Micros]
	longs  boxes[int64]
	decs   boxes[value.Decimal]
	strs   boxes[string]
	int32s boxes[int32]
	days   boxes[value.Days]
	local  boxes[value.LocalMicros]
	dbls   boxes[float64]
}

// Slab sizes, in elements: a few kilobytes each.
const (
	slabBoxes   = 256
	slabAnys    = 1024
	slabStrings = 256
	slabSources = 128
	// maxSlabbed is the largest slice cut from a slab; longer ones are
	// allocated on their own.
	maxSlabbed = 64
)

func cutAnys(slab *[]any, n int) []any {
	if n > maxSlabbed {
		return make([]any, n)
	}
	if len(*slab) < n {
		*slab = make([]any, slabAnys)
	}
	out := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return out
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
	if len(s.knames) < n {
		s.knames = make([]string, slabStrings)
	}
	out := s.knames[:n:n]
	s.knames = s.knames[n:]
	return out
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

// boxes puts values of type T into interfaces without an allocation
// each. Converting a non-pointer value to an interface copies it to a heap
// object of its own, and the interface points to that copy: four of the
// payload values of a typical event, each a small object to allocate and
// for the collector to track. A box points into a shared slab instead. It
// relies on an interface being a type word and a pointer to a value that is
// never changed after the conversion, which the runtime itself relies on
// (it points small integers into one static array); a slab element is
// written once, before its interface exists, and never again. A slab stays
// alive while any interface into it does.
type boxes[T any] struct {
	free []T
	typ  unsafe.Pointer // T's type word in an interface
}

// eface is the layout of an empty interface.
type eface struct {
	typ, data unsafe.Pointer
}

// box returns v in an interface, as any(v) does.
func (b *boxes[T]) box(v T) any {
	if len(b.free) == 0 {
		if b.typ == nil {
			var x any = v
			b.typ = (*eface)(unsafe.Pointer(&x)).typ
		}
		b.free = make([]T, slabBoxes)
	}
	p := &b.free[0]
	*p = v
	b.free = b.free[1:]
	var x any
	e := (*eface)(unsafe.Pointer(&x))
	e.typ, e.data = b.typ, unsafe.Pointer(p)
	return x
}

// Boxing of decoded values; a nil *slabs boxes as any(v) does.

func (s *slabs) boxMicros(v value.Micros) any {
	if s == nil {
		return v
	}
	return s.micros.box(v)
}

func (s *slabs) boxLong(v int64) any {
	if s == nil {
		return v
	}
	return s.longs.box(v)
}

func (s *slabs) boxDecimal(v value.Decimal) any {
	if s == nil {
		return v
	}
	return s.decs.box(v)
}

func (s *slabs) boxString(v string) any {
	if s == nil {
		return v
	}
	return s.strs.box(v)
}

// strArena copies the strings of events (payload text, uuids, ordering
// keys) into shared blocks instead of one allocation each: a decoded file
// of short strings is then a few large objects for the garbage collector
// rather than millions of small ones. Bytes are only ever appended to a
// block, never changed, which is what makes the strings viewing them
// immutable, as strings must be; a block stays alive while any of its
// strings does. A nil *strArena allocates each string on its own.
type strArena struct {
	block []byte
}

// Arena sizes: strings longer than maxArenaString get their own allocation,
// so that one long value does not waste the rest of a block.
const (
	arenaBlockBytes = 32 << 10
	maxArenaString  = 1 << 10
)

// string returns a string holding a copy of b.
func (a *strArena) string(b []byte) string {
	if a == nil || len(b) == 0 || len(b) > maxArenaString {
		return string(b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaBlockBytes)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return unsafe.String(&a.block[start], len(b))
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
	if a == nil || len(b) > maxArenaString {
		return append([]byte(nil), b...)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaBlockBytes)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}
