package cdc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
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

// TestLatestOfRunsKeepsWhatTheSortKeeps: changes made of a few runs in key
// order (a step's staged parts) give, merged, the changes the map and the
// sort give: the greatest order of each key, the first of equal orders,
// sorted by key; more runs than maxKeyRuns are left to the sort.
func TestLatestOfRunsKeepsWhatTheSortKeeps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 300 {
		mixed := round%10 == 9 // first key columns of two types
		var changes []Change
		runs := 1 + r.IntN(8)
		if round%50 == 49 {
			runs = maxKeyRuns + 1 + r.IntN(5)
		}
		for range runs {
			var run [][]any
			for range r.IntN(60) {
				var first any = fmt.Sprintf("k%03d", r.IntN(40))
				if mixed && r.IntN(2) == 0 {
					first = int64(r.IntN(40))
				}
				run = append(run, []any{first, int64(r.IntN(3))})
			}
			slices.SortStableFunc(run, value.CompareKeys)
			if len(run) == 0 {
				run = append(run, []any{"k000", int64(0)}) // a run of its own
			}
			for _, key := range run {
				changes = append(changes, Change{Key: key, KeyText: KeyText(key), Order: []byte{byte(r.IntN(6))}, Position: fmt.Sprint(len(changes))})
			}
		}
		want := sortByKey(changes, latestIndexes(changes))
		got, ok := latestOfRuns(changes)
		if !ok {
			if runs <= maxKeyRuns {
				t.Fatalf("round %d: %d runs not merged", round, runs)
			}
			continue
		}
		sameLatest(t, round, got, want)
	}
}

// sameLatest checks that got keeps, for every key, the change want keeps
// (told by their Position), in the same order.
func sameLatest(t *testing.T, round int, got, want []Change) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("round %d: %d keys, want %d", round, len(got), len(want))
	}
	for i := range got {
		if got[i].Position != want[i].Position {
			t.Fatalf("round %d: key %v: change %s, want %s", round, got[i].Key, got[i].Position, want[i].Position)
		}
	}
}

// TestLatestOfRunsInKeyRangesIsTheMapAndTheSort: runs merged in several
// key ranges at once (as many changes are) give each key the change the
// map and the sort give, in the same order, whatever keys the ranges are
// cut at: runs of few distinct keys, so that a key's changes lie on both
// sides of where a range would be cut in one run and not in another, runs
// empty on one side, and a single run.
func TestLatestOfRunsInKeyRangesIsTheMapAndTheSort(t *testing.T) {
	defer func(n int) { parallelRunsMin = n }(parallelRunsMin)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r := rand.New(rand.NewPCG(5, 9))
	for round := range 300 {
		parallelRunsMin = 1 + r.IntN(40)
		keys := 1 + r.IntN(30)
		var changes []Change
		for range 1 + r.IntN(10) {
			var run [][]any
			for range r.IntN(80) {
				run = append(run, []any{fmt.Sprintf("k%03d", r.IntN(keys)), int64(r.IntN(2))})
			}
			slices.SortStableFunc(run, value.CompareKeys)
			for _, key := range run {
				changes = append(changes, Change{Key: key, KeyText: KeyText(key), Order: []byte{byte(r.IntN(4))}, Position: fmt.Sprint(len(changes))})
			}
		}
		want := sortByKey(changes, latestIndexes(changes))
		got, ok := latestOfRuns(changes)
		if !ok {
			t.Fatalf("round %d: not merged", round)
		}
		sameLatest(t, round, got, want)
	}
}

// BenchmarkLatestSorted: a step's 85k changes in 20 runs of UUID-like
// keys in key order (its staged parts), by merging the runs and by the map
// and the sort.
func BenchmarkLatestSorted(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var changes []Change
	for range 20 {
		var run [][]any
		for range 85_000 / 20 {
			run = append(run, []any{fmt.Sprintf("%08x-%04x-4%03x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff)})
		}
		slices.SortFunc(run, value.CompareKeys)
		for _, k := range run {
			changes = append(changes, Change{Key: k, KeyText: KeyText(k), Order: []byte{0, byte(r.IntN(200))}})
		}
	}
	b.Run("runs merged", func(b *testing.B) {
		for b.Loop() {
			if _, ok := latestOfRuns(changes); !ok {
				b.Fatal("not merged")
			}
		}
	})
	b.Run("map and sort", func(b *testing.B) {
		for b.Loop() {
			sortByKey(changes, latestIndexes(changes))
		}
	})
}
