package delta

import (
	"context"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Delta's test suites write DV files with a name prefix the descriptor does
// not carry (table-with-dv-small); Spark reads them, so must we, and vacuum
// must not delete them.
func TestPrefixedDeletionVectorFileIsFoundAndKept(t *testing.T) {
	ctx := context.Background()
	dir := fixture.Path(t, "delta", "table-with-dv-small")
	src, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.NewMemory()
	err = src.List(ctx, "", "", func(info objstore.Info) error {
		b, err := objstore.ReadAll(ctx, src, info.Name)
		if err != nil {
			return err
		}
		_, err = objstore.WriteBytes(ctx, store, info.Name, b, objstore.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, f := range snap.Files() {
		err := ReadFile(ctx, store, snap.Metadata(), f, ReadOptions{}, func(row []any) error {
			ids = append(ids, int64(row[0].(int32)))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != 8 || ids[0] != 1 || ids[7] != 8 {
		t.Fatalf("rows %v, want 1..8", ids)
	}
	res, err := Open(store).Vacuum(ctx, VacuumOptions{DryRun: true, Retention: 0, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if len(f) > 4 && f[len(f)-4:] == ".bin" {
			t.Fatalf("vacuum would delete the live deletion vector %s", f)
		}
	}
}
