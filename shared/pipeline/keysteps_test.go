package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/dsdelta/dsdelta/shared/value"
)

// bulkLoad is files of random string keys, some read again by later files
// with other values, as a restarted backfill chunk does; want is each
// key's last value of n.
func bulkLoad(seed uint64, files, perFile, keys int) ([]dssim.File, map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int{}
	var out []dssim.File
	for f := range files {
		var payloads []string
		for i := range perFile {
			id := fmt.Sprintf("k%08x", rng.Uint32()%uint32(keys)*2654435761)
			n := f*perFile + i
			payloads = append(payloads, fmt.Sprintf(`{"id":%q,"n":%d}`, id, n))
			want[id] = n // positions grow with f and i: the later read wins
		}
		out = append(out, jsonlFile(fmt.Sprintf("f%02d", f), f*perFile, payloads...))
	}
	return out, want
}

// wantLastReads checks that table shop.t holds each key of want with its
// last read (see bulkLoad), and no other.
func wantLastReads(t *testing.T, ctx context.Context, p *Pipeline, want map[string]int) {
	t.Helper()
	_, rows := stateRows(t, ctx, p, "shop.t", "id")
	if len(rows) != len(want) {
		t.Fatalf("%d state rows, want %d keys", len(rows), len(want))
	}
	for id, n := range want {
		key := fmt.Sprintf(`{"id":%q}`, id)
		if got, wantRow := rows[key], fmt.Sprintf(`{"id":%q,"n":%d}`, id, n); got != wantRow {
			t.Fatalf("row of %s = %s, want %s", id, got, wantRow)
		}
	}
}

// stageAndMerge stages files into a new pipeline of configuration cfg and
// merges table shop.t.
func stageAndMerge(t *testing.T, ctx context.Context, files []dssim.File, cfg config.Config) (*Pipeline, MergeResult) {
	t.Helper()
	source := objstore.NewMemory()
	p := newPipeline(t, source, cfg)
	return p, stageAndMergeInto(t, ctx, p, source, files)
}

// stageAndMergeInto stages files, written to source, by p and merges
// table shop.t.
func stageAndMergeInto(t *testing.T, ctx context.Context, p *Pipeline, source objstore.Store, files []dssim.File) MergeResult {
	t.Helper()
	for _, n := range write(t, ctx, source, files) {
		if res, err := p.Stage(ctx, n); err != nil || res.Quarantined != "" {
			t.Fatalf("stage %s: %+v %v", n.Name, res, err)
		}
	}
	mr, err := p.MergeTable(ctx, "shop.t")
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

// TestABulkLoadInOneBatchIsMergedInKeyRangesWritingEachRowOnce: a batch
// larger than batch_max_events is merged in steps by key range: every
// step's state file holds keys apart from the others', no step reads or
// rewrites another's file, and the table is each key's last read.
func TestABulkLoadInOneBatchIsMergedInKeyRangesWritingEachRowOnce(t *testing.T) {
	ctx := context.Background()
	files, want := bulkLoad(3, 6, 40, 150)
	p, mr := stageAndMerge(t, ctx, files, config.Config{BatchMaxEvents: 50})
	if mr.Batches != 1 || mr.Steps < 5 {
		t.Fatalf("%d batches in %d steps, want one batch of 240 events in steps of at most 50", mr.Batches, mr.Steps)
	}
	if mr.Result.FilesRead != 0 || mr.Result.FilesRewritten != 0 || mr.Result.RowsReencoded != 0 {
		t.Fatalf("a step read %d and rewrote %d files (%d rows) of other steps: %+v", mr.Result.FilesRead, mr.Result.FilesRewritten, mr.Result.RowsReencoded, mr.Result)
	}
	wantLastReads(t, ctx, p, want)
	// The steps' files hold key ranges apart from each other.
	_, snap := stateSnapshot(t, ctx, p, "shop.t")
	type bounds struct{ lo, hi string }
	var bs []bounds
	for _, f := range snap.Files() {
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, ok := st.MinMax("id", value.String)
		if !ok {
			t.Fatalf("state file %s has no key bounds", f.Path)
		}
		bs = append(bs, bounds{lo.(string), hi.(string)})
	}
	slices.SortFunc(bs, func(a, b bounds) int { return strings.Compare(a.lo, b.lo) })
	for i := 1; i < len(bs); i++ {
		if bs[i].lo <= bs[i-1].hi {
			t.Fatalf("state files' keys overlap: [%s, %s] and [%s, %s]", bs[i-1].lo, bs[i-1].hi, bs[i].lo, bs[i].hi)
		}
	}
	if len(bs) != mr.Steps {
		t.Fatalf("%d state files for %d steps", len(bs), mr.Steps)
	}
}

// TestKeyRangeStepsDecodeEachStagedRowOnce: parts of many row groups, each
// group straddling the bounds of one or more steps. Every step hands on the
// rows it decoded past its span, so the batch decodes each staged row once,
// and the table is still each key's last read. Without the hand-on, each
// step decoded again the row group the step before it ended in.
//
// What steps hand on is bounded at half a step: where the parts' remaining
// rows would be more (row groups as large as the parts, steps smaller than
// a row group of each part), the next step reads them again, and the table
// is the same.
func TestKeyRangeStepsDecodeEachStagedRowOnce(t *testing.T) {
	ctx := context.Background()
	const nfiles, perFile = 4, 1500
	for _, c := range []struct {
		groupRows  int   // of the staged parts (cut at a multiple of 128)
		stepMemory int64 // bounds the steps
		once       bool  // the hand-on fits its bound
	}{{128, 800 << 10, true}, {128, 1200 << 10, true}, {256, 1600 << 10, true}, {128, 200 << 10, false}, {2048, 400 << 10, false}} {
		t.Run(fmt.Sprint(c.groupRows, "/", c.stepMemory), func(t *testing.T) {
			files, want := bulkLoad(uint64(c.groupRows+int(c.stepMemory)), nfiles, perFile, 5000)
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{})
			p.stagedGroupRows, p.stepMemory = c.groupRows, c.stepMemory
			mr := stageAndMergeInto(t, ctx, p, source, files)
			if mr.Batches != 1 || mr.Steps < 3 {
				t.Fatalf("%d batches in %d steps, want one batch in several steps", mr.Batches, mr.Steps)
			}
			if once := mr.StagedRowsRead == nfiles*perFile; once != c.once || mr.StagedRowsRead < nfiles*perFile {
				t.Fatalf("the batch decoded %d staged rows in %d steps for its %d events, want them once each: %v", mr.StagedRowsRead, mr.Steps, nfiles*perFile, c.once)
			}
			wantLastReads(t, ctx, p, want)
		})
	}
}

