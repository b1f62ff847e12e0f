package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// interleavingStore runs a hook once, the first time a data file of the
// current-state table "shop/customers" is written after it is armed: the
// hook's work then lands between the writer's read of the table and its
// commit, deterministically.
type interleavingStore struct {
	objstore.Store
	armed atomic.Bool
	hook  func()
}

func (s *interleavingStore) Write(ctx context.Context, name string, r io.Reader, o objstore.WriteOptions) (objstore.Info, error) {
	if strings.HasPrefix(name, "shop/customers/") && strings.HasSuffix(name, ".parquet") && s.armed.CompareAndSwap(true, false) {
		s.hook()
	}
	return s.Store.Write(ctx, name, r, o)
}

// logCounter is a slog handler that counts the records by message, and
// keeps the greatest "attempt" each message carried, for the goroutines of
// one test.
type logCounter struct {
	mu      sync.Mutex
	n       map[string]int
	attempt map[string]int64
}

func newLogCounter() *logCounter {
	return &logCounter{n: map[string]int{}, attempt: map[string]int64{}}
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCounter) WithGroup(string) slog.Handler            { return c }

func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "attempt" {
			c.attempt[r.Message] = max(c.attempt[r.Message], a.Value.Int64())
		}
		return true
	})
	return nil
}

func (c *logCounter) maxAttempt(msg string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempt[msg]
}

