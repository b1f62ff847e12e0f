package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/gcp"
	"github.com/dsdelta/dsdelta/shared/value"
)

// The backfill of TestABackfillMergesWithinAFunctionsMemory.
const (
	// mergeMemoryMiB is the memory of the merge function the test plays:
	// the promise that a function of 512 MiB merges a batch of any size
	// (memory is bounded by batch_max_events, docs/internals.md "Memory").
	mergeMemoryMiB = 512
	// backfillMaxEvents is batch_max_events: the default, so that the test
	// holds the configuration a deployment gets to the promise above. The
	// merge's live memory follows it: collecting each time the heap
	// doubled, this backfill peaked at about 220 MiB at 50000 and 330 to
	// 360 MiB at 100000.
	backfillMaxEvents = config.DefaultBatchMaxEvents
)

// backfillFiles are the events of each backfill file: 400k in all, the
// largest more than twice batch_max_events. The merge before issue 12
// (aaa08fe) took every staged file into one batch (up to 500 files or 256 MB
// of staged Parquet, far above these) and held all of it: on this test,
// with the same memory limit, its process peaked at 748 MiB (1038 MiB
// without one).
func backfillFiles() []int { return []int{220_000, 100_000, 50_000, 30_000} }

// TestABackfillMergesWithinAFunctionsMemory pushes a backfill through the
// functions, each served as in the cloud with the GOMEMLIMIT terraform
// gives a 512 MiB function, and checks that the merge function's peak RSS
// stays within that memory, that the largest batch was merged in steps, and
// that the tables equal the source. Under the limit the merge collects
// when its heap reaches it (package memlimit), so its peak sits near the
// limit: about 420 MiB here, where it was 330 to 360 MiB collecting each
// time the heap doubled.
//
// It starts a stack of its own rather than being a step of
// TestStackConvergesToTheSourceUnderFaults: the peak RSS it asserts is the
// merge process's high-water mark, which must be this backfill's alone (the
// other test's merge server has merged other tables and been killed and
// restarted), and it needs its own configuration (the default batch
// bounds, a memory limit, no compaction schedule) where the other test
// wants two-file batches. The stack costs some 15 seconds more.
func TestABackfillMergesWithinAFunctionsMemory(t *testing.T) {
	mergeWithinMemory(t, backfillFiles(), true)
}

// TestManySmallFilesMergeWithinAFunctionsMemory is the backfill above as a
// backlog of small files (100 of 4,000 events, each under the size the
// history takes as a file): the merge writes their history rows itself,
// and each key-range step of the one batch takes a share of every staged
// part, reading the parts' small row groups (partGroupRows) rather than
// holding what it decoded past its range for the next step. The functions
// run as the other test's, in a 512 MiB function; collecting each time the
// heap doubled (no GOMEMLIMIT), this merge peaked at about 410 MiB.
func TestManySmallFilesMergeWithinAFunctionsMemory(t *testing.T) {
	files := make([]int, 100)
	for i := range files {
		files[i] = 4_000
	}
	mergeWithinMemory(t, files, false)
}

