package delta

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// optDVTable creates an empty optSchema table that allows deletion vectors.
func optDVTable(t *testing.T, ctx context.Context) objstore.Store {
	t.Helper()
	store := objstore.NewMemory()
	_, err := Create(ctx, store, CreateOptions{Schema: optSchema, PartitionColumns: []string{"region"},
		Configuration: map[string]string{PropEnableDeletionVectors: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// optDelete marks the rows at positions pos of the live file add deleted,
// with a deletion vector in a DV file, in one commit (remove the old pair,
// add the new one), and returns the new add.
func optDelete(t *testing.T, ctx context.Context, store objstore.Store, add Add, pos ...uint64) Add {
	t.Helper()
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bm := roaring64.BitmapOf(pos...)
	if add.DeletionVector != nil {
		old, err := loadDeletionVector(ctx, store, *add.DeletionVector)
		if err != nil {
			t.Fatal(err)
		}
		bm.Or(old)
	}
	dvs, err := WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{bm})
	if err != nil {
		t.Fatal(err)
	}
	next := add.WithDeletionVector(&dvs[0])
	tx := snap.NewTransaction(Operation{Name: "DELETE"})
	tx.ReadFiles(add.Path)
	tx.Remove(add.Remove(snap.Timestamp().UnixMilli(), true))
	tx.Add(next)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return next
}

func ids(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestOptimizeFoldsDeletionVectorsPastTheDeletedShare(t *testing.T) {
	cases := []struct {
		name     string
		share    float64
		rewrites []int // which of the three files are rewritten
		added    int
	}{
		{"the default share rewrites the file with 30% deleted", 0, []int{0}, 1},
		// Two files of under half the target each make one bin.
		{"a share of 5% rewrites the file with 10% deleted too, both into one", 0.05, []int{0, 1}, 1},
		{"a share of 1 rewrites no large file", 1, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := optDVTable(t, ctx)
			// Three files of 10 rows: 3 deleted, 1 deleted, none.
			f := []Add{
				optAppend(t, ctx, store, "eu", 0, ids(0, 10)...),
				optAppend(t, ctx, store, "eu", 1, ids(10, 20)...),
				optAppend(t, ctx, store, "eu", 2, ids(20, 30)...),
			}
			f[0] = optDelete(t, ctx, store, f[0], 1, 4, 9)
			f[1] = optDelete(t, ctx, store, f[1], 5)
			before, snap := optRead(t, ctx, store)
			// Every file is large: at least a quarter of the target.
			target := 2 * slices.MaxFunc(f, func(a, b Add) int { return int(a.Size - b.Size) }).Size
			res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, ClusterBy: []string{"id"}, MaxDeletedShare: tc.share})
			if err != nil {
				t.Fatal(err)
			}
			var purged int64
			for _, i := range tc.rewrites {
				purged += f[i].DeletionVector.Cardinality
			}
			want := OptimizeResult{FilesRemoved: len(tc.rewrites), FilesAdded: tc.added, DeletionVectorsPurged: len(tc.rewrites), RowsPurged: purged}
			if counts(res) != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			after, snap2 := optRead(t, ctx, store)
			if !slices.Equal(optAll(after), optAll(before)) {
				t.Errorf("rows changed:\n got %v\nwant %v", optAll(after), optAll(before))
			}
			if len(tc.rewrites) == 0 && snap2.Version() != snap.Version() {
				t.Errorf("committed version %d with nothing to rewrite", snap2.Version())
			}
			for i, old := range f {
				rewritten := slices.Contains(tc.rewrites, i)
				live := slices.ContainsFunc(snap2.Files(), func(a Add) bool { return a.Path == old.Path })
				if live == rewritten {
					t.Errorf("file %d: live %v, rewritten %v", i, live, rewritten)
				}
			}
			for _, a := range snap2.Files() {
				if _, stays := after[a.Path]; !stays {
					continue
				}
				if a.DataChange && !slices.ContainsFunc(f, func(o Add) bool { return o.Path == a.Path }) {
					t.Errorf("output %s has dataChange true", a.Path)
				}
				if !slices.IsSortedFunc(after[a.Path], compareOptRows) {
					t.Errorf("file %s is not sorted by key: %v", a.Path, after[a.Path])
				}
			}
		})
	}
}

func TestOptimizePacksSmallFilesWithDeletionVectors(t *testing.T) {
	ctx := context.Background()
	store := optDVTable(t, ctx)
	eu0 := optAppend(t, ctx, store, "eu", 0, 0, 3, 6, 9)
	optAppend(t, ctx, store, "eu", 1, 1, 4, 7)
	optAppend(t, ctx, store, "eu", 2, 2, 5, 8)
	us := optAppend(t, ctx, store, "us", 3, ids(0, 20)...)
	optAppend(t, ctx, store, "ap", 4, 1, 2)
	// A vector under the share in a small file of a bin, and one in a lone
	// small file: both are folded, the lone file without a vector is not.
	optDelete(t, ctx, store, eu0, 1)
	optDelete(t, ctx, store, us, 0)
	before, snap := optRead(t, ctx, store)
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 30, ClusterBy: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	want := OptimizeResult{FilesRemoved: 4, FilesAdded: 2, DeletionVectorsPurged: 2, RowsPurged: 2}
	if counts(res) != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	after, snap2 := optRead(t, ctx, store)
	if !slices.Equal(optAll(after), optAll(before)) {
		t.Errorf("rows changed:\n got %v\nwant %v", optAll(after), optAll(before))
	}
	regions := map[string]int{}
	for _, a := range snap2.Files() {
		if a.DeletionVector != nil {
			t.Errorf("%s kept a deletion vector", a.Path)
		}
		rows := after[a.Path]
		regions[rows[0].region]++
		if !slices.IsSortedFunc(rows, compareOptRows) {
			t.Errorf("%s is not clustered by key: %v", a.Path, rows)
		}
	}
	if regions["eu"] != 1 || regions["us"] != 1 || regions["ap"] != 1 {
		t.Errorf("files per region %v, want one each", regions)
	}
	h, err := Open(store).History(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := h[0].Metrics; h[0].Operation != "OPTIMIZE" || m["numDeletionVectorsRemoved"] != "2" || m["numDeletionVectorRowsRemoved"] != "2" {
		t.Errorf("commit %s with metrics %v, want OPTIMIZE naming 2 vectors and 2 rows", h[0].Operation, m)
	}
}

func TestOptimizeRemovesAFileWhoseRowsAreAllDeleted(t *testing.T) {
	ctx := context.Background()
	store := optDVTable(t, ctx)
	gone := optAppend(t, ctx, store, "eu", 0, 1, 2, 3)
	kept := optAppend(t, ctx, store, "eu", 1, 4, 5, 6)
	gone = optDelete(t, ctx, store, gone, 0, 1, 2)
	_, snap := optRead(t, ctx, store)
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 2 * max(gone.Size, kept.Size)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (OptimizeResult{FilesRemoved: 1, DeletionVectorsPurged: 1, RowsPurged: 3}); counts(res) != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	after, snap2 := optRead(t, ctx, store)
	if len(snap2.Files()) != 1 || snap2.Files()[0].Path != kept.Path || len(after[kept.Path]) != 3 {
		t.Errorf("files %v, want only %s", after, kept.Path)
	}
}

func TestOptimizeFoldsAVectorOfAFileWithoutRecordCounts(t *testing.T) {
	ctx := context.Background()
	store := optDVTable(t, ctx)
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewFileWriter(ctx, store, WriteOptions{Schema: optSchema, PartitionColumns: []string{"region"}, PartitionValues: map[string]any{"region": "eu"}, DataChange: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(100) {
		if err := w.Write([]any{i, int64(0), "eu"}); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add.Stats = "" // as some writers leave it
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(add)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	optDelete(t, ctx, store, add, 50)
	_, snap = optRead(t, ctx, store)
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: add.Size})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletionVectorsPurged != 1 || res.RowsPurged != 1 {
		t.Fatalf("result %+v, want the file's vector folded", res)
	}
	after, snap2 := optRead(t, ctx, store)
	rows := optAll(after)
	if len(rows) != 99 || slices.ContainsFunc(rows, func(r optRow) bool { return r.id == 50 }) {
		t.Errorf("%d rows, want 99 without id 50", len(rows))
	}
	if n, ok := snap2.NumRecords(); !ok || n != 99 {
		t.Errorf("numRecords %d (%v), want 99 from the new file's stats", n, ok)
	}
}

// TestOptimizeFoldsSparksDeletionVectors: the DELETE of Spark's fixture
// left a vector on 2 of 5 rows of one file; Optimize folds it, as a small
// file packed with the other or, when both are large, alone.
func TestOptimizeFoldsSparksDeletionVectors(t *testing.T) {
	cases := []struct {
		name           string
		target         int64
		removed, added int
	}{
		{"small files pack into one", 1 << 20, 2, 1},
		{"a large file is rewritten alone", 1000, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := copyStore(t, fixtureStore(t, "basic-dv-no-checkpoint"), nil)
			snap := mustSnapshot(t, Open(store))
			res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: tc.target, ClusterBy: []string{"id"}})
			if err != nil {
				t.Fatal(err)
			}
			if want := (OptimizeResult{FilesRemoved: tc.removed, FilesAdded: tc.added, DeletionVectorsPurged: 1, RowsPurged: 2}); counts(res) != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			after := mustSnapshot(t, Open(store))
			var got []int64
			for _, f := range after.Files() {
				if f.DeletionVector != nil {
					t.Errorf("%s kept its deletion vector", f.Path)
				}
				err := ReadFile(ctx, store, after.Metadata(), f, ReadOptions{}, func(row []any) error {
					got = append(got, row[0].(int64))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, ids(2, 10)) {
				t.Errorf("rows %v, want 2..9", got)
			}
			if n, ok := after.NumRecords(); !ok || n != 8 {
				t.Errorf("numRecords %d (%v), want 8", n, ok)
			}
		})
	}
}

// TestOptimizeOfATableItMayNotWriteWritesNothing: table-with-dv-small uses
// column mapping, which this package does not write; folding its vector
// is refused before any file is written.
func TestOptimizeOfATableItMayNotWriteWritesNothing(t *testing.T) {
	store := copyStore(t, fixtureStore(t, "table-with-dv-small"), nil)
	before := objectNames(t, store)
	_, err := mustSnapshot(t, Open(store)).Optimize(context.Background(), OptimizeOptions{TargetFileBytes: 1 << 20})
	if !errors.Is(err, ErrUnsupportedFeature) {
		t.Errorf("err = %v, want ErrUnsupportedFeature", err)
	}
	if after := objectNames(t, store); len(after) != len(before) {
		t.Errorf("%d objects after, %d before: files were written", len(after), len(before))
	}
}

// A capped Optimize (MaxBytes) packs the small files first, then folds the
// most-deleted files first, leaving the rest, counted, to later calls,
// and always rewrites one bin at least: repeated calls fold every file
// past the share, one call's worth at a time, and no row changes.
func TestOptimizeCappedPacksSmallFilesThenFoldsTheMostDeletedFirst(t *testing.T) {
	ctx := context.Background()
	store := optDVTable(t, ctx)
	// Four large files of 4,000 rows (40%, 50%, 30% and 10% deleted),
	// each a bin of its own, and two small ones of 2 rows.
	large := make([]Add, 4)
	for i, n := range []uint64{1600, 2000, 1200, 400} {
		large[i] = optAppend(t, ctx, store, "eu", int64(i), ids(int64(i)*4000, int64(i)*4000+4000)...)
		var pos []uint64
		for p := range n {
			pos = append(pos, p*2)
		}
		large[i] = optDelete(t, ctx, store, large[i], pos...)
	}
	small := []Add{optAppend(t, ctx, store, "eu", 4, 100000, 100001), optAppend(t, ctx, store, "eu", 5, 100002, 100003)}
	target := slices.MinFunc(large, func(a, b Add) int { return int(a.Size - b.Size) }).Size
	for _, s := range small {
		if s.Size >= target/4 {
			t.Fatalf("setup: small file of %d bytes is not under a quarter of the target %d", s.Size, target)
		}
	}
	before, _ := optRead(t, ctx, store)
	rewritten := func(snap *Snapshot, fs ...Add) []bool {
		var out []bool
		for _, f := range fs {
			out = append(out, !slices.ContainsFunc(snap.Files(), func(a Add) bool { return a.Path == f.Path }))
		}
		return out
	}
	// Uncapped, every file past the share and both small ones (packed
	// smallest first, whatever their names) would be rewritten.
	plan, err := mustSnapshot(t, Open(store)).Optimize(ctx, OptimizeOptions{TargetFileBytes: target, DryRun: true})
	if err != nil || plan.FilesRemoved != 5 || plan.FilesLeft != 0 {
		t.Fatalf("uncapped plan %+v (err %v), want 5 files removed and none left", plan, err)
	}
	// The cap fits the small bin and one large file: the 50% one.
	maxBytes := small[0].Size + small[1].Size + large[1].Size
	steps := []struct {
		gone      []bool // large[0..3] rewritten by then
		filesLeft int
		bytesLeft int64
	}{
		{[]bool{false, true, false, false}, 2, large[0].Size + large[2].Size},
		{[]bool{true, true, false, false}, 1, large[2].Size},
		{[]bool{true, true, true, false}, 0, 0},
	}
	for i, step := range steps {
		snap := mustSnapshot(t, Open(store))
		res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, ClusterBy: []string{"id"}, MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		after, snap2 := optRead(t, ctx, store)
		if got := rewritten(snap2, large...); !slices.Equal(got, step.gone) {
			t.Errorf("call %d: large files rewritten %v, want %v", i+1, got, step.gone)
		}
		if i == 0 && !slices.Equal(rewritten(snap2, small...), []bool{true, true}) {
			t.Errorf("call 1 left a small file: %v", rewritten(snap2, small...))
		}
		if res.FilesLeft != step.filesLeft || res.BytesLeft != step.bytesLeft {
			t.Errorf("call %d: left %d files of %d bytes, want %d of %d", i+1, res.FilesLeft, res.BytesLeft, step.filesLeft, step.bytesLeft)
		}
		if !slices.Equal(optAll(after), optAll(before)) {
			t.Fatalf("call %d changed the rows", i+1)
		}
	}
	snap := mustSnapshot(t, Open(store))
	if res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, MaxBytes: maxBytes}); err != nil || res.FilesRemoved != 0 {
		t.Errorf("a fourth call rewrote %d files (err %v); the 10%% file is under the share", res.FilesRemoved, err)
	}

	t.Run("a cap smaller than any bin still rewrites one bin per call", func(t *testing.T) {
		store := optDVTable(t, ctx)
		a := optDelete(t, ctx, store, optAppend(t, ctx, store, "eu", 0, ids(0, 100)...), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25)
		b := optDelete(t, ctx, store, optAppend(t, ctx, store, "eu", 1, ids(100, 200)...), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30)
		target := min(a.Size, b.Size) // each a bin of its own
		for call, want := range [][]bool{{false, true}, {true, true}} {
			snap := mustSnapshot(t, Open(store))
			res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, MaxBytes: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.FilesRemoved != 1 {
				t.Errorf("call %d rewrote %d files, want 1", call+1, res.FilesRemoved)
			}
			if got := rewritten(mustSnapshot(t, Open(store)), a, b); !slices.Equal(got, want) {
				t.Errorf("call %d: rewritten %v, want %v", call+1, got, want)
			}
		}
	})
}