// TestCarryBudgetDropsWhatDoesNotFit: carries are kept while their rows
// and estimated memory fit what is left of the bound; one that does not
// fit keeps its opened file but none of its rows, and its next read starts
// from the beginning of the part.
func TestCarryBudgetDropsWhatDoesNotFit(t *testing.T) {
	part := stagedPart{Events: 1000, MemBytes: 100_000} // 100 bytes an event
	carry := func(n int) *partCarry {
		c := &partCarry{from: 4096}
		for i := range n {
			c.add([]byte{byte(i)}, []any{int64(i)})
		}
		return c
	}
	b := carryBudget{events: 100, mem: 8_000}
	kept := []*partCarry{carry(30), carry(40), carry(10)}
	dropped := []*partCarry{carry(90), carry(20)} // past the events, then the memory left
	for _, c := range []*partCarry{kept[0], dropped[0], kept[1], kept[2], dropped[1]} {
		b.take(c, part)
	}
	for i, c := range kept {
		if len(c.rows) == 0 || c.from != 4096 {
			t.Fatalf("carry %d was dropped", i)
		}
	}
	for i, c := range dropped {
		if len(c.rows) != 0 || len(c.codes.at) != 0 || c.from != 0 {
			t.Fatalf("carry %d was kept: %d rows from %d", i, len(c.rows), c.from)
		}
	}
	if b.events != 20 || b.mem != 0 {
		t.Fatalf("budget left: %+v, want 20 events and no memory", b)
	}
}

