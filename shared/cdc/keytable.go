package cdc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// keyTable is what one pass over the history holds per key: the key's code
// (see valuecode.go), the greatest order seen, flags, and a 128-bit sum of
// the state row that order implies (verify) or that row's code (rebuild).
//
// It is built for many small entries: keys and orders live in byte slabs,
// entries in fixed-size chunks, and the index maps a key's 64-bit hash to
// its first entry (entries whose keys share a hash are chained), so that
// neither the garbage collector nor a growing slice has to walk or copy
// millions of small objects.
type keyTable struct {
	seed   maphash.Seed
	index  map[uint64]int32
	chunks [][]keyEntry
	n      int
	slabs  [][]byte
	rows   [][]byte // per entry, when rows are kept (rebuild)
	bytes  int64    // memory held, as entryOverhead per entry plus slabs and rows
}

// keyEntry is one key of a keyTable.
type keyEntry struct {
	key, order slabRef
	next       int32 // next entry whose key has the same hash, or -1
	flags      uint8
	sum        [16]byte
}

// Entry flags.
const (
	entDelete uint8 = 1 << iota // the winning change is a delete
	entAbsent                   // history has no change of the key: the state's row made the entry
	entSeen                     // the state table holds a row of the key
)

// slabRef locates a length-prefixed byte string: slab index << 32 | offset.
type slabRef uint64

const (
	slabBytes     = 1 << 20
	chunkEntries  = 1 << 14
	entryOverhead = 64 // a keyEntry and its share of the index
	rowOverhead   = 24 // a row's slice header
)

func newKeyTable(seed maphash.Seed, keepRows bool) *keyTable {
	t := &keyTable{seed: seed, index: map[uint64]int32{}}
	if keepRows {
		t.rows = [][]byte{}
	}
	return t
}

func (t *keyTable) len() int { return t.n }

func (t *keyTable) entry(i int32) *keyEntry {
	return &t.chunks[i/chunkEntries][i%chunkEntries]
}

// put stores b in a slab and returns where.
func (t *keyTable) put(b []byte) slabRef {
	need := binary.MaxVarintLen32 + len(b)
	last := len(t.slabs) - 1
	if last < 0 || cap(t.slabs[last])-len(t.slabs[last]) < need {
		size := slabBytes
		if need > slabBytes/4 {
			size = need // large strings get a slab of their own
		}
		t.slabs = append(t.slabs, make([]byte, 0, size))
		last++
	}
	s := t.slabs[last]
	ref := slabRef(uint64(last)<<32 | uint64(len(s)))
	s = binary.AppendUvarint(s, uint64(len(b)))
	s = append(s, b...)
	t.bytes += int64(len(s) - len(t.slabs[last]))
	t.slabs[last] = s
	return ref
}

// get returns the bytes stored at ref, aliasing the slab.
func (t *keyTable) get(ref slabRef) []byte {
	s := t.slabs[ref>>32][uint32(ref):]
	n, k := binary.Uvarint(s)
	return s[k : k+int(n)]
}

func (t *keyTable) keyOf(i int32) []byte   { return t.get(t.entry(i).key) }
func (t *keyTable) orderOf(i int32) []byte { return t.get(t.entry(i).order) }

// find returns the entry of key.
func (t *keyTable) find(key []byte) (int32, bool) {
	i, ok := t.index[maphash.Bytes(t.seed, key)]
	for ok && i >= 0 {
		if bytes.Equal(t.keyOf(i), key) {
			return i, true
		}
		i = t.entry(i).next
	}
	return -1, false
}

// insert adds key, which must not be in the table yet.
func (t *keyTable) insert(key, order []byte, flags uint8) int32 {
	if t.n%chunkEntries == 0 {
		t.chunks = append(t.chunks, make([]keyEntry, chunkEntries))
	}
	i := int32(t.n)
	t.n++
	h := maphash.Bytes(t.seed, key)
	next, ok := t.index[h]
	if !ok {
		next = -1
	}
	t.index[h] = i
	*t.entry(i) = keyEntry{key: t.put(key), order: t.put(order), next: next, flags: flags}
	t.bytes += entryOverhead
	if t.rows != nil {
		t.rows = append(t.rows, nil)
		t.bytes += rowOverhead
	}
	return i
}

// setOrder replaces the order of entry i, in place when it has the same
// length (orders of one source mostly do).
func (t *keyTable) setOrder(i int32, order []byte) {
	e := t.entry(i)
	if old := t.get(e.order); len(old) == len(order) {
		copy(old, order)
		return
	}
	e.order = t.put(order)
}

// setRow keeps the row code of entry i (a copy of b), reusing the former
// row's memory when it fits without wasting much of it.
func (t *keyTable) setRow(i int32, b []byte) {
	old := t.rows[i]
	if cap(old) >= len(b) && cap(old) <= 2*len(b)+64 {
		t.rows[i] = append(old[:0], b...)
		return
	}
	row := append(make([]byte, 0, len(b)), b...)
	t.rows[i] = row
	t.bytes += int64(cap(row) - cap(old))
}

// appendRow appends b to the row code of entry i (modes that keep every
// change of a key, see replayRun.collect).
func (t *keyTable) appendRow(i int32, b []byte) {
	old := t.rows[i]
	t.rows[i] = append(old, b...)
	t.bytes += int64(cap(t.rows[i]) - cap(old))
}

// sortedEntries returns the entries in the order of their keys.
func (t *keyTable) sortedEntries() []int32 {
	out := make([]int32, t.n)
	for i := range out {
		out[i] = int32(i)
	}
	slices.SortFunc(out, func(a, b int32) int { return bytes.Compare(t.keyOf(a), t.keyOf(b)) })
	return out
}

// below returns a new table holding the entries whose key sorts before
// cut; t is not usable afterwards.
func (t *keyTable) below(cut []byte) *keyTable {
	out := newKeyTable(t.seed, t.rows != nil)
	for i := int32(0); i < int32(t.n); i++ {
		k := t.keyOf(i)
		if bytes.Compare(k, cut) >= 0 {
			continue
		}
		e := t.entry(i)
		j := out.insert(k, t.get(e.order), e.flags)
		out.entry(j).sum = e.sum
		if t.rows != nil {
			out.rows[j] = t.rows[i]
			out.bytes += int64(cap(t.rows[i]))
		}
	}
	*t = keyTable{}
	return out
}

// median returns a copy of the middle key in key order, so that below it
// holds about half the entries.
func (t *keyTable) median() []byte {
	keys := make([][]byte, t.n)
	for i := range keys {
		keys[i] = t.keyOf(int32(i))
	}
	slices.SortFunc(keys, bytes.Compare)
	return bytes.Clone(keys[len(keys)/2])
}
