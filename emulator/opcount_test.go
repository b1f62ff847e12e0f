package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// The scenarios of TestStackOperationCounts, whose figures docs/cost.md
// quotes: a CDC trickle (one file a table per rotation, each merged alone,
// as a 60 s rotation gives) and a backfill (large files, merged together).
const (
	trickleTable, trickleFiles, trickleFileEvents    = "shop.orders", 24, 600
	backfillTable, backfillFileCount, backfillEvents = "shop.items", 4, 40_000
	backfillStepEvents                               = 10_000
)

// opBound bounds the operations of a run: Base, plus PerFile for each file
// of a batch (for staging: each part of the file), PerStep for each step
// after a batch's first, and PerEarlier for each batch of the table merged
// since its last compaction: a merge reads and rewrites the files the
// earlier batches left, which compaction folds together. The bounds are
// about 1.5 times what the scenarios measure (docs/cost.md), so that a
// change that doubles the calls of a file or a batch fails the test.
type opBound struct {
	Base, PerFile, PerStep, PerEarlier opcount.Counts
}

func scale(c opcount.Counts, n int64) opcount.Counts {
	return opcount.Counts{GCSClassA: c.GCSClassA * n, GCSClassB: c.GCSClassB * n, FirestoreReads: c.FirestoreReads * n,
		FirestoreWrites: c.FirestoreWrites * n, FirestoreDeletes: c.FirestoreDeletes * n, PubSubPublishes: c.PubSubPublishes * n}
}

func (b opBound) at(files, steps, earlier int64) opcount.Counts {
	return b.Base.Add(scale(b.PerFile, files)).Add(scale(b.PerStep, max(steps-1, 0))).Add(scale(b.PerEarlier, earlier))
}

var (
	// stagingBound is per staged file. Its class B reads include the
	// state table's log since its last checkpoint (up to 9 commits), read
	// for the schema a JSON file is typed by.
	stagingBound = opBound{
		Base:    opcount.Counts{GCSClassA: 3, GCSClassB: 18, FirestoreReads: 4, FirestoreWrites: 3, PubSubPublishes: 1},
		PerFile: opcount.Counts{GCSClassA: 3, GCSClassB: 1},
	}
	// batchBound is per merged batch.
	batchBound = opBound{
		Base:       opcount.Counts{GCSClassA: 20, GCSClassB: 60, FirestoreReads: 6, FirestoreWrites: 6},
		PerFile:    opcount.Counts{GCSClassA: 3, GCSClassB: 10, FirestoreReads: 3, FirestoreWrites: 3},
		PerStep:    opcount.Counts{GCSClassA: 12, GCSClassB: 40},
		PerEarlier: opcount.Counts{GCSClassA: 1, GCSClassB: 16},
	}
)

// exceeds names the kinds of c above bound.
func exceeds(c, bound opcount.Counts) []string {
	var out []string
	for _, k := range []struct {
		name       string
		got, limit int64
	}{
		{"gcs_class_a", c.GCSClassA, bound.GCSClassA}, {"gcs_class_b", c.GCSClassB, bound.GCSClassB},
		{"firestore_reads", c.FirestoreReads, bound.FirestoreReads}, {"firestore_writes", c.FirestoreWrites, bound.FirestoreWrites},
		{"firestore_deletes", c.FirestoreDeletes, bound.FirestoreDeletes}, {"pubsub_publishes", c.PubSubPublishes, bound.PubSubPublishes},
	} {
		if k.got > k.limit {
			out = append(out, fmt.Sprintf("%s %d > %d", k.name, k.got, k.limit))
		}
	}
	return out
}

// withRetries widens bound by the Firestore transaction attempts c says
// aborted on contention (several files of a table staged at once) and ran
// again: each re-reads what its transaction read, at most all of bound's
// reads, while its writes are not billed, so not counted.
func withRetries(bound, c opcount.Counts) opcount.Counts {
	bound.FirestoreReads *= 1 + c.FirestoreRetries
	return bound
}

// num reads a number of a JSON log record; str a string.
func num(rec map[string]any, key string) int64  { v, _ := rec[key].(float64); return int64(v) }
func str(rec map[string]any, key string) string { v, _ := rec[key].(string); return v }

// logged reads a log record's operation counts.
func logged(rec map[string]any) opcount.Counts {
	return opcount.Counts{GCSClassA: num(rec, "gcs_class_a"), GCSClassB: num(rec, "gcs_class_b"), FirestoreReads: num(rec, "firestore_reads"),
		FirestoreWrites: num(rec, "firestore_writes"), FirestoreDeletes: num(rec, "firestore_deletes"), PubSubPublishes: num(rec, "pubsub_publishes"),
		FirestoreRetries: num(rec, "firestore_retries")}
}

