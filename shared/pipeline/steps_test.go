package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TestFilesLargerThanTheEventBoundAreStagedInPartsAndMergedInSteps runs
// simulated workloads whose files and batches exceed batch_max_events, in
// every table mode, with deletion vectors on and off, staging a part at a
// time or decoding each part while the one before is written
// (stagesAhead): files are staged in several parts, batches merged in
// several steps (key ranges), and the tables equal the source.
func TestFilesLargerThanTheEventBoundAreStagedInPartsAndMergedInSteps(t *testing.T) {
	ctx := context.Background()
	formats := []dssim.Format{dssim.JSONL, dssim.Avro, dssim.JSONLGz}
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			sim, err := dssim.Run(dssim.Options{
				Seed: seed, EventsPerFile: 20 + rng.IntN(40), DuplicateEvents: 0.1, RedeliveredFiles: 0.1, Shuffle: true,
				Tables: []dssim.TableSpec{
					{Source: dssim.MySQL, Database: "shop", Table: "customers", Format: formats[seed%3], InitialRows: 40, Changes: 120},
					{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", Format: formats[(seed+1)%3], InitialRows: 30, Changes: 90},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			source := objstore.NewMemory()
			maxEvents := int64(3 + rng.IntN(15))
			// Every table mode, with deletion vectors on and off.
			defaults := config.TableConfig{Mode: tableModes[seed%3], DeletionVectors: []config.Switch{config.Off, config.On}[seed/3%2]}
			p := newPipeline(t, source, config.Config{BatchMaxFiles: 1 + rng.IntN(8), BatchMaxEvents: maxEvents, Defaults: defaults})
			p.dvMinFileBytes = -1
			// Each format both ways over the seeds.
			p.memoryLimit = []int64{-1, 1 << 40}[seed%2]
			if p.stagesAhead() != (seed%2 == 1) {
				t.Fatalf("stages ahead: %v under a limit of %d", p.stagesAhead(), p.memoryLimit)
			}
			notes := write(t, ctx, source, sim.Files)
			rng.Shuffle(len(notes), func(i, j int) { notes[i], notes[j] = notes[j], notes[i] })
			steps, batches, multiPart := 0, 0, 0
			for i, n := range notes {
				res, err := p.Stage(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				if res.Quarantined != "" || res.Skipped != "" {
					t.Fatalf("%s: %+v", n.Name, res)
				}
				if !res.Duplicate {
					m := stagedManifest(t, ctx, p, n)
					for _, part := range m.Parts {
						if part.Events > maxEvents {
							t.Fatalf("%s: a part of %d events, bound %d", n.Name, part.Events, maxEvents)
						}
					}
					if len(m.Parts) > 1 {
						multiPart++
					}
				}
				if rng.IntN(4) == 0 || i == len(notes)-1 {
					for id := range sim.Tables {
						r, err := p.MergeTable(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						steps += r.Steps
						batches += r.Batches
					}
				}
			}
			if multiPart == 0 || steps <= batches {
				t.Fatalf("%d files staged in several parts and %d steps for %d batches: the bound %d was not exercised", multiPart, steps, batches, maxEvents)
			}
			checkTables(t, ctx, p, sim.Tables)
			if names := stepPlans(t, ctx, p.Lake); len(names) > 0 {
				t.Fatalf("step plans left after their batches completed: %v", names)
			}
			for id := range sim.Tables {
				if _, err := p.Maintain(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			checkTables(t, ctx, p, sim.Tables)
			if left := stagedObjects(t, ctx, p.Lake); len(left) > 0 {
				t.Fatalf("maintenance left staged objects of merged files: %v", left)
			}
		})
	}
}

// stagedManifest reads the manifest of a staged source file.
func stagedManifest(t *testing.T, ctx context.Context, p *Pipeline, n datastream.SourceFile) *manifest {
	t.Helper()
	rec, err := p.Registry.File(ctx, coord.FileID(n.Bucket, n.Name, n.Generation))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	m, err := p.readStaged(ctx, rec.StagedPath)
	if err != nil {
		t.Fatal(err)
	}
	var events int64
	for _, part := range m.Parts {
		events += part.Events
	}
	if events != m.Events || rec.Events != m.Events {
		t.Fatalf("%s: parts hold %d events, the manifest says %d, the registry %d", n.Name, events, m.Events, rec.Events)
	}
	return m
}

// listAll lists the object names under prefix.
func listAll(t *testing.T, ctx context.Context, lake objstore.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := lake.List(ctx, prefix, "", func(i objstore.Info) error {
		out = append(out, i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// stepPlans lists the step plans in the lake.
func stepPlans(t *testing.T, ctx context.Context, lake objstore.Store) []string {
	t.Helper()
	var out []string
	for _, name := range listAll(t, ctx, lake, "_staging/") {
		if strings.Contains(name, "/_steps/") {
			out = append(out, name)
		}
	}
	return out
}

// stagedObjects lists the staged Parquet files and manifests in the lake.
func stagedObjects(t *testing.T, ctx context.Context, lake objstore.Store) []string {
	t.Helper()
	var out []string
	for _, name := range listAll(t, ctx, lake, "_staging/") {
		if !strings.Contains(name, "/_steps/") {
			out = append(out, name)
		}
	}
	return out
}

// TestMergeInStepsCrashAtEveryCommitConverges kills a merge that runs in
// steps at every commit of every step (and at the write of its step plan),
// then resumes it in a new process configured with another bound: the
// resumed merge follows the first attempt's split, and the tables equal the
// source with every event once in history.
func TestMergeInStepsCrashAtEveryCommitConverges(t *testing.T) {
	for _, mode := range tableModes {
		t.Run("mode "+string(mode), func(t *testing.T) { crashAtEveryCommit(t, mode) })
	}
}

// crashAtEveryCommit crashes a merge in steps at each of its commits in
// turn, in table mode mode, and resumes it in a new process.
func crashAtEveryCommit(t *testing.T, mode config.Mode) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 21, EventsPerFile: 40, DuplicateEvents: 0.1, Shuffle: true, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 30, Changes: 90},
	}})
	if err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for n := int64(1); ; n++ {
		source := objstore.NewMemory()
		var writes atomic.Int64
		var checkpoint atomic.Bool // the crash point is a checkpoint write
		lake := &crashingStore{Store: objstore.NewMemory(), match: func(name string) bool {
			if !strings.Contains(name, "_delta_log/") && !strings.Contains(name, "/_steps/") {
				return false
			}
			if writes.Add(1) != n {
				return false
			}
			checkpoint.Store(strings.Contains(name, "checkpoint"))
			return true
		}}
		local, err := coord.NewLocal(lake.Store, coord.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(local), Config: config.Config{BatchMaxFiles: 50, BatchMaxEvents: 25, Defaults: config.TableConfig{Mode: mode}}, Holder: "crashy"}
		for _, note := range write(t, ctx, source, sim.Files) {
			if _, err := p.Stage(ctx, note); err != nil {
				t.Fatal(err)
			}
		}
		lake.armed.Store(true)
		res, err := p.MergeTable(ctx, "shop.customers")
		lake.armed.Store(false)
		if lake.hits.Load() == 0 {
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps < 3 {
				t.Fatalf("the batch ran in %d steps, want several", res.Steps)
			}
			break // no write left to crash at
		}
		// A checkpoint is written after its commit, and one that fails
		// leaves the table readable from its commits: the merge goes on.
		if !errors.Is(err, errCrash) && !(err == nil && checkpoint.Load()) {
			t.Fatalf("crash at write %d did not surface: %+v %v", n, res, err)
		}
		crashes++
		// A new process with a bound that would split the batch otherwise.
		p2 := &Pipeline{Lake: lake.Store, Sources: oneSource{source}, Coordination: Coordinate(local), Config: config.Config{BatchMaxFiles: 50, BatchMaxEvents: 1000, Defaults: config.TableConfig{Mode: mode}}, Holder: "restarted"}
		if r, err := p2.MergeTable(ctx, "shop.customers"); err != nil || r.Busy {
			t.Fatalf("restart after a crash at write %d: %+v %v", n, r, err)
		}
		t.Run(fmt.Sprintf("crash at write %d", n), func(t *testing.T) { checkTables(t, ctx, p2, sim.Tables) })
	}
	if crashes < 6 {
		t.Fatalf("only %d crash points", crashes)
	}
}

// TestABadRecordInALaterPartQuarantinesTheFileAndLeavesNoPart stages a file
// whose bad record comes after several parts were written: the file is
// quarantined whole, naming the line, and its parts are deleted.
func TestABadRecordInALaterPartQuarantinesTheFileAndLeavesNoPart(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxEvents: 4})
	var payloads []string
	for i := 1; i <= 13; i++ {
		payloads = append(payloads, fmt.Sprintf(`{"id":%d,"n":%d}`, i, i))
	}
	payloads = append(payloads, `{"id":14,"n":"abc"}`, `{"id":15,"n":15}`)
	bad := jsonlFile("b", 20, payloads...)
	good := jsonlFile("a", 100, `{"id":1,"n":5}`, `{"id":2,"n":6}`, `{"id":3,"n":7}`, `{"id":4,"n":8}`, `{"id":5,"n":9}`)
	res := stageAll(t, ctx, p, source, "shop.t", good, bad)
	if res[0].Quarantined != "" {
		t.Fatalf("the good file was quarantined: %s", res[0].Quarantined)
	}
	for _, want := range []string{bad.Name, "line 14", "payload.n"} {
		if !strings.Contains(res[1].Quarantined, want) {
			t.Errorf("quarantine reason %q does not name %s", res[1].Quarantined, want)
		}
	}
	if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 5 {
		t.Errorf("state holds %d rows, want the good file's 5", len(rows))
	}
	// The good file's two parts stay until maintenance; the bad file's
	// three must be gone.
	var parts []string
	for _, name := range stagedObjects(t, ctx, p.Lake) {
		if strings.HasSuffix(name, ".parquet") {
			parts = append(parts, name)
		}
	}
	if len(parts) != 2 {
		t.Errorf("staged parts left: %v, want the good file's 2", parts)
	}
}

// TestWideRowsEndPartsAndStepsByTheirSize stages rows of large values: a
// part ends when its events' estimated size reaches the bound, long before
// batch_max_events, and a step holds no more than its bound of them.
func TestWideRowsEndPartsAndStepsByTheirSize(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxEvents: 1000})
	p.partMemory, p.stepMemory = 40<<10, 80<<10
	wide := strings.Repeat("x", 4000)
	var payloads []string
	for i := 1; i <= 120; i++ {
		payloads = append(payloads, fmt.Sprintf(`{"id":%d,"note":%q}`, i, wide))
	}
	f := jsonlFile("wide", 1, payloads...)
	notes := write(t, ctx, source, []dssim.File{f})
	if res, err := p.Stage(ctx, notes[0]); err != nil || res.Quarantined != "" {
		t.Fatalf("stage: %+v %v", res, err)
	}
	m := stagedManifest(t, ctx, p, notes[0])
	if len(m.Parts) < 10 {
		t.Fatalf("120 rows of 4 kB in %d parts, want a part per 40 kB or so", len(m.Parts))
	}
	for _, part := range m.Parts {
		// A part ends with the event that reaches the bound.
		if part.MemBytes == 0 || part.MemBytes > 40<<10+5000 {
			t.Fatalf("part of %d events, %d bytes estimated", part.Events, part.MemBytes)
		}
	}
	res, err := p.MergeTable(ctx, "shop.t")
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps < len(m.Parts)/2 {
		t.Fatalf("%d parts merged in %d steps, want at most two parts per step", len(m.Parts), res.Steps)
	}
	if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 120 {
		t.Fatalf("state holds %d rows, want 120", len(rows))
	}
}

