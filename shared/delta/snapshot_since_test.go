package delta

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// checkpointReads counts the reads of checkpoint files.
type checkpointReads struct {
	objstore.Store
	n atomic.Int64
}

func (c *checkpointReads) NewReader(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if strings.Contains(name, ".checkpoint.") {
		c.n.Add(1)
	}
	return c.Store.NewReader(ctx, name, off, n)
}

// sameAsWhole fails unless got holds what want (a snapshot read whole)
// holds (sameSnapshot), its domains and checkpoint version too.
func sameAsWhole(t *testing.T, got, want *Snapshot) {
	t.Helper()
	sameSnapshot(t, got, want)
	if !reflect.DeepEqual(got.DomainMetadata(), want.DomainMetadata()) {
		t.Errorf("version %d: domains differ", got.Version())
	}
	if got.CheckpointVersion() != want.CheckpointVersion() {
		t.Errorf("version %d: checkpoint version %d, want %d", got.Version(), got.CheckpointVersion(), want.CheckpointVersion())
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestSnapshotSinceMatchesAWholeRead commits random adds, removes,
// deletion-vector updates, schema changes and transaction versions,
// with checkpoints now and then, and after each commit brings a snapshot
// up to date with SnapshotSince from one taken some commits before: it
// must hold what a whole read holds, and read no checkpoint.
func TestSnapshotSinceMatchesAWholeRead(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long, Nullable: true}}}
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 3))
		store := &checkpointReads{Store: objstore.NewMemory()}
		if _, err := Create(ctx, store, CreateOptions{Schema: schema, Configuration: map[string]string{PropEnableDeletionVectors: "true"}}); err != nil {
			t.Fatal(err)
		}
		tbl := Open(store)
		var kept []*Snapshot // earlier snapshots, read whole or brought up to date
		incremental := 0
		for step := range 60 {
			snap := mustSnapshot(t, tbl)
			tx := snap.NewTransaction(Operation{Name: "WRITE"})
			files := snap.Files()
			switch k := r.IntN(10); {
			case k < 4 || len(files) == 0:
				tx.Add(pqWriteRows(t, store, WriteOptions{Schema: snap.Schema(), DataChange: true}, 1+r.IntN(3), func(i int) []any {
					row := make([]any, len(snap.Schema().Fields))
					row[0] = int64(step*10 + i)
					return row
				}))
			case k < 6:
				tx.Remove(files[r.IntN(len(files))].Remove(int64(step), true))
			case k < 8:
				f := files[r.IntN(len(files))]
				dv := &DeletionVector{StorageType: "i", PathOrInlineDv: fmt.Sprintf("inline%d", step), SizeInBytes: 10, Cardinality: 1}
				tx.Remove(f.Remove(int64(step), true))
				tx.Add(f.WithDeletionVector(dv))
			case k < 9:
				md := snap.Metadata()
				next := snap.Schema()
				next.Fields = append(next.Fields, value.Field{Name: fmt.Sprintf("c%d", step), Type: value.String, Nullable: true})
				md.SchemaString = next.SchemaString()
				tx.SetMetadata(md)
			default:
				tx.SetTxn(fmt.Sprintf("app%d", r.IntN(3)), int64(step))
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if r.IntN(7) == 0 {
				if err := mustSnapshot(t, tbl).WriteCheckpoint(ctx); err != nil {
					t.Fatal(err)
				}
			}
			want := mustSnapshot(t, tbl)
			if len(kept) > 0 {
				prev := kept[r.IntN(len(kept))]
				store.n.Store(0)
				got, err := tbl.SnapshotSince(ctx, prev)
				if err != nil {
					t.Fatalf("seed %d step %d: SnapshotSince: %v", seed, step, err)
				}
				sameAsWhole(t, got, want)
				if prev.commit.Name != "" {
					incremental++
					if n := store.n.Load(); n > 0 {
						t.Fatalf("seed %d step %d: brought version %d up to date reading %d checkpoint files", seed, step, prev.Version(), n)
					}
				}
				kept = append(kept, got)
			}
			kept = append(kept, want)
		}
		if incremental < 40 {
			t.Fatalf("seed %d: %d snapshots brought up to date from their commit: the test must exercise it", seed, incremental)
		}
	}
}

