package cdc

import (
	"context"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// deleteTombstones marks the rows at positions pos of the live file add
// deleted by a deletion vector (upgrading the table to the feature first
// when needed) and returns the rows left of rows, the file's rows in key
// order.
func deleteTombstones(t *testing.T, ctx context.Context, store objstore.Store, add delta.Add, rows []tomb, pos ...uint64) []tomb {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dvs, err := delta.WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{roaring64.BitmapOf(pos...)})
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(delta.Operation{Name: "DELETE"})
	if !snap.DeletionVectorsWritable() {
		md := snap.Metadata()
		md.Configuration[delta.PropEnableDeletionVectors] = "true"
		tx.SetMetadata(md)
		tx.SetProtocol(snap.Protocol().WithReaderWriterFeature(delta.FeatureDeletionVectors))
	}
	tx.ReadFiles(add.Path)
	tx.Remove(add.Remove(expiryNow.UnixMilli(), true))
	tx.Add(add.WithDeletionVector(&dvs[0]))
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var left []tomb
	for i, r := range rows {
		if !slices.Contains(pos, uint64(i)) {
			left = append(left, r)
		}
	}
	return left
}

func TestExpireTombstonesLeavesOutRowsDeletedByDeletionVectors(t *testing.T) {
	ctx := context.Background()
	t.Run("small files with deletion vectors are compacted with the others", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		var want []tomb
		for b := range 8 {
			rows := []tomb{{int64(b), uint64(b), freshTS}, {int64(b + 100), uint64(b + 100), freshTS}}
			add := appendTombstones(t, ctx, store, rows, fileOptions{})
			if b%3 == 0 {
				rows = deleteTombstones(t, ctx, store, add, rows, 1)
			}
			want = append(want, rows...)
		}
		res := expire(t, ctx, store, 1<<20)
		got, after := readTombstones(t, ctx, store)
		sameTombs(t, got, unexpired(want))
		if res.FilesCompacted != 8 || after.NumFiles() != 1 || after.Files()[0].DeletionVector != nil {
			t.Fatalf("result %+v with files %+v, want 8 files compacted into 1 without a vector", res, after.Files())
		}
		if res.Copied != int64(len(want)) || res.Expired != 0 {
			t.Errorf("result %+v, want %d copied and none expired", res, len(want))
		}
		assertClustered(t, ctx, store, after)
	})
	t.Run("a large file with a deletion vector is rewritten without its deleted and expired rows", func(t *testing.T) {
		store := newTombstoneTable(t, ctx)
		// Row groups of 128 rows: fresh, old, fresh with one row deleted
		// by the vector, old with one deleted.
		const groupRows = 128
		var rows []tomb
		for id := range int64(4 * groupRows) {
			ts := freshTS
			if id/groupRows%2 == 1 {
				ts = oldTS
			}
			rows = append(rows, tomb{id, uint64(id), ts})
		}
		add := appendTombstones(t, ctx, store, rows, fileOptions{rowGroupRows: groupRows})
		left := deleteTombstones(t, ctx, store, add, rows, 2*groupRows+1, 3*groupRows+1)
		res := expire(t, ctx, store, 4) // every file is large
		got, after := readTombstones(t, ctx, store)
		sameTombs(t, got, unexpired(left))
		if res.Expired != 2*groupRows-1 || res.Copied != 2*groupRows-1 || res.FilesRewritten != 1 {
			t.Errorf("result %+v, want %d expired and copied in 1 file", res, 2*groupRows-1)
		}
		if res.RowGroupsCopied != 1 || res.RowGroupsDecoded != 1 {
			t.Errorf("copied %d and decoded %d row groups, want the first copied and the third decoded", res.RowGroupsCopied, res.RowGroupsDecoded)
		}
		for _, f := range after.Files() {
			if f.DeletionVector != nil {
				t.Errorf("%s kept a deletion vector", f.Path)
			}
		}
	})
}
