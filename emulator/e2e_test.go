package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/pubsub/v2"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestMain lets the test binary serve a function when the stack starts it
// as a function server, as the emulator's own binary does.
func TestMain(m *testing.M) {
	if isFunctionServer() {
		if err := serveFunction(); err != nil {
			fmt.Fprintln(os.Stderr, "function server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// e2eLeaseTTL is short so that a crashed merge's table is taken over in
// seconds.
const e2eLeaseTTL = 4 * time.Second

// startStack starts the emulator stack for a test with opts, in a data
// directory and project of the test's own, or skips (fails when CI=true)
// without the tools.
func startStack(t *testing.T, ctx context.Context, opts Options) *Stack {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("the end-to-end test starts two JVM emulators; skipped with -short")
	}
	if err := CheckTools(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI=true requires the emulator stack", err)
		}
		t.Skipf("%v; skipping", err)
	}
	opts.DataDir, opts.Project = t.TempDir(), "dsdelta-e2e"
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, s)
		}
		procs := s.processes()
		s.Close()
		for _, p := range procs {
			if p.Alive() {
				t.Errorf("a process of %s is still running after Close", p.Name())
			}
		}
	})
	for _, kv := range s.EmulatorEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return s
}

// stackClients returns the test's own clients of a stack: Firestore, the
// coordinator on it, and a pipeline reading the lake, for checks.
func stackClients(t *testing.T, ctx context.Context, s *Stack) (*firestore.Client, *firestorecoord.Coordinator, *pipeline.Pipeline) {
	t.Helper()
	opts := s.Options()
	fs, err := firestore.NewClient(ctx, opts.Project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	co, err := firestorecoord.New(ctx, fs, firestorecoord.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return fs, co, &pipeline.Pipeline{Lake: gcsstore.New(s.Storage(), opts.LakeBucket, "")}
}

// e2eDVTables are the simulated tables whose merges use deletion vectors in
// the e2e run (e2eConfig).
var e2eDVTables = map[string]bool{"shop.customers": true, "HR.EMPLOYEES": true, "public.invoices": true}

const e2eConfig = `{"batch_max_files": 2, "tables": {` +
	`"shop.customers": {"deletion_vectors": "on", "deletion_vector_min_file_bytes": 1}, ` +
	`"HR.EMPLOYEES": {"deletion_vectors": "on", "deletion_vector_min_file_bytes": 1}, ` +
	`"public.invoices": {"deletion_vectors": "on", "deletion_vector_min_file_bytes": 1}}}`

// TestStackConvergesToTheSourceUnderFaults runs the whole system on the
// emulators: simulated Datastream files in, Delta tables out, equal to the
// simulator's reference state; then again with duplicated notifications, a
// merge server killed mid-batch and a stale lease holder racing a new one.
func TestStackConvergesToTheSourceUnderFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	s := startStack(t, ctx, Options{
		Tick:        2 * time.Second,
		LeaseTTL:    e2eLeaseTTL,
		MergeBudget: time.Minute,
		// Small batches: a merge runs several, so faults land mid-work.
		// Deletion vectors are on for some tables (and given to files of
		// any size) and off for the others, so both merges run here.
		Config: e2eConfig,
	})
	opts := s.Options()
	fs, co, lake := stackClients(t, ctx, s)
	src := newSourceLog()
	written, refs := src.written, src.refs
	simulate := func(seed uint64, tables []dssim.TableSpec, perFile int) *dssim.Result {
		t.Helper()
		res, err := Simulate(ctx, s.Storage(), opts.SourceBucket, dssim.Options{
			Seed: seed, Tables: tables, EventsPerFile: perFile,
			DuplicateEvents: 0.05, RedeliveredFiles: 0.1, Shuffle: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		src.add(res.Files, res.Tables)
		return res
	}

	t.Run("simulated tables of every source converge to the reference state", func(t *testing.T) {
		simulate(1, DefaultTables(15, 60), 20)
		waitQuiet(t, ctx, co, written, 90*time.Second)
		checkAll(t, ctx, lake, refs)
	})
	if t.Failed() {
		return
	}

	t.Run("tables with deletion vectors on are upgraded and take vectors, the others are not", func(t *testing.T) {
		vectors := 0
		for id := range refs {
			tabs, err := lake.TableSet(id)
			if err != nil {
				t.Fatal(err)
			}
			tab := delta.Open(tabs.State)
			snap, err := tab.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			on := e2eDVTables[id]
			if got := snap.Protocol().Supports(delta.FeatureDeletionVectors); got != on {
				t.Errorf("%s: supports deletion vectors = %v, want %v", id, got, on)
			}
			commits, err := tab.History(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range commits {
				n, _ := strconv.Atoi(c.Metrics["numTargetDeletionVectorsAdded"])
				m, _ := strconv.Atoi(c.Metrics["numTargetDeletionVectorsUpdated"])
				if (n > 0 || m > 0) && !on {
					t.Errorf("%s: version %d added deletion vectors with the setting off", id, c.Version)
				}
				vectors += n + m
			}
		}
		if vectors == 0 {
			t.Error("no merge wrote a deletion vector in the tables that have them on")
		}
		t.Logf("merges wrote %d deletion vectors", vectors)
	})

	t.Run("duplicated notifications change nothing", func(t *testing.T) {
		before := countLog(t, s, "function-onfile", `"event":"duplicate"`)
		var names []string
		it := s.Storage().Bucket(opts.SourceBucket).Objects(ctx, nil)
		for len(names) < 6 {
			a, err := it.Next()
			if err != nil {
				t.Fatalf("list source objects: %v", err)
			}
			names = append(names, a.Name)
		}
		for _, n := range names {
			for range 2 {
				if err := s.Notify(ctx, opts.SourceBucket, n); err != nil {
					t.Fatal(err)
				}
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for countLog(t, s, "function-onfile", `"event":"duplicate"`)-before < 2*len(names) {
			if time.Now().After(deadline) {
				t.Fatalf("onfile reported %d duplicates of the %d published", countLog(t, s, "function-onfile", `"event":"duplicate"`)-before, 2*len(names))
			}
			time.Sleep(200 * time.Millisecond)
		}
		waitQuiet(t, ctx, co, written, 30*time.Second)
		checkAll(t, ctx, lake, refs)
	})

	t.Run("a merge server killed mid-batch and restarted loses nothing", func(t *testing.T) {
		res := simulate(2, []dssim.TableSpec{
			{Source: dssim.MySQL, Database: "shop", Table: "payments", Format: dssim.JSONL, InitialRows: 20, Changes: 120},
			{Source: dssim.Oracle, Database: "HR", Table: "DEPARTMENTS", Format: dssim.Avro, InitialRows: 20, Changes: 120},
		}, 10)
		st, ok := waitMerging(ctx, co, tableIDs(res), 60*time.Second)
		if !ok {
			t.Fatal("never saw a merge of the new tables in progress")
		}
		if err := s.KillFunction(FuncMerge); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed the merge server while it held %s with batch %d open", st.Table, st.OpenBatchSeq)
		// Re-delivered notifications while the merge server is down.
		for _, f := range res.Files[:3] {
			if err := s.Notify(ctx, opts.SourceBucket, f.Name); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
		if err := s.RestartFunction(ctx, FuncMerge); err != nil {
			t.Fatal(err)
		}
		waitQuiet(t, ctx, co, written, 90*time.Second)
		after, err := co.Status(ctx, st.Table)
		if err != nil {
			t.Fatal(err)
		}
		if after.LastBatchSeq < st.OpenBatchSeq {
			t.Errorf("%s: last batch %d, but batch %d was open at the crash", st.Table, after.LastBatchSeq, st.OpenBatchSeq)
		}
		checkAll(t, ctx, lake, refs)
	})

	t.Run("a stale lease holder racing a new one corrupts nothing", func(t *testing.T) {
		res := simulate(3, []dssim.TableSpec{
			{Source: dssim.PostgreSQL, Database: "public", Table: "shipments", Format: dssim.JSONLGz, InitialRows: 20, Changes: 120},
			{Source: dssim.MySQL, Database: "shop", Table: "carts", Format: dssim.Avro, InitialRows: 20, Changes: 120},
		}, 10)
		st, ok := waitMerging(ctx, co, tableIDs(res), 60*time.Second)
		if !ok {
			t.Fatal("never saw a merge of the new tables in progress")
		}
		// The new holder's coordinator clock runs an hour ahead, so the
		// merge function's live lease looks expired to it and is taken
		// over while the function is still working: the function is now
		// the stale holder.
		skewed, err := firestorecoord.New(ctx, fs, firestorecoord.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		usurper := &pipeline.Pipeline{Lake: lake.Lake, Coordination: pipeline.Coordinate(skewed), Holder: "e2e-new-holder", LeaseTTL: e2eLeaseTTL}
		// The race may make the new holder's commit lose to the stale
		// holder's commit of the same batch; like the platform, retry.
		var mr pipeline.MergeResult
		for attempt := 1; ; attempt++ {
			mr, err = usurper.MergeTable(ctx, st.Table)
			if err == nil {
				break
			}
			if attempt == 5 {
				t.Fatalf("new holder's merge of %s, attempt %d: %v", st.Table, attempt, err)
			}
			t.Logf("new holder's merge of %s, attempt %d (retried): %v", st.Table, attempt, err)
		}
		if mr.Busy {
			t.Fatalf("new holder found %s busy; it should have taken the expired-looking lease", st.Table)
		}
		t.Logf("took %s over from %s (batch %d open); the new holder merged %d batches", st.Table, st.LeaseHolder, st.OpenBatchSeq, mr.Batches)
		waitQuiet(t, ctx, co, written, 90*time.Second)
		checkAll(t, ctx, lake, refs)
		t.Logf("the merge function logged %d lost leases", countLog(t, s, "function-merge", "lease lost"))
	})

	t.Run("no message was dead-lettered", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		var mu sync.Mutex
		var letters []string
		err := s.PubSub().Subscriber(SubscriptionDeadLetters).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			mu.Lock()
			letters = append(letters, fmt.Sprintf("%s %v", m.Data, m.Attributes))
			mu.Unlock()
		})
		if err != nil && rctx.Err() == nil {
			t.Fatalf("receive dead letters: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, l := range letters {
			t.Errorf("dead letter: %s", l)
		}
	})
}

// sourceLog is what a test wrote to a stack's source bucket.
type sourceLog struct {
	written map[string]int          // table → objects written (generations)
	refs    map[string]*dssim.Table // table → reference state
}

func newSourceLog() *sourceLog {
	return &sourceLog{written: map[string]int{}, refs: map[string]*dssim.Table{}}
}

// add records written files and the reference state of their tables.
func (l *sourceLog) add(files []dssim.File, tables map[string]*dssim.Table) {
	for _, f := range files {
		l.written[f.Table]++
	}
	maps.Copy(l.refs, tables)
}

func tableIDs(res *dssim.Result) []string {
	var ids []string
	for id := range res.Tables {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// waitMerging polls until one of tables has a live lease held by the merge
// function with a batch open, and returns that table's status.
func waitMerging(ctx context.Context, co *firestorecoord.Coordinator, tables []string, timeout time.Duration) (coord.TableStatus, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, id := range tables {
			st, err := co.Status(ctx, id)
			if err == nil && st.OpenBatchSeq != 0 && strings.HasPrefix(st.LeaseHolder, "merge-") && st.LeaseExpires.After(time.Now()) {
				return st, true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return coord.TableStatus{}, false
}

// waitQuiet waits until every table has merged all the objects written for
// it (one registry record per generation), nothing is pending and no batch
// is open. (A lease may still be held by a merge finishing.) A
// quarantined file fails the test at once.
func waitQuiet(t *testing.T, ctx context.Context, co *firestorecoord.Coordinator, written map[string]int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var why string
	for {
		why = ""
		for table, n := range written {
			st, err := co.Status(ctx, table)
			if errors.Is(err, coord.ErrNotFound) {
				why = table + " is not registered yet"
				break
			}
			if err != nil {
				t.Fatalf("status of %s: %v", table, err)
			}
			if st.Quarantined > 0 {
				files, _ := co.ListFiles(ctx, table, coord.StateQuarantined)
				for _, f := range files {
					t.Errorf("%s: quarantined %s: %s", table, f.Name, f.Reason)
				}
				t.FailNow()
			}
			if st.Pending != 0 || st.OpenBatchSeq != 0 {
				why = fmt.Sprintf("%s: %d pending, batch %d open (lease %q)", table, st.Pending, st.OpenBatchSeq, st.LeaseHolder)
				break
			}
			merged, err := co.ListFiles(ctx, table, coord.StateMerged)
			if err != nil {
				t.Fatalf("files of %s: %v", table, err)
			}
			if len(merged) != n {
				why = fmt.Sprintf("%s: %d of %d files merged", table, len(merged), n)
				break
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("not quiet after %s: %s", timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkAll compares every table with its reference.
func checkAll(t *testing.T, ctx context.Context, lake *pipeline.Pipeline, refs map[string]*dssim.Table) {
	t.Helper()
	for id, ref := range refs {
		tabs, err := lake.TableSet(id)
		if err != nil {
			t.Fatal(err)
		}
		checkState(t, ctx, tabs, ref)
		checkHistory(t, ctx, tabs, ref)
		v, err := cdc.Verify(ctx, tabs)
		if err != nil {
			t.Errorf("verify %s: %v", id, err)
		} else if !v.OK() {
			t.Errorf("verify %s: %d mismatches between state and history, first: %+v", id, v.Total, v.Mismatches[0])
		}
	}
}

// readTable reads every row of a Delta table's latest snapshot.
func readTable(t *testing.T, ctx context.Context, store objstore.Store) (value.StructType, [][]any) {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatalf("open %s: %v", store.URL(), err)
	}
	var rows [][]any
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			rows = append(rows, append([]any(nil), row...))
			return nil
		})
		if err != nil {
			t.Fatalf("read %s: %v", store.URL(), err)
		}
	}
	return snap.Schema(), rows
}

// columns returns the positions in schema of the named columns.
func columns(t *testing.T, schema value.StructType, names []string) []int {
	t.Helper()
	pos := make([]int, len(names))
	for i, n := range names {
		pos[i] = -1
		for j, f := range schema.Fields {
			if f.Name == n {
				pos[i] = j
			}
		}
		if pos[i] < 0 {
			t.Fatalf("column %s missing from %s", n, schema.SchemaString())
		}
	}
	return pos
}

func pick(row []any, pos []int) []any {
	out := make([]any, len(pos))
	for i, p := range pos {
		out[i] = row[p]
	}
	return out
}

// checkState compares the current-state table with the reference rows,
// source columns by key.
func checkState(t *testing.T, ctx context.Context, tabs cdc.TableSet, ref *dssim.Table) {
	t.Helper()
	schema, rows := readTable(t, ctx, tabs.State)
	var names []string
	for _, f := range ref.Schema.Fields {
		names = append(names, f.Name)
	}
	cols := columns(t, schema, names)
	keyPos := columns(t, ref.Schema, ref.Key)
	got := map[string][]any{}
	errs := 0
	report := func(format string, args ...any) {
		if errs++; errs <= 5 {
			t.Errorf(tabs.ID+": "+format, args...)
		}
	}
	for _, row := range rows {
		src := pick(row, cols)
		k := dssim.KeyString(pick(src, keyPos))
		if _, dup := got[k]; dup {
			report("key %s appears twice", k)
		}
		got[k] = src
	}
	for k, want := range ref.Rows {
		g, ok := got[k]
		if !ok {
			report("key %s missing", k)
			continue
		}
		for i := range want {
			if !sameValue(ref.Spec.Format, g[i], want[i]) {
				report("key %s column %s = %v (%T), want %v (%T)", k, names[i], g[i], g[i], want[i], want[i])
			}
		}
	}
	for k := range got {
		if _, ok := ref.Rows[k]; !ok {
			report("key %s present but deleted or never inserted at the source", k)
		}
	}
	if errs > 5 {
		t.Errorf("%s: %d differences in all (%d rows, %d expected)", tabs.ID, errs, len(rows), len(ref.Rows))
	}
}

// sameValue compares a state value with the reference. Avro files carry
// the source types, so values must be equal in type and value. JSON output
// carries no schema: the decoder infers long for every integer and keeps a
// timestamp as the text Datastream wrote, so for JSON sources a value of
// another type must render the same as the reference.
func sameValue(format dssim.Format, got, want any) bool {
	if value.EqualValues(got, want) {
		return true
	}
	return format != dssim.Avro && got != nil && want != nil && fmt.Sprint(got) == fmt.Sprint(want)
}

// checkHistory checks that the history holds each distinct event once.
func checkHistory(t *testing.T, ctx context.Context, tabs cdc.TableSet, ref *dssim.Table) {
	t.Helper()
	schema, rows := readTable(t, ctx, tabs.History)
	keyPos := columns(t, schema, ref.Key)
	order := columns(t, schema, []string{cdc.ColOrder})[0]
	distinct := map[string]bool{}
	for _, row := range rows {
		distinct[dssim.KeyString(append(pick(row, keyPos), row[order]))] = true
	}
	if len(distinct) != len(rows) {
		t.Errorf("%s: history holds %d rows for %d distinct (key, order) events", tabs.ID, len(rows), len(distinct))
	}
	if len(rows) != ref.Events {
		t.Errorf("%s: history holds %d events, the source emitted %d", tabs.ID, len(rows), ref.Events)
	}
}

// countLog counts the lines of a process's log holding substr.
func countLog(t *testing.T, s *Stack, name, substr string) int {
	t.Helper()
	n := 0
	scanLog(t, s, name, func(line string) {
		if strings.Contains(line, substr) {
			n++
		}
	})
	return n
}

// logEvents returns the JSON records of a function's log whose "event" is
// event.
func logEvents(t *testing.T, s *Stack, name, event string) []map[string]any {
	t.Helper()
	var out []map[string]any
	scanLog(t, s, name, func(line string) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["event"] == event {
			out = append(out, rec)
		}
	})
	return out
}

// scanLog calls fn with each line of a process's log.
func scanLog(t *testing.T, s *Stack, name string, fn func(line string)) {
	t.Helper()
	f, err := os.Open(s.logPath(name))
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read log %s: %v", name, err)
	}
}

// dumpLogs logs the tail of every process log, for a failed test.
func dumpLogs(t *testing.T, s *Stack) {
	paths, _ := filepath.Glob(filepath.Join(s.DataDir(), "*.log"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("--- %s (last %d lines)\n%s", filepath.Base(p), len(lines), strings.Join(lines, "\n"))
	}
}
