package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// gatedSource is a source whose listings, once held, wait until open is
// closed: staging stands still while the test looks at merging.
type gatedSource struct {
	objstore.Store
	held    atomic.Bool
	once    sync.Once
	reached chan struct{} // closed when a listing waits at the gate
	open    chan struct{}
}

func (g *gatedSource) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	if g.held.Load() {
		g.once.Do(func() { close(g.reached) })
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.List(ctx, prefix, startAt, fn)
}

// watchRun runs Watch until stop is called, summing its reports.
type watchRun struct {
	mu     sync.Mutex
	sum    map[string]*TableRun
	merged int // reports of merging passes that merged a table
	busy   []coord.TableStatus
	// maintaining counts the maintenance runs begun; maintained are
	// the results of those ended.
	maintaining  int
	maintained   []MaintainResult
	onMaintained func(MaintainResult) // called with mu held
	done         chan error
	cancel       context.CancelFunc
}

func startWatch(t *testing.T, p *Pipeline, source objstore.Store, progress func(StageProgress)) *watchRun {
	t.Helper()
	return startWatchEvery(t, p, source, progress, 0)
}

// startWatchEvery is startWatch with WatchOptions.MaintainEvery.
func startWatchEvery(t *testing.T, p *Pipeline, source objstore.Store, progress func(StageProgress), every time.Duration) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchRun{sum: map[string]*TableRun{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		w.done <- p.Watch(ctx, WatchOptions{
			RunOptions: RunOptions{Source: source, Parallel: 2, Progress: progress, Busy: func(st coord.TableStatus) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.busy = append(w.busy, st)
			}},
			Interval:      5 * time.Millisecond,
			MaintainEvery: every,
			Maintaining: func(string) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.maintaining++
			},
			Maintained: func(r MaintainResult) {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.maintained = append(w.maintained, r)
				if w.onMaintained != nil {
					w.onMaintained(r)
				}
			},
			Report: func(res RunResult) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if len(res.Merged) > 0 {
					w.merged++
				}
				for id, tr := range res.Tables {
					if w.sum[id] == nil {
						w.sum[id] = &TableRun{StateVersion: -1, HistoryVersion: -1}
					}
					w.sum[id].Add(*tr)
				}
			},
		})
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop ends the run and checks that Watch returned the context's error.
func (w *watchRun) stop(t *testing.T) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v after its context ended; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Watch did not return within 10s of its context's end")
	}
}

func (w *watchRun) table(id string) TableRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tr := w.sum[id]; tr != nil {
		return *tr
	}
	return TableRun{StateVersion: -1, HistoryVersion: -1}
}