func (c *logCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

// Messages the race tests count.
const (
	logCompactRetry  = "compaction lost to a concurrent commit; trying again from a fresh snapshot"
	logCompactGaveUp = "compaction lost to a concurrent commit again; left to the next maintenance run"
	logMergeReplan   = "merge conflicted with a concurrent commit; planning again"
)

// counted sets p's logger to a new logCounter and returns it.
func counted(p *Pipeline) *logCounter {
	c := newLogCounter()
	p.Logger = slog.New(c)
	return c
}

// raceSetup is a pipeline over an interleaving lake with half the
// simulated files of shop.customers merged in batches of one file (so the
// state has many small files to compact) and the other half returned, not
// yet written to the source.
func raceSetup(t *testing.T, ctx context.Context, seed uint64) (*Pipeline, *interleavingStore, *logCounter, *dssim.Result, []dssim.File) {
	t.Helper()
	sim, err := dssim.Run(dssim.Options{Seed: seed, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 30, Changes: 160},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := newPipeline(t, objstore.NewMemory(), config.Config{BatchMaxFiles: 1})
	lake := &interleavingStore{Store: p.Lake}
	p.Lake = lake
	logs := counted(p)
	half := len(sim.Files) / 2
	stageAll(t, ctx, p, p.Sources.(oneSource).s, "shop.customers", sim.Files[:half]...)
	return p, lake, logs, sim, sim.Files[half:]
}

func TestMaintainNeedsNoLease(t *testing.T) {
	ctx := context.Background()
	p, _, _, sim, rest := raceSetup(t, ctx, 21)
	stageOnly(t, ctx, p, p.Sources.(oneSource).s, rest...)
	// A merge (another process) holds the table: maintenance runs anyway.
	lease, err := p.Leaser.Acquire(ctx, "shop.customers", "merging-instance/1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	if res.CompactedFiles == 0 {
		t.Fatalf("nothing compacted while another holder had the lease: %+v", res)
	}
	if err := p.Leaser.CheckLease(ctx, lease); err != nil {
		t.Fatalf("maintenance disturbed the merge's lease: %v", err)
	}
	if err := p.Leaser.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	checkTables(t, ctx, p, sim.Tables)
}

// interleave runs outer with inner armed to run once inside it, between
// outer's read of the state table and its commit, and returns the two
// errors; it fails the test if inner never ran.
func interleave(t *testing.T, lake *interleavingStore, outer, inner func() error) (outerErr, innerErr error) {
	t.Helper()
	lake.hook = func() { innerErr = inner() }
	lake.armed.Store(true)
	outerErr = outer()
	if lake.armed.Swap(false) {
		t.Fatal("no state data file was written: no race happened")
	}
	return outerErr, innerErr
}

// TestCompactionThatLosesToAMergeTriesAgainAndLosesNothing commits a whole
// merge between the compaction's read of the state table and its commit:
// the merge rewrote files the compaction rewrote too, so the compaction's
// commit conflicts; it tries again from a fresh snapshot and succeeds.
func TestCompactionThatLosesToAMergeTriesAgainAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	p, lake, logs, sim, rest := raceSetup(t, ctx, 22)
	stageOnly(t, ctx, p, p.Sources.(oneSource).s, rest...)
	var merged MergeResult
	var maintained MaintainResult
	maintainErr, mergeErr := interleave(t, lake,
		func() (err error) { maintained, err = p.Maintain(ctx, "shop.customers"); return err },
		func() (err error) { merged, err = p.MergeTable(ctx, "shop.customers"); return err })
	if mergeErr != nil || merged.Busy || merged.Files != len(rest) {
		t.Fatalf("merge during the compaction = %+v, %v; want all %d files merged, never busy", merged, mergeErr, len(rest))
	}
	if maintainErr != nil || maintained.Conflicts != 0 || maintained.CompactedFiles == 0 {
		t.Fatalf("maintenance = %+v, %v; want the retry to compact", maintained, maintainErr)
	}
	if n := logs.count(logCompactRetry); n != 1 {
		t.Fatalf("the compaction lost %d races, want 1", n)
	}
	checkTables(t, ctx, p, sim.Tables)
}

// TestCompactionThatLosesTwiceIsLeftToTheNextRun commits a merge inside
// each of the compaction's two attempts: the compaction gives up for this
// run, which still succeeds, and the next run compacts.
func TestCompactionThatLosesTwiceIsLeftToTheNextRun(t *testing.T) {
	ctx := context.Background()
	p, lake, logs, sim, rest := raceSetup(t, ctx, 24)
	source := p.Sources.(oneSource).s
	half := len(rest) / 2
	stageOnly(t, ctx, p, source, rest[:half]...)
	second := write(t, ctx, source, rest[half:])
	var mergeErrs []error
	merge := func() {
		mr, err := p.MergeTable(ctx, "shop.customers")
		if err == nil && (mr.Busy || mr.Files == 0) {
			err = fmt.Errorf("merge inside the compaction = %+v; want files merged", mr)
		}
		mergeErrs = append(mergeErrs, err)
	}
	lake.hook = func() {
		merge()
		// Armed again only now, so that the next state file written is
		// the compaction's second attempt's, not this merge's.
		lake.hook = func() {
			for _, n := range second {
				if _, err := p.Stage(ctx, n); err != nil {
					mergeErrs = append(mergeErrs, err)
				}
			}
			merge()
		}
		lake.armed.Store(true)
	}
	lake.armed.Store(true)
	res, err := p.Maintain(ctx, "shop.customers")
	if err != nil {
		t.Fatalf("maintenance failed after losing twice: %v", err)
	}
	if len(mergeErrs) < 2 || errors.Join(mergeErrs...) != nil {
		t.Fatalf("merges inside the compaction: %v (want 2, no error)", mergeErrs)
	}
	if res.Conflicts != 1 || logs.count(logCompactRetry) != 1 || logs.count(logCompactGaveUp) != 1 {
		t.Fatalf("maintenance = %+v, %d retries and %d give-ups logged; want the state's compaction given up once after one retry",
			res, logs.count(logCompactRetry), logs.count(logCompactGaveUp))
	}
	checkTables(t, ctx, p, sim.Tables)
	next, err := p.Maintain(ctx, "shop.customers")
	if err != nil || next.Conflicts != 0 || next.CompactedFiles == 0 {
		t.Fatalf("next maintenance = %+v, %v; want it to compact", next, err)
	}
	checkTables(t, ctx, p, sim.Tables)
}

// TestMergeThatLosesToACompactionPlansAgain commits a whole maintenance run
// between the merge's read of the state table and its state commit: the
// merge's commit conflicts with the compaction that removed the files it
// read, and the merge plans again instead of failing or waiting.
func TestMergeThatLosesToACompactionPlansAgain(t *testing.T) {
	ctx := context.Background()
	p, lake, logs, sim, rest := raceSetup(t, ctx, 23)
	source := p.Sources.(oneSource).s
	stageOnly(t, ctx, p, source, rest[0])
	var merged MergeResult
	var maintained MaintainResult
	mergeErr, maintainErr := interleave(t, lake,
		func() (err error) { merged, err = p.MergeTable(ctx, "shop.customers"); return err },
		func() (err error) { maintained, err = p.Maintain(ctx, "shop.customers"); return err })
	if mergeErr != nil || merged.Busy || merged.Files != 1 {
		t.Fatalf("merge = %+v, %v; want the file merged", merged, mergeErr)
	}
	if maintainErr != nil || maintained.CompactedFiles == 0 {
		t.Fatalf("maintenance during the merge = %+v, %v; want a compaction", maintained, maintainErr)
	}
	if n := logs.count(logMergeReplan); n != 1 {
		t.Fatalf("the merge planned again %d times, want 1", n)
	}
	stageAll(t, ctx, p, source, "shop.customers", rest[1:]...)
	checkTables(t, ctx, p, sim.Tables)
}

// maintainWhile runs Maintain on tables in a loop, in a goroutine, until
// work returns, and returns work's error, then the first maintenance error,
// and what the runs did in total.
func maintainWhile(ctx context.Context, p *Pipeline, tables []string, work func() error) (MaintainResult, int, error) {
	done := make(chan struct{})
	var total MaintainResult
	runs := 0
	var maintainErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, id := range tables {
				res, err := p.Maintain(ctx, id)
				if err != nil {
					maintainErr = fmt.Errorf("maintain %s: %w", id, err)
					return
				}
				runs++
				total.CompactedFiles += res.CompactedFiles
				total.ExpiredTombstones += res.ExpiredTombstones
				total.Conflicts += res.Conflicts
			}
		}
	}()
	err := work()
	close(done)
	wg.Wait()
	if err == nil {
		err = maintainErr
	}
	return total, runs, err
}

