package cdc

import (
	"bytes"
	"hash/maphash"
	"math"
	"testing"
)

func codeOf(t *testing.T, key ...any) []byte {
	t.Helper()
	c, err := appendCodes(nil, key, codeKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeySampleEstimatesDistinctKeysAndPlansEvenPasses: however often each
// key occurs, the sample estimates the distinct keys, and the ranges it
// plans hold about the keys asked for.
func TestKeySampleEstimatesDistinctKeysAndPlansEvenPasses(t *testing.T) {
	const keys = 200_000
	s := newKeySample(4096, maphash.MakeSeed())
	for i := range keys {
		for range 1 + i%3 { // some keys occur more often: no matter
			s.add(codeOf(t, int64(i*7), "eu"))
		}
	}
	if est := s.distinct(); math.Abs(est-keys)/keys > 0.1 {
		t.Fatalf("estimated %.0f distinct keys, want about %d", est, keys)
	}
	p := newPassPlan(s)
	const target = 30_000
	var lo []byte
	passes := 0
	for {
		hi := p.hi(lo, target)
		n := 0
		for i := range keys {
			c := codeOf(t, int64(i*7), "eu")
			if (lo == nil || bytes.Compare(c, lo) >= 0) && (hi == nil || bytes.Compare(c, hi) < 0) {
				n++
			}
		}
		passes++
		if hi == nil {
			break
		}
		if n < target*3/4 || n > target*5/4 {
			t.Fatalf("pass %d holds %d keys, want about %d", passes, n, target)
		}
		lo = hi
	}
	if want := p.passes(target); passes < want-1 || passes > want+1 {
		t.Fatalf("%d passes, the plan said %d", passes, want)
	}
}

func TestKeySampleOfFewKeysHoldsThemAll(t *testing.T) {
	s := newKeySample(100, maphash.MakeSeed())
	for i := range 60 {
		s.add(codeOf(t, int64(i%30)))
	}
	if s.distinct() != 30 {
		t.Fatalf("distinct = %v, want 30", s.distinct())
	}
	if p := newPassPlan(s); p.hi(nil, 1000) != nil || p.passes(10) != 3 {
		t.Fatalf("plan of 30 keys: %d passes of 10", p.passes(10))
	}
}

// TestKeyTableKeepsEntriesThroughCutsAndSorts: entries stay findable with
// their order, flags, sum and row after the table is cut below its
// median, and come out in key order.
func TestKeyTableKeepsEntriesThroughCutsAndSorts(t *testing.T) {
	tab := newKeyTable(maphash.MakeSeed(), true)
	const n = 50_000
	for i := range n {
		k := codeOf(t, int64((i*7919)%n))
		j := tab.insert(k, []byte{1, byte(i)}, uint8(i%2))
		tab.entry(j).sum[0] = byte(i)
		tab.setRow(j, k)
	}
	for i := 0; i < n; i += 7 { // longer orders move, same-length ones stay
		j, ok := tab.find(codeOf(t, int64((i*7919)%n)))
		if !ok {
			t.Fatalf("key %d not found", i)
		}
		if i%2 == 0 {
			tab.setOrder(j, []byte{2, byte(i), 0})
		} else {
			tab.setOrder(j, []byte{3, byte(i)})
		}
	}
	cut := tab.median()
	tab = tab.below(cut)
	if tab.len() != n/2 {
		t.Fatalf("%d entries below the median, want %d", tab.len(), n/2)
	}
	for i := range n {
		k := codeOf(t, int64((i*7919)%n))
		j, ok := tab.find(k)
		if ok != (bytes.Compare(k, cut) < 0) {
			t.Fatalf("key %d: found %v, below the cut %v", i, ok, bytes.Compare(k, cut) < 0)
		}
		if !ok {
			continue
		}
		e := tab.entry(j)
		want := []byte{1, byte(i)}
		if i%7 == 0 && i%2 == 0 {
			want = []byte{2, byte(i), 0}
		} else if i%7 == 0 {
			want = []byte{3, byte(i)}
		}
		if !bytes.Equal(tab.orderOf(j), want) || e.flags != uint8(i%2) || e.sum[0] != byte(i) || !bytes.Equal(tab.rows[j], k) {
			t.Fatalf("key %d: order %x flags %d sum %d row %x", i, tab.orderOf(j), e.flags, e.sum[0], tab.rows[j])
		}
	}
	sorted := tab.sortedEntries()
	for i := 1; i < len(sorted); i++ {
		if bytes.Compare(tab.keyOf(sorted[i-1]), tab.keyOf(sorted[i])) >= 0 {
			t.Fatal("entries are not in key order")
		}
	}
	if tab.bytes < int64(tab.len())*(entryOverhead+rowOverhead) {
		t.Fatalf("%d bytes counted for %d entries", tab.bytes, tab.len())
	}
}

// TestKeyTextKeepsInvalidUTF8KeysApart: strings that are not valid UTF-8
// differ in their bad bytes, which JSON would turn into the same U+FFFD;
// their key texts must differ, and differ from the valid string JSON would
// give, or two keys would be merged as one.
func TestKeyTextKeepsInvalidUTF8KeysApart(t *testing.T) {
	a, b, valid := "id\xff", "id\xfe", "id\ufffd"
	ta, tb, tv := KeyText([]any{a}), KeyText([]any{b}), KeyText([]any{valid})
	if ta == tb || ta == tv || tb == tv {
		t.Fatalf("key texts %q %q %q: want three different", ta, tb, tv)
	}
	if got := KeyText([]any{"x6964ff"}); got == ta {
		t.Fatalf("the valid string %q shares the text of an invalid one", "x6964ff")
	}
	latest := Latest([]Change{
		{Key: []any{a}, KeyText: ta, Order: []byte{1}},
		{Key: []any{b}, KeyText: tb, Order: []byte{2}},
	})
	if len(latest) != 2 {
		t.Fatalf("Latest kept %d keys of two different ones", len(latest))
	}
}