// TestATruncatedGzipInABackfillQuarantinesThatFileAlone cuts one gzip file
// of a backfill staged in parts in the middle: that file is quarantined
// with a reason naming it, leaves no staged part behind, and every other
// file of the backfill is merged; staging a part at a time, and decoding
// each part while the one before is written.
func TestATruncatedGzipInABackfillQuarantinesThatFileAlone(t *testing.T) {
	for _, limit := range []int64{-1, 1 << 40} {
		t.Run(fmt.Sprintf("memory limit %d", limit), func(t *testing.T) { truncatedGzipInABackfill(t, limit) })
	}
}

func truncatedGzipInABackfill(t *testing.T, memoryLimit int64) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 5, EventsPerFile: 60, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", Format: dssim.JSONLGz, InitialRows: 400},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sim.Files) < 5 {
		t.Fatalf("%d files, want several", len(sim.Files))
	}
	cut := len(sim.Files) / 2
	files := append([]dssim.File(nil), sim.Files...)
	files[cut].Data = files[cut].Data[:len(files[cut].Data)*2/3]
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxEvents: 25})
	p.memoryLimit = memoryLimit
	var quarantined []StageResult
	notes := write(t, ctx, source, files)
	for _, n := range notes {
		res, err := p.Stage(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if res.Quarantined != "" {
			quarantined = append(quarantined, res)
		}
	}
	if len(quarantined) != 1 || quarantined[0].File.Name != files[cut].Name || !strings.Contains(quarantined[0].Quarantined, files[cut].Name) {
		t.Fatalf("quarantined %+v, want %s alone, named in the reason", quarantined, files[cut].Name)
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	// Every event of the other files is in the history, once.
	want := 0
	for i, f := range files {
		if i != cut {
			want += bytes.Count(gunzip(t, f.Data), []byte("\n"))
		}
	}
	tabs, err := p.TableSet("shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := hs.NumRecords(); !ok || got != int64(want) {
		t.Fatalf("history holds %d events, the other files %d", got, want)
	}
	id := coord.FileID(notes[cut].Bucket, notes[cut].Name, notes[cut].Generation)
	for _, name := range stagedObjects(t, ctx, p.Lake) {
		if strings.Contains(name, id) {
			t.Errorf("a staged object of the quarantined file is left: %s", name)
		}
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMaintainDeletesTheStepPlansOfCompletedBatches: a merge that died
// between completing a batch and deleting its step plan leaves the plan;
// maintenance deletes it, and keeps a plan of a batch not completed yet.
func TestMaintainDeletesTheStepPlansOfCompletedBatches(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	stageAll(t, ctx, p, source, "shop.t", jsonlFile("a", 10, `{"id":1,"n":5}`))
	st, err := p.Status.Status(ctx, "shop.t")
	if err != nil || st.LastBatchSeq != 1 {
		t.Fatalf("status %+v, %v", st, err)
	}
	left, future := stepPlanPath("shop.t", 1), stepPlanPath("shop.t", 2)
	for _, name := range []string{left, future} {
		if _, err := p.Lake.Write(ctx, name, strings.NewReader(`{}`), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Maintain(ctx, "shop.t"); err != nil {
		t.Fatal(err)
	}
	got := stepPlans(t, ctx, p.Lake)
	if len(got) != 1 || got[0] != future {
		t.Fatalf("step plans after maintenance: %v, want only %s", got, future)
	}
}

// TestAStalePlanUnderTheBatchNumberIsIgnored: a plan left under the batch's
// number by another history of the registry (other files, or parts that do
// not exist) does not steer the batch, which is planned and merged anew.
func TestAStalePlanUnderTheBatchNumberIsIgnored(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		plan func(ids []string) stepPlan
	}{
		{"other files", func([]string) stepPlan {
			return stepPlan{Seq: 1, Files: []string{"x", "y"}, Steps: [][]partRef{{{File: "x", Part: 0}}}}
		}},
		{"parts that do not exist", func(ids []string) stepPlan {
			// Batch 1 is the first file alone: its events pass the bound.
			return stepPlan{Seq: 1, Files: ids[:1], Steps: [][]partRef{{{File: ids[0], Part: 99}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, err := dssim.Run(dssim.Options{Seed: 9, EventsPerFile: 30, Tables: []dssim.TableSpec{
				{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 20, Changes: 40},
			}})
			if err != nil {
				t.Fatal(err)
			}
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{BatchMaxEvents: 10, BatchMaxFiles: 100})
			var ids []string
			notes := write(t, ctx, source, sim.Files)
			for _, n := range notes {
				if _, err := p.Stage(ctx, n); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, coord.FileID(n.Bucket, n.Name, n.Generation))
			}
			body, err := json.Marshal(tc.plan(ids))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Lake.Write(ctx, stepPlanPath("shop.customers", 1), bytes.NewReader(body), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			res, err := p.MergeTable(ctx, "shop.customers")
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps < 2 {
				t.Fatalf("%d steps, want the batch planned anew in several", res.Steps)
			}
			checkTables(t, ctx, p, sim.Tables)
		})
	}
}
