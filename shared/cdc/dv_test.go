package cdc

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// dvOptions turns deletion vectors on for files of any size, so that the
// small files of a test take the vector path.
func dvOptions() Options {
	return Options{DeletionVectors: true, DVMinFileBytes: -1, TargetFileBytes: 1 << 14}
}

// textLogger returns a logger writing text lines into buf.
func textLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// seedEvents are n inserts of keys 0..n-1 in region eu.
func seedEvents(n int) []datastream.Event {
	var evs []datastream.Event
	for i := range n {
		evs = append(evs, genEvent(uint64(i+1), int64(i), "eu", false, int64(i)))
	}
	return evs
}

// scattered are count changes of random keys below maxID (some new, a
// quarter of them deletes), with orders from *n on.
func scattered(rng *rand.Rand, n *uint64, count, maxID int) []datastream.Event {
	var evs []datastream.Event
	for range count {
		*n++
		evs = append(evs, genEvent(*n, int64(rng.IntN(maxID)), "eu", rng.IntN(4) == 0, int64(*n)))
	}
	return evs
}

func stateSnapshot(t *testing.T, ctx context.Context, store objstore.Store) *delta.Snapshot {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// lastMetrics is the operation metrics of a table's latest commit.
func lastMetrics(t *testing.T, ctx context.Context, store objstore.Store) map[string]string {
	t.Helper()
	h, err := delta.Open(store).History(ctx, 1)
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %v %v", h, err)
	}
	return h[0].Metrics
}

func metric(t *testing.T, m map[string]string, name string) int {
	t.Helper()
	v, err := strconv.Atoi(m[name])
	if err != nil {
		t.Fatalf("metric %s = %q: %v", name, m[name], err)
	}
	return v
}

func TestMergeWithDeletionVectorsMarksRowsAndEqualsTheModel(t *testing.T) {
	m := newModelRun(t, dvOptions())
	m.apply(1, seedEvents(2000))
	rng := rand.New(rand.NewPCG(7, 7))
	n := uint64(10_000)
	var marked, updated int
	for seq := int64(2); seq <= 7; seq++ {
		r := m.apply(seq, scattered(rng, &n, 30, 2200))
		if r.FilesRewritten != 0 {
			t.Fatalf("batch %d rewrote %d files: scattered changes into files of ~1000 rows belong in vectors", seq, r.FilesRewritten)
		}
		marked += r.DeletionVectors
		mt := lastMetrics(t, m.ctx, m.tabs.State)
		if got := metric(t, mt, "numTargetDeletionVectorsAdded"); got != r.DeletionVectors {
			t.Fatalf("batch %d: numTargetDeletionVectorsAdded %d, result says %d", seq, got, r.DeletionVectors)
		}
		if metric(t, mt, "numTargetFilesRemoved") != 0 || metric(t, mt, "numTargetDeletionVectorsRemoved") != metric(t, mt, "numTargetDeletionVectorsUpdated") {
			t.Fatalf("batch %d: metrics %v: a vector update removes one vector and no file", seq, mt)
		}
		updated += metric(t, mt, "numTargetDeletionVectorsUpdated")
	}
	if marked == 0 || updated == 0 {
		t.Fatalf("%d vectors written, %d updated: the test must add to existing vectors too", marked, updated)
	}
	m.check()
	snap := stateSnapshot(t, m.ctx, m.tabs.State)
	if !snap.DeletionVectorsWritable() {
		t.Fatalf("state table protocol %+v, configuration %v: a table created with deletion vectors on has the feature", snap.Protocol(), snap.Configuration())
	}
	withDV := 0
	for _, f := range snap.Files() {
		if f.DeletionVector != nil {
			withDV++
			if f.DeletionVector.StorageType != "u" {
				t.Errorf("file %s has a %q vector, want one in a DV file", f.Path, f.DeletionVector.StorageType)
			}
		}
	}
	if withDV == 0 {
		t.Fatal("no state file has a deletion vector")
	}
	tomb := stateSnapshot(t, m.ctx, m.tabs.Tombstones)
	if tomb.Protocol().Supports(delta.FeatureDeletionVectors) {
		t.Errorf("tombstone table protocol %+v: tombstones stay append-only", tomb.Protocol())
	}
	for _, f := range tomb.Files() {
		if f.DeletionVector != nil {
			t.Fatalf("tombstone file %s has a deletion vector", f.Path)
		}
	}
}

