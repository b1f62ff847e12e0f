package cdc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestSortByKeyOrdersAsCompareKeys(t *testing.T) {
	strs := []any{nil, "", "a", "a\x00", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefgz", "\xff\xff\xff\xff\xff\xff\xff\xff", "é", "b"}
	ints := []any{nil, int64(math.MinInt64), int64(-1), int64(0), int64(1), int64(math.MaxInt64), int64(1 << 40)}
	for _, tc := range []struct {
		name string
		gen  func(r *rand.Rand) []any
	}{
		{"string keys with shared prefixes, empty and null", func(r *rand.Rand) []any { return []any{strs[r.IntN(len(strs))]} }},
		{"random string keys", func(r *rand.Rand) []any { return []any{fmt.Sprintf("%x", r.Uint64()>>r.IntN(64))} }},
		{"long keys of both signs", func(r *rand.Rand) []any { return []any{ints[r.IntN(len(ints))]} }},
		{"int keys", func(r *rand.Rand) []any { return []any{int32(r.IntN(200) - 100)} }},
		{"binary keys", func(r *rand.Rand) []any {
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.IntN(3)) * 127
			}
			return []any{b}
		}},
		{"two-column keys tied on the first", func(r *rand.Rand) []any { return []any{strs[r.IntN(3)], int64(r.IntN(5))} }},
		{"a column of mixed types", func(r *rand.Rand) []any {
			if r.IntN(2) == 0 {
				return []any{strs[r.IntN(len(strs))]}
			}
			return []any{ints[r.IntN(len(ints))]}
		}},
		{"decimal keys (no prefix)", func(r *rand.Rand) []any {
			d, err := value.ParseDecimal(fmt.Sprintf("%d.%02d", r.IntN(50)-25, r.IntN(100)))
			if err != nil {
				panic(err)
			}
			return []any{d}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			for round := 0; round < 50; round++ {
				changes := make([]Change, r.IntN(300))
				for i := range changes {
					changes[i] = Change{Key: tc.gen(r), Position: fmt.Sprint(i)}
				}
				idx := make([]int32, len(changes))
				for i := range idx {
					idx[i] = int32(i)
				}
				got := sortByKey(changes, idx)
				if len(got) != len(changes) {
					t.Fatalf("sorted %d changes into %d", len(changes), len(got))
				}
				if !slices.IsSortedFunc(got, func(a, b Change) int { return value.CompareKeys(a.Key, b.Key) }) {
					t.Fatalf("not sorted by key: %v", keysOf(got))
				}
				seen := map[string]bool{}
				for _, c := range got {
					if seen[c.Position] {
						t.Fatalf("change %s twice", c.Position)
					}
					seen[c.Position] = true
				}
			}
		})
	}
}

func keysOf(cs []Change) [][]any {
	out := make([][]any, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}

// TestLatestSortedKeepsWhatLatestKeeps: the latest change of each key (the
// greatest order, the first of equal orders), sorted by key.
func TestLatestSortedKeepsWhatLatestKeeps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 100; round++ {
		changes := make([]Change, r.IntN(400))
		for i := range changes {
			key := []any{fmt.Sprintf("k%03d", r.IntN(60)), int64(r.IntN(3))}
			changes[i] = Change{Key: key, KeyText: KeyText(key), Order: []byte{byte(r.IntN(8))}, Position: fmt.Sprint(i)}
		}
		var want []Change
		for _, c := range Latest(changes) {
			want = append(want, c)
		}
		slices.SortFunc(want, func(a, b Change) int { return value.CompareKeys(a.Key, b.Key) })
		got := latestSorted(changes)
		if len(got) != len(want) {
			t.Fatalf("%d keys, want %d", len(got), len(want))
		}
		for i := range got {
			if got[i].Position != want[i].Position {
				t.Fatalf("key %v: change %s, want %s (order %v vs %v)", got[i].Key, got[i].Position, want[i].Position, got[i].Order, want[i].Order)
			}
		}
	}
}
