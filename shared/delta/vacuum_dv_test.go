package delta

import (
	"context"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// replaceDV gives the live file add a deletion vector of rows in a new DV
// file under prefix, removing the old pair with deletion time removedAt.
// It returns the new add and the DV file's object name.
func replaceDV(t *testing.T, ctx context.Context, store objstore.Store, prefix string, add Add, removedAt time.Time, rows ...uint64) (Add, string) {
	t.Helper()
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dvs, err := WriteDeletionVectors(ctx, store, prefix, []*roaring64.Bitmap{roaring64.BitmapOf(rows...)})
	if err != nil {
		t.Fatal(err)
	}
	name, err := dvs[0].StoragePath()
	if err != nil {
		t.Fatal(err)
	}
	next := add.WithDeletionVector(&dvs[0])
	tx := snap.NewTransaction(Operation{Name: "DELETE"})
	tx.ReadFiles(add.Path)
	tx.Remove(add.Remove(removedAt.UnixMilli(), true))
	tx.Add(next)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return next, name
}

// TestVacuumDeletesDeletionVectorFilesNoVersionNeeds: a file whose vector
// is replaced twice keeps its current DV file; the first goes once its
// remove has expired, the second only after its own has, and a DV file no
// commit references goes like any orphan. Objects are written at the real
// time; vacuum runs days later by its clock.
func TestVacuumDeletesDeletionVectorFilesNoVersionNeeds(t *testing.T) {
	for _, prefix := range []string{"", "q7"} {
		t.Run("with prefix "+prefix+" the replaced vectors go after the retention", func(t *testing.T) {
			ctx := context.Background()
			store := optDVTable(t, ctx)
			add := optAppend(t, ctx, store, "eu", 0, ids(0, 10)...)
			data, err := add.ObjectName()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			add, first := replaceDV(t, ctx, store, prefix, add, start, 1)
			add, second := replaceDV(t, ctx, store, prefix, add, start, 1, 2)
			_, current := replaceDV(t, ctx, store, prefix, add, start.Add(5*24*time.Hour), 1, 2, 3)
			dvs, err := WriteDeletionVectors(ctx, store, prefix, []*roaring64.Bitmap{roaring64.BitmapOf(4)})
			if err != nil {
				t.Fatal(err)
			}
			orphan, _ := dvs[0].StoragePath()

			// Retention 7 days, run 10 days on: the cutoff is day 3. The
			// first vector's remove (day 0) has expired, the second's
			// (day 5) has not.
			vacuumAt := func(days int) map[string]bool {
				t.Helper()
				_, err := Open(store).Vacuum(ctx, VacuumOptions{Now: func() time.Time { return start.Add(time.Duration(days) * 24 * time.Hour) }})
				if err != nil {
					t.Fatal(err)
				}
				return objectNames(t, store)
			}
			left := vacuumAt(10)
			if left[first] || left[orphan] || !left[second] || !left[current] || !left[data] {
				t.Errorf("after day 10: first %v, orphan %v, second %v, current %v, data %v; want only second, current and data",
					left[first], left[orphan], left[second], left[current], left[data])
			}
			left = vacuumAt(20)
			if left[second] || !left[current] || !left[data] {
				t.Errorf("after day 20: second %v, current %v, data %v; want current and data", left[second], left[current], left[data])
			}
			snap, err := Open(store).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			err = ReadFile(ctx, store, snap.Metadata(), snap.Files()[0], ReadOptions{}, func([]any) error { n++; return nil })
			if err != nil || n != 7 {
				t.Errorf("read %d rows (%v), want 7 through the current vector", n, err)
			}
		})
	}
}
