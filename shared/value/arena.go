package value

import "unsafe"

// Arena copies strings and byte slices into shared blocks instead of one
// allocation each: many short values are then a few large objects for the
// garbage collector rather than millions of small ones. Bytes are only
// ever appended to a block, never changed, which is what makes the strings
// viewing them immutable, as strings must be; a block stays alive while
// any value cut from it does, so an arena suits values that are kept
// together. The zero Arena is ready to use.
type Arena struct {
	block []byte
}

// Arena sizes: values longer than maxArenaBytes get their own allocation,
// so that one long value does not waste the rest of a block.
const (
	arenaBlockBytes = 32 << 10
	maxArenaBytes   = 1 << 10
)

// String returns a string holding a copy of b.
func (a *Arena) String(b []byte) string {
	if len(b) == 0 || len(b) > maxArenaBytes {
		return string(b)
	}
	return unsafe.String(&a.cut(b)[0], len(b))
}

// Bytes returns a copy of b that cannot grow into a neighbour (appending to
// it reallocates).
func (a *Arena) Bytes(b []byte) []byte {
	if len(b) > maxArenaBytes {
		return append([]byte(nil), b...)
	}
	return a.cut(b)
}

// cut appends b to the block and returns the copy, capped at its length.
func (a *Arena) cut(b []byte) []byte {
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, arenaBlockBytes)
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}
