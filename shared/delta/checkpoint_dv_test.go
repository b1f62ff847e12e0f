package delta

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/parquet-go/parquet-go"
)

// TestCheckpointOfOurDeletionVectorsReadsBack: a table whose files carry
// our deletion vectors (in a DV file at the root, under a random prefix,
// inline), with removes carrying the vectors they replaced, checkpoints and
// reads back from the checkpoint alone with the same descriptors, field for
// field, and the same rows.
func TestCheckpointOfOurDeletionVectorsReadsBack(t *testing.T) {
	ctx := context.Background()
	store := optDVTable(t, ctx)
	a := optAppend(t, ctx, store, "eu", 0, ids(0, 10)...)
	b := optAppend(t, ctx, store, "eu", 1, ids(10, 20)...)
	c := optAppend(t, ctx, store, "us", 2, ids(20, 30)...)
	now := time.Now()
	a, _ = replaceDV(t, ctx, store, "", a, now, 0)
	replaceDV(t, ctx, store, "", a, now, 0, 9)
	replaceDV(t, ctx, store, "zz", b, now, 3, 4)
	inline, err := InlineDeletionVector(roaring64.BitmapOf(1, 2, 5))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(Operation{Name: "DELETE"})
	tx.ReadFiles(c.Path)
	tx.Remove(c.Remove(now.UnixMilli(), true))
	tx.Add(c.WithDeletionVector(&inline))
	if snap, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := snap.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}

	got := mustSnapshot(t, Open(copyStore(t, store, commitsUpTo(snap.Version()))))
	if got.CheckpointVersion() != snap.Version() {
		t.Fatalf("loaded checkpoint version %d, want %d", got.CheckpointVersion(), snap.Version())
	}
	sameSnapshot(t, got, snap)
	if len(got.Files()) != 3 {
		t.Fatalf("%d files, want 3", len(got.Files()))
	}
	for i, f := range got.Files() {
		if w := snap.Files()[i]; !reflect.DeepEqual(f.DeletionVector, w.DeletionVector) || f.Stats != w.Stats {
			t.Errorf("file %s: vector %+v and stats %s, want %+v and %s", f.Path, f.DeletionVector, f.Stats, w.DeletionVector, w.Stats)
		}
	}
	gt, wt := got.Tombstones(), snap.Tombstones()
	if len(wt) != 4 || len(gt) != len(wt) {
		t.Fatalf("%d tombstones, want %d (the vectorless adds and the first vector of a)", len(gt), len(wt))
	}
	for i := range wt {
		if !reflect.DeepEqual(gt[i].DeletionVector, wt[i].DeletionVector) || gt[i].Path != wt[i].Path {
			t.Errorf("tombstone %s with %+v, want %s with %+v", gt[i].Path, gt[i].DeletionVector, wt[i].Path, wt[i].DeletionVector)
		}
	}
	if n, ok := got.NumRecords(); !ok || n != 30-2-2-3 {
		t.Errorf("records %d (%v), want 23", n, ok)
	}
	var rows int
	for _, f := range got.Files() {
		if err := ReadFile(ctx, got.Store(), got.Metadata(), f, ReadOptions{}, func([]any) error { rows++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if rows != 23 {
		t.Errorf("read %d rows from the checkpointed snapshot, want 23", rows)
	}

	// Spark's checkpoint schema has deletionVector.maxRowIndex; Spark
	// never stores a value there (a transient field of its descriptor), and
	// neither do we.
	raw := readAll(t, store, checkpointName(snap.Version()))
	f, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"add", "remove"} {
		leaf, ok := f.Schema().Lookup(side, "deletionVector", "maxRowIndex")
		if !ok {
			t.Fatalf("checkpoint has no %s.deletionVector.maxRowIndex column", side)
		}
		if n := f.RowGroups()[0].ColumnChunks()[leaf.ColumnIndex].(*parquet.FileColumnChunk).NullCount(); n != f.NumRows() {
			t.Errorf("%s.deletionVector.maxRowIndex has %d nulls in %d rows, want all null", side, n, f.NumRows())
		}
	}
}