// TestStagedPartsAreSortedByKeyWithASampleOfTheirCodes: staging writes a
// part's rows in key order (a key's events in file order) and records the
// range codes a merge cuts key ranges by.
func TestStagedPartsAreSortedByKeyWithASampleOfTheirCodes(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(5, 1, 700, 300)
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	notes := write(t, ctx, source, files)
	if _, err := p.Stage(ctx, notes[0]); err != nil {
		t.Fatal(err)
	}
	rec, err := p.Registry.File(ctx, coord.FileID(notes[0].Bucket, notes[0].Name, notes[0].Generation))
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.readStaged(ctx, rec.StagedPath)
	if err != nil {
		t.Fatal(err)
	}
	part := m.Parts[0]
	if !part.keySorted() || part.KeyEvery != 2 || len(part.KeySample) != 350 {
		t.Fatalf("part: code %d, every %d, %d sampled; want version %d, every 2, 350 sampled", part.KeyCode, part.KeyEvery, len(part.KeySample), cdc.RangeCodeVersion)
	}
	hs, err := value.ParseSchema(part.Schema)
	if err != nil {
		t.Fatal(err)
	}
	idIdx, posIdx := hs.Index("id"), hs.Index(cdc.ColOrder)
	var codes, orders [][]byte
	var ids []string
	err = delta.ReadFile(ctx, p.Lake, part.metadata(), part.Add, delta.ReadOptions{}, func(row []any) error {
		code, err := cdc.AppendRangeCode(nil, []any{row[idIdx]})
		codes, ids, orders = append(codes, code), append(ids, row[idIdx].(string)), append(orders, row[posIdx].([]byte))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] < ids[i-1] || ids[i] == ids[i-1] && bytes.Compare(orders[i], orders[i-1]) <= 0 {
			t.Fatalf("row %d (%s) follows %s: not in key order, a key's events in file order", i, ids[i], ids[i-1])
		}
	}
	for j, c := range part.KeySample {
		if !bytes.Equal(c, codes[j*2]) {
			t.Fatalf("sampled code %d is not that of row %d", j, j*2)
		}
	}
	if !bytes.Equal(part.KeyMax, codes[len(codes)-1]) {
		t.Fatal("the part's last code is not that of its last row")
	}
}

