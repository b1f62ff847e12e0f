package delta

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// A merge that gives a file a deletion vector commits remove (P, old
// vector) + add (P, new vector) (PROTOCOL.md "Deletion Vectors"); a
// compaction commits removes of its inputs and adds of their rows. The
// tests below commit one of the two between the other's read and its
// commit: the second must conflict (checklist §11: both remove P), and once
// it retries from a fresh snapshot the table must hold every row once,
// minus the rows the merge deleted.

// dvCommit builds a transaction against a snapshot, as a writer would
// after reading it.
type dvCommit func(t *testing.T, ctx context.Context, snap *Snapshot) func() error

// dvDelete is a merge deleting the rows of keys ids by deletion vectors:
// each file holding one gets a vector marking them (added to its old one).
func dvDelete(ids ...int64) dvCommit {
	return func(t *testing.T, ctx context.Context, snap *Snapshot) func() error {
		t.Helper()
		store := snap.Store()
		tx := snap.NewTransaction(Operation{Name: "DELETE"})
		for _, f := range snap.Files() {
			deleted := roaring64.New()
			if f.DeletionVector != nil {
				old, err := loadDeletionVector(ctx, store, *f.DeletionVector)
				if err != nil {
					t.Fatal(err)
				}
				deleted.Or(old)
			}
			before := deleted.GetCardinality()
			// Row positions are physical: read the file without its vector.
			phys := f
			phys.DeletionVector = nil
			pos := uint64(0)
			err := ReadFile(ctx, store, snap.Metadata(), phys, ReadOptions{}, func(row []any) error {
				if slices.Contains(ids, row[0].(int64)) {
					deleted.Add(pos)
				}
				pos++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Only the files it changes count as read, as for a merge
			// whose lookup pruned the others by their key bounds: the
			// conflict then comes from the remove of (P, old vector).
			if deleted.GetCardinality() == before {
				continue
			}
			tx.ReadFiles(f.Path)
			dvs, err := WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{deleted})
			if err != nil {
				t.Fatal(err)
			}
			tx.Remove(f.Remove(snap.table.now().UnixMilli(), true))
			tx.Add(f.WithDeletionVector(&dvs[0]))
		}
		return func() error { _, err := tx.Commit(ctx); return err }
	}
}

// dvDeleted commits dvDelete(ids...) at once, as a setup.
func dvDeleted(ids ...int64) func(t *testing.T, ctx context.Context, store objstore.Store) {
	return func(t *testing.T, ctx context.Context, store objstore.Store) {
		t.Helper()
		snap, err := Open(store).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := dvDelete(ids...)(t, ctx, snap)(); err != nil {
			t.Fatal(err)
		}
	}
}

// dvOptimize is the compaction as it runs today: Optimize, which leaves
// files with a vector alone, from the snapshot.
func dvOptimize(t *testing.T, ctx context.Context, snap *Snapshot) func() error {
	return func() error {
		_, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20, ClusterBy: []string{"id"}})
		return err
	}
}

// dvFold is a compaction that folds deletion vectors: each file with one
// is rewritten without its deleted rows (dataChange=false), as a
// compaction of DV files must.
func dvFold(t *testing.T, ctx context.Context, snap *Snapshot) func() error {
	t.Helper()
	store := snap.Store()
	tx := snap.NewTransaction(Operation{Name: "OPTIMIZE"})
	for _, f := range snap.Files() {
		if f.DeletionVector == nil {
			continue
		}
		w, err := NewFileWriter(ctx, store, WriteOptions{Schema: optSchema, PartitionColumns: []string{"region"}, PartitionValues: map[string]any{"region": *f.PartitionValues["region"]}})
		if err != nil {
			t.Fatal(err)
		}
		if err := ReadFile(ctx, store, snap.Metadata(), f, ReadOptions{}, w.Write); err != nil {
			t.Fatal(err)
		}
		add, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.ReadFiles(f.Path)
		tx.Remove(f.Remove(snap.table.now().UnixMilli(), false))
		tx.Add(add)
	}
	return func() error { _, err := tx.Commit(ctx); return err }
}

// dvRows are the ids of the live rows of the latest snapshot, sorted.
func dvRows(t *testing.T, ctx context.Context, store objstore.Store) []int64 {
	t.Helper()
	files, _ := optRead(t, ctx, store)
	var ids []int64
	for _, r := range optAll(files) {
		ids = append(ids, r.id)
	}
	slices.Sort(ids)
	return ids
}

