package value

import "unsafe"

// Boxes puts values of type T into interfaces without an allocation
// each. Converting a non-pointer value to an interface copies it to a heap
// object of its own, and the interface points to that copy: several values
// of every event, each a small object to allocate and for the collector to
// track. A box points into a shared slab instead. It relies on an
// interface being a type word and a pointer to a value that is never
// changed after the conversion, which the runtime itself relies on (it
// points small integers into one static array); a slab element is written
// once, before its interface exists, and never again. A slab stays alive
// while any interface into it does. The zero Boxes is ready to use; a nil
// *Boxes boxes as any(v) does.
type Boxes[T any] struct {
	free []T
	typ  unsafe.Pointer // T's type word in an interface
}

// boxesPerSlab is the size of a slab, in values: a few kilobytes.
const boxesPerSlab = 256

// eface is the layout of an empty interface.
type eface struct {
	typ, data unsafe.Pointer
}

// Box returns v in an interface, as any(v) does.
func (b *Boxes[T]) Box(v T) any {
	if b == nil {
		return v
	}
	if len(b.free) == 0 {
		if b.typ == nil {
			var x any = v
			b.typ = (*eface)(unsafe.Pointer(&x)).typ
		}
		b.free = make([]T, boxesPerSlab)
	}
	p := &b.free[0]
	*p = v
	b.free = b.free[1:]
	var x any
	e := (*eface)(unsafe.Pointer(&x))
	e.typ, e.data = b.typ, unsafe.Pointer(p)
	return x
}

// Cut returns n zero values cut from *slab, starting a new slab of size
// values when it holds fewer: many small slices become one allocation, and
// one object for the collector to track. The slice is capped at n, so
// appending to it reallocates instead of overwriting a neighbour. n must
// not exceed size.
func Cut[T any](slab *[]T, n, size int) []T {
	if len(*slab) < n {
		*slab = make([]T, size)
	}
	out := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return out
}
