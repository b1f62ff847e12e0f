package cdc

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// TestRangeCodesOrderKeysWhateverTheWidthOfTheirColumns: range codes sort
// as value.CompareKeys orders keys, and a key's code is the same whether
// its integer column is 32 or 64 bits wide in a file.
func TestRangeCodesOrderKeysWhateverTheWidthOfTheirColumns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() []any {
		return []any{int64(rng.IntN(50) - 25), string(rune('a' + rng.IntN(5))), float64(rng.IntN(7)) / 2}
	}
	for range 2000 {
		a, b := key(), key()
		ca, err := AppendRangeCode(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		cb, err := AppendRangeCode(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytes.Compare(ca, cb), value.CompareKeys(a, b); got != want {
			t.Fatalf("codes of %v and %v compare %d, keys %d", a, b, got, want)
		}
		narrow := []any{int32(a[0].(int64)), a[1], float32(a[2].(float64))}
		cn, err := AppendRangeCode(nil, narrow)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cn, ca) {
			t.Fatalf("the code of %v (int32, float32) differs from that of %v", narrow, a)
		}
	}
}

// TestAKeySpanFiltersByCodesAndByFirstColumnBounds: a span holds the codes
// in [lo, hi), overlaps the code ranges that can hold one, and keeps the
// row groups whose first-column bounds can, of any integer width.
func TestAKeySpanFiltersByCodesAndByFirstColumnBounds(t *testing.T) {
	code := func(k ...any) []byte {
		c, err := AppendRangeCode(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := NewKeySpan(code(int64(10), "m"), code(int64(20), "a"))
	for _, tc := range []struct {
		key  []any
		want bool
	}{
		{[]any{int64(10), "a"}, false},
		{[]any{int64(10), "m"}, true},
		{[]any{int32(15), "z"}, true},
		{[]any{int64(20), ""}, true},
		{[]any{int64(20), "a"}, false},
		{[]any{int64(21), "a"}, false},
	} {
		if got := s.Contains(code(tc.key...)); got != tc.want {
			t.Errorf("Contains(%v) = %v, want %v", tc.key, got, tc.want)
		}
	}
	if s.Overlaps(code(int64(1)), code(int64(9))) || !s.Overlaps(code(int64(1)), code(int64(10), "z")) || s.Overlaps(code(int64(20), "a"), code(int64(30))) {
		t.Error("Overlaps disagrees with the span [10 m, 20 a)")
	}
	keep := s.RowGroupFilter("id").Keep
	for _, tc := range []struct {
		min, max any
		want     bool
	}{
		{int32(1), int32(9), false},
		{int32(1), int32(10), true},
		{int16(20), int16(40), true},
		{int64(21), int64(40), false},
		{"x", "y", true}, // another kind of value: not comparable, kept
	} {
		if got := keep(tc.min, tc.max); got != tc.want {
			t.Errorf("Keep(%v, %v) = %v, want %v", tc.min, tc.max, got, tc.want)
		}
	}
	if NewKeySpan(nil, nil).RowGroupFilter("id") != nil {
		t.Error("an unbounded span filters row groups")
	}
}

// TestRecommendDVWarnsAboveTheShareOnly: the recommendation names the
// table and the figures, and only once more than the share was rewritten.
func TestRecommendDVWarnsAboveTheShareOnly(t *testing.T) {
	for _, tc := range []struct {
		spareable, total int64
		warn             bool
	}{{30, 100, true}, {25, 100, false}, {0, 100, false}, {10, 0, false}} {
		var b bytes.Buffer
		RecommendDV(context.Background(), slog.New(slog.NewTextHandler(&b, nil)), "db.t", tc.spareable, tc.total, DefaultRecommendDVShare)
		got := strings.Contains(b.String(), "deletion_vectors: on") && strings.Contains(b.String(), "table=db.t") && strings.Contains(b.String(), fmt.Sprintf("rows_rewritten=%d", tc.spareable))
		if got != tc.warn || !tc.warn && b.Len() > 0 {
			t.Errorf("%d of %d rows: logged %q, want a warning %v", tc.spareable, tc.total, b.String(), tc.warn)
		}
	}
}