// waitFor polls cond until it holds, failing after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatch(t *testing.T) {
	ctx := context.Background()

	t.Run("files arriving in waves are staged and merged as they come, and the reports sum to what arrived", func(t *testing.T) {
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{})
		w := startWatch(t, p, source, nil)
		want := map[string]string{}
		files := 0
		for wave := range 4 {
			var batch []dssim.File
			for f := range 3 {
				var payloads []string
				for k := range 5 {
					// From the second wave on, odd k update a key the wave
					// before inserted (merged by now).
					id := wave*5 + k
					if wave > 0 && k%2 == 1 {
						id = (wave-1)*5 + k - 1
					}
					payloads = append(payloads, fmt.Sprintf(`{"id":%d,"n":%d}`, id, wave*100+f*10+k))
					want[fmt.Sprintf(`{"id":%d}`, id)] = fmt.Sprintf(`{"id":%d,"n":%d}`, id, wave*100+f*10+k)
				}
				// Positions rise with waves and files: later events win.
				batch = append(batch, jsonlFile(fmt.Sprintf("w%d-f%d", wave, f), 1000*wave+100*f, payloads...))
			}
			write(t, ctx, source, batch)
			files += len(batch)
			waitFor(t, fmt.Sprintf("wave %d merged", wave), func() bool { return w.table("shop.t").MergedFiles == int64(files) })
		}
		w.stop(t)
		tr := w.table("shop.t")
		if tr.StagedFiles != int64(files) || tr.StagedEvents != int64(5*files) || tr.MergedEvents != int64(5*files) || tr.StateVersion < 1 || tr.HistoryVersion < 1 {
			t.Errorf("reports sum to %+v; want %d files and %d events staged and merged, with versions", tr, files, 5*files)
		}
		if tr.Inserted != int64(len(want)) || tr.Updated == 0 {
			t.Errorf("reports sum to %d inserted, %d updated; want the %d keys inserted, and updates", tr.Inserted, tr.Updated, len(want))
		}
		if _, rows := stateRows(t, ctx, p, "shop.t", "id"); !reflect.DeepEqual(rows, want) {
			t.Errorf("state = %v\nwant  %v", rows, want)
		}
		if u, err := p.Unmerged(ctx); err != nil || len(u) != 0 {
			t.Errorf("Unmerged = %+v, %v; want nothing", u, err)
		}
	})

	t.Run("merging goes on while staging stands still", func(t *testing.T) {
		mem := objstore.NewMemory()
		source := &gatedSource{Store: mem, reached: make(chan struct{}), open: make(chan struct{})}
		p := newPipeline(t, source, config.Config{})
		write(t, ctx, mem, []dssim.File{jsonlFile("a", 10, `{"id":1,"n":1}`), jsonlFile("b", 20, `{"id":2,"n":2}`)})
		// Once both files are staged, the pass's next listing (the one that
		// would find nothing more and end it) waits: the staging pass never
		// ends, and never wakes merging.
		w := startWatch(t, p, source, func(sp StageProgress) {
			if sp.Done == 2 {
				source.held.Store(true)
			}
		})
		select {
		case <-source.reached:
		case <-time.After(20 * time.Second):
			t.Fatal("staging never listed again")
		}
		// Merging finds the staged files on its own and merges them.
		waitFor(t, "the staged files merged while staging waits", func() bool { return w.table("shop.t").MergedFiles == 2 })
		// A file that arrives now waits for staging, not for a merge.
		write(t, ctx, mem, []dssim.File{jsonlFile("c", 30, `{"id":1,"n":3}`)})
		close(source.open)
		waitFor(t, "the late file merged once staging goes on", func() bool { return w.table("shop.t").MergedFiles == 3 })
		w.stop(t)
		if _, rows := stateRows(t, ctx, p, "shop.t", "id"); !reflect.DeepEqual(rows, map[string]string{`{"id":1}`: `{"id":1,"n":3}`, `{"id":2}`: `{"id":2,"n":2}`}) {
			t.Errorf("state = %v", rows)
		}
	})

	t.Run("a table another process holds is told of at each merging pass, and merged once its lease is free", func(t *testing.T) {
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{})
		l, err := p.Leaser.Acquire(ctx, "shop.t", "other/1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		write(t, ctx, source, []dssim.File{jsonlFile("a", 10, `{"id":1,"n":1}`)})
		w := startWatch(t, p, source, nil)
		waitFor(t, "the busy table told", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.busy) >= 2
		})
		if got := w.table("shop.t"); got.MergedFiles != 0 || got.StagedFiles != 1 {
			t.Fatalf("while another process holds the lease: %+v; want 1 staged, none merged", got)
		}
		if err := p.Leaser.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		// No file arrives: merging tries the table again on its own.
		waitFor(t, "the table merged once free", func() bool { return w.table("shop.t").MergedFiles == 1 })
		w.stop(t)
		w.mu.Lock()
		defer w.mu.Unlock()
		if st := w.busy[0]; st.Table != "shop.t" || st.LeaseHolder != "other/1" {
			t.Errorf("told %+v; want shop.t held by other/1", st)
		}
	})

	t.Run("an error ends the watch with it", func(t *testing.T) {
		source := &failingList{Store: objstore.NewMemory(), err: errors.New("listing refused")}
		p := newPipeline(t, source, config.Config{})
		err := p.Watch(ctx, WatchOptions{RunOptions: RunOptions{Source: source}, Interval: time.Millisecond})
		if err == nil || !errors.Is(err, source.err) {
			t.Fatalf("Watch = %v; want the listing's error", err)
		}
	})
}

