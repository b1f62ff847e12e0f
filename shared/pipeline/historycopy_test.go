package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// historyTable reads table shop.t's history: every row as JSON (all
// columns, the source date included), sorted; an event (key and order)
// found twice fails the test.
func historyTable(t *testing.T, ctx context.Context, p *Pipeline) (rows []string, files []delta.Add) {
	t.Helper()
	tabs, err := p.TableSet("shop.t")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := snap.Schema()
	var cols []string
	for _, f := range schema.Fields {
		cols = append(cols, f.Name)
	}
	seen := map[string]bool{}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.History, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			id := fmt.Sprint(row[schema.Index("id")], row[schema.Index(cdc.ColOrder)])
			if seen[id] {
				t.Fatalf("the history holds event %s twice", id)
			}
			seen[id] = true
			rows = append(rows, sourceJSON(t, schema, row, cols))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(rows)
	return rows, snap.Files()
}

// mergeBoth stages and merges the same files in batches (each a list of
// files merged together, in order) into two lakes, one that copies staged
// parts to the history and one that writes their rows; it returns both
// pipelines and the copying one's merge results.
func mergeBoth(t *testing.T, ctx context.Context, cfg config.Config, batches ...[]dssim.File) (copying, writing *Pipeline, results []MergeResult) {
	t.Helper()
	for _, noCopies := range []bool{false, true} {
		source := objstore.NewMemory()
		p := newPipeline(t, source, cfg)
		p.noHistoryCopies = noCopies
		for _, files := range batches {
			mr := stageAndMergeInto(t, ctx, p, source, files)
			if noCopies {
				if mr.Result.HistoryFilesCopied != 0 {
					t.Fatalf("%d history files copied with copies off", mr.Result.HistoryFilesCopied)
				}
				writing = p
			} else {
				copying = p
				results = append(results, mr)
			}
		}
	}
	return copying, writing, results
}

// sameHistory checks that the two pipelines' histories hold the same rows.
func sameHistory(t *testing.T, ctx context.Context, copying, writing *Pipeline, events int) {
	t.Helper()
	got, _ := historyTable(t, ctx, copying)
	want, _ := historyTable(t, ctx, writing)
	if len(want) != events {
		t.Fatalf("the written history holds %d events, want %d", len(want), events)
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("the history with copies differs at row %d of %d/%d:\n got  %s\n want %s", i, len(got), len(want), got[i], want[i])
			}
		}
		t.Fatalf("the history with copies holds %d rows, written %d", len(got), len(want))
	}
	_, gotState := stateRows(t, ctx, copying, "shop.t", "id")
	_, wantState := stateRows(t, ctx, writing, "shop.t", "id")
	if fmt.Sprint(gotState) != fmt.Sprint(wantState) {
		t.Fatalf("the state differs with copies:\n got  %v\n want %v", gotState, wantState)
	}
}

