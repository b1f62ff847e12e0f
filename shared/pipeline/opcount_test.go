package pipeline

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// readSpy records the names a store is asked to read.
type readSpy struct {
	objstore.Store
	mu    sync.Mutex
	reads []string
	// merge is the span of reads a countingRun's MergeTable made.
	merge [2]int
}

func (s *readSpy) NewReader(ctx context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.reads = append(s.reads, name)
	s.mu.Unlock()
	return s.Store.NewReader(ctx, name, offset, length)
}

func (s *readSpy) readsOf(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, name := range s.reads {
		if strings.Contains(name, substr) {
			n++
		}
	}
	return n
}

// countingRun stages a simulated table's files and merges them, one file
// a batch, with the step bound at maxEvents.
func countingRun(t *testing.T, ctx context.Context, maxEvents int64) (*Pipeline, *readSpy, []StageResult, MergeResult) {
	t.Helper()
	sim, err := dssim.Run(dssim.Options{Seed: 31, EventsPerFile: 40, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 60, Changes: 100},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxFiles: 1, BatchMaxEvents: maxEvents})
	spy := &readSpy{Store: p.Lake}
	p.Lake = spy
	var staged []StageResult
	for _, n := range write(t, ctx, source, sim.Files) {
		res, err := p.Stage(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		staged = append(staged, res)
	}
	spy.merge[0] = len(spy.reads)
	res, err := p.MergeTable(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	spy.merge[1] = len(spy.reads)
	checkTables(t, ctx, p, sim.Tables)
	return p, spy, staged, res
}

func TestRunsReportTheirOperations(t *testing.T) {
	ctx := context.Background()
	_, _, staged, merged := countingRun(t, ctx, 0)
	for _, s := range staged {
		if s.Ops.GCSClassA == 0 || s.Ops.GCSClassB == 0 || s.Ops.FirestoreWrites == 0 {
			t.Errorf("staging %s counted %+v, want storage writes and reads and registry writes", s.File.Name, s.Ops)
		}
	}
	if merged.Batches < 2 || merged.Ops.GCSClassA < int64(merged.Batches) || merged.Ops.FirestoreReads == 0 || merged.Ops.FirestoreWrites == 0 {
		t.Errorf("merging %d batches counted %+v, want commits and registry reads and writes", merged.Batches, merged.Ops)
	}
}

func TestAFreshBatchReadsNoStepPlan(t *testing.T) {
	ctx := context.Background()
	t.Run("batches of one step", func(t *testing.T) {
		_, spy, _, res := countingRun(t, ctx, 0)
		if res.Steps != res.Batches {
			t.Fatalf("%d steps for %d batches, want one each", res.Steps, res.Batches)
		}
		if n := spy.readsOf("/_steps/"); n != 0 {
			t.Errorf("%d reads of step plans, want none", n)
		}
	})
	t.Run("batches in steps", func(t *testing.T) {
		p, spy, _, res := countingRun(t, ctx, 15)
		if res.Steps <= res.Batches {
			t.Fatalf("%d steps for %d batches, want batches in several steps", res.Steps, res.Batches)
		}
		if n := spy.readsOf("/_steps/"); n != 0 {
			t.Errorf("%d reads of step plans, want none", n)
		}
		plans := 0
		if err := p.Lake.List(ctx, stagingDir("shop.customers")+"/_steps/", "", func(objstore.Info) error { plans++; return nil }); err != nil {
			t.Fatal(err)
		}
		if plans != 0 {
			t.Errorf("%d step plans left after the batches completed", plans)
		}
	})
}

// TestALeaseReadsEachCommitOfItsTablesOnce merges batches in several steps
// under one lease: each step reads the three tables' snapshots, and each
// read after the first reads only the commits since (delta.Snapshots).
// Before, every step read each table's log from its start (or its
// checkpoint), so the first commits were read once a step.
func TestALeaseReadsEachCommitOfItsTablesOnce(t *testing.T) {
	ctx := context.Background()
	_, spy, _, res := countingRun(t, ctx, 15)
	if res.Steps < 6 {
		t.Fatalf("%d steps, want several", res.Steps)
	}
	reads := map[string]int{}
	for _, name := range spy.reads[spy.merge[0]:spy.merge[1]] {
		if strings.Contains(name, "/_delta_log/") && strings.HasSuffix(name, ".json") {
			reads[name]++
		}
	}
	if len(reads) < 2*res.Steps {
		t.Fatalf("%d commits read for %d steps, want at least one a step of the state and history tables", len(reads), res.Steps)
	}
	for name, n := range reads {
		if n > 1 {
			t.Errorf("commit %s read %d times in one lease", name, n)
		}
	}
}

func TestMaintenanceDeletesAMergedFilesStagedObjectsOnce(t *testing.T) {
	ctx := context.Background()
	p, spy, _, _ := countingRun(t, ctx, 0)
	// A file staged after the merge stays pending: its objects must stay.
	sim, err := dssim.Run(dssim.Options{Seed: 32, EventsPerFile: 40, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 5, Changes: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := p.Sources.(oneSource).s
	late := write(t, ctx, source, sim.Files[:1])[0]
	if _, err := p.Stage(ctx, late); err != nil {
		t.Fatal(err)
	}
	staged := func() []string {
		var names []string
		err := p.Lake.List(ctx, stagingDir("shop.customers")+"/", "", func(info objstore.Info) error {
			names = append(names, info.Name)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	first, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if first.StagedFilesDeleted == 0 {
		t.Fatal("the merged files' staged objects were not deleted")
	}
	left := staged()
	if len(left) == 0 {
		t.Fatal("the pending file's staged objects were deleted")
	}
	pending, err := p.Registry.Pending(ctx, "shop.customers", 0)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %v, %v; want the late file", pending, err)
	}
	for _, name := range left {
		if got, ok := stagedFileID(name); !ok || got != pending[0].ID {
			t.Errorf("staged object %s left, not of the pending file %s", name, pending[0].ID)
		}
	}
	readsBefore := len(spy.reads)
	second, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if second.StagedFilesDeleted != 0 {
		t.Errorf("the second run deleted %d staged objects again", second.StagedFilesDeleted)
	}
	// Before, each run read every merged file's manifest again.
	for _, name := range spy.reads[readsBefore:] {
		if strings.HasPrefix(name, "_staging/") {
			t.Errorf("the second run read staged object %s", name)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatalf("merging the pending file after maintenance: %v", err)
	}
}

func TestStagedFileIDs(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name string
		want string
	}{
		{"_staging/db.t/" + id + ".json", id},
		{"_staging/db.t/" + id + "-1a2b3c4d-0.snappy.parquet", id},
		{"_staging/db.t/_ds_source_date=2026-01-05/" + id + "-1a2b3c4d-2.snappy.parquet", id},
		{"_staging/db.t/" + id + "-1a2b3c4d-0.keys", id},
		{"_staging/db.t/_steps/12.json", ""},
		{"_staging/db.t/notes.txt", ""},
	} {
		got, ok := stagedFileID(c.name)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("stagedFileID(%q) = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

// listSpy counts the listings of a store whose prefix holds a substring.
type listSpy struct {
	objstore.Store
	substr string
	mu     sync.Mutex
	lists  int
}

func (s *listSpy) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	if strings.Contains(prefix, s.substr) {
		s.mu.Lock()
		s.lists++
		s.mu.Unlock()
	}
	return s.Store.List(ctx, prefix, startAt, fn)
}

// TestABatchOfOneStepListsTheStateLogTwice: a batch of one step lists the
// current-state table's log twice, once to check its files against the
// table's schema and mode and plan the step, once when the step opens the
// table to commit. It listed it three times before (four when the
// history takes a staged part as a file), on the way of a new table's
// first file.
func TestABatchOfOneStepListsTheStateLogTwice(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 33, EventsPerFile: 40, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 10, Changes: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	for _, n := range write(t, ctx, source, sim.Files[:1]) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	spy := &listSpy{Store: p.Lake, substr: "shop/customers/_delta_log/"}
	p.Lake = spy
	res, err := p.MergeTable(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if res.Batches != 1 || res.Steps != 1 {
		t.Fatalf("%d batches in %d steps, want one of one", res.Batches, res.Steps)
	}
	if spy.lists != 2 {
		t.Errorf("the new table's first batch listed its state log %d times, want 2", spy.lists)
	}
}