func idsExcept(from, to int64, except ...int64) []int64 {
	var out []int64
	for id := from; id <= to; id++ {
		if !slices.Contains(except, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestDeletionVectorCommitsConflictWithACompactionOfTheSameFile(t *testing.T) {
	cases := []struct {
		name string
		// setup runs on the fresh table of four small files (ids 1-20,
		// five a file) before the race.
		setup         func(t *testing.T, ctx context.Context, store objstore.Store)
		first, second dvCommit
		want          []int64
		// files, when set, checks the final snapshot's files against the
		// paths of the four original files, in the order of their ids.
		files func(t *testing.T, snap *Snapshot, original []string)
	}{
		{
			name:  "a compaction that commits first makes the merge adding a vector conflict; its retry deletes from the compacted file",
			first: dvOptimize, second: dvDelete(3, 7),
			want: idsExcept(1, 20, 3, 7),
			files: func(t *testing.T, snap *Snapshot, original []string) {
				for _, f := range snap.Files() {
					if slices.Contains(original, f.Path) || f.DeletionVector == nil {
						t.Errorf("file %s (vector %v): want only the compacted file, with the vector", f.Path, f.DeletionVector)
					}
				}
			},
		},
		{
			name:  "a merge adding a vector that commits first makes the compaction conflict; its retry folds the vectors into the compacted file",
			first: dvDelete(3, 7), second: dvOptimize,
			want: idsExcept(1, 20, 3, 7),
			files: func(t *testing.T, snap *Snapshot, original []string) {
				// Small files with vectors join the bins (Optimize folds
				// vectors): the retry compacts all four into one file whose
				// rows leave out the deleted ones.
				for _, f := range snap.Files() {
					if slices.Contains(original, f.Path) || f.DeletionVector != nil {
						t.Errorf("file %s (vector %v): want only the compacted file, without a vector", f.Path, f.DeletionVector)
					}
				}
			},
		},
		{
			name:  "a compaction folding a vector that commits first makes the merge updating it conflict",
			setup: dvDeleted(2),
			first: dvFold, second: dvDelete(4),
			want: idsExcept(1, 20, 2, 4),
		},
		{
			name:  "a merge updating a vector that commits first makes the compaction folding it conflict",
			setup: dvDeleted(2),
			first: dvDelete(4), second: dvFold,
			want: idsExcept(1, 20, 2, 4),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := objstore.NewMemory()
			if _, err := Create(ctx, store, CreateOptions{Schema: optSchema, PartitionColumns: []string{"region"}, Configuration: map[string]string{PropEnableDeletionVectors: "true"}}); err != nil {
				t.Fatal(err)
			}
			var original []string
			for f := int64(0); f < 4; f++ {
				original = append(original, optAppend(t, ctx, store, "eu", f, 5*f+1, 5*f+2, 5*f+3, 5*f+4, 5*f+5).Path)
			}
			if c.setup != nil {
				c.setup(t, ctx, store)
			}
			read, err := Open(store).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !read.DeletionVectorsWritable() {
				t.Fatal("the table does not allow deletion vectors")
			}
			// Both read the same version; first commits, then second.
			second := c.second(t, ctx, read)
			if err := c.first(t, ctx, read)(); err != nil {
				t.Fatalf("first commit: %v", err)
			}
			afterFirst := dvRows(t, ctx, store)
			err = second()
			if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrConcurrentDeleteDelete) {
				t.Fatalf("second commit = %v, want a delete-delete conflict", err)
			}
			if got := dvRows(t, ctx, store); !slices.Equal(got, afterFirst) {
				t.Fatalf("the losing commit changed the table: %v, was %v", got, afterFirst)
			}
			// The loser retries from a fresh snapshot.
			fresh, err := Open(store).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.second(t, ctx, fresh)(); err != nil {
				t.Fatalf("retry of the second commit: %v", err)
			}
			if got := dvRows(t, ctx, store); !slices.Equal(got, c.want) {
				t.Fatalf("table holds %v, want %v", got, c.want)
			}
			if c.files != nil {
				snap, err := Open(store).Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				c.files(t, snap, original)
			}
		})
	}
}