// TestTheHistoryTakesStagedPartsAsFiles: a staged part of one source date
// whose events are new is the history's data file as it is; the history
// holds the same rows as when they are written one by one, in a batch of
// one step and in one split by key range.
func TestTheHistoryTakesStagedPartsAsFiles(t *testing.T) {
	ctx := context.Background()
	for _, maxEvents := range []int64{0, 50} {
		t.Run(fmt.Sprintf("batch_max_events %d", maxEvents), func(t *testing.T) {
			files, _ := bulkLoad(5, 6, 40, 150)
			copying, writing, results := mergeBoth(t, ctx, config.Config{BatchMaxEvents: maxEvents}, files)
			mr := results[0]
			if maxEvents > 0 && mr.Steps < 5 {
				t.Fatalf("%d steps, want a batch split by key", mr.Steps)
			}
			if mr.Result.HistoryFilesCopied != len(files) || mr.Result.HistoryRowsCopied != 240 {
				t.Fatalf("%d history files (%d rows) copied, want the %d files' parts (240 rows)", mr.Result.HistoryFilesCopied, mr.Result.HistoryRowsCopied, len(files))
			}
			sameHistory(t, ctx, copying, writing, 240)
			_, adds := historyTable(t, ctx, copying)
			if len(adds) != len(files) {
				t.Fatalf("%d history files, want the %d copies alone", len(adds), len(files))
			}
			for _, a := range adds {
				if !strings.HasPrefix(a.Path, cdc.ColSourceDate+"=2026-01-05/part-00000-") || !a.DataChange || a.Stats == "" {
					t.Fatalf("history file %+v: want a data file of the source date's partition, with stats", a)
				}
			}
			// Merged staged files go with their key hashes.
			if _, err := copying.Maintain(ctx, "shop.t"); err != nil {
				t.Fatal(err)
			}
			err := copying.Lake.List(ctx, "_staging/shop.t/", "", func(info objstore.Info) error {
				if !strings.Contains(info.Name, "/_steps/") {
					t.Errorf("%s left in the staging area after maintenance", info.Name)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestATableWithoutAKeyCopiesItsParts: the history of a table without a
// primary key keeps every event as delivered (no re-delivery to find), so
// each of its files is copied.
func TestATableWithoutAKeyCopiesItsParts(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(13, 3, 40, 150)
	for i := range files {
		files[i].Data = []byte(strings.ReplaceAll(string(files[i].Data), `"primary_keys":["id"]`, `"primary_keys":[]`))
	}
	copying, writing, results := mergeBoth(t, ctx, config.Config{}, files)
	if n := results[0].Result.HistoryFilesCopied; n != len(files) {
		t.Fatalf("%d files copied, want %d", n, len(files))
	}
	got, _ := historyTable(t, ctx, copying)
	want, _ := historyTable(t, ctx, writing)
	if len(want) != 120 || !slices.Equal(got, want) {
		t.Fatalf("the history with copies (%d rows) differs from the written one (%d rows)", len(got), len(want))
	}
}

// TestSmallFilesAreWrittenNotCopied: below historyCopyMinEvents a file's
// rows are written (an object's round trips cost more than encoding them),
// and the merge reads no key hashes.
func TestSmallFilesAreWrittenNotCopied(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(5, 3, 40, 150)
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	p.historyCopyEvents = 0 // the default
	stageOnly(t, ctx, p, source, files...)
	var hashes []string
	err := p.Lake.List(ctx, "_staging/shop.t/", "", func(info objstore.Info) error {
		if strings.HasSuffix(info.Name, keyHashesSuffix) {
			hashes = append(hashes, info.Name)
		}
		return nil
	})
	if err != nil || len(hashes) != len(files) {
		t.Fatalf("%d key hash objects staged for %d files: %v", len(hashes), len(files), err)
	}
	for _, name := range hashes {
		if err := p.Lake.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	// Their key hashes gone, a merge that read them would copy nothing
	// either, but fail: it must not read them.
	mr, err := p.MergeTable(ctx, "shop.t")
	if err != nil {
		t.Fatal(err)
	}
	if mr.Result.HistoryFilesCopied != 0 || mr.Result.Events != 120 {
		t.Fatalf("%d files copied of %d events, want none: the files are small", mr.Result.HistoryFilesCopied, mr.Result.Events)
	}
	if rows, _ := historyTable(t, ctx, p); len(rows) != 120 {
		t.Fatalf("the history holds %d events, want 120", len(rows))
	}
}

// TestARedeliveredEventIsNeverCopied: a file whose events another file of
// the batch, or the history, already holds is written row by row, so that
// the history keeps each event once; the other files are still copied.
func TestARedeliveredEventIsNeverCopied(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(7, 4, 40, 150)
	again := files[1] // the same events under another name
	again.Name = strings.Replace(again.Name, "f01", "f01again", 1)
	for _, maxEvents := range []int64{0, 50} {
		t.Run(fmt.Sprintf("in the same batch, batch_max_events %d", maxEvents), func(t *testing.T) {
			copying, writing, results := mergeBoth(t, ctx, config.Config{BatchMaxEvents: maxEvents}, append(slices.Clone(files), again))
			if n := results[0].Result.HistoryFilesCopied; n != len(files)-1 {
				t.Fatalf("%d files copied, want all but the two with the same events (%d)", n, len(files)-1)
			}
			sameHistory(t, ctx, copying, writing, 160)
		})
		t.Run(fmt.Sprintf("in a later batch, batch_max_events %d", maxEvents), func(t *testing.T) {
			later, _ := bulkLoad(8, 1, 40, 150)
			later[0].Name = strings.Replace(later[0].Name, "f00", "later", 1)
			later[0] = jsonlFile("later", 10_000, payloadsOf(t, later[0])...) // orders after the first batch
			copying, writing, results := mergeBoth(t, ctx, config.Config{BatchMaxEvents: maxEvents}, files, []dssim.File{again, later[0]})
			if n := results[1].Result.HistoryFilesCopied; n != 1 {
				t.Fatalf("%d files copied in the second batch, want the new one alone", n)
			}
			if results[1].Result.Redelivered != 40 {
				t.Fatalf("%d events found re-delivered, want the 40 of the file", results[1].Result.Redelivered)
			}
			sameHistory(t, ctx, copying, writing, 200)
		})
	}
}

// payloadsOf returns the payloads of a jsonlFile.
func payloadsOf(t *testing.T, f dssim.File) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
		var ev struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(ev.Payload))
	}
	return out
}

// TestAPartOfTwoSourceDatesIsWrittenRowByRow: a part whose events span
// midnight is staged with its date column, and its rows are written to
// both partitions.
func TestAPartOfTwoSourceDatesIsWrittenRowByRow(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(9, 3, 40, 150)
	midnight := jsonlFile("midnight", 5_000, `{"id":"m1","n":1}`, `{"id":"m2","n":2}`)
	midnight.Data = []byte(strings.Replace(string(midnight.Data), `"source_timestamp":"2026-01-05T10:00:01.000Z"`, `"source_timestamp":"2026-01-06T00:00:01.000Z"`, 1))
	copying, writing, results := mergeBoth(t, ctx, config.Config{}, append(files, midnight))
	if n := results[0].Result.HistoryFilesCopied; n != len(files) {
		t.Fatalf("%d files copied, want the %d of one date", n, len(files))
	}
	sameHistory(t, ctx, copying, writing, 122)
	rows, _ := historyTable(t, ctx, copying)
	dates := map[string]int{}
	for _, r := range rows {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		dates[fmt.Sprint(m[cdc.ColSourceDate])]++
	}
	if dates["2026-01-06"] != 1 || dates["2026-01-05"] != 121 {
		t.Fatalf("history rows by source date %v, want 121 on 2026-01-05 and 1 on 2026-01-06", dates)
	}
}

// TestCopiedFilesSurviveACrashBetweenSteps: the last step of a batch split
// by key copies the files to the history, and the steps before it leave
// their rows out; a crash at any commit, and a restart, leaves the history
// with each event once (the plan names the copied files) and the state
// complete.
func TestCopiedFilesSurviveACrashBetweenSteps(t *testing.T) {
	ctx := context.Background()
	files, want := bulkLoad(11, 6, 40, 150)
	cfg := config.Config{BatchMaxEvents: 50}
	commits := countCommits(t, ctx, cfg, nil, files)
	for crashAt := 1; crashAt <= commits; crashAt++ {
		t.Run(fmt.Sprintf("crash at commit %d of %d", crashAt, commits), func(t *testing.T) {
			p2, mr := crashAndRestart(t, ctx, cfg, nil, files, crashAt)
			if copied := mr.Result.HistoryFilesCopied; copied != 0 && copied != len(files) {
				t.Fatalf("the restart copied %d files, want all %d or none", copied, len(files))
			}
			rows, _ := historyTable(t, ctx, p2)
			if len(rows) != 240 {
				t.Fatalf("the history holds %d events, want 240", len(rows))
			}
			wantLastReads(t, ctx, p2, want)
		})
	}
}

// countCommits returns how many table commits staging the batches before
// and merging files as one batch makes.
func countCommits(t *testing.T, ctx context.Context, cfg config.Config, before [][]dssim.File, files []dssim.File) int {
	t.Helper()
	commits := 0
	lake := &crashingStore{Store: objstore.NewMemory(), match: func(n string) bool {
		if isTableCommit(n) {
			commits++
		}
		return false
	}}
	p, source := crashPipeline(t, lake, cfg, before)
	stageOnly(t, ctx, p, source, files...)
	lake.armed.Store(true)
	if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
		t.Fatal(err)
	}
	return commits
}

func isTableCommit(name string) bool {
	return strings.HasPrefix(name, "shop/t") && strings.Contains(name, "/_delta_log/") && strings.HasSuffix(name, ".json")
}

// crashPipeline is a pipeline copying every file to the history (no
// minimum size) on lake, with the batches before merged.
func crashPipeline(t *testing.T, lake *crashingStore, cfg config.Config, before [][]dssim.File) (*Pipeline, objstore.Store) {
	t.Helper()
	ctx := context.Background()
	source := objstore.NewMemory()
	local, err := coord.NewLocal(lake.Store, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(local), Config: cfg, Holder: "crashy", historyCopyEvents: 1}
	for _, files := range before {
		stageOnly(t, ctx, p, source, files...)
		if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
			t.Fatal(err)
		}
	}
	return p, source
}

// crashAndRestart merges the batches before, then stages files and merges
// them with a crash at the crashAt-th table commit, and again on a
// restarted pipeline, whose merge result it returns.
func crashAndRestart(t *testing.T, ctx context.Context, cfg config.Config, before [][]dssim.File, files []dssim.File, crashAt int) (*Pipeline, MergeResult) {
	t.Helper()
	commits := 0
	lake := &crashingStore{Store: objstore.NewMemory(), match: func(n string) bool {
		if isTableCommit(n) {
			commits++
			return commits == crashAt
		}
		return false
	}}
	p, source := crashPipeline(t, lake, cfg, before)
	stageOnly(t, ctx, p, source, files...)
	lake.armed.Store(true)
	if _, err := p.MergeTable(ctx, "shop.t"); err == nil {
		t.Fatal("the crash did not happen")
	}
	lake.armed.Store(false)
	p2 := &Pipeline{Lake: lake.Store, Sources: oneSource{source}, Coordination: p.Coordination, Config: cfg, Holder: "restarted", historyCopyEvents: 1}
	mr, err := p2.MergeTable(ctx, "shop.t")
	if err != nil {
		t.Fatal(err)
	}
	return p2, mr
}

// TestAStepThatFindsACopiedEventInTheHistoryWritesTheFile: a batch in key
// ranges of two files, one of which carries an event an earlier batch
// merged, whose key a middle step takes. That step breaks the file's copy:
// it writes the file's rows of its own keys and of the steps before it,
// the steps after it write the file's rows, and the last step copies the
// other file. With a crash at any commit and a restart, the history holds
// each event once, as a merge without copies writes it.
func TestAStepThatFindsACopiedEventInTheHistoryWritesTheFile(t *testing.T) {
	ctx := context.Background()
	first, _ := bulkLoad(21, 2, 40, 150)
	fresh, _ := bulkLoad(22, 2, 60, 400)
	mixed := jsonlFile("mixed", 10_000, payloadsOf(t, fresh[0])...)
	other := jsonlFile("other", 20_000, payloadsOf(t, fresh[1])...)
	// The event of the first batch with the median key, delivered again.
	lines := strings.Split(strings.TrimSpace(string(first[1].Data)), "\n")
	slices.SortFunc(lines, func(a, b string) int { return strings.Compare(lineID(t, a), lineID(t, b)) })
	mixed.Data = append(mixed.Data, lines[len(lines)/2]+"\n"...)
	cfg := config.Config{BatchMaxEvents: 50}
	before := [][]dssim.File{first}
	files := []dssim.File{mixed, other}

	copying, writing, results := mergeBoth(t, ctx, cfg, first, files)
	if n := results[1].Result.HistoryRowsCopied; n != 60 {
		t.Fatalf("%d history rows copied in the second batch, want the 60 of the file without the event merged before", n)
	}
	if results[1].Result.Redelivered != 1 {
		t.Fatalf("%d events found re-delivered, want 1", results[1].Result.Redelivered)
	}
	sameHistory(t, ctx, copying, writing, 200)
	want, _ := historyTable(t, ctx, writing)

	commits := countCommits(t, ctx, cfg, before, files)
	for crashAt := 1; crashAt <= commits; crashAt++ {
		t.Run(fmt.Sprintf("crash at commit %d of %d", crashAt, commits), func(t *testing.T) {
			p2, _ := crashAndRestart(t, ctx, cfg, before, files, crashAt)
			got, _ := historyTable(t, ctx, p2)
			if !slices.Equal(got, want) {
				t.Fatalf("the history holds %d events, want the %d a merge without copies writes", len(got), len(want))
			}
			_, gotState := stateRows(t, ctx, p2, "shop.t", "id")
			_, wantState := stateRows(t, ctx, writing, "shop.t", "id")
			if !maps.Equal(gotState, wantState) {
				t.Fatalf("the state differs from a merge without copies")
			}
		})
	}
}

// lineID is the id of a JSONL line's payload.
func lineID(t *testing.T, line string) string {
	t.Helper()
	var ev struct {
		Payload struct {
			ID string `json:"id"`
		} `json:"payload"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Payload.ID
}

// TestACopyPlanStopsAnEarlierRelease: a plan whose first step copies files
// to the history fails to parse in the releases before copies (which read
// a plan by key from an object) and in those before key ranges.
func TestACopyPlanStopsAnEarlierRelease(t *testing.T) {
	plan := stepPlan{Seq: 3, Files: []string{"a", "b"}, KeyCode: cdc.RangeCodeVersion, Bounds: [][]byte{{1}, {2}}, Copied: []string{"b"}}
	body, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	// The release before copies: a plan by key is an object.
	var prev struct {
		Steps json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(body, &prev); err != nil {
		t.Fatal(err)
	}
	var parts [][]partRef
	if prev.Steps[0] == '{' || json.Unmarshal(prev.Steps, &parts) == nil {
		t.Fatalf("the release before copies reads the plan's steps %s", prev.Steps)
	}
	var back stepPlan
	if err := json.Unmarshal(body, &back); err != nil || !slices.Equal(back.Copied, plan.Copied) || len(back.Bounds) != 2 || back.CopyFirst {
		t.Fatalf("the plan reads back as %+v, %v", back, err)
	}
	// The release that copied in the first step reads a string as its
	// steps: it must not read this plan, whose first step leaves the
	// copies to the last.
	if prev.Steps[0] == '"' {
		t.Fatalf("a release that copies in the first step reads the plan's steps %s", prev.Steps)
	}
	// A plan of that release is still followed as it was made.
	plan.CopyFirst = true
	old, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	back = stepPlan{}
	if err := json.Unmarshal(old, &back); err != nil || !back.CopyFirst || !slices.Equal(back.Copied, plan.Copied) {
		t.Fatalf("a plan that copies in the first step reads back as %+v, %v", back, err)
	}
	// Without copies, a plan by key is written as before.
	plain, err := json.Marshal(stepPlan{Seq: 3, Files: []string{"a"}, KeyCode: cdc.RangeCodeVersion, Bounds: [][]byte{{1}}})
	if err != nil || !strings.Contains(string(plain), keyPlanSteps) || strings.Contains(string(plain), "copied") {
		t.Fatalf("a plan by key without copies: %s, %v", plain, err)
	}
}

// TestCollidingRunsAgreeWithAMap: the runs collidingRuns names are those
// that hold a value held twice over all runs, as a count of every value
// says; intersect agrees with a set. The last seeds hold enough values to
// be merged in ranges on several cores, with values repeated at and next
// to the ranges' bounds.
func TestCollidingRunsAgreeWithAMap(t *testing.T) {
	for seed := range uint64(230) {
		rng := rand.New(rand.NewPCG(seed, 3))
		big := seed >= 200
		runs := make([][]uint64, rng.IntN(6))
		if big {
			runs = make([][]uint64, 2+rng.IntN(20))
		}
		count := map[uint64]int{}
		for r := range runs {
			n := rng.IntN(20)
			if big {
				n = collideRangeValues/len(runs) + rng.IntN(5000)
			}
			for range n {
				v := rng.Uint64N(60)
				if big {
					v = rng.Uint64()
				}
				runs[r] = append(runs[r], v)
				count[v]++
			}
			if big && rng.IntN(2) == 0 && len(runs[r]) > 0 { // one value again, in some run
				v := runs[r][rng.IntN(len(runs[r]))]
				o := rng.IntN(len(runs))
				runs[o] = append(runs[o], v)
				count[v]++
				slices.Sort(runs[o])
			}
			slices.Sort(runs[r])
		}
		if big && seed%2 == 0 { // a bound of 2..8 ranges, or next to it, in runs 0 and 1
			d := uint64(2 + seed%7)
			v := uint64(1+rng.Uint64N(d-1))*(math.MaxUint64/d) + seed%3 - 1
			for o := range 2 {
				runs[o] = append(runs[o], v)
				count[v]++
				slices.Sort(runs[o])
			}
		}
		want := map[int]bool{}
		for r, run := range runs {
			for _, v := range run {
				if count[v] > 1 {
					want[r] = true
				}
			}
		}
		got := map[int]bool{}
		for _, r := range collidingRuns(runs) {
			if got[r] {
				t.Fatalf("seed %d: run %d named twice", seed, r)
			}
			got[r] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("seed %d: colliding runs %v, want %v (runs %v)", seed, got, want, runs)
		}
		if len(runs) >= 2 {
			set := map[uint64]bool{}
			for _, v := range runs[0] {
				set[v] = true
			}
			shared := slices.ContainsFunc(runs[1], func(v uint64) bool { return set[v] })
			if intersect(runs[0], runs[1]) != shared {
				t.Fatalf("seed %d: intersect(%v, %v) = %v", seed, runs[0], runs[1], !shared)
			}
		}
	}
}

// TestKeyHashesThatDoNotFitTheirPartCopyNothing: a part's key hashes that
// are not one per event, or not sorted, prove nothing: the batch's rows are
// written, each event once.
func TestKeyHashesThatDoNotFitTheirPartCopyNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		body func(old []byte) []byte
	}{
		{"one hash short", func(old []byte) []byte { return old[8:] }},
		{"out of order", func(old []byte) []byte {
			b := slices.Clone(old)
			copy(b[:8], old[len(old)-8:])
			copy(b[len(b)-8:], old[:8])
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, _ := bulkLoad(17, 3, 40, 150)
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{})
			stageOnly(t, ctx, p, source, files...)
			var name string
			err := p.Lake.List(ctx, "_staging/shop.t/", "", func(info objstore.Info) error {
				if strings.HasSuffix(info.Name, keyHashesSuffix) && name == "" {
					name = info.Name
				}
				return nil
			})
			if err != nil || name == "" {
				t.Fatalf("no key hashes staged: %v", err)
			}
			old, err := objstore.ReadAll(ctx, p.Lake, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := objstore.WriteBytes(ctx, p.Lake, name, tc.body(old), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			mr, err := p.MergeTable(ctx, "shop.t")
			if err != nil {
				t.Fatal(err)
			}
			if mr.Result.HistoryFilesCopied != 0 {
				t.Fatalf("%d files copied on hashes that prove nothing", mr.Result.HistoryFilesCopied)
			}
			if rows, _ := historyTable(t, ctx, p); len(rows) != 120 {
				t.Fatalf("the history holds %d events, want 120", len(rows))
			}
		})
	}
}

// TestAStagedPartAndItsKeyHashesStandOrFallTogether: a part's key hashes
// are written beside the part; when either write fails, staging fails
// (to be retried) and leaves neither object behind, and the retry stages
// the file whole.
func TestAStagedPartAndItsKeyHashesStandOrFallTogether(t *testing.T) {
	for _, failing := range []string{keyHashesSuffix, ".parquet"} {
		t.Run("failing "+failing, func(t *testing.T) {
			ctx := context.Background()
			files, want := bulkLoad(17, 2, 40, 150)
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{})
			lake := p.Lake
			crashing := &crashingStore{Store: lake, match: func(name string) bool {
				return strings.HasPrefix(name, "_staging/") && strings.HasSuffix(name, failing)
			}}
			crashing.armed.Store(true)
			p.Lake = crashing
			notes := write(t, ctx, source, files)
			if _, err := p.Stage(ctx, notes[0]); !errors.Is(err, errCrash) {
				t.Fatalf("stage with the %s write failing: %v, want the failure", failing, err)
			}
			if crashing.hits.Load() == 0 {
				t.Fatalf("no %s write was tried", failing)
			}
			err := lake.List(ctx, "_staging/", "", func(info objstore.Info) error {
				if strings.HasSuffix(info.Name, keyHashesSuffix) || strings.HasSuffix(info.Name, ".parquet") {
					t.Errorf("left behind by the failed staging: %s", info.Name)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			crashing.armed.Store(false)
			for _, n := range notes {
				if res, err := p.Stage(ctx, n); err != nil || res.Quarantined != "" {
					t.Fatalf("stage %s again: %+v %v", n.Name, res, err)
				}
			}
			if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
				t.Fatal(err)
			}
			wantLastReads(t, ctx, p, want)
		})
	}
}