// mergeWithinMemory stages a backfill of files (events per file) through a
// stack of its own whose functions run as in a function of mergeMemoryMiB,
// then has the merge function take it all at once, and checks its steps,
// its peak RSS against mergeMemoryMiB and the tables; copies says that the
// staged files are large enough for the history to take them as files.
func mergeWithinMemory(t *testing.T, events []int, copies bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// No compaction schedule: the merge is under test, and on two cores
	// compacting beside it would only slow the run.
	s := startStack(t, ctx, Options{
		// Terraform's limit for a function of mergeMemoryMiB: four fifths.
		FunctionEnv: []string{fmt.Sprintf("GOMEMLIMIT=%dMiB", mergeMemoryMiB*4/5)},
	})
	opts := s.Options()
	_, co, lake := stackClients(t, ctx, s)

	// The merge is held back until the whole backfill is staged, so that
	// it finds all of it pending at once, as it does when a backfill lands
	// faster than it is merged: the case that needed the old merge's
	// largest batch. Its server is down meanwhile, so the wake-ups wait in
	// Pub/Sub; once it is up again, its peak RSS is that of this backfill.
	if err := s.KillFunction(FuncMerge); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	files, ref, err := backfill(7, events)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := writeObject(ctx, s.Storage(), opts.SourceBucket, f.Name, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	written := map[string]int{ref.Spec.ID(): len(files)}
	t.Logf("wrote %d files of %d events in all (%d MiB) in %s", len(files), ref.Events, sizeOf(files)>>20, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	waitStaged(t, ctx, co, ref.Spec.ID(), len(files), 2*time.Minute)
	t.Logf("onfile staged them in %s", time.Since(start).Round(time.Millisecond))
	// One onfile process stages the files at once here, where the cloud
	// gives each its own instance: its memory is shown, not checked.
	if rss, err := s.FunctionPeakRSS(FuncOnFile); err == nil {
		t.Logf("onfile peak RSS %d MiB", rss>>20)
	}

	start = time.Now()
	if err := s.RestartFunction(ctx, FuncMerge); err != nil {
		t.Fatal(err)
	}
	// The wake-ups onfile published are redelivered with backoff; one more
	// saves waiting for it.
	wake, err := json.Marshal(gcp.WakeMessage{Table: ref.Spec.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PubSub().Publisher(TopicMerge).Publish(ctx, &pubsub.Message{Data: wake}).Get(ctx); err != nil {
		t.Fatalf("wake the merge: %v", err)
	}
	waitQuiet(t, ctx, co, written, 3*time.Minute)
	merged := time.Since(start)
	rss, rssErr := s.FunctionPeakRSS(FuncMerge)
	t.Logf("merge took %s", merged.Round(time.Millisecond))

	steps := logEvents(t, s, "function-merge", "step")
	t.Logf("the merge applied %d batches, in %d steps where a batch had several", len(logEvents(t, s, "function-merge", "merged")), len(steps))
	total := 0
	for _, n := range events {
		total += n
	}
	if want := (total + backfillMaxEvents - 1) / backfillMaxEvents; len(logEvents(t, s, "function-merge", "steps")) == 0 || len(steps) < want {
		t.Errorf("the merge logged %d steps, want at least %d: the %d events were not merged in steps of %d", len(steps), want, total, backfillMaxEvents)
	}
	for _, st := range steps {
		if n, _ := st["events"].(float64); n > backfillMaxEvents {
			t.Errorf("a step of %v events, bound %d: %v", st["events"], backfillMaxEvents, st)
		}
	}
	// A backfill's large staged parts are new events of one source date:
	// the history takes them as files, copied within the bucket (a rewrite
	// on the GCS emulator), not decoded and encoded again. Small ones are
	// written into the history's own files.
	copied := 0.0
	for _, plan := range logEvents(t, s, "function-merge", "steps") {
		n, _ := plan["files_copied_to_history"].(float64)
		copied += n
	}
	if copies && copied == 0 {
		t.Errorf("no batch plan copied a staged file to the history")
	}
	if !copies && copied != 0 {
		t.Errorf("batch plans copied %v small staged files to the history", copied)
	}

	switch {
	case errors.Is(rssErr, errors.ErrUnsupported):
		t.Logf("merge peak RSS not measured: %v", rssErr)
	case rssErr != nil:
		t.Errorf("merge peak RSS: %v", rssErr)
	case rss > mergeMemoryMiB<<20:
		t.Errorf("the merge function's peak RSS was %d MiB, over the %d MiB of the function", rss>>20, mergeMemoryMiB)
	default:
		t.Logf("merge peak RSS %d MiB (function memory %d MiB)", rss>>20, mergeMemoryMiB)
	}

	start = time.Now()
	checkAll(t, ctx, lake, map[string]*dssim.Table{ref.Spec.ID(): ref})
	t.Logf("checked the tables in %s", time.Since(start).Round(time.Millisecond))
}

// waitStaged waits until n files of table are staged and none is
// quarantined.
func waitStaged(t *testing.T, ctx context.Context, co *firestorecoord.Coordinator, tableID string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := co.Status(ctx, tableID)
		if err != nil && !errors.Is(err, coord.ErrNotFound) {
			t.Fatalf("status of %s: %v", tableID, err)
		}
		if st.Quarantined > 0 {
			t.Fatalf("%s: %d files quarantined", tableID, st.Quarantined)
		}
		if st.Pending == int64(n) {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: %d of %d files staged after %s", tableID, st.Pending, n, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func sizeOf(files []dssim.File) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f.Data))
	}
	return n
}

// backfill writes the backfill of a MySQL table keyed by random strings, as
// Datastream's JSON lines, one file per entry of events, and returns the
// files with the reference state. Random keys are the hard case for the
// merge: every step's keys fall within the key range of every file the
// table already has, so no file is pruned. (dssim numbers its keys.)
// The columns and their values are dssim's MySQL table's, so the JSON
// decoder's types compare with the reference as checkState expects.
func backfill(seed uint64, events []int) ([]dssim.File, *dssim.Table, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	spec := dssim.TableSpec{Source: dssim.MySQL, Database: "shop", Table: "backfill", Format: dssim.JSONL}
	ref := &dssim.Table{
		Spec: spec, Key: []string{"id"}, Rows: map[string][]any{},
		Schema: value.StructType{Fields: []value.Field{
			{Name: "id", Type: value.String, Nullable: true},
			{Name: "email", Type: value.String, Nullable: true},
			{Name: "name", Type: value.String, Nullable: true},
			{Name: "balance", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
			{Name: "created_at", Type: value.Timestamp, Nullable: true},
			{Name: "is_active", Type: value.Integer, Nullable: true},
			{Name: "notes", Type: value.String, Nullable: true},
		}},
	}
	firstNames := []string{"Ada", "Grace", "Linus", "Barbara", "Edsger", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Zoë", "José"}
	lastNames := []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Allen", "Thompson", "Hamilton", "Ritchie", "Perlman", "Ñúñez", "O'Brien"}
	notes := []string{"vip", "call back", "línea 2", "multi\nline", `quote "x"`, "🙂 emoji"}
	const schemaKey = "5f1ab3c0e2d94b7a8c6e0f1d2a3b4c5d6e7f8091"
	taskStart := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	var files []dssim.File
	n := 0
	for fi, count := range events {
		var buf bytes.Buffer
		buf.Grow(count * 750) // about the size of a line
		for range count {
			// A bijection of n (splitmix64's finaliser), so keys never repeat.
			x := uint64(n) + 0x9e3779b97f4a7c15
			x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
			x = (x ^ (x >> 27)) * 0x94d049bb133111eb
			id := fmt.Sprintf("%016x", x^(x>>31))
			var note any
			if rng.IntN(3) != 0 {
				note = notes[rng.IntN(len(notes))]
			}
			row := []any{
				id,
				"user" + id[:6] + "+" + strconv.Itoa(rng.IntN(1000)) + "@example.com",
				firstNames[rng.IntN(len(firstNames))] + " " + lastNames[rng.IntN(len(lastNames))],
				value.Decimal{Unscaled: big.NewInt(rng.Int64N(2_000_000_00) - 50_000_00), Scale: 2},
				value.Micros(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + rng.Int64N(700*86400*1_000_000)),
				int32(rng.IntN(2)),
				note,
			}
			ref.Rows[dssim.KeyString(row[:1])] = row
			// A backfill reads a few thousand rows a second; MySQL's
			// source_timestamp has whole seconds.
			read := taskStart.Add(time.Duration(n) * 400 * time.Microsecond)
			src := read.Truncate(time.Second)
			payload, err := json.Marshal(backfillPayload{
				ID: id, Email: row[1].(string), Name: row[2].(string), Balance: json.Number(row[3].(value.Decimal).String()),
				CreatedAt: row[4].(value.Micros).Time().Format("2006-01-02T15:04:05.000000Z"), IsActive: row[5].(int32), Notes: note,
			})
			if err != nil {
				return nil, nil, fmt.Errorf("render row %d: %w", n, err)
			}
			fmt.Fprintf(&buf, `{"uuid":"%s-0000-4000-8000-%012x","read_timestamp":"%s","source_timestamp":"%s","object":"%s",`+
				`"read_method":"mysql-backfill-fulldump","stream_name":"projects/545418958905/locations/us-central1/streams/dsdelta-sim",`+
				`"schema_key":"%s","sort_keys":[%d,"",0],"source_metadata":{"table":"%s","database":"%s","primary_keys":["id"],`+
				`"log_file":"","log_position":0,"change_type":"INSERT","is_deleted":false},"payload":%s}`+"\n",
				schemaKey[:8], fi<<32|n, read.Format("2006-01-02T15:04:05.000Z"), src.Format("2006-01-02T15:04:05.000Z"), spec.Object(),
				schemaKey, src.UnixMilli(), spec.Table, spec.Database, payload)
			n++
		}
		// Backfill files go under the backfill task's start time.
		name := fmt.Sprintf("%s/%s/%s_mysql-backfill-fulldump_%d_%d_%d.jsonl",
			spec.Object(), taskStart.Format("2006/01/02/15/04"), schemaKey, int32(rng.Uint32()), fi%8, fi)
		files = append(files, dssim.File{Name: name, Data: buf.Bytes(), Table: spec.ID(), Events: count})
	}
	ref.Events = n
	return files, ref, nil
}

// backfillPayload is a backfill row's payload, in the source's column
// order, with Datastream's JSON forms: a decimal as a bare number, a
// timestamp as ISO text.
type backfillPayload struct {
	ID        string      `json:"id"`
	Email     string      `json:"email"`
	Name      string      `json:"name"`
	Balance   json.Number `json:"balance"`
	CreatedAt string      `json:"created_at"`
	IsActive  int32       `json:"is_active"`
	Notes     any         `json:"notes"`
}
