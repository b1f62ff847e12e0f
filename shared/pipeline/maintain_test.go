package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"reflect"
	"strconv"
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

// TestMaintainFoldsDeletionVectors: merges with deletion vectors on leave
// vectors in the state table; maintenance rewrites those files without the
// rows the vectors mark, says so, and the tables still equal the source.
func TestMaintainFoldsDeletionVectors(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 12, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 40, Changes: 120},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxFiles: 1, Defaults: config.TableConfig{DeletionVectors: config.On}})
	p.dvMinFileBytes = -1
	for _, n := range write(t, ctx, source, sim.Files) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	tabs, _ := p.TableSet("shop.customers")
	withVectors := func() int {
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range snap.Files() {
			if f.DeletionVector != nil {
				n++
			}
		}
		return n
	}
	before := withVectors()
	if before == 0 {
		t.Fatal("the merges left no file with a deletion vector")
	}
	res, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if res.DeletionVectorsFolded == 0 || res.RowsPurged == 0 {
		t.Errorf("maintenance folded %d vectors (%d rows), want some of the %d files with vectors", res.DeletionVectorsFolded, res.RowsPurged, before)
	}
	if after := withVectors(); after >= before {
		t.Errorf("files with deletion vectors: %d before maintenance, %d after", before, after)
	}
	checkTables(t, ctx, p, sim.Tables)
}

// TestMaintainFoldsAVectorPastTheTablesShare: a large state file whose
// deletion vector marks 30% of its rows is rewritten by the default share
// (0.2), and kept with its vector by a table whose
// deletion_vector_max_deleted_share is 0.5; the rows read the same.
func TestMaintainFoldsAVectorPastTheTablesShare(t *testing.T) {
	ctx := context.Background()
	const rows, updated = 6000, 1800
	load := make([]string, rows)
	for i := range load {
		load[i] = fmt.Sprintf(`{"id":%d,"pad":"%x"}`, i, sha256.Sum256([]byte(strconv.Itoa(i))))
	}
	change := make([]string, updated)
	want := map[string]string{}
	for i := range rows {
		want[fmt.Sprintf(`{"id":%d}`, i)] = fmt.Sprintf(`{"id":%d,"pad":"%x"}`, i, sha256.Sum256([]byte(strconv.Itoa(i))))
	}
	for i := range change {
		change[i] = fmt.Sprintf(`{"id":%d,"pad":"changed %d"}`, i*3, i)
		want[fmt.Sprintf(`{"id":%d}`, i*3)] = fmt.Sprintf(`{"id":%d,"pad":"changed %d"}`, i*3, i)
	}
	for _, c := range []struct {
		name  string
		share float64
		folds bool
	}{{"default share", 0, true}, {"share 0.5", 0.5, false}} {
		t.Run(c.name, func(t *testing.T) {
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{Defaults: config.TableConfig{DeletionVectors: config.On, TargetFileBytes: 1 << 20, DVMaxDeletedShare: c.share}})
			p.dvMinFileBytes = -1
			merge := func(f dssim.File) {
				t.Helper()
				for _, n := range write(t, ctx, source, []dssim.File{f}) {
					if _, err := p.Stage(ctx, n); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
					t.Fatal(err)
				}
			}
			merge(jsonlFile("load", 0, load...))
			_, snap := stateSnapshot(t, ctx, p, "shop.t")
			if snap.NumFiles() != 1 || snap.Files()[0].Size < (1<<20)/4 {
				t.Fatalf("the load wrote %d state files (first %d bytes); want one of at least a quarter of the target", snap.NumFiles(), snap.Files()[0].Size)
			}
			big := snap.Files()[0].Path
			merge(jsonlFile("change", 100000, change...))
			res, err := p.Maintain(ctx, "shop.t")
			if err != nil {
				t.Fatal(err)
			}
			_, snap = stateSnapshot(t, ctx, p, "shop.t")
			var kept *delta.Add
			for _, f := range snap.Files() {
				if f.Path == big {
					kept = &f
				}
			}
			switch {
			case c.folds && (kept != nil || res.DeletionVectorsFolded == 0 || res.RowsPurged != updated):
				t.Errorf("maintenance kept the file (%v) and folded %d vectors, %d rows; want the file rewritten without its %d deleted rows", kept != nil, res.DeletionVectorsFolded, res.RowsPurged, updated)
			case !c.folds && (kept == nil || kept.DeletionVector == nil || res.DeletionVectorsFolded != 0):
				t.Errorf("maintenance rewrote the file (kept %v) and folded %d vectors; want it kept with its vector", kept != nil, res.DeletionVectorsFolded)
			}
			if _, got := stateRows(t, ctx, p, "shop.t", "id"); !reflect.DeepEqual(got, want) {
				t.Errorf("state holds %d rows, want %d, and the changed ones changed", len(got), len(want))
			}
		})
	}
}

// Maintain rewrites at most the table's compaction_max_bytes in each Delta
// table, at least one bin, and counts what it left; -1 lifts the cap.
func TestMaintainCompactsWithinTheTablesCap(t *testing.T) {
	ctx := context.Background()
	t.Run("a cap below one partition's files compacts one partition a run", func(t *testing.T) {
		p, _ := partitionedSmallFiles(t, ctx, objstore.NewMemory(), 1)
		for run, left := range []int{9, 6, 3, 0} {
			res, err := p.Maintain(ctx, "shop.t")
			if err != nil {
				t.Fatal(err)
			}
			// The history (one partition, a file per source file) is
			// one bin: the first run compacts it too.
			compacted := 3
			if run == 0 {
				compacted += 12
			}
			if res.CompactedFiles != compacted || res.CompactionLeftFiles != left || (left > 0) != (res.CompactionLeftBytes > 0) {
				t.Errorf("run %d: compacted %d, left %d files of %d bytes; want %d compacted and %d left", run+1, res.CompactedFiles, res.CompactionLeftFiles, res.CompactionLeftBytes, compacted, left)
			}
		}
	})
	t.Run("no cap compacts every partition in one run", func(t *testing.T) {
		p, _ := partitionedSmallFiles(t, ctx, objstore.NewMemory(), -1)
		res, err := p.Maintain(ctx, "shop.t")
		if err != nil {
			t.Fatal(err)
		}
		if res.CompactedFiles != 24 || res.CompactionLeftFiles != 0 || res.CompactionLeftBytes != 0 {
			t.Errorf("compacted %d, left %d files of %d bytes; want all 24 (12 state, 12 history) and none left", res.CompactedFiles, res.CompactionLeftFiles, res.CompactionLeftBytes)
		}
	})
}
