package parquetfile

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/value"
)

// The stored test of a string column finds exactly the values looked for,
// whether the page's values come in order (the cursor moves forward) or
// not (it searches again), against a set of the values looked for.
func TestStoredTestOfStringsMatchesASet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func(n int) string { return fmt.Sprintf("k%05d", n) }
	for round := range 300 {
		var looked []any
		set := map[string]bool{}
		for range rng.IntN(40) {
			k := key(rng.IntN(200))
			looked = append(looked, k)
			set[k] = true
		}
		m := newValueMatch(value.Field{Name: "id", Type: value.String}, 0, looked)
		if m == nil {
			t.Fatal("no match built for a string column")
		}
		// The page: values in order (a sorted file, duplicates allowed),
		// or shuffled (an unsorted one).
		page := make([]string, rng.IntN(300))
		for i := range page {
			page[i] = key(rng.IntN(220))
		}
		sorted := round%2 == 0
		if sorted {
			slices.Sort(page)
		}
		// The values within the page's bounds, as the column index gives
		// them; or all of them.
		lo, hi := 0, len(m.values)
		if sorted && len(page) > 0 {
			lo, _ = slices.BinarySearch(m.strList, page[0])
			hi, _ = slices.BinarySearch(m.strList, page[len(page)-1]+"\x00")
		}
		st := m.storedTest(format.ByteArray, lo, hi)
		for i, v := range page {
			if got := st.hasBytes([]byte(v)); got != set[v] {
				t.Fatalf("round %d (sorted %v), value %d %q: hasBytes %v, want %v (looked for %v)", round, sorted, i, v, got, set[v], m.strList[lo:hi])
			}
		}
	}
}