// failingList is a source whose listings fail.
type failingList struct {
	objstore.Store
	err error
}

func (f *failingList) List(context.Context, string, string, func(objstore.Info) error) error {
	return f.err
}

func TestWatchMaintainsWhenCaughtUpOrEveryInterval(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	m := maintainPolicy{every: time.Minute, last: map[string]time.Time{}, deferred: map[string]bool{}, now: func() time.Time { return now }}
	steps := []struct {
		after   time.Duration
		table   string
		pending bool
		later   bool
	}{
		{0, "a", true, false},               // never maintained: now
		{time.Second, "a", true, true},      // files pending, maintained a second ago
		{30 * time.Second, "a", true, true}, // still within the minute
		{time.Second, "b", true, false},     // another table has its own clock
		{time.Second, "a", false, false},    // caught up: now, and the clock starts again
		{59 * time.Second, "a", true, true}, // within a minute of that
		{time.Second, "a", true, false},     // a minute since: now, though files are pending
		{time.Second, "a", true, true},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if got := m.later(s.table, s.pending); got != s.later {
			t.Fatalf("step %d (%s, pending %v, +%s): later = %v, want %v", i, s.table, s.pending, s.after, got, s.later)
		}
	}
	// a's last merge left its maintenance for later: it is owed, once.
	if got := m.owed(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("owed = %v, want [a]", got)
	}
	if got := m.owed(); len(got) != 0 {
		t.Fatalf("owed again = %v, want none", got)
	}
	// Paid when merging waited: the clock starts again from then.
	now = now.Add(time.Second)
	if !m.later("a", true) {
		t.Fatal("a merge a second after the owed maintenance was not left for later")
	}
	// A table maintained after being left for later owes nothing.
	now = now.Add(time.Minute)
	if m.later("a", true) {
		t.Fatal("a merge a minute later was left for later")
	}
	if got := m.owed(); len(got) != 0 {
		t.Fatalf("owed = %v after a was maintained, want none", got)
	}
}

// partitionedSmallFiles merges three rounds of files into shop.t, whose
// state is partitioned by r, without maintaining it: three small state
// files in each of four partitions. It returns the pipeline (shop.t's
// compaction_max_bytes set to maxBytes) and the state expected.
func partitionedSmallFiles(t *testing.T, ctx context.Context, source objstore.Store, maxBytes int64) (*Pipeline, map[string]string) {
	t.Helper()
	p := newPipeline(t, source, config.Config{Tables: map[string]config.TableConfig{
		"shop.t": {PartitionColumns: []string{"r"}, CompactionMaxBytes: maxBytes},
	}})
	want := map[string]string{}
	for round := range 3 {
		var files []dssim.File
		for part := range 4 {
			id := round*10 + part
			payload := fmt.Sprintf(`{"id":%d,"r":"p%d"}`, id, part)
			want[fmt.Sprintf(`{"id":%d}`, id)] = payload
			files = append(files, jsonlFile(fmt.Sprintf("r%d-p%d", round, part), 100*round+10*part, payload))
		}
		write(t, ctx, source, files)
		res := RunResult{Tables: map[string]*TableRun{}}
		if err := p.stageAll(ctx, RunOptions{Source: source, Parallel: 2}, &res); err != nil {
			t.Fatal(err)
		}
		if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
			t.Fatal(err)
		}
	}
	return p, want
}

