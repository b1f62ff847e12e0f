package delta

import (
	"context"
	"fmt"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// buildLargeTable writes a table whose latest snapshot is a checkpoint of
// files live adds followed by commits JSON commits (2 adds and 1 remove
// each). It returns the store and the number of actions a load replays.
func buildLargeTable(b *testing.B, files, commits int) (objstore.Store, int) {
	b.Helper()
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := createTable(b, Open(store), []string{"dt"}, map[string]string{"delta.checkpointInterval": "1000000"})
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	for i := range files {
		dt := fmt.Sprintf("2026-01-%02d", 1+i%28)
		a := dataFile(fmt.Sprintf("dt=%s/part-%06d-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0.c000.zstd.parquet", dt, i), 10_000, map[string]*string{"dt": strp(dt)})
		a.Stats = fmt.Sprintf(`{"numRecords":10000,"minValues":{"id":%d,"name":"a"},"maxValues":{"id":%d,"name":"z"},"nullCount":{"id":0,"name":3}}`, i*10_000, i*10_000+9_999)
		tx.Add(a)
	}
	snap, err := tx.Commit(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := snap.WriteCheckpoint(ctx); err != nil {
		b.Fatal(err)
	}
	for c := range commits {
		tx := snap.NewTransaction(Operation{Name: "MERGE"})
		victim := snap.Files()[c]
		tx.ReadFiles(victim.Path)
		tx.Remove(victim.Remove(1, true))
		tx.Add(dataFile(fmt.Sprintf("dt=2026-02-01/new-%d-a.parquet", c), 10, map[string]*string{"dt": strp("2026-02-01")}),
			dataFile(fmt.Sprintf("dt=2026-02-01/new-%d-b.parquet", c), 10, map[string]*string{"dt": strp("2026-02-01")}))
		if snap, err = tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return store, files + 2 + 3*commits
}

// BenchmarkSnapshotLoad loads the latest snapshot of a 100k-file table: a
// checkpoint plus 50 JSON commits.
func BenchmarkSnapshotLoad(b *testing.B) {
	store, actions := buildLargeTable(b, 100_000, 50)
	tbl := Open(store)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s, err := tbl.Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Files()) != 100_000+50 {
			b.Fatalf("files = %d", len(s.Files()))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(actions), "ns/action")
}