// TestANullKeyQuarantinesItsFileNamingTheRecord: a primary-key value that
// is null cannot be merged; staging quarantines the file, naming the
// record and the column, and nothing of it is staged.
func TestANullKeyQuarantinesItsFileNamingTheRecord(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	notes := write(t, ctx, source, []dssim.File{jsonlFile("nullkey", 1, `{"id":"a","n":1}`, `{"id":null,"n":2}`)})
	res, err := p.Stage(ctx, notes[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Quarantined, "record 2") || !strings.Contains(res.Quarantined, `primary key column "id" is null`) || !strings.Contains(res.Quarantined, "nullkey") {
		t.Fatalf("quarantine reason %q: want the file, record 2 and the null key column", res.Quarantined)
	}
	var staged []string
	if err := p.Lake.List(ctx, "_staging/", "", func(info objstore.Info) error {
		if strings.HasSuffix(info.Name, ".parquet") {
			staged = append(staged, info.Name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(staged) > 0 {
		t.Fatalf("staged parts left of a quarantined file: %v", staged)
	}
}

// TestAKeyPlanOfAnotherCodeVersionIsRefused: the steps of a batch split by
// key ranges that committed under one code version cannot be followed by
// codes of another: the merge stops with a message instead of applying an
// event twice or never.
func TestAKeyPlanOfAnotherCodeVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	files, _ := bulkLoad(7, 2, 30, 100)
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxEvents: 20})
	var ids []string
	for _, n := range write(t, ctx, source, files) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, coord.FileID(n.Bucket, n.Name, n.Generation))
	}
	body, err := json.Marshal(stepPlan{Seq: 1, Files: ids, KeyCode: cdc.RangeCodeVersion + 1, Bounds: [][]byte{{0x0c, 'k', '8'}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Lake.Write(ctx, stepPlanPath("shop.t", 1), bytes.NewReader(body), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = p.MergeTable(ctx, "shop.t")
	if err == nil || !strings.Contains(err.Error(), "range codes of version") {
		t.Fatalf("merge under a plan of another code version: %v, want it refused", err)
	}
}

// TestKeyRangesHoldKeysCastToAnotherKind: in schema mode overwrite a key
// column may change kind (numbers, then strings); the older part's rows,
// cast to the new kind, belong to ranges its own codes do not tell, and
// every one of them is still merged.
func TestKeyRangesHoldKeysCastToAnotherKind(t *testing.T) {
	ctx := context.Background()
	var older, newer []string
	want := map[string]bool{}
	for i := range 40 {
		older = append(older, fmt.Sprintf(`{"id":%d,"n":%d}`, 100+i, i))
		want[fmt.Sprint(100+i)] = true
		newer = append(newer, fmt.Sprintf(`{"id":"s%02d","n":%d}`, i, i))
		want[fmt.Sprintf("s%02d", i)] = true
	}
	files := []dssim.File{jsonlFile("old", 0, older...), jsonlFile("new", 1000, newer...)}
	p, mr := stageAndMerge(t, ctx, files, config.Config{BatchMaxEvents: 20, Defaults: config.TableConfig{SchemaMode: config.SchemaOverwrite}})
	if mr.Batches != 1 || mr.Steps < 3 {
		t.Fatalf("%d batches in %d steps, want one batch in key ranges", mr.Batches, mr.Steps)
	}
	_, rows := stateRows(t, ctx, p, "shop.t", "id")
	for id := range want {
		if _, ok := rows[fmt.Sprintf(`{"id":%q}`, id)]; !ok {
			t.Errorf("key %s is missing from the state (%d rows)", id, len(rows))
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d state rows, want %d", len(rows), len(want))
	}
}

// TestAKeyPlanStopsAReleaseThatReadsPlansByParts: a release from before key
// ranges reads a plan's steps as lists of parts; a plan by key must fail to
// parse there (its merge stops) rather than read as no step at all, and a
// plan by parts must still read there as before.
func TestAKeyPlanStopsAReleaseThatReadsPlansByParts(t *testing.T) {
	type earlierPlan struct { // the plan as the earlier release declares it
		Seq   int64       `json:"seq"`
		Files []string    `json:"files"`
		Steps [][]partRef `json:"steps"`
	}
	byKey, err := json.Marshal(stepPlan{Seq: 3, Files: []string{"a"}, KeyCode: cdc.RangeCodeVersion, Bounds: [][]byte{{1}, {2}}})
	if err != nil {
		t.Fatal(err)
	}
	var old earlierPlan
	if err := json.Unmarshal(byKey, &old); err == nil {
		t.Fatalf("the earlier release reads a plan by key as %+v", old)
	}
	var back stepPlan
	if err := json.Unmarshal(byKey, &back); err != nil || back.KeyCode != cdc.RangeCodeVersion || len(back.Bounds) != 2 || back.Steps != nil {
		t.Fatalf("a plan by key reads back as %+v, %v", back, err)
	}
	byParts, err := json.Marshal(stepPlan{Seq: 4, Files: []string{"a"}, Steps: [][]partRef{{{File: "a", Part: 0}}, {{File: "a", Part: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(byParts, &old); err != nil || len(old.Steps) != 2 || old.Steps[1][0].Part != 1 {
		t.Fatalf("the earlier release reads a plan by parts as %+v, %v", old, err)
	}
	if err := json.Unmarshal(byParts, &back); err != nil || len(back.Steps) != 2 || back.Bounds != nil {
		t.Fatalf("a plan by parts reads back as %+v, %v", back, err)
	}
}

// TestABatchThatRewritesTheTableRecommendsDeletionVectorsOnce: each
// key-range step of a batch rewrites a small share of the table, the batch
// all of it: a batch is judged whole, in many steps as in one, and warns
// once, naming the table; with deletion vectors on it has nothing to
// recommend.
func TestABatchThatRewritesTheTableRecommendsDeletionVectorsOnce(t *testing.T) {
	for _, maxEvents := range []int64{20, 0} {
		for _, dv := range []config.Switch{config.Off, config.On} {
			t.Run(fmt.Sprintf("batch_max_events %d, deletion_vectors %s", maxEvents, dv), func(t *testing.T) {
				ctx := context.Background()
				load, _ := bulkLoad(11, 4, 50, 1<<20)
				// Two keys in five read again, later: fewer than half the
				// rows of each file, which deletion vectors would mark.
				var again []dssim.File
				for i, f := range load {
					var kept [][]byte
					for j, line := range bytes.SplitAfter(f.Data, []byte("\n")) {
						if j%5 < 2 {
							kept = append(kept, bytes.Replace(line, []byte(`"log_position":`), []byte(`"log_position":1`+fmt.Sprint(i)), 1))
						}
					}
					again = append(again, dssim.File{Name: strings.Replace(f.Name, "/f", "/g", 1), Data: bytes.Join(kept, nil)})
				}
				source := objstore.NewMemory()
				var logs bytes.Buffer
				p := newPipeline(t, source, config.Config{BatchMaxEvents: maxEvents, Defaults: config.TableConfig{DeletionVectors: dv}})
				p.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
				p.dvMinFileBytes = -1 // the test's files are small: count them all
				for round, files := range [][]dssim.File{load, again} {
					mr := stageAndMergeInto(t, ctx, p, source, files)
					if maxEvents > 0 && mr.Steps < 3+3*(1-round) || maxEvents == 0 && mr.Steps != 1 {
						t.Fatalf("round %d: %d steps, want several key ranges with a bound of 20, one without", round, mr.Steps)
					}
				}
				warns := strings.Count(logs.String(), "rewrote a large share")
				if want := map[config.Switch]int{config.Off: 1, config.On: 0}[dv]; warns != want || want == 1 && !strings.Contains(logs.String(), "table=shop.t") {
					t.Fatalf("%d recommendations, want %d:\n%s", warns, want, logs.String())
				}
			})
		}
	}
}

// TestAHotKeyWithMoreEventsThanAStepIsMergedInStepsByParts: a range is
// never cut inside a key, so a key with more events than a step holds
// (a row updated over and over) makes the batch split by parts instead:
// every step stays within the bound, and the key ends at its last change.
func TestAHotKeyWithMoreEventsThanAStepIsMergedInStepsByParts(t *testing.T) {
	ctx := context.Background()
	var files []dssim.File
	for f := range 3 {
		var payloads []string
		for i := range 50 {
			id := "hot"
			if i%3 == 0 {
				id = fmt.Sprintf("k%03d", f*50+i)
			}
			payloads = append(payloads, fmt.Sprintf(`{"id":%q,"n":%d}`, id, f*50+i))
		}
		files = append(files, jsonlFile(fmt.Sprintf("h%d", f), f*50, payloads...))
	}
	var logs bytes.Buffer
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{BatchMaxEvents: 20})
	p.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	mr := stageAndMergeInto(t, ctx, p, source, files)
	if mr.Batches != 1 || mr.Steps < 150/20 {
		t.Fatalf("%d batches in %d steps, want one batch in steps of at most 20 of its 150 events", mr.Batches, mr.Steps)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "batch merged in steps") && !strings.Contains(line, "by_key=false") {
			t.Fatalf("the batch was split by key: %s", line)
		}
	}
	_, rows := stateRows(t, ctx, p, "shop.t", "id")
	if got, want := rows[`{"id":"hot"}`], `{"id":"hot","n":149}`; got != want || len(rows) != 52 {
		t.Fatalf("hot row %s, want %s; %d rows, want 52", got, want, len(rows))
	}
}

// TestSpanEventsBoundsTheEventsOfASpan: a sorted part's estimate of its
// events in a span, by its key sample, is at least the span's events and
// not much more.
func TestSpanEventsBoundsTheEventsOfASpan(t *testing.T) {
	code := func(k int) []byte {
		c, err := cdc.AppendRangeCode(nil, []any{int64(k)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const events, every = 10_000, 39
	part := stagedPart{Events: events, KeyCode: cdc.RangeCodeVersion, KeyEvery: every}
	for k := 0; k < events; k += every {
		part.KeySample = append(part.KeySample, code(k))
	}
	r := rand.New(rand.NewPCG(2, 3))
	for range 200 {
		lo, hi := r.IntN(events), r.IntN(events)
		lo, hi = min(lo, hi), max(lo, hi)
		span := cdc.NewKeySpan(code(lo), code(hi))
		if r.IntN(10) == 0 {
			span, lo = cdc.NewKeySpan(nil, code(hi)), 0
		}
		got, want := part.spanEvents(span), int64(hi-lo)
		if got < want || got > want+want/4+3*every+64 {
			t.Fatalf("span [%d, %d): estimated %d events, want at least %d and not much more", lo, hi, got, want)
		}
	}
	if got := (stagedPart{Events: 800}).spanEvents(cdc.NewKeySpan(nil, code(5))); got != 200 {
		t.Fatalf("an unsorted part's estimate is %d, want a quarter of its 800 events", got)
	}
}

// TestSmallPartsHaveSmallRowGroups: a part too small for the history to
// take as a file has small row groups; the others keep the large ones, and
// the test knob decides for every part.
func TestSmallPartsHaveSmallRowGroups(t *testing.T) {
	p := &Pipeline{}
	for n, want := range map[int64]int64{1: smallGroupRows, 1000: smallGroupRows, historyCopyMinEvents - 1: smallGroupRows, historyCopyMinEvents: stagedRowGroupRows, 100_000: stagedRowGroupRows} {
		if got := p.partGroupRows(n); got != want {
			t.Errorf("a part of %d events has row groups of %d rows, want %d", n, got, want)
		}
	}
	p.stagedGroupRows = 300
	if got := p.partGroupRows(2500); got != 300 {
		t.Errorf("under the knob, row groups of %d rows, want 300", got)
	}
}