// Watch compacts a slice at a time (watchCompactBytes) and, while nothing
// is pending, slice after slice until compaction is done: a table whose
// compaction one slice cannot finish ends compacted all the same, each
// OPTIMIZE commit within the cap.
func TestWatchCompactsSliceAfterSliceWhileNothingIsPending(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	// A cap of one byte: each slice rewrites one bin, here one partition.
	p, want := partitionedSmallFiles(t, ctx, source, 1)
	// Watch merges one more file, then maintains: one slice after the
	// merge, the others while nothing is pending.
	w := startWatch(t, p, source, nil)
	write(t, ctx, source, []dssim.File{jsonlFile("last", 1000, `{"id":99,"r":"p0"}`)})
	want[`{"id":99}`] = `{"id":99,"r":"p0"}`
	tabs, err := p.TableSet("shop.t")
	if err != nil {
		t.Fatal(err)
	}
	perPartition := func() map[string]int {
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, f := range snap.Files() {
			n[*f.PartitionValues["r"]]++
		}
		return n
	}
	waitFor(t, "every state partition compacted into one file", func() bool {
		return w.table("shop.t").MergedFiles == 1 && reflect.DeepEqual(perPartition(), map[string]int{"p0": 1, "p1": 1, "p2": 1, "p3": 1})
	})
	// The last slice has committed; it ends with the table's other steps.
	waitFor(t, "the fourth maintenance run ended", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.maintained) >= 4
	})
	w.stop(t)
	if _, rows := stateRows(t, ctx, p, "shop.t", "id"); !reflect.DeepEqual(rows, want) {
		t.Errorf("state = %v\nwant  %v", rows, want)
	}
	hist, err := delta.Open(tabs.State).History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	optimizes := 0
	for _, h := range hist {
		if h.Operation != "OPTIMIZE" {
			continue
		}
		optimizes++
		if h.Metrics["numRemovedFiles"] != "3" && h.Metrics["numRemovedFiles"] != "4" {
			t.Errorf("version %d: an OPTIMIZE removed %s files; the cap allows one partition's 3 (4 for p0)", h.Version, h.Metrics["numRemovedFiles"])
		}
	}
	if optimizes != 4 {
		t.Errorf("%d OPTIMIZE commits, want one per partition (4)", optimizes)
	}
	// Each run was told of, before and after; each slice but the last
	// left files, fewer each time.
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.maintaining != len(w.maintained) || len(w.maintained) < 4 {
		t.Fatalf("%d maintenance runs begun, %d ended; want the same, at least 4", w.maintaining, len(w.maintained))
	}
	var lefts []int
	for _, r := range w.maintained[:4] {
		lefts = append(lefts, r.CompactionLeftFiles)
		if r.Table != "shop.t" || r.Duration <= 0 {
			t.Errorf("maintained %+v: want shop.t and its duration", r)
		}
	}
	if !reflect.DeepEqual(lefts, []int{10, 7, 4, 0}) {
		t.Errorf("the slices left %v files; want 10, 7, 4, 0 (p0 has a fourth file, so its bin is the largest and last)", lefts)
	}
}

// A table whose files keep merging is maintained about every
// MaintainEvery all the same: a merge hands over after that long, though
// files are pending.
func TestWatchMaintainsATableThatNeverCatchesUp(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	// One file a batch: 80 batches of work, staged before Watch starts.
	p := newPipeline(t, source, config.Config{BatchMaxFiles: 1})
	var files []dssim.File
	for f := range 80 {
		files = append(files, jsonlFile(fmt.Sprintf("f%02d", f), 10*f, fmt.Sprintf(`{"id":%d,"n":%d}`, f%7, f)))
	}
	write(t, ctx, source, files)
	res := RunResult{Tables: map[string]*TableRun{}}
	if err := p.stageAll(ctx, RunOptions{Source: source, Parallel: 2}, &res); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pendingAt []int64 // files pending at each maintenance run's end
	w := startWatchEvery(t, p, source, nil, 30*time.Millisecond)
	w.mu.Lock()
	w.onMaintained = func(MaintainResult) {
		st, err := p.Status.Status(ctx, "shop.t")
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		pendingAt = append(pendingAt, st.Pending)
	}
	w.mu.Unlock()
	waitFor(t, "every file merged", func() bool { return w.table("shop.t").MergedFiles == 80 })
	w.stop(t)
	mu.Lock()
	defer mu.Unlock()
	during := 0
	for _, n := range pendingAt {
		if n > 0 {
			during++
		}
	}
	if during < 2 {
		t.Errorf("maintained %d times with files pending (pending at each run: %v); want at least 2 while the 80 batches merge", during, pendingAt)
	}
}
