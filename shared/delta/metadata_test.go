package delta

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

func TestMetadataSince(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	newTable := func(t *testing.T) (objstore.Store, *Table) {
		t.Helper()
		store := objstore.NewMemory()
		if _, err := Create(ctx, store, CreateOptions{Schema: schema}); err != nil {
			t.Fatal(err)
		}
		return store, Open(store)
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
	check := func(t *testing.T, tbl *Table, md *Metadata, v int64, wantCols, wantVersion int) {
		t.Helper()
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
		md, v, err := tbl.MetadataSince(ctx, -1, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, md, v, 1, 1)
	})
	t.Run("commits without metaData keep the one known; one with it replaces it", func(t *testing.T) {
		store, tbl := newTable(t)
		md, v, err := tbl.MetadataSince(ctx, -1, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			appendRow(t, store, int64(i))
		}
		md2, v2, err := tbl.MetadataSince(ctx, v, md)
		if err != nil {
			t.Fatal(err)
		}
		if md2 != md {
			t.Error("a new metaData read where no commit changed it")
		}
		check(t, tbl, md2, v2, 1, 3)
		widen(t, tbl, "a")
		appendRow(t, store, 9)
		widen(t, tbl, "b")
		appendRow(t, store, 10)
		md3, v3, err := tbl.MetadataSince(ctx, v2, md2)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, md3, v3, 3, 7)
		// Nothing new: the same metaData, the same version.
		if md4, v4, err := tbl.MetadataSince(ctx, v3, md3); err != nil || md4 != md3 || v4 != v3 {
			t.Errorf("again: %p at %d (%v), want %p at %d", md4, v4, err, md3, v3)
		}
	})
	t.Run("commits cleaned up since are read from the latest snapshot", func(t *testing.T) {
		store, tbl := newTable(t)
		md, v, err := tbl.MetadataSince(ctx, -1, nil)
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
		md2, v2, err := tbl.MetadataSince(ctx, v, md)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tbl, md2, v2, 2, 2)
	})
	t.Run("no table is ErrNotATable", func(t *testing.T) {
		if _, _, err := Open(objstore.NewMemory()).MetadataSince(ctx, -1, nil); !errors.Is(err, ErrNotATable) {
			t.Errorf("error %v, want ErrNotATable", err)
		}
	})
}