// tally sums a scenario's runs.
type tally struct {
	runs, files, events int64
	ops                 opcount.Counts
}

func (t *tally) add(files, events int64, c opcount.Counts) {
	t.runs, t.files, t.events, t.ops = t.runs+1, t.files+files, t.events+events, t.ops.Add(c)
}

// row formats the tally's mean per run (a unit) and per 1,000 events.
func (t tally) row(what, unit string) string {
	c := t.ops
	line := func(unit string, n float64) string {
		per := func(v int64) string { return fmt.Sprintf("%9.2f", float64(v)/max(n, 1e-9)) }
		return fmt.Sprintf("%-38s %-10s %s %s %s %s %s %s", what, unit, per(c.GCSClassA), per(c.GCSClassB),
			per(c.FirestoreReads), per(c.FirestoreWrites), per(c.FirestoreDeletes), per(c.PubSubPublishes))
	}
	if t.events == 0 {
		return line("per "+unit, float64(t.runs))
	}
	return line("per "+unit, float64(t.runs)) + "\n" + line("per 1k ev", float64(t.events)/1000)
}

// TestStackOperationCounts measures the operations a staged file and a
// merged batch cost on the emulators, for a CDC trickle and a backfill,
// and fails when a file or a batch costs more than its bound. It prints
// the figures docs/cost.md quotes:
//
//	go test ./emulator -run TestStackOperationCounts -count=1 -v
//
// The trickle is a table's initial load, then one CDC file at a time, each
// merged before the next arrives (as with a 60 s rotation); its last
// files arrive after a compaction. The backfill is large files written at
// once, merged in one batch of several steps.
func TestStackOperationCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	// Steps of 10,000 events, so that the backfill's batch is merged in
	// steps as a large backfill's are (of 100,000 events by default).
	s := startStack(t, ctx, Options{MergeBudget: time.Minute, Config: fmt.Sprintf(`{"batch_max_events": %d}`, backfillStepEvents)})
	opts := s.Options()
	_, co, lake := stackClients(t, ctx, s)
	written := map[string]int{}
	put := func(files ...dssim.File) {
		t.Helper()
		for _, f := range files {
			if err := writeObject(ctx, s.Storage(), opts.SourceBucket, f.Name, f.Data); err != nil {
				t.Fatal(err)
			}
			written[f.Table]++
		}
		waitQuiet(t, ctx, co, written, 3*time.Minute)
	}
	trickle, backfill := costScenarios(t)
	late := trickle.Files[len(trickle.Files)-trickleAfterCompaction:]
	for _, f := range trickle.Files[:len(trickle.Files)-trickleAfterCompaction] {
		put(f)
	}
	put(backfill.Files...)
	st, err := co.Status(ctx, trickleTable)
	if err != nil {
		t.Fatal(err)
	}
	compactedAt := st.LastBatchSeq
	p := &pipeline.Pipeline{Lake: gcsstore.New(s.Storage(), opts.LakeBucket, ""), Coordination: pipeline.Coordinate(co)}
	var maintained tally
	for _, table := range []string{trickleTable, backfillTable} {
		res, err := p.Maintain(ctx, table)
		if err != nil {
			t.Fatalf("maintain %s: %v", table, err)
		}
		maintained.add(0, 0, res.Ops)
	}
	for _, f := range late {
		put(f)
	}
	checkAll(t, ctx, lake, map[string]*dssim.Table{trickleTable: trickle.Tables[trickleTable], backfillTable: backfill.Tables[backfillTable]})

	stages := stagingCosts(t, s)
	merges, series := mergeCosts(t, s, compactedAt)
	var b strings.Builder
	fmt.Fprintf(&b, "%-38s %-10s %9s %9s %9s %9s %9s %9s\n", "operations, mean", "unit", "gcs A", "gcs B", "fs read", "fs write", "fs delete", "publish")
	for _, r := range []struct {
		what, unit string
		t          *tally
	}{
		{fmt.Sprintf("trickle staging (%d ev/file)", trickleFileEvents), "file", stages[trickleTable]},
		{fmt.Sprintf("trickle merge, batches 2-%d", compactedAt), "batch", merges[trickleTable]},
		{"trickle merge after a compaction", "batch", merges[trickleAfter]},
		{fmt.Sprintf("backfill staging (%d ev/file)", backfillEvents/backfillFileCount), "file", stages[backfillTable]},
		{fmt.Sprintf("backfill merge (%d steps)", series.backfillSteps), "batch", merges[backfillTable]},
		{"maintenance, both tables", "run", &maintained},
	} {
		fmt.Fprintln(&b, r.t.row(r.what, r.unit))
	}
	a0, a1 := fitLine(series.n, series.a)
	b0, b1 := fitLine(series.n, series.b)
	fmt.Fprintf(&b, "trickle merge per batch, fitted over batches 2-%d by the batches n merged before it since the table's creation (no compaction): gcs A %.1f + %.2f n, gcs B %.1f + %.2f n\n",
		compactedAt, a0, a1, b0, b1)
	t.Logf("measured operations:\n%s", b.String())
}

