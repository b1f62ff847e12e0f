package cdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

type lookupHit struct {
	key   string
	order string
	path  string
	pos   int64
}

// TestLookupFindsWhatAFullReadFinds builds state tables of several
// key-sorted files with overlapping key ranges (as successive merges leave
// them), small pages and row groups, composite keys, duplicate keys and
// deletion vectors, and checks that lookup reports exactly the rows, orders
// and positions that reading every row of every file finds for the batch's
// keys.
func TestLookupFindsWhatAFullReadFinds(t *testing.T) {
	ctx := context.Background()
	for trial := range 12 {
		r := rand.New(rand.NewPCG(uint64(trial), 14))
		kt := value.Type(value.String)
		if trial%2 == 1 {
			kt = value.Long
		}
		key := func(i int) any {
			if kt == value.String {
				return fmt.Sprintf("cust-%06d", i)
			}
			return int64(i)
		}
		schema := value.StructType{Fields: []value.Field{
			{Name: "k1", Type: kt, Nullable: true}, {Name: "k2", Type: value.Long, Nullable: true},
			{Name: "v", Type: value.String, Nullable: true}, {Name: ColOrder, Type: value.Binary, Nullable: true},
		}}
		store := objstore.NewMemory()
		snap, err := delta.Create(ctx, store, delta.CreateOptions{Schema: schema, Configuration: map[string]string{delta.PropEnableDeletionVectors: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		space := 5000
		var files []delta.Add
		var written [][]any
		for f := range 1 + r.IntN(4) {
			n := 300 + r.IntN(3000)
			rows := make([][]any, n)
			for i := range rows {
				rows[i] = []any{key(r.IntN(space)), int64(r.IntN(3)), fmt.Sprintf("v%d", i), []byte{byte(f), byte(i >> 8), byte(i)}}
			}
			slices.SortFunc(rows, func(a, b []any) int { return value.CompareKeys(a[:2], b[:2]) })
			for _, row := range rows {
				written = append(written, row[:2])
			}
			w, err := delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: schema, RowGroupRows: int64(100 + r.IntN(900)),
				PageBytes: []int{512, 2048, StatePageBytes}[r.IntN(3)], BloomFilterColumns: []string{"k1"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range rows {
				if err := w.Write(row); err != nil {
					t.Fatal(err)
				}
			}
			add, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.IntN(2) == 0 {
				del := roaring64.New()
				for range r.IntN(n / 3) {
					del.Add(uint64(r.IntN(n)))
				}
				dvs, err := delta.WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{del})
				if err != nil {
					t.Fatal(err)
				}
				add.DeletionVector = &dvs[0]
			}
			files = append(files, add)
		}
		var keys []Change
		seen := map[string]bool{}
		for range 1 + r.IntN(40) {
			k := []any{key(r.IntN(space)), int64(r.IntN(3))} // mostly absent
			if r.IntN(2) == 0 {
				k = written[r.IntN(len(written))]
			}
			text := string(AppendKeyText(nil, k))
			if !seen[text] {
				seen[text] = true
				keys = append(keys, Change{Key: k, KeyText: text})
			}
		}
		slices.SortFunc(keys, func(a, b Change) int { return value.CompareKeys(a.Key, b.Key) })

		var want []lookupHit
		for _, f := range files {
			err := delta.ReadFileAt(ctx, store, snap.Metadata(), f, delta.ReadOptions{Columns: []string{"k1", "k2", ColOrder}}, func(pos int64, row []any) error {
				if text := string(AppendKeyText(nil, row[:2])); seen[text] {
					want = append(want, lookupHit{text, string(row[2].([]byte)), f.Path, pos})
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		found := map[string]*stored{}
		for _, c := range keys {
			found[c.KeyText] = &stored{}
		}
		var got []lookupHit
		err = lookup(ctx, snap, files, []string{"k1", "k2"}, keys, found, nil, func(s *stored, order []byte, path string, pos int64) {
			for text, v := range found {
				if v == s {
					got = append(got, lookupHit{text, string(order), path, pos})
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatalf("trial %d: no key of the batch is stored: the trial tests nothing", trial)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%v keys, %d files): lookup found %d rows, a full read %d\ngot  %v\nwant %v", trial, kt, len(files), len(got), len(want), got, want)
		}
	}
}
