package cdc

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// keyJoin finds a file's rows among a step's keys by walking both in key
// order instead of probing a map with each row's KeyText: state files are
// written in key order (and rewritten in it), so consecutive rows find
// their key at or just after the previous row's, in memory read in order,
// where a map of a step's keys misses the cache on nearly every probe of
// a backfill's random keys. It handles the common single-column string
// or long key; other keys, and rows it cannot decide, go to the map.
type keyJoin struct {
	strs []string // the step's keys, sorted, when they are strings
	pre  []uint64 // their keyPrefix, side by side: most steps compare these
	ints []int64  // ... or longs
}

// joinBacks is how many rows a file may have out of key order before its
// cursor gives up and leaves the rest of the file to the map.
const joinBacks = 64

// newKeyJoin returns the join over keys (sorted by value.CompareKeys), or
// nil when they are not all single strings (valid UTF-8, whose KeyText is
// equal exactly when the strings are) or all single longs. Each key must
// carry its KeyText: the join names a found key by it.
func newKeyJoin(keys []Change) *keyJoin {
	if len(keys) == 0 || len(keys[0].Key) != 1 {
		return nil
	}

	kj := &keyJoin{}
	switch keys[0].Key[0].(type) {
	case string:
		kj.strs = make([]string, len(keys))
		kj.pre = make([]uint64, len(keys))
		for i, c := range keys {
			s, ok := c.Key[0].(string)
			if len(c.Key) != 1 || !ok || !utf8.ValidString(s) {
				return nil
			}
			kj.strs[i], kj.pre[i] = s, keyPrefix(s)
		}
		if !slices.IsSorted(kj.strs) {
			return nil
		}
	case int64:
		kj.ints = make([]int64, len(keys))
		for i, c := range keys {
			v, ok := c.Key[0].(int64)
			if len(c.Key) != 1 || !ok {
				return nil
			}
			kj.ints[i] = v
		}
		if !slices.IsSorted(kj.ints) {
			return nil
		}
	default:
		return nil
	}
	return kj
}

// joinCursor is one file's walk over a keyJoin.
type joinCursor struct {
	kj    *keyJoin
	j     int // keys before j are below the previous row's key
	backs int
}

func (kj *keyJoin) cursor() *joinCursor {
	if kj == nil {
		return nil
	}
	return &joinCursor{kj: kj}
}

// find returns the index of the step key equal to a row's key value, or
// -1; handled is false when the caller must probe the map instead (a value
// of another type, a string that is not valid UTF-8, a file found out of
// key order).
func (c *joinCursor) find(v any) (idx int, handled bool) {
	if c == nil || c.backs > joinBacks {
		return -1, false
	}
	if c.kj.strs != nil {
		s, ok := v.(string)
		if !ok || !utf8.ValidString(s) {
			return -1, false
		}
		p := keyPrefix(s)
		return c.seek(len(c.kj.strs), func(i int) int {
			if d := cmp.Compare(c.kj.pre[i], p); d != 0 {
				return d
			}
			return strings.Compare(c.kj.strs[i], s)
		})
	}
	n, ok := v.(int64)
	if !ok {
		return -1, false
	}
	return c.seek(len(c.kj.ints), func(i int) int { return cmp.Compare(c.kj.ints[i], n) })
}

// seek moves the cursor to the first key not below the row's (compare(i)
// compares key i with it) and reports whether that key equals it.
func (c *joinCursor) seek(n int, compare func(i int) int) (int, bool) {
	// Keys before j are below the previous row's; a row at or below key
	// j-1 (a file out of key order) is found by jumping back.
	if c.j > 0 && compare(c.j-1) >= 0 {
		c.backs++
		if c.backs > joinBacks {
			return -1, false
		}
		c.j = sort.Search(n, func(i int) bool { return compare(i) >= 0 })
	} else if c.j < n && compare(c.j) < 0 {
		// Gallop forward: a small file among many keys skips far, a
		// dense one a step or two.
		lo, step := c.j, 1 // compare(lo) < 0
		hi := lo + 1
		for hi < n && compare(hi) < 0 {
			lo, step = hi, step*2
			hi = lo + step
		}
		hi = min(hi, n)
		c.j = lo + 1 + sort.Search(hi-lo-1, func(k int) bool { return compare(lo+1+k) >= 0 })
	}
	if c.j < n && compare(c.j) == 0 {
		return c.j, true
	}
	return -1, true
}
