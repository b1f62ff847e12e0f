package delta

import (
	"context"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// TestReadFileAtReportsPhysicalRowPositions reads a file of many row groups
// whose rows hold their own index as id, with a deletion vector stored in a
// DV file and a row-group filter that skips some groups: each row comes
// with the index a deletion vector would mark, deleted rows and skipped
// groups still count, and a vector built from the positions deletes those
// very rows.
func TestReadFileAtReportsPhysicalRowPositions(t *testing.T) {
	ctx := context.Background()
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	sizes := rgGroups(t, store, add)
	deleted := roaring64.BitmapOf(0, 3, 200, 600, 601, 900, uint64(len(rows)-1))
	dvs, err := WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{deleted})
	if err != nil {
		t.Fatal(err)
	}
	add.DeletionVector = &dvs[0]
	const from = 500 // keep the row groups that can hold an id >= from
	var want []int64
	first := 0
	for _, n := range sizes {
		group := rows[first : first+n]
		if group[n-1][0].(int64) >= from {
			for i := range group {
				if !deleted.Contains(uint64(first + i)) {
					want = append(want, int64(first+i))
				}
			}
		}
		first += n
	}
	if len(want) == 0 || int(want[0]) < sizes[0] {
		t.Fatalf("the filter keeps rows from position %v: it must skip the first row groups", want[:min(1, len(want))])
	}
	var got []int64
	err = ReadFileAt(ctx, store, md, add, ReadOptions{Columns: []string{"id"}, RowGroupFilter: &RowGroupFilter{Column: "id", Keep: func(lo, hi any) bool {
		return hi.(int64) >= from
	}}}, func(pos int64, row []any) error {
		if row[0].(int64) != pos {
			t.Fatalf("row with id %d reported at position %d", row[0], pos)
		}
		got = append(got, pos)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("positions %v, want %v", got, want)
	}

	// The positions are DV indexes: marking a few of them removes exactly
	// those rows from a full read.
	more := roaring64.BitmapOf(uint64(got[0]), uint64(got[len(got)/2]))
	more.Or(deleted)
	dvs, err = WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{more})
	if err != nil {
		t.Fatal(err)
	}
	add.DeletionVector = &dvs[0]
	n := 0
	err = ReadFileAt(ctx, store, md, add, ReadOptions{}, func(pos int64, row []any) error {
		if more.Contains(uint64(pos)) || row[0].(int64) != pos {
			t.Fatalf("row %v at position %d", row[0], pos)
		}
		n++
		return nil
	})
	if err != nil || n != len(rows)-int(more.GetCardinality()) {
		t.Fatalf("read %d rows (%v), want %d", n, err, len(rows)-int(more.GetCardinality()))
	}
}
