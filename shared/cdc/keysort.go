package cdc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"reflect"
	"slices"

	"github.com/dsdelta/dsdelta/shared/value"
)

// latestIndexes returns the index of the latest change of each key, the one
// Latest keeps: the greatest order, the first of equal ones. Indexes into
// the batch stand in for copies of 160-byte Changes in a map.
func latestIndexes(changes []Change) []int32 {
	at := make(map[string]int32, len(changes))
	for i := range changes {
		c := &changes[i]
		if j, ok := at[c.KeyText]; !ok || bytes.Compare(c.Order, changes[j].Order) > 0 {
			at[c.KeyText] = int32(i)
		}
	}
	idx := make([]int32, 0, len(at))
	for _, j := range at {
		idx = append(idx, j)
	}
	return idx
}

// sortByKey returns the changes at idx sorted by key (value.CompareKeys).
// A batch sorts up to a step's worth of keys, and comparing them through
// the []any of each key misses the cache at every step; each key's first
// column is first reduced to a 64-bit prefix that orders as the value does
// (keyPrefix), so most comparisons are of two integers side by side, and
// only equal prefixes compare the keys themselves. Indexes are sorted,
// not the changes: a swap moves 16 bytes, not a Change.
func sortByKey(changes []Change, idx []int32) []Change {
	type entry struct {
		prefix uint64
		i      int32
	}
	ents := make([]entry, len(idx))
	var typ reflect.Type
	mixed := false
	for k, i := range idx {
		c := &changes[i]
		var p uint64
		if len(c.Key) > 0 && c.Key[0] != nil {
			if t := reflect.TypeOf(c.Key[0]); typ == nil {
				typ = t
			} else if t != typ {
				mixed = true
			}
			p = keyPrefix(c.Key[0])
		}
		ents[k] = entry{p, i}
	}
	if mixed { // prefixes of different types do not compare
		for i := range ents {
			ents[i].prefix = 0
		}
	}
	slices.SortFunc(ents, func(a, b entry) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return value.CompareKeys(changes[a.i].Key, changes[b.i].Key)
	})
	out := make([]Change, len(ents))
	for k, e := range ents {
		out[k] = changes[e.i]
	}
	return out
}

// keyPrefix maps a key value to a number that orders as value.Compare
// orders values of its type, possibly with ties between unequal values
// (never an inversion): the first 8 bytes of a string or binary value,
// big-endian and zero-padded (byte-wise order), an integer with its sign
// bit flipped. Null sorts first (0); keys of one column share a type, and
// other types all tie at 0, leaving the order to value.Compare. sortByKey
// uses prefixes only when every non-null first value has one type.
func keyPrefix(v any) uint64 {
	switch x := v.(type) {
	case string:
		var b [8]byte
		copy(b[:], x)
		return binary.BigEndian.Uint64(b[:])
	case []byte:
		var b [8]byte
		copy(b[:], x)
		return binary.BigEndian.Uint64(b[:])
	case int64:
		return uint64(x) ^ 1<<63
	case int32:
		return uint64(int64(x)) ^ 1<<63
	case int16:
		return uint64(int64(x)) ^ 1<<63
	case int8:
		return uint64(int64(x)) ^ 1<<63
	}
	return 0
}
