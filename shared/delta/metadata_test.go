package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// createTableOf creates a table of schema in store.
func createTableOf(t *testing.T, store objstore.Store, schema value.StructType) *Table {
	t.Helper()
	if _, err := Create(context.Background(), store, CreateOptions{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	return Open(store)
}

func TestMetadataSince(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	newTable := func(t *testing.T) (objstore.Store, *Table) {
		store := objstore.NewMemory()
		return store, createTableOf(t, store, schema)
	}
	appendRow := func(t *testing.T, store objstore.Store, id int64) {
		t.Helper()
		commitRows(t, ctx, store, WriteOptions{Schema: schema, DataChange: true}, [][]any{{id}})
	}
	widen := func(t *testing.T, tbl *Table, col string) {
		t.Helper()
		snap := mustSnapshot(t, tbl)
		md := snap.Metadata()
		next := snap.Schema()
		next.Fields = append(next.Fields, value.Field{Name: col, Type: value.String, Nullable: true})
		md.SchemaString = next.SchemaString()
		tx := snap.NewTransaction(Operation{Name: "ADD COLUMNS"})
		tx.SetMetadata(md)
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, tbl *Table, at MetadataAt, wantCols, wantVersion int) {
		t.Helper()
		md, v := at.Metadata, at.Version
		s, err := value.ParseSchema(md.SchemaString)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Fields) != wantCols || v != int64(wantVersion) {
			t.Fatalf("metaData of %d columns at version %d, want %d at %d", len(s.Fields), v, wantCols, wantVersion)
		}
		if latest := mustSnapshot(t, tbl); latest.Version() != v || latest.Metadata().SchemaString != md.SchemaString {
			t.Fatalf("version %d, want the latest %d and its schema", v, latest.Version())
		}
	}

	t.Run("nothing known reads the latest snapshot", func(t *testing.T) {
		store, tbl := newTable(t)
		appendRow(t, store, 1)
		at, err := tbl.MetadataSince(ctx, MetadataAt{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, at, 1, 1)
	})
	t.Run("commits without metaData keep the one known; one with it replaces it", func(t *testing.T) {
		store, tbl := newTable(t)
		at, err := tbl.MetadataSince(ctx, MetadataAt{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			appendRow(t, store, int64(i))
		}
		at2, err := tbl.MetadataSince(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if at2.Metadata != at.Metadata {
			t.Error("a new metaData read where no commit changed it")
		}
		check(t, tbl, at2, 1, 3)
		widen(t, tbl, "a")
		appendRow(t, store, 9)
		widen(t, tbl, "b")
		appendRow(t, store, 10)
		at3, err := tbl.MetadataSince(ctx, at2)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, at3, 3, 7)
		// Nothing new: the same metaData, the same version.
		if at4, err := tbl.MetadataSince(ctx, at3); err != nil || at4.Metadata != at3.Metadata || at4.Version != at3.Version {
			t.Errorf("again: %p at %d (%v), want %p at %d", at4.Metadata, at4.Version, err, at3.Metadata, at3.Version)
		}
	})
	t.Run("commits cleaned up since are read from the latest snapshot", func(t *testing.T) {
		store, tbl := newTable(t)
		at, err := tbl.MetadataSince(ctx, MetadataAt{})
		if err != nil {
			t.Fatal(err)
		}
		widen(t, tbl, "a")
		appendRow(t, store, 1)
		if err := mustSnapshot(t, tbl).WriteCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		// The commit that changed the schema is gone; the checkpoint holds
		// its metaData.
		if err := store.Delete(ctx, fmt.Sprintf("_delta_log/%020d.json", 1)); err != nil {
			t.Fatal(err)
		}
		at2, err := tbl.MetadataSince(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, at2, 2, 2)
	})
	t.Run("a table deleted and created again is read anew", func(t *testing.T) {
		store, tbl := newTable(t)
		widen(t, tbl, "a")
		appendRow(t, store, 1)
		at, err := tbl.MetadataSince(ctx, MetadataAt{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, at, 2, 2)
		// Recreated with the first schema, and as many commits: version 2
		// again, another commit.
		for _, name := range []string{"_delta_log/00000000000000000000.json", "_delta_log/00000000000000000001.json", "_delta_log/00000000000000000002.json"} {
			if err := store.Delete(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Create(ctx, store, CreateOptions{Schema: schema}); err != nil {
			t.Fatal(err)
		}
		appendRow(t, store, 1)
		appendRow(t, store, 2)
		at2, err := tbl.MetadataSince(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, at2, 1, 2)
	})
	t.Run("a read of the latest snapshot lists the log once, and the next call reads on from its commit", func(t *testing.T) {
		mem, _ := newTable(t)
		appendRow(t, mem, 1)
		rec := &listRecorder{Store: mem}
		tbl := Open(rec)
		at, err := tbl.MetadataSince(ctx, MetadataAt{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.starts) != 1 {
			t.Fatalf("listed the log %d times (from %q), want once", len(rec.starts), rec.starts)
		}
		appendRow(t, mem, 2)
		rec.starts = nil
		at2, err := tbl.MetadataSince(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"_delta_log/00000000000000000001"}; !slices.Equal(rec.starts, want) {
			t.Fatalf("listed from %q, want %q: the commit of the snapshot read was not kept", rec.starts, want)
		}
		check(t, tbl, at2, 1, 2)
	})
	t.Run("no table is ErrNotATable", func(t *testing.T) {
		if _, err := Open(objstore.NewMemory()).MetadataSince(ctx, MetadataAt{}); !errors.Is(err, ErrNotATable) {
			t.Errorf("error %v, want ErrNotATable", err)
		}
	})
}