// raceSummary says how often merges and compactions lost races. A merge
// plans again up to cdc.Options.MaxConflictRetries (5) times; the most
// attempts one batch needed shows how far from that limit a maintenance
// loop with no pause keeps it.
func raceSummary(logs *logCounter, total MaintainResult) string {
	return fmt.Sprintf("merges planned again %d times (the most for one step: %d), compactions lost %d races (%d given up)",
		logs.count(logMergeReplan), logs.maxAttempt(logMergeReplan), logs.count(logCompactRetry)+logs.count(logCompactGaveUp), total.Conflicts)
}

// mergeEach stages each file and merges its table at once, as the merge
// function does on each wake-up; a busy table is an error, since nothing
// but this loop merges.
func mergeEach(ctx context.Context, p *Pipeline, notes []datastream.SourceFile) error {
	for _, n := range notes {
		sr, err := p.Stage(ctx, n)
		if err != nil {
			return err
		}
		if sr.Quarantined != "" || sr.Skipped != "" {
			return fmt.Errorf("%s: %+v", n.Name, sr)
		}
		mr, err := p.MergeTable(ctx, sr.Table)
		if err != nil {
			return err
		}
		if mr.Busy {
			return fmt.Errorf("merge of %s found the table busy", n.Name)
		}
	}
	return nil
}

