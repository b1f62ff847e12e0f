package value

import (
	"runtime"
	"testing"
)

func TestBoxesHoldWhatAnyHolds(t *testing.T) {
	for _, b := range []*Boxes[[]byte]{nil, {}} {
		var got []any
		for i := range 2*boxesPerSlab + 3 {
			got = append(got, b.Box([]byte{byte(i), byte(i >> 8)}))
		}
		runtime.GC() // the slabs must stay alive through the boxes alone
		for i, g := range got {
			v, ok := g.([]byte)
			if !ok || len(v) != 2 || v[0] != byte(i) || v[1] != byte(i>>8) {
				t.Fatalf("box %d = %#v", i, g)
			}
		}
	}
}

func TestCutSlicesCannotGrowIntoANeighbour(t *testing.T) {
	var slab []int
	a := Cut(&slab, 3, 8)
	b := Cut(&slab, 3, 8)
	c := Cut(&slab, 3, 8) // does not fit: a new slab
	a = append(a, 9)
	if b[0] != 0 || len(c) != 3 || cap(c) != 3 || cap(b) != 3 {
		t.Fatalf("a=%v b=%v (cap %d) c=%v (cap %d)", a, b, cap(b), c, cap(c))
	}
	if len(slab) != 5 {
		t.Fatalf("slab has %d values left, want 5", len(slab))
	}
}

func TestArenaCopiesWhatItIsGiven(t *testing.T) {
	var a Arena
	src := []byte("abc")
	s, b := a.String(src), a.Bytes(src)
	long := make([]byte, 2*maxArenaBytes)
	l := a.Bytes(long)
	src[0] = 'x'
	long[0] = 1
	if s != "abc" || string(b) != "abc" || cap(b) != 3 || len(l) != len(long) || l[0] != 0 {
		t.Fatalf("string %q, bytes %q (cap %d), long value's first byte %d", s, b, cap(b), l[0])
	}
	if a.String(nil) != "" {
		t.Fatal("empty string")
	}
}
