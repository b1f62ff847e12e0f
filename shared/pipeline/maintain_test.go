package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestMaintainCompactsClustersAndExpires(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 11, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 20, Changes: 120},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	now := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	p := newPipeline(t, source, config.Config{BatchMaxFiles: 1})
	p.Now = func() time.Time { return now }
	for _, n := range write(t, ctx, source, sim.Files) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	tabs, _ := p.TableSet("shop.customers")
	before, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.NumFiles() < 3 {
		t.Fatalf("expected many small files before maintenance, got %d", before.NumFiles())
	}
	res, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	after, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.CompactedFiles == 0 || after.NumFiles() >= before.NumFiles() {
		t.Fatalf("no compaction: %+v, files %d -> %d", res, before.NumFiles(), after.NumFiles())
	}
	for _, f := range after.Files() {
		if f.DataChange {
			t.Fatalf("compacted file %s has dataChange=true", f.Path)
		}
	}
	if res.StagedFilesDeleted == 0 {
		t.Fatal("merged staged files were not deleted")
	}
	checkTables(t, ctx, p, sim.Tables)
	// Clustering: the compacted file's rows come out sorted by key.
	var last int64 = -1
	for _, f := range after.Files() {
		err := delta.ReadFile(ctx, tabs.State, after.Metadata(), f, delta.ReadOptions{Columns: []string{"id"}}, func(row []any) error {
			id := row[0].(int64)
			if id <= last {
				t.Fatalf("rows not clustered by key: %d after %d in %s", id, last, f.Path)
			}
			last = id
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		last = -1
	}
	// Tombstones expire after their retention (7 days by default).
	if sim.Tables["shop.customers"].Deletes == 0 {
		t.Fatal("workload without deletes")
	}
	now = now.Add(8 * 24 * time.Hour)
	res, err = p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExpiredTombstones == 0 {
		t.Fatalf("tombstones did not expire: %+v", res)
	}
	ts, err := delta.Open(tabs.Tombstones).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := ts.NumRecords(); n != 0 {
		t.Fatalf("%d tombstones left after expiry", n)
	}
}

// leaseProbe is a Waker that checks, when woken, that the table's lease is
// free (another holder can take it), as a woken merge needs.
type leaseProbe struct {
	c                Leaser
	woken, leaseFree int
}

func (w *leaseProbe) Wake(ctx context.Context, tableID string) error {
	w.woken++
	l, err := w.c.Acquire(ctx, tableID, "probe", time.Minute)
	if err != nil {
		return nil // the lease is still held: leaseFree stays short
	}
	w.leaseFree++
	return w.c.Release(ctx, l)
}

func TestMaintainWakesFilesStagedMeanwhileWithTheLeaseFree(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 5, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 20, Changes: 60},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	files := write(t, ctx, source, sim.Files)
	half := len(files) / 2
	for _, n := range files[:half] {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}

	probe := &leaseProbe{c: p.Leaser}
	p.Waker = probe
	res, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if res.Woke || probe.woken != 0 {
		t.Fatalf("nothing was pending, yet Maintain woke the merge (%+v, %d wakes)", res, probe.woken)
	}

	// Files staged while no merge runs (their wake-up turned away, as
	// while Maintain holds the lease) are woken by the next Maintain, once
	// the lease is released and before checkpoints and vacuum.
	p.Waker = nil
	for _, n := range files[half:] {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	p.Waker = probe
	if res, err = p.Maintain(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	if !res.Woke || probe.woken != 1 {
		t.Fatalf("pending files were not woken once: %+v, %d wakes", res, probe.woken)
	}
	if probe.leaseFree != 1 {
		t.Fatal("the merge was woken while Maintain still held the table's lease")
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	checkTables(t, ctx, p, sim.Tables)
}