// TestConcurrentMergesAndMaintenanceEqualTheSource merges file after file
// while another goroutine maintains the tables in a loop, with no lease
// between them: the tables must equal a reference model, with every event
// in the history once.
func TestConcurrentMergesAndMaintenanceEqualTheSource(t *testing.T) {
	ctx := context.Background()

	// The simulator's shuffled, duplicated and re-delivered events make an
	// expired delete undoable by an older event, by design: tombstones
	// outlive this run, and expiry only compacts their files.
	t.Run("simulated tables with shuffled, duplicated and re-delivered events equal the simulator's state", func(t *testing.T) {
		sim, err := dssim.Run(dssim.Options{Seed: 31, EventsPerFile: 8, DuplicateEvents: 0.1, RedeliveredFiles: 0.1, Shuffle: true, Tables: []dssim.TableSpec{
			{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 20, Changes: 300},
			{Source: dssim.PostgreSQL, Database: "public", Table: "orders", Format: dssim.Avro, InitialRows: 10, Changes: 200},
		}})
		if err != nil {
			t.Fatal(err)
		}
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{BatchMaxFiles: 1})
		logs := counted(p)
		notes := write(t, ctx, source, sim.Files)
		total, runs, err := maintainWhile(ctx, p, []string{"shop.customers", "public.orders"}, func() error { return mergeEach(ctx, p, notes) })
		if err != nil {
			t.Fatal(err)
		}
		if total.CompactedFiles == 0 {
			t.Fatalf("%d maintenance runs compacted nothing", runs)
		}
		t.Logf("%d maintenance runs compacted %d files; %s", runs, total.CompactedFiles, raceSummary(logs, total))
		checkTables(t, ctx, p, sim.Tables)
	})

	// Events in log order, delivered in order and once: no event is older
	// than a delete already applied, so expiring every tombstone on every
	// run (retention 1 ns) must leave the state equal to the events
	// replayed into a map.
	t.Run("tombstones expired by every run beside the merges lose no delete", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(33, 1))
		model := map[int]int{}
		var files []dssim.File
		pos := 1
		events := 0
		for f := 0; f < 60; f++ {
			var evs []jsonEvent
			for range 8 {
				id := rng.IntN(40)
				v := pos * 10
				_, live := model[id]
				del := live && rng.IntN(3) == 0
				if del {
					delete(model, id)
				} else {
					model[id] = v
				}
				evs = append(evs, jsonEvent{payload: fmt.Sprintf(`{"id":%d,"v":%d}`, id, v), delete: del})
				pos++
			}
			events += len(evs)
			files = append(files, jsonlEvents(fmt.Sprintf("f%03d", f), pos-len(evs), evs...))
		}
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{BatchMaxFiles: 1, Defaults: config.TableConfig{TombstoneRetention: config.Duration(time.Nanosecond)}})
		logs := counted(p)
		notes := write(t, ctx, source, files)
		total, runs, err := maintainWhile(ctx, p, []string{"shop.t"}, func() error { return mergeEach(ctx, p, notes) })
		if err != nil {
			t.Fatal(err)
		}
		if total.CompactedFiles == 0 || total.ExpiredTombstones == 0 {
			t.Fatalf("%d maintenance runs compacted %d files and expired %d tombstones; want both", runs, total.CompactedFiles, total.ExpiredTombstones)
		}
		t.Logf("%d maintenance runs compacted %d files, expired %d tombstones; %s", runs, total.CompactedFiles, total.ExpiredTombstones, raceSummary(logs, total))
		_, rows := stateRows(t, ctx, p, "shop.t", "id")
		for id, v := range model {
			key := fmt.Sprintf(`{"id":%d}`, id)
			if want := fmt.Sprintf(`{"id":%d,"v":%d}`, id, v); rows[key] != want {
				t.Errorf("key %s: got %s, want %s", key, rows[key], want)
			}
			delete(rows, key)
		}
		for k, r := range rows {
			t.Errorf("key %s is deleted in the source but the state holds %s", k, r)
		}
		tabs, err := p.TableSet("shop.t")
		if err != nil {
			t.Fatal(err)
		}
		if n := historyEvents(t, ctx, tabs.History); n != events {
			t.Errorf("history holds %d events, want %d", n, events)
		}
	})
}
