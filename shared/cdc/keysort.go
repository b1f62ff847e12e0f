package cdc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/dsdelta/dsdelta/shared/value"
)

// latestIndexes returns the index of the latest change of each key, the one
// Latest keeps: the greatest order, the first of equal ones. Indexes into
// the batch stand in for copies of 160-byte Changes in a map.
func latestIndexes(changes []Change) []int32 {
	at := make(map[string]int32, len(changes))
	for i := range changes {
		c := &changes[i]
		text := c.Text()
		if j, ok := at[text]; !ok || bytes.Compare(c.Order, changes[j].Order) > 0 {
			at[text] = int32(i)
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
	ents := keyEntries(changes, idx)
	slices.SortFunc(ents, func(a, b keyRef) int { return compareKeyRefs(changes, a, b) })
	out := make([]Change, len(ents))
	for k, e := range ents {
		out[k] = changes[e.i]
	}
	return out
}

// keyRef is a change (its index) and the 64-bit prefix of its key's
// first column (keyPrefix).
type keyRef struct {
	prefix uint64
	i      int32
}

// compareKeyRefs orders two changes by key (value.CompareKeys), by their
// prefixes where those differ.
func compareKeyRefs(changes []Change, a, b keyRef) int {
	if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	return value.CompareKeys(changes[a.i].Key, changes[b.i].Key)
}

// keyEntries returns the keyRef of the changes at idx (of every change
// when idx is nil), in order. Prefixes are 0 when the first key columns
// differ in type: they would not compare.
func keyEntries(changes []Change, idx []int32) []keyRef {
	n := len(idx)
	if idx == nil {
		n = len(changes)
	}
	ents := make([]keyRef, n)
	var typ reflect.Type
	mixed := false
	for k := range n {
		i := int32(k)
		if idx != nil {
			i = idx[k]
		}
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
		ents[k] = keyRef{p, i}
	}
	if mixed {
		for k := range ents {
			ents[k].prefix = 0
		}
	}
	return ents
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

// maxKeyRuns is the most runs of keys in order latestOfRuns merges.
const maxKeyRuns = 64

// parallelRunsMin is the fewest changes per core whose runs latestOfRuns
// merges in key ranges on several cores: it is on a step's critical path,
// between the read of the step's parts and the write of its state. A
// variable for tests.
var parallelRunsMin = 16 << 10

// latestOfRuns is latestSorted for changes that are a few runs each in key
// order, as a step of staged parts is (each part's rows are sorted by key):
// the runs are merged, and each key's latest change kept as it goes, with
// no map of the keys and no sort. ok is false, with nothing done, when the
// changes are in more than maxKeyRuns runs.
//
// Many changes are merged in GOMAXPROCS key ranges at once: the ranges are
// cut at keys of the longest run, each run where its keys reach the cut,
// so that all the changes of a key fall in one range.
func latestOfRuns(changes []Change) (out []Change, ok bool) {
	if len(changes) == 0 {
		return nil, true
	}
	ents := keyEntries(changes, nil)
	less := func(a, b keyRef) int { return compareKeyRefs(changes, a, b) }
	var starts []int // the first entry of each run
	for k := range ents {
		if k == 0 || less(ents[k-1], ents[k]) > 0 {
			if len(starts) == maxKeyRuns {
				return nil, false
			}
			starts = append(starts, k)
		}
	}
	heads := make([]runHead, len(starts))
	longest := 0
	for r, st := range starts {
		end := len(ents)
		if r+1 < len(starts) {
			end = starts[r+1]
		}
		heads[r] = runHead{st, end}
		if end-st > heads[longest].end-heads[longest].at {
			longest = r
		}
	}
	parts := min(runtime.GOMAXPROCS(0), len(ents)/parallelRunsMin)
	if parts <= 1 {
		return gather(changes, mergeLatest(changes, ents, heads, less)), true
	}
	// Range q holds, of run r, the entries from cut q-1 to cut q (the
	// first of the run's entries not below the q-th pivot).
	lr := heads[longest]
	cuts := make([][]runHead, parts)
	for q := range parts {
		cuts[q] = make([]runHead, len(heads))
		for r, h := range heads {
			lo := h.at
			if q > 0 {
				lo = cuts[q-1][r].end
			}
			hi := h.end
			if q+1 < parts {
				pivot := ents[lr.at+(lr.end-lr.at)*(q+1)/parts]
				hi = lo + sort.Search(h.end-lo, func(k int) bool { return less(ents[lo+k], pivot) >= 0 })
			}
			cuts[q][r] = runHead{lo, hi}
		}
	}
	outs := make([][]int32, parts)
	var wg sync.WaitGroup
	for q := range parts {
		wg.Go(func() { outs[q] = mergeLatest(changes, ents, cuts[q], less) })
	}
	wg.Wait()
	n := 0
	for _, o := range outs {
		n += len(o)
	}
	// The changes are copied on all cores too, each range into its place.
	out = make([]Change, n)
	at := 0
	for _, o := range outs {
		dst := out[at : at+len(o)]
		wg.Go(func() { gatherInto(dst, changes, o) })
		at += len(o)
	}
	wg.Wait()
	return out, true
}

// gather returns the changes at idx, in order.
func gather(changes []Change, idx []int32) []Change {
	out := make([]Change, len(idx))
	gatherInto(out, changes, idx)
	return out
}

func gatherInto(dst, changes []Change, idx []int32) {
	for k, i := range idx {
		dst[k] = changes[i]
	}
}

// runHead is the next entry of a run of key entries in order, and its end.
type runHead struct{ at, end int }

// mergeLatest merges runs of entries in key order (heads, in the changes'
// order), a run before a later one on equal keys so that a key's changes
// come in their batch order, and returns the index of each key's latest
// change.
func mergeLatest(changes []Change, ents []keyRef, heads []runHead, less func(a, b keyRef) int) []int32 {
	heads = slices.Clone(heads)
	h := make([]int, 0, len(heads)) // a heap of run numbers
	before := func(x, y int) bool {
		if c := less(ents[heads[x].at], ents[heads[y].at]); c != 0 {
			return c < 0
		}
		return x < y
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && before(h[r], h[l]) {
				m = r
			}
			if !before(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	n := 0
	for r, hd := range heads {
		if hd.at < hd.end {
			h = append(h, r)
			n += hd.end - hd.at
		}
	}
	if len(h) == 0 {
		return nil
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	out := make([]int32, 0, n)
	last := -1 // the entry of the key being gathered
	for len(h) > 0 {
		r := h[0]
		e := ents[heads[r].at]
		switch {
		case last < 0 || less(ents[last], e) != 0:
			if last >= 0 {
				out = append(out, ents[last].i)
			}
			last = heads[r].at
		case bytes.Compare(changes[e.i].Order, changes[ents[last].i].Order) > 0:
			last = heads[r].at // a later change of the key (the first of equal orders stays)
		}
		if heads[r].at++; heads[r].at == heads[r].end {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		if len(h) > 0 {
			down(0)
		}
	}
	return append(out, ents[last].i)
}
