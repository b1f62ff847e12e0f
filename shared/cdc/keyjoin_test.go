package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestLookupFindsWhatAMapOfKeyTextsFinds: the key-order walk (keyJoin) of
// lookup reports the same rows as probing the map of the step's KeyTexts
// with every row, for files in key order, sparse among the keys, out of
// order (beyond the walk's patience), with duplicated keys, with strings
// that are not valid UTF-8, and for long keys.
func TestLookupFindsWhatAMapOfKeyTextsFinds(t *testing.T) {
	ctx := context.Background()
	for _, typ := range []value.Type{value.String, value.Long} {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			val := func(n int) any {
				if typ == value.Long {
					return int64(n - 500)
				}
				if n%97 == 0 {
					return fmt.Sprintf("k%04d\xff", n) // not valid UTF-8
				}
				return fmt.Sprintf("k%04d", n)
			}
			schema := value.StructType{Fields: []value.Field{{Name: "id", Type: typ, Nullable: true}, {Name: ColOrder, Type: value.Binary, Nullable: true}}}
			store := objstore.NewMemory()
			snap, err := delta.Open(store).Create(ctx, delta.CreateOptions{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			file := func(rows [][]any) {
				adds, err := writeRows(ctx, store, delta.WriteOptions{Schema: schema}, rows, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
				tx.Add(adds...)
				if snap, err = tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var sorted, shuffled, dups [][]any
			for n := 0; n < 1000; n += 1 + r.IntN(3) {
				sorted = append(sorted, []any{val(n), []byte{byte(n)}})
			}
			slices.SortFunc(sorted, func(a, b []any) int { return value.Compare(a[0], b[0]) })
			for n := range 1000 {
				shuffled = append(shuffled, []any{val(n), []byte{byte(n), 1}})
			}
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for n := 0; n < 1000; n += 7 {
				dups = append(dups, []any{val(n), []byte{byte(n), 2}}, []any{val(n), []byte{byte(n), 3}})
			}
			slices.SortStableFunc(dups, func(a, b []any) int { return value.Compare(a[0], b[0]) })
			var sparse [][]any // the walk gallops over most keys
			for _, n := range []int{0, 3, 400, 401, 700, 998, 999} {
				sparse = append(sparse, []any{val(n), []byte{byte(n), 4}})
			}
			file(sorted)
			file(shuffled)
			file(dups)
			file(sparse)

			var keys []Change
			for n := 0; n < 1100; n += 1 + r.IntN(4) {
				k := []any{val(n)}
				keys = append(keys, Change{Key: k, KeyText: KeyText(k)})
			}
			keys = sortByKey(keys, indexes(len(keys)))
			if typ == value.String {
				if newKeyJoin(keys) != nil {
					t.Fatal("keys with a string that is not valid UTF-8 are joined")
				}
				// Without them the walk is used; rows that are not valid
				// UTF-8 are still looked up in the map.
				keys = slices.DeleteFunc(keys, func(c Change) bool { return c.KeyText != KeyText([]any{c.Key[0]}) || !validKey(c) })
			}
			if newKeyJoin(keys) == nil {
				t.Fatal("the keys are not joined: the test would not test the walk")
			}
			type hit struct{ key, order, path string }
			run := func() []hit {
				found := map[string]*stored{}
				for _, c := range keys {
					found[c.KeyText] = &stored{}
				}
				var out []hit
				err := lookup(ctx, snap, snap.Files(), []string{"id"}, keys, found, nil, func(s *stored, order []byte, path string, _ int64) {
					for k, v := range found {
						if v == s {
							out = append(out, hit{k, string(order), path})
						}
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			got := run()
			// The reference: every row's KeyText probed in the map.
			var want []hit
			inKeys := map[string]bool{}
			for _, c := range keys {
				inKeys[c.KeyText] = true
			}
			for _, f := range snap.Files() {
				err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
					if k := KeyText(row[:1]); inKeys[k] {
						want = append(want, hit{k, string(row[1].([]byte)), f.Path})
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(want) < 100 {
				t.Fatalf("only %d rows match: the test would not test much", len(want))
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("lookup found %d rows, the map %d:\n got %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}
}

func indexes(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

func validKey(c Change) bool {
	s, ok := c.Key[0].(string)
	return !ok || newKeyJoin([]Change{{Key: []any{s}}}) != nil
}

// TestJoinCursorFindsAKeyBelowTheCursor: in a file out of key order, a row
// equal to a key the cursor has moved past is still found (the cursor
// jumps back), however the rows arrive.
func TestJoinCursorFindsAKeyBelowTheCursor(t *testing.T) {
	var keys []Change
	for _, n := range []int64{10, 20, 30} {
		k := []any{n}
		keys = append(keys, Change{Key: k, KeyText: KeyText(k)})
	}
	kj := newKeyJoin(keys)
	if kj == nil {
		t.Fatal("the keys are not joined")
	}
	for _, rows := range [][]int64{{25, 20}, {30, 10, 20, 30}, {20, 25, 20, 15, 10}} {
		cur := kj.cursor()
		for _, r := range rows {
			j, handled := cur.find(r)
			want := slices.IndexFunc(keys, func(c Change) bool { return c.Key[0] == r })
			if handled && j != want {
				t.Fatalf("rows %v: row %d found as key %d, want %d", rows, r, j, want)
			}
		}
	}
}