func TestChooseFileActionPrefersTheCheaperWay(t *testing.T) {
	file := func(size, records, deleted int64) delta.Add {
		a := delta.Add{Path: "f.parquet", Size: size, Stats: `{"numRecords":` + strconv.FormatInt(records, 10) + `}`}
		if deleted > 0 {
			a.DeletionVector = &delta.DeletionVector{StorageType: "u", Cardinality: deleted}
		}
		return a
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		f     delta.Add
		drop  uint64
		useDV bool
		min   int64
		want  fileAction
	}{
		{"with vectors off a file is rewritten", file(64*mib, 1000, 0), 3, false, mib, rewriteFile},
		{"a few rows of a large file go in a vector", file(64*mib, 1000, 0), 3, true, mib, markFile},
		{"a file below the size threshold is rewritten", file(mib-1, 1000, 0), 3, true, mib, rewriteFile},
		{"a negative threshold leaves small files to vectors", file(100, 1000, 0), 3, true, -1, markFile},
		{"half the rows deleted makes a rewrite cheaper", file(64*mib, 1000, 0), 500, true, mib, rewriteFile},
		{"rows deleted before count towards the half", file(64*mib, 1000, 400), 100, true, mib, rewriteFile},
		{"below half with earlier deletes a vector grows", file(64*mib, 1000, 400), 99, true, mib, markFile},
		{"a file whose every row goes is removed unread", file(64*mib, 1000, 990), 10, true, mib, removeFile},
		{"a file without stats gets a vector", delta.Add{Path: "f", Size: 64 * mib}, 10, true, mib, markFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseFileAction(tc.f, tc.drop, tc.useDV, tc.min); got != tc.want {
				t.Fatalf("action %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDeletionVectorsOnUpgradesAnExistingTableAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	m := newModelRun(t, Options{TargetFileBytes: 1 << 14})
	m.apply(1, seedEvents(1000))
	rng := rand.New(rand.NewPCG(3, 3))
	n := uint64(10_000)
	m.apply(2, scattered(rng, &n, 20, 1000))
	before := stateSnapshot(t, m.ctx, m.tabs.State)
	if before.Protocol().Supports(delta.FeatureDeletionVectors) || before.Configuration()[delta.PropEnableDeletionVectors] != "" {
		t.Fatalf("with deletion_vectors off the table got protocol %+v, configuration %v", before.Protocol(), before.Configuration())
	}
	for _, f := range before.Files() {
		if f.DeletionVector != nil {
			t.Fatalf("with deletion_vectors off file %s has a vector", f.Path)
		}
	}
	if strings.Contains(logs.String(), "deletion") {
		t.Fatalf("logged before the setting asked: %s", logs.String())
	}
	m.opts = dvOptions()
	m.opts.Logger = textLogger(&logs)
	r := m.apply(3, scattered(rng, &n, 20, 1000))
	after := stateSnapshot(t, m.ctx, m.tabs.State)
	if p := after.Protocol(); p.MinReaderVersion != 3 || p.MinWriterVersion != 7 || !after.DeletionVectorsWritable() {
		t.Fatalf("after the upgrade: protocol %+v, configuration %v", p, after.Configuration())
	}
	if after.Version() != before.Version()+1 || r.DeletionVectors == 0 {
		t.Fatalf("the upgrade took versions %d→%d and wrote %d vectors: it belongs in the merge's own commit, which may use them", before.Version(), after.Version(), r.DeletionVectors)
	}
	line := logs.String()
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "table=db.t") || !strings.Contains(line, "engines without deletion-vector support can no longer read it") {
		t.Fatalf("upgrade log line missing or incomplete: %s", line)
	}
	if after.Configuration()[PropKey] != before.Configuration()[PropKey] {
		t.Fatalf("the upgrade lost the table's properties: %v", after.Configuration())
	}
	logs.Reset()
	m.apply(4, scattered(rng, &n, 20, 1000))
	if strings.Contains(logs.String(), "upgraded") {
		t.Fatalf("a table upgraded already is upgraded again: %s", logs.String())
	}
	m.check()
}

func TestDeletionVectorsOffRewritesVectorFilesAndWritesNoNewOnes(t *testing.T) {
	m := newModelRun(t, dvOptions())
	m.apply(1, seedEvents(2000))
	rng := rand.New(rand.NewPCG(5, 5))
	n := uint64(10_000)
	for seq := int64(2); seq <= 4; seq++ {
		m.apply(seq, scattered(rng, &n, 40, 2000))
	}
	before := stateSnapshot(t, m.ctx, m.tabs.State)
	dvs := map[string]string{}
	for _, f := range before.Files() {
		if f.DeletionVector != nil {
			dvs[f.Path] = f.DeletionVector.PathOrInlineDv
		}
	}
	if len(dvs) == 0 {
		t.Fatal("setup wrote no deletion vectors")
	}
	m.opts.DeletionVectors = false
	// Change keys of every file that has a vector: each such file is
	// rewritten, its deleted rows must stay deleted.
	var evs []datastream.Event
	for _, f := range before.Files() {
		if f.DeletionVector == nil {
			continue
		}
		err := delta.ReadFile(m.ctx, m.tabs.State, before.Metadata(), f, delta.ReadOptions{Columns: []string{"id"}}, func(row []any) error {
			if len(evs) < 200 && rng.IntN(8) == 0 {
				n++
				evs = append(evs, genEvent(n, row[0].(int64), "eu", rng.IntN(3) == 0, int64(n)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := m.apply(5, evs)
	if r.DeletionVectors != 0 || r.FilesRewritten == 0 {
		t.Fatalf("with vectors off: %d vectors written, %d files rewritten", r.DeletionVectors, r.FilesRewritten)
	}
	after := stateSnapshot(t, m.ctx, m.tabs.State)
	for _, f := range after.Files() {
		if f.DeletionVector != nil && dvs[f.Path] != f.DeletionVector.PathOrInlineDv {
			t.Fatalf("file %s got a new vector with deletion_vectors off", f.Path)
		}
	}
	m.check()
}

// conflictingStore runs compact once, just before the first DV file is
// written: a compaction that commits between the merge's plan and its
// commit.
type conflictingStore struct {
	objstore.Store
	fired   atomic.Bool
	compact func(ctx context.Context) error
}

func (s *conflictingStore) Write(ctx context.Context, name string, r io.Reader, o objstore.WriteOptions) (objstore.Info, error) {
	if strings.Contains(name, "deletion_vector_") && s.fired.CompareAndSwap(false, true) {
		if err := s.compact(ctx); err != nil {
			return objstore.Info{}, err
		}
	}
	return s.Store.Write(ctx, name, r, o)
}

// compactAll rewrites every file of a table into one (dataChange false),
// as compaction does, leaving vector-deleted rows out.
func compactAll(ctx context.Context, store objstore.Store) error {
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return err
	}
	w := delta.NewRollingWriter(ctx, store, delta.WriteOptions{Schema: snap.Schema(), PartitionColumns: snap.PartitionColumns()}, 1<<30)
	var removes []delta.Remove
	for _, f := range snap.Files() {
		if err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, w.Write); err != nil {
			w.Abort()
			return err
		}
		removes = append(removes, f.Remove(0, false))
	}
	adds, err := w.Close()
	if err != nil {
		return err
	}
	tx := snap.NewTransaction(delta.Operation{Name: "OPTIMIZE"})
	tx.ReadWholeTable()
	tx.Remove(removes...)
	tx.Add(adds...)
	_, err = tx.Commit(ctx)
	return err
}

func TestADeletionVectorUpdateRacingACompactionPlansAgain(t *testing.T) {
	var logs bytes.Buffer
	m := newModelRun(t, dvOptions())
	m.apply(1, seedEvents(2000))
	rng := rand.New(rand.NewPCG(9, 9))
	n := uint64(10_000)
	m.apply(2, scattered(rng, &n, 30, 2000)) // vectors to carry through the race
	cs := &conflictingStore{Store: m.tabs.State}
	cs.compact = func(ctx context.Context) error { return compactAll(ctx, m.tabs.State) }
	m.tabs.State = cs
	m.opts.Logger = textLogger(&logs)
	r := m.apply(3, scattered(rng, &n, 30, 2000))
	if !cs.fired.Load() {
		t.Fatal("the compaction never ran: the merge wrote no DV file")
	}
	if !strings.Contains(logs.String(), "planning again") {
		t.Fatalf("the merge did not retry after the compaction: %s", logs.String())
	}
	if r.DeletionVectors == 0 {
		t.Fatalf("the retry wrote no vector into the compacted file: %+v", r)
	}
	m.check() // nothing lost, nothing duplicated
	snap := stateSnapshot(t, m.ctx, m.tabs.State)
	h, err := delta.Open(m.tabs.State).History(m.ctx, 2)
	if err != nil || h[0].Operation != "MERGE" || h[1].Operation != "OPTIMIZE" || h[0].Version != snap.Version() {
		t.Fatalf("history %+v %v: want the compaction, then the merge planned again on top of it", h, err)
	}
}

func TestCopyOnWriteOfALargeShareRecommendsDeletionVectors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dv        bool
		changes   int
		minBytes  int64
		recommend bool
	}{
		{"a batch rewriting most rows with vectors off recommends them", false, 60, -1, true},
		{"a batch rewriting a small share says nothing", false, 0, -1, false},
		{"with vectors on nothing is recommended", true, 60, -1, false},
		{"files too small for vectors are rewritten either way and say nothing", false, 60, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			opts := Options{TargetFileBytes: 1 << 14, DeletionVectors: tc.dv, DVMinFileBytes: tc.minBytes}
			m := newModelRun(t, opts)
			m.apply(1, seedEvents(5000)) // files of about 1000 rows: a fifth of the table each
			m.opts.Logger = textLogger(&logs)
			rng := rand.New(rand.NewPCG(11, 11))
			n := uint64(10_000)
			evs := scattered(rng, &n, tc.changes, 2000)
			if tc.changes == 0 { // one key: one file of many rewritten
				n++
				evs = append(evs, genEvent(n, 5, "eu", false, 1))
			}
			m.apply(2, evs)
			got := logs.String()
			if has := strings.Contains(got, "deletion_vectors: on"); has != tc.recommend {
				t.Fatalf("recommendation logged %v, want %v: %s", has, tc.recommend, got)
			}
			if tc.recommend && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, "table=db.t") || !strings.Contains(got, "rows_rewritten=") || !strings.Contains(got, "share=")) {
				t.Fatalf("recommendation lacks the table, rows or share: %s", got)
			}
			m.check()
		})
	}
}

// TestAVectorFileMostlyOrWhollyDeletedLeavesTheTable follows one file of
// 100 rows: a few deletes give it a vector, deletes up to more than half
// rewrite it (its vector goes), and deleting the rest removes the
// rewritten file unread — with the metrics Spark writes for each.
func TestAVectorFileMostlyOrWhollyDeletedLeavesTheTable(t *testing.T) {
	m := newModelRun(t, dvOptions())
	m.apply(1, seedEvents(100))
	n, seq := uint64(1000), int64(1)
	deletes := func(ids ...int) []datastream.Event {
		var evs []datastream.Event
		for _, id := range ids {
			n++
			evs = append(evs, genEvent(n, int64(id), "eu", true, 0))
		}
		return evs
	}
	span := func(lo, hi int) []int {
		var out []int
		for i := lo; i < hi; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, step := range []struct {
		name                                        string
		ids                                         []int
		filesRemoved, dvAdded, dvRemoved, dvUpdated int
		rewritten, copied                           int
	}{
		{"ten deletes of a hundred rows: a vector", span(0, 10), 0, 1, 0, 0, 0, 0},
		{"five more: the vector grows", span(10, 15), 0, 1, 1, 1, 0, 0},
		{"forty more reach half: a rewrite, the vector goes with the file", span(15, 55), 1, 0, 1, 0, 1, 45},
		{"the rest: the file is removed unread", span(55, 100), 1, 0, 0, 0, 0, 0},
	} {
		seq++
		t.Run(step.name, func(t *testing.T) {
			r := m.apply(seq, deletes(step.ids...))
			mt := lastMetrics(t, m.ctx, m.tabs.State)
			got := []int{metric(t, mt, "numTargetFilesRemoved"), metric(t, mt, "numTargetDeletionVectorsAdded"), metric(t, mt, "numTargetDeletionVectorsRemoved"), metric(t, mt, "numTargetDeletionVectorsUpdated"), r.FilesRewritten}
			want := []int{step.filesRemoved, step.dvAdded, step.dvRemoved, step.dvUpdated, step.rewritten}
			if !slices.Equal(got, want) {
				t.Fatalf("files removed, vectors added, removed, updated, files rewritten = %v, want %v (metrics %v)", got, want, mt)
			}
			if metric(t, mt, "numTargetRowsDeleted") != len(step.ids) || metric(t, mt, "numTargetRowsCopied") != step.copied {
				t.Fatalf("metrics %v: want %d rows deleted, %d copied", mt, len(step.ids), step.copied)
			}
			m.check()
		})
	}
	if snap := stateSnapshot(t, m.ctx, m.tabs.State); len(snap.Files()) != 0 {
		t.Fatalf("%d files left after every row was deleted", len(snap.Files()))
	}
}

// vectorsWritten sums the deletion vectors a state table's merges added or
// updated (Spark's MERGE metrics).
func vectorsWritten(t *testing.T, ctx context.Context, store objstore.Store) int {
	t.Helper()
	h, err := delta.Open(store).History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range h {
		a, _ := strconv.Atoi(e.Metrics["numTargetDeletionVectorsAdded"])
		u, _ := strconv.Atoi(e.Metrics["numTargetDeletionVectorsUpdated"])
		n += a + u
	}
	return n
}

// modePropertyOptions are the options of a mode's reference-model property
// test for one seed: overwrite schema mode for a third of the seeds, a
// partitioned state table for half, and deletion vectors (given to files of
// any size) for the other half.
func modePropertyOptions(seed uint64, mode Mode) Options {
	opts := Options{TargetFileBytes: 1 << 12, Mode: mode, Overwrite: seed%3 == 0, DeletionVectors: seed%4 < 2, DVMinFileBytes: -1}
	if seed%2 == 0 {
		opts.StatePartitionColumns = []string{"region"}
	}
	return opts
}

// vectorsOf returns the deletion vectors the merges into tabs wrote,
// failing when they wrote any with opts' deletion vectors off.
func vectorsOf(t *testing.T, ctx context.Context, tabs TableSet, opts Options) int {
	t.Helper()
	n := vectorsWritten(t, ctx, tabs.State)
	if n > 0 && !opts.DeletionVectors {
		t.Fatalf("deletion vectors off, and the merges wrote %d", n)
	}
	return n
}