// trickleAfterCompaction are the trickle's files that arrive after the
// compaction; trickleAfter tallies their batches.
const (
	trickleAfterCompaction = 3
	trickleAfter           = trickleTable + " after compaction"
)

// costScenarios simulates the trickle's and the backfill's source files.
func costScenarios(t *testing.T) (trickle, backfill *dssim.Result) {
	t.Helper()
	trickle, err := dssim.Run(dssim.Options{Seed: 41, EventsPerFile: trickleFileEvents, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "orders", Format: dssim.JSONL, InitialRows: trickleFileEvents, Changes: trickleFiles * trickleFileEvents},
	}})
	if err != nil {
		t.Fatal(err)
	}
	backfill, err = dssim.Run(dssim.Options{Seed: 42, EventsPerFile: backfillEvents / backfillFileCount, Tables: []dssim.TableSpec{
		{Source: dssim.PostgreSQL, Database: "shop", Table: "items", Format: dssim.JSONL, InitialRows: backfillEvents},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return trickle, backfill
}

// stagingCosts checks each staged file's operations against its bound and
// tallies them by table; the trickle's initial load is left out.
func stagingCosts(t *testing.T, s *Stack) map[string]*tally {
	stages := map[string]*tally{trickleTable: {}, backfillTable: {}}
	for _, rec := range logEvents(t, s, "function-onfile", "staged") {
		table, file, parts, c := str(rec, "table"), str(rec, "file"), num(rec, "parts"), logged(rec)
		if bad := exceeds(c, withRetries(stagingBound.at(parts, 0, 0), c)); len(bad) > 0 {
			t.Errorf("staging %s (%d parts) costs more than its bound: %s", file, parts, strings.Join(bad, ", "))
		}
		if st := stages[table]; st != nil && (table != trickleTable || strings.Contains(file, "-cdc")) {
			st.add(1, num(rec, "events"), c)
		}
	}
	return stages
}

// batchSeries are the trickle's batches before the compaction, for a fit
// of their operations by the batches merged before them.
type batchSeries struct {
	n, a, b       []float64
	backfillSteps int64
}

// mergeCosts checks each merged batch's operations against its bound and
// tallies them: the trickle's up to the compaction after batch
// compactedAt (without its first, the initial load, which creates the
// tables), the trickle's after it, and the backfill's.
func mergeCosts(t *testing.T, s *Stack, compactedAt int64) (map[string]*tally, batchSeries) {
	merges := map[string]*tally{trickleTable: {}, trickleAfter: {}, backfillTable: {}}
	var series batchSeries
	for _, rec := range logEvents(t, s, "function-merge", "merged") {
		table, batch, files, steps, c := str(rec, "table"), num(rec, "batch"), num(rec, "files"), num(rec, "steps"), logged(rec)
		earlier, key := batch-1, table
		if table == trickleTable && batch > compactedAt {
			earlier, key = batch-compactedAt-1, trickleAfter
		}
		if bad := exceeds(c, withRetries(batchBound.at(files, steps, earlier), c)); len(bad) > 0 {
			t.Errorf("batch %d of %s (%d files, %d steps, %d batches since compaction) costs more than its bound: %s", batch, table, files, steps, earlier, strings.Join(bad, ", "))
		}
		switch {
		case key == trickleTable && batch > 1:
			series.n, series.a, series.b = append(series.n, float64(earlier)), append(series.a, float64(c.GCSClassA)), append(series.b, float64(c.GCSClassB))
		case key == backfillTable:
			series.backfillSteps += steps
		case key != trickleAfter:
			continue
		}
		merges[key].add(files, num(rec, "events"), c)
	}
	return merges, series
}

// fitLine returns the least-squares line y = a + b x.
func fitLine(x, y []float64) (a, b float64) {
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	n := float64(len(x))
	if d := n*sxx - sx*sx; d != 0 {
		b = (n*sxy - sx*sy) / d
	}
	return (sy - b*sx) / max(n, 1), b
}
