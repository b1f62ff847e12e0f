package cdc

import (
	"bytes"
	"container/heap"
	"hash/maphash"
	"math"
	"reflect"
	"slices"
	"sort"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// keyRange is the keys one pass handles: codes in [lo, hi), nil meaning
// unbounded. lo0 and hi0 are the first key column's values of lo and hi,
// which file statistics and row-group bounds can be compared with.
type keyRange struct {
	lo, hi   []byte
	lo0, hi0 any
}

func (r *keyRange) contains(code []byte) bool {
	return (r.lo == nil || bytes.Compare(code, r.lo) >= 0) && (r.hi == nil || bytes.Compare(code, r.hi) < 0)
}

// setLo and setHi move a bound to a key code.
func (r *keyRange) setLo(code []byte) { r.lo, r.lo0 = code, firstOfCode(code) }
func (r *keyRange) setHi(code []byte) { r.hi, r.hi0 = code, firstOfCode(code) }

func firstOfCode(code []byte) any {
	if code == nil {
		return nil
	}
	v, _, err := readCode(code)
	if err != nil {
		return nil
	}
	return v
}

// overlaps reports whether first-column values in [min, max] can belong to
// the range. Integers of any width compare as numbers, as do floats; bounds
// of another kind than the range's cannot be compared: they overlap.
func (r *keyRange) overlaps(min, max any) bool {
	if r.lo != nil {
		max, lo0 := value.Widest(max), value.Widest(r.lo0)
		if reflect.TypeOf(max) != reflect.TypeOf(lo0) {
			return true
		}
		if value.Compare(max, lo0) < 0 {
			return false
		}
	}
	if r.hi != nil {
		min, hi0 := value.Widest(min), value.Widest(r.hi0)
		if reflect.TypeOf(min) != reflect.TypeOf(hi0) {
			return true
		}
		// hi is exclusive for whole keys, but a key whose first column
		// equals hi0 may still sort before hi.
		if value.Compare(min, hi0) > 0 {
			return false
		}
	}
	return true
}

// rowGroupFilter skips the row groups of file f whose first key column
// cannot hold a key of the range. A row whose key is null belongs to the
// first range (null sorts first) and row-group bounds say nothing of nulls,
// so the first range filters only files whose statistics show no null key,
// and only when allowed: when its rows need not all be counted.
func (r *keyRange) rowGroupFilter(f delta.Add, col string, first bool) *delta.RowGroupFilter {
	if r.lo == nil && r.hi == nil {
		return nil
	}
	if r.lo == nil {
		if !first {
			return nil
		}
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			return nil
		}
		if n, ok := st.NullCountOf(col); !ok || n > 0 {
			return nil
		}
	}
	return &delta.RowGroupFilter{Column: col, Keep: r.overlaps}
}

// mayHold reports whether a data file's statistics leave room for a key of
// the range in it. Only types whose statistics order as value codes do are
// trusted; a file with null keys may hold keys of the first range.
func (r *keyRange) mayHold(f delta.Add, col string, typ value.Type) bool {
	if (r.lo == nil && r.hi == nil) || !statsOrderAsCodes(typ) {
		return true
	}
	st, err := delta.ParseStats(f.Stats)
	if err != nil {
		return true
	}
	if r.lo == nil {
		if n, ok := st.NullCountOf(col); !ok || n > 0 {
			return true
		}
	}
	min, max, ok := st.MinMax(col, typ)
	return !ok || r.overlaps(min, max)
}

func statsOrderAsCodes(t value.Type) bool {
	switch t {
	case value.Byte, value.Short, value.Integer, value.Long, value.String, value.Binary, value.Date, value.Timestamp, value.TimestampNTZ:
		return true
	}
	_, ok := t.(value.DecimalType)
	return ok
}

// keySample is a bottom-k sketch of the distinct keys of the tables: the k
// key codes with the smallest hashes. They are a uniform sample of the
// distinct keys, however often each key occurs, and the k-th smallest hash
// estimates how many distinct keys there are.
type keySample struct {
	k    int
	seed maphash.Seed
	h    sampleHeap
	in   map[uint64]bool
}

type sampleItem struct {
	hash uint64
	code []byte
}

// sampleHeap is a max-heap by hash.
type sampleHeap []sampleItem

func (h sampleHeap) Len() int           { return len(h) }
func (h sampleHeap) Less(i, j int) bool { return h[i].hash > h[j].hash }
func (h sampleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sampleHeap) Push(x any)        { *h = append(*h, x.(sampleItem)) }
func (h *sampleHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newKeySample(k int, seed maphash.Seed) *keySample {
	return &keySample{k: k, seed: seed, in: map[uint64]bool{}}
}

func (s *keySample) add(code []byte) {
	hash := maphash.Bytes(s.seed, code)
	if len(s.h) == s.k && hash >= s.h[0].hash || s.in[hash] {
		return
	}
	s.in[hash] = true
	heap.Push(&s.h, sampleItem{hash: hash, code: bytes.Clone(code)})
	if len(s.h) > s.k {
		delete(s.in, heap.Pop(&s.h).(sampleItem).hash)
	}
}

// distinct estimates the number of distinct keys added.
func (s *keySample) distinct() float64 {
	if len(s.h) < s.k {
		return float64(len(s.h)) // every key is in the sample
	}
	return float64(s.k-1) / (float64(s.h[0].hash) / math.Exp2(64))
}

// passPlan chooses each pass's upper bound from a sample of the keys.
type passPlan struct {
	sample    [][]byte // codes, sorted
	perSample float64  // distinct keys per sampled key
	// historyRows counts the history's rows, all read for the sample.
	historyRows int64
}

func newPassPlan(s *keySample) *passPlan {
	p := &passPlan{perSample: 1}
	for _, it := range s.h {
		p.sample = append(p.sample, it.code)
	}
	slices.SortFunc(p.sample, bytes.Compare)
	if len(p.sample) > 0 {
		p.perSample = s.distinct() / float64(len(p.sample))
	}
	return p
}

// hi returns the upper bound of a pass that starts at lo and should hold
// about target keys; nil when the rest of the keys fit.
func (p *passPlan) hi(lo []byte, target float64) []byte {
	if p == nil {
		return nil
	}
	j := 0
	if lo != nil {
		j = sort.Search(len(p.sample), func(i int) bool { return bytes.Compare(p.sample[i], lo) > 0 })
	}
	m := max(1, int(target/p.perSample))
	if j+m >= len(p.sample) {
		return nil
	}
	return p.sample[j+m]
}

// passes estimates how many passes of target keys the keys need.
func (p *passPlan) passes(target float64) int {
	if p == nil {
		return 1
	}
	return max(1, int(math.Ceil(float64(len(p.sample))*p.perSample/target)))
}