func TestSnapshotSince(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	newTable := func(t *testing.T) (*checkpointReads, *Table) {
		store := &checkpointReads{Store: objstore.NewMemory()}
		return store, createTableOf(t, store, schema)
	}
	appendRow := func(t *testing.T, store objstore.Store, id int64) {
		t.Helper()
		commitRows(t, ctx, store, WriteOptions{Schema: schema, DataChange: true}, [][]any{{id}})
	}
	since := func(t *testing.T, tbl *Table, prev *Snapshot) *Snapshot {
		t.Helper()
		s, err := tbl.SnapshotSince(ctx, prev)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("nothing new returns the snapshot itself", func(t *testing.T) {
		store, tbl := newTable(t)
		appendRow(t, store, 1)
		prev := mustSnapshot(t, tbl)
		if got := since(t, tbl, prev); got != prev {
			t.Fatalf("got another snapshot (version %d) where no commit followed version %d", got.Version(), prev.Version())
		}
	})
	t.Run("a snapshot of a version only a checkpoint stands for is read whole", func(t *testing.T) {
		store, tbl := newTable(t)
		appendRow(t, store, 1)
		if err := mustSnapshot(t, tbl).WriteCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(ctx, fmt.Sprintf("_delta_log/%020d.json", 1)); err != nil {
			t.Fatal(err)
		}
		prev := mustSnapshot(t, tbl)
		appendRow(t, store, 2)
		store.n.Store(0)
		sameAsWhole(t, since(t, tbl, prev), mustSnapshot(t, tbl))
		if store.n.Load() == 0 {
			t.Fatal("brought up to date without the checkpoint, from a version whose commit it never listed")
		}
	})
	t.Run("commits cleaned up since are read from the latest snapshot", func(t *testing.T) {
		store, tbl := newTable(t)
		prev := mustSnapshot(t, tbl)
		appendRow(t, store, 1)
		appendRow(t, store, 2)
		if err := mustSnapshot(t, tbl).WriteCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(ctx, fmt.Sprintf("_delta_log/%020d.json", 1)); err != nil {
			t.Fatal(err)
		}
		sameAsWhole(t, since(t, tbl, prev), mustSnapshot(t, tbl))
	})
	t.Run("a table deleted and created again is read anew", func(t *testing.T) {
		store, tbl := newTable(t)
		appendRow(t, store, 1)
		appendRow(t, store, 2)
		prev := mustSnapshot(t, tbl)
		for v := range 3 {
			if err := store.Delete(ctx, fmt.Sprintf("_delta_log/%020d.json", v)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Create(ctx, store, CreateOptions{Schema: schema}); err != nil {
			t.Fatal(err)
		}
		appendRow(t, store, 7)
		appendRow(t, store, 8)
		appendRow(t, store, 9)
		got, want := since(t, tbl, prev), mustSnapshot(t, tbl)
		sameAsWhole(t, got, want)
		if got.Metadata().ID == prev.Metadata().ID {
			t.Fatal("the recreated table's snapshot has the old table's metaData")
		}
	})
	t.Run("Snapshots keeps each table's latest and brings it up to date", func(t *testing.T) {
		// Two memory stores share a URL: they are told apart as stores.
		store, tbl := newTable(t)
		other, otherTbl := newTable(t)
		appendRow(t, other, 5)
		var c Snapshots
		first, err := c.Latest(ctx, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Latest(ctx, otherTbl); err != nil {
			t.Fatal(err)
		}
		appendRow(t, store, 1)
		store.n.Store(0)
		got, err := c.Latest(ctx, Open(store))
		if err != nil {
			t.Fatal(err)
		}
		sameAsWhole(t, got, mustSnapshot(t, tbl))
		if got.Version() != first.Version()+1 || store.n.Load() != 0 {
			t.Fatalf("version %d reading %d checkpoint files, want %d reading none", got.Version(), store.n.Load(), first.Version()+1)
		}
		o, err := c.Latest(ctx, otherTbl)
		if err != nil {
			t.Fatal(err)
		}
		sameAsWhole(t, o, mustSnapshot(t, Open(other)))
		var none *Snapshots
		if s, err := none.Latest(ctx, tbl); err != nil || s.Version() != got.Version() {
			t.Fatalf("a nil Snapshots read version %d (%v), want %d", s.Version(), err, got.Version())
		}
	})
}
