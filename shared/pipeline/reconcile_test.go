package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// reconcileRig is a source bucket and a registry under one clock, with a
// pipeline that reconciles the source's prefix "stream".
type reconcileRig struct {
	t     *testing.T
	ctx   context.Context
	clock *coordtest.Clock
	src   objstore.Store
	p     *Pipeline
	co    *coord.Local
}

const rigBucket = "ds-bucket"

func newReconcileRig(t *testing.T, cfg config.Config) *reconcileRig {
	t.Helper()
	clock := coordtest.NewClock() // 2026-03-01 12:00 UTC
	lake := objstore.NewMemory()
	co, err := coord.NewLocal(lake, coord.LocalOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	src := objstore.NewMemoryAt(clock.Now)
	p := &Pipeline{Lake: lake, Sources: oneSource{src}, Coordination: Coordinate(co), Config: cfg,
		Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	return &reconcileRig{t: t, ctx: context.Background(), clock: clock, src: src, p: p, co: co}
}

// put writes a data file of the stream's table folder into time folder
// at, named name, and returns its name in the bucket.
func (r *reconcileRig) put(folder string, at time.Time, name string) string {
	r.t.Helper()
	full := "stream/" + timeFolderName(folder, at) + name + ".jsonl"
	if _, err := r.src.Write(r.ctx, full, strings.NewReader("{}\n"), objstore.WriteOptions{}); err != nil {
		r.t.Fatal(err)
	}
	return full
}

// notify plays onfile for the named objects: it registers them, as their
// notification would.
func (r *reconcileRig) notify(names ...string) {
	r.t.Helper()
	for _, name := range names {
		info, err := r.src.Stat(r.ctx, name)
		if err != nil {
			r.t.Fatal(err)
		}
		id := coord.FileID(rigBucket, name, info.Generation)
		if _, _, err := r.co.RegisterFile(r.ctx, coord.FileRecord{ID: id, Table: "shop.t", Bucket: rigBucket, Name: name,
			Generation: info.Generation, Size: 3, StagedPath: "_staging/shop.t/" + id + ".json", Events: 1}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// tick runs a reconcile tick and returns the names it handed to staging,
// sorted.
func (r *reconcileRig) tick() ([]string, ReconcileResult) {
	r.t.Helper()
	var got []string
	res, err := r.p.Reconcile(r.ctx, ReconcileOptions{
		Sources: r.p.Streams(Source{Store: r.src, Bucket: rigBucket, Prefix: "stream"}),
		Announce: AnnounceFunc(func(_ context.Context, files []datastream.SourceFile) error {
			for _, f := range files {
				if f.Bucket != rigBucket || f.Generation == 0 || f.Created.IsZero() {
					r.t.Errorf("handed over %+v, want its bucket, generation and creation time", f)
				}
				got = append(got, f.Name)
			}
			return nil
		}),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	slices.Sort(got)
	return got, res
}

// watermark reads a folder's stored watermark.
func (r *reconcileRig) watermark(folder string) watermark {
	r.t.Helper()
	var w watermark
	tick := &reconcileTick{p: r.p}
	if _, err := tick.load(r.ctx, Source{Store: r.src, Prefix: "stream"}.key(folder), &w); err != nil {
		r.t.Fatal(err)
	}
	return w
}

func TestReconcileHandsOverWhatNoNotificationAnnounced(t *testing.T) {
	r := newReconcileRig(t, config.Config{})
	t0 := r.clock.Now()
	var all []string
	for i := range 10 {
		all = append(all, r.put("shop_t", t0.Add(time.Duration(i)*time.Minute), fmt.Sprintf("f%02d", i)))
	}
	r.notify(all[0], all[3], all[7]) // these notifications arrived
	lost := slices.Clone(all)
	lost = slices.DeleteFunc(lost, func(n string) bool { return n == all[0] || n == all[3] || n == all[7] })

	t.Run("nothing is handed over within the grace period", func(t *testing.T) {
		if got, res := r.tick(); len(got) != 0 || res.unregistered() != 0 {
			t.Fatalf("handed over %v (unregistered %d) within the grace period", got, res.unregistered())
		}
	})
	r.clock.Advance(11 * time.Minute)
	t.Run("past the grace period, exactly the files the registry does not know are handed over", func(t *testing.T) {
		got, res := r.tick()
		if !slices.Equal(got, lost) {
			t.Fatalf("handed over %v, want %v", got, lost)
		}
		if res.unregistered() != len(lost) {
			t.Errorf("unregistered = %d, want %d", res.unregistered(), len(lost))
		}
	})
	t.Run("a file handed over is not handed over again before its retry delay", func(t *testing.T) {
		r.clock.Advance(time.Minute)
		if got, _ := r.tick(); len(got) != 0 {
			t.Fatalf("handed over %v again at once", got)
		}
	})
	t.Run("a file still unregistered after its retry delay is handed over again", func(t *testing.T) {
		r.notify(lost[1:]...) // staged, all but one
		r.clock.Advance(retryDelay(config.DefaultReconcileGrace, 1))
		got, res := r.tick()
		if !slices.Equal(got, lost[:1]) {
			t.Fatalf("handed over %v, want only %v", got, lost[:1])
		}
		if h := r.watermark("shop_t").Holes; len(h) != 1 || h[0].Tries != 2 {
			t.Errorf("holes = %+v, want the one file tried twice", h)
		}
		if res.unregistered() != 1 {
			t.Errorf("unregistered = %d, want 1", res.unregistered())
		}
	})
	t.Run("once registered, a file is forgotten and the folder's table is known", func(t *testing.T) {
		r.notify(lost[0])
		r.clock.Advance(48 * time.Hour)
		got, res := r.tick()
		w := r.watermark("shop_t")
		if len(got) != 0 || len(w.Holes) != 0 || res.unregistered() != 0 || w.Table != "shop.t" {
			t.Fatalf("handed over %v with holes %+v and table %q, want nothing, none and shop.t", got, w.Holes, w.Table)
		}
	})
}

func TestReconcileLooksUpOnlyWhatIsNewSinceItsLastPass(t *testing.T) {
	r := newReconcileRig(t, config.Config{})
	t0 := r.clock.Now()
	var names []string
	for i := range 50 {
		names = append(names, r.put("shop_t", t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("f%02d", i)))
	}
	r.notify(names...)
	r.clock.Advance(10 * time.Minute)
	if _, res := r.tick(); res.Looked != 50 {
		t.Fatalf("the first pass looked up %d files, want all 50", res.Looked)
	}
	r.clock.Advance(10 * time.Minute)
	late := r.put("shop_t", t0.Add(5*time.Minute), "late")
	r.clock.Advance(10 * time.Minute)
	got, res := r.tick()
	if res.Looked != 1 || res.Listed != 51 || !slices.Equal(got, []string{late}) {
		t.Fatalf("the second pass listed %d, looked up %d and handed over %v; want 51, 1 and the late file", res.Listed, res.Looked, got)
	}
}

func TestReconcileFindsLateFilesInOldMinuteFolders(t *testing.T) {
	r := newReconcileRig(t, config.Config{})
	t0 := r.clock.Now()
	backfill := t0 // a backfill's files all go to its start minute
	// Three hours of CDC, a file every 5 minutes in the minute of its source
	// time, and a backfill writing into its start minute every 10 minutes;
	// every notification arrives, and a reconcile ticks every 10 minutes.
	var cdc []string
	for m := 0; m < 180; m += 5 {
		r.clock.Advance(5 * time.Minute)
		cdc = append(cdc, r.put("shop_t", r.clock.Now().Add(-30*time.Second), fmt.Sprintf("cdc%03d", m)))
		r.notify(cdc[len(cdc)-1])
		if m%10 == 0 {
			r.notify(r.put("shop_t", backfill, fmt.Sprintf("bf%03d", m)))
			if got, _ := r.tick(); len(got) != 0 {
				t.Fatalf("minute %d: handed over %v, though every notification arrived", m, got)
			}
		}
	}
	if got, _ := r.tick(); len(got) != 0 {
		t.Fatalf("handed over %v, though every notification arrived", got)
	}
	w := r.watermark("shop_t")
	newest := r.clock.Now().Add(-30 * time.Second).Truncate(time.Minute)
	if !w.Newest.Equal(newest) {
		t.Fatalf("newest folder %v, want %v", w.Newest, newest)
	}
	if want := timeFolderName("shop_t", backfill); w.Start > want {
		t.Fatalf("Start %q passed the backfill's folder %q, which still receives files", w.Start, want)
	}

	t.Run("a late file in a minute folder the watermark passed is found", func(t *testing.T) {
		late := r.put("shop_t", newest.Add(-90*time.Minute), "late-cdc")
		r.clock.Advance(11 * time.Minute)
		if got, _ := r.tick(); !slices.Equal(got, []string{late}) {
			t.Fatalf("handed over %v, want %v", got, []string{late})
		}
	})
	t.Run("a backfill's late file in its old start folder is found", func(t *testing.T) {
		late := r.put("shop_t", backfill, "bf-lost")
		r.clock.Advance(11 * time.Minute)
		if got, _ := r.tick(); !slices.Equal(got, []string{late}) {
			t.Fatalf("handed over %v, want %v", got, []string{late})
		}
	})
	t.Run("once the backfill has been quiet for the lookback, Start moves past its folder", func(t *testing.T) {
		for range 14 { // 140 minutes of CDC only
			r.clock.Advance(10 * time.Minute)
			r.notify(r.put("shop_t", r.clock.Now().Add(-30*time.Second), fmt.Sprintf("cdc-more-%s", r.clock.Now().Format("1504"))))
			r.tick()
		}
		w := r.watermark("shop_t")
		want := timeFolderName("shop_t", w.Newest.Add(-config.DefaultReconcileLookback))
		if w.Start != want || len(w.Active) != 0 {
			t.Fatalf("Start %q with active folders %+v, want %q and none", w.Start, w.Active, want)
		}
	})
}

func TestReconcileDoesNotStageAgainWhatWasMergedLongAgo(t *testing.T) {
	r := newReconcileRig(t, config.Config{})
	t0 := r.clock.Now()
	var names []string
	for i := range 5 {
		names = append(names, r.put("shop_t", t0, fmt.Sprintf("f%d", i)))
	}
	r.notify(names...)
	r.clock.Advance(11 * time.Minute)
	r.tick()
	// The files are merged, and their records expire after the retention.
	l, err := r.co.Acquire(r.ctx, "shop.t", "test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.co.NextBatch(r.ctx, l, "shop.t", coord.BatchLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.co.CompleteBatch(r.ctx, l, b, coord.BatchStats{}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(coord.DefaultRetention + time.Hour)
	if n, err := r.co.Expire(r.ctx, r.clock.Now().Add(-coord.DefaultRetention)); err != nil || n < len(names) {
		t.Fatalf("Expire = %d, %v; want the %d records gone", n, err, len(names))
	}
	info, err := r.src.Stat(r.ctx, names[0])
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := r.co.Files(r.ctx, []string{coord.FileID(rigBucket, names[0], info.Generation)}); err != nil || len(recs) != 0 {
		t.Fatalf("records after expiry: %v, %v", recs, err)
	}
	if got, _ := r.tick(); len(got) != 0 {
		t.Fatalf("handed over %v, files merged a week ago", got)
	}
}

func TestReconcileKeepsEachTickWithinItsBounds(t *testing.T) {
	// A backlog of 30,000 files in 6 folders, no notification ever: each
	// tick hands over at most reconcile_max_files and lists at most
	// reconcile_max_listed objects; staging (onfile) registers what it is
	// handed between ticks; every file is handed over exactly once.
	const folders, perFolder = 6, 5000
	cfg := config.Config{ReconcileMaxFiles: 3000, ReconcileMaxListed: 12000}
	r := newReconcileRig(t, cfg)
	t0 := r.clock.Now()
	for f := range folders {
		for i := range perFolder {
			r.put(fmt.Sprintf("db_t%d", f), t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("f%05d", i))
		}
	}
	r.clock.Advance(2 * time.Hour)
	seen := map[string]bool{}
	ticks := 0
	for len(seen) < folders*perFolder {
		ticks++
		if ticks > 100 {
			t.Fatalf("%d of %d files handed over after 100 ticks", len(seen), folders*perFolder)
		}
		got, res := r.tick()
		if len(got) > cfg.ReconcileMaxFiles || res.Listed > cfg.ReconcileMaxListed {
			t.Fatalf("tick %d handed over %d files and listed %d objects, bounds %d and %d", ticks, len(got), res.Listed, cfg.ReconcileMaxFiles, cfg.ReconcileMaxListed)
		}
		for _, name := range got {
			if seen[name] {
				t.Fatalf("tick %d handed %s over again", ticks, name)
			}
			seen[name] = true
		}
		t.Logf("tick %d: listed %d, looked up %d, handed over %d", ticks, res.Listed, res.Looked, len(got))
		r.notify(got...)
		r.clock.Advance(10 * time.Minute)
	}
	// The passes under way go on to their end (the 30,000 objects take
	// three ticks' listing); once every folder had a complete pass, a tick
	// lists its share and looks nothing up: nothing is new.
	for n := range 8 {
		got, res := r.tick()
		if len(got) != 0 || res.unregistered() != 0 {
			t.Fatalf("after the backlog: handed over %d, unregistered %d", len(got), res.unregistered())
		}
		if res.Listed > cfg.ReconcileMaxListed {
			t.Fatalf("listed %d objects, bound %d", res.Listed, cfg.ReconcileMaxListed)
		}
		if n >= 5 && res.Looked != 0 {
			t.Errorf("tick %d after the backlog looked up %d files, want none", n+1, res.Looked)
		}
		r.clock.Advance(10 * time.Minute)
	}
}

func TestReconcileChoosesDataFilesAsStagingDoes(t *testing.T) {
	r := newReconcileRig(t, config.Config{})
	at := r.clock.Now()
	data := r.put("shop_t", at, "f")
	for _, name := range []string{"stream/shop_t/" + timeLayout + "/schema.avsc"} {
		if _, err := r.src.Write(r.ctx, name, strings.NewReader("x"), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.src.Write(r.ctx, "stream/shop_t/2026/03/01/12/00/empty.jsonl", strings.NewReader(""), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(11 * time.Minute)
	got, res := r.tick()
	if !slices.Equal(got, []string{data}) || res.Ignored != 2 {
		t.Fatalf("handed over %v and ignored %d, want only %s and 2 ignored", got, res.Ignored, data)
	}
}

func TestWatermarkRules(t *testing.T) {
	t.Run("a time folder is read from a name in its table folder only", func(t *testing.T) {
		ft, ok := folderTime("shop_t", "shop_t/2026/01/05/10/07/x.jsonl")
		if !ok || !ft.Equal(time.Date(2026, 1, 5, 10, 7, 0, 0, time.UTC)) {
			t.Fatalf("folderTime = %v, %v", ft, ok)
		}
		for _, name := range []string{"shop_t/x.jsonl", "shop_t/2026/01/05/10/x.jsonl", "other/2026/01/05/10/07/x", "shop_t/2026/13/05/10/07/x"} {
			if _, ok := folderTime("shop_t", name); ok {
				t.Errorf("folderTime(%q) found a time folder", name)
			}
		}
	})
	t.Run("a minute's files sort after the minute's folder name and before the next minute's", func(t *testing.T) {
		minute := time.Date(2026, 1, 5, 10, 7, 0, 0, time.UTC)
		start, next := timeFolderName("t", minute), timeFolderName("t", minute.Add(time.Minute))
		for _, file := range []string{"0", "zz", "ffff_postgresql-cdc_-1_2_2.jsonl.gz"} {
			if n := start + file; !(start < n && n < next) {
				t.Errorf("%q does not sort between %q and %q", n, start, next)
			}
		}
		if prev := timeFolderName("t", minute.Add(-time.Minute)) + "zz"; prev >= start {
			t.Errorf("%q sorts after %q", prev, start)
		}
	})
	t.Run("the retry delay doubles from the grace period up to a day", func(t *testing.T) {
		if d := retryDelay(10*time.Minute, 1); d != 20*time.Minute {
			t.Errorf("first retry after %v, want 20m", d)
		}
		if d := retryDelay(10*time.Minute, 3); d != 80*time.Minute {
			t.Errorf("third retry after %v, want 80m", d)
		}
		if d := retryDelay(10*time.Minute, 50); d != 24*time.Hour {
			t.Errorf("retry after %v, want at most a day", d)
		}
	})
	t.Run("since moves the first pass's start, never back", func(t *testing.T) {
		w := watermark{Folder: "t"}
		since := time.Date(2026, 2, 1, 0, 0, 30, 0, time.UTC)
		if got := w.startName(since); got != "t/2026/02/01/00/00/" {
			t.Errorf("start = %q", got)
		}
		w.Start = "t/2026/03/01/00/00/"
		if got := w.startName(since); got != w.Start {
			t.Errorf("start = %q, want %q", got, w.Start)
		}
		if got := (&watermark{Folder: "t"}).startName(time.Time{}); got != "t/" {
			t.Errorf("start = %q, want the folder's first name", got)
		}
	})
	t.Run("a complete pass drops holes it no longer listed, and keeps those it did", func(t *testing.T) {
		pass := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		w := watermark{Folder: "t", PassStart: pass, Holes: []hole{
			{Name: "t/gone", Created: unixTime{pass.Add(-time.Hour)}},
			{Name: "t/listed", Created: unixTime{pass.Add(-time.Hour)}, Pass: unixTime{pass}},
			{Name: "t/new", Created: unixTime{pass.Add(time.Second)}},
		}}
		w.completePass(pass.Add(time.Minute), time.Hour, false)
		var names []string
		for _, h := range w.Holes {
			names = append(names, h.Name)
		}
		if !slices.Equal(names, []string{"t/listed", "t/new"}) || !w.Covered.Equal(pass) {
			t.Fatalf("holes %v, covered %v", names, w.Covered)
		}
	})
	t.Run("a watermark of the most holes fits a coordination document", func(t *testing.T) {
		w := watermark{Folder: strings.Repeat("f", 100)}
		for i := range maxHoles {
			name := fmt.Sprintf("%s/2026/01/05/10/00/638130bb2feaf16dc5ea494583688736f5032f1c_postgresql-cdc_-1006577620_%d_2.jsonl.gz", w.Folder, i)
			w.Holes = append(w.Holes, hole{Name: name, Generation: 1767607200123456, Size: 1 << 30, Created: unixTime{time.Now()}, Tries: 9, Next: unixTime{time.Now()}, Pass: unixTime{time.Now()}})
		}
		b, err := json.Marshal(w)
		if err != nil || len(b) > 512<<10 {
			t.Fatalf("%d bytes (%v), want at most 512 KiB", len(b), err)
		}
	})
}

// TestAStagingAgainAfterTheRegistryForgotIsHarmless: should the registry
// and the watermarks lose every record (expired records, a watermark that
// could not be read, a new coordination database), the next run finds
// every file again and stages it again; the merge's history dedupe and
// txn keep every event once, and the state as it was.
func TestAStagingAgainAfterTheRegistryForgotIsHarmless(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	write(t, ctx, source, []dssim.File{
		jsonlFile("a", 10, `{"id":1,"n":5}`, `{"id":2,"n":6}`),
		jsonlFile("b", 20, `{"id":1,"n":7}`),
	})
	p := newPipeline(t, source, config.Config{})
	if _, err := p.RunOnce(ctx, RunOptions{Source: source}); err != nil {
		t.Fatal(err)
	}
	before, _ := historyTable(t, ctx, p)
	_, state := stateRows(t, ctx, p, "shop.t", "id")
	// Forget everything the coordination kept.
	var docs []string
	if err := p.Lake.List(ctx, "_dsdelta/", "", func(info objstore.Info) error {
		docs = append(docs, info.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range docs {
		if err := p.Lake.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.RunOnce(ctx, RunOptions{Source: source})
	if err != nil {
		t.Fatal(err)
	}
	if tr := res.Tables["shop.t"]; tr == nil || tr.StagedFiles != 2 || tr.MergedFiles != 2 {
		t.Fatalf("second run = %+v, want both files found, staged and merged again", tr)
	}
	after, _ := historyTable(t, ctx, p) // fails on an event held twice
	if !slices.Equal(before, after) {
		t.Fatalf("history changed:\nbefore %v\nafter  %v", before, after)
	}
	if _, again := stateRows(t, ctx, p, "shop.t", "id"); !maps.Equal(state, again) {
		t.Fatalf("state changed: %v, then %v", state, again)
	}
}

func TestReconcileListsEachConfiguredStreamByItsTableFolders(t *testing.T) {
	cfg := config.Config{Sources: []config.Source{{Prefix: "stream/sales/", Namespace: "sales"}, {Prefix: "stream/hr", Namespace: "hr"}}}
	r := newReconcileRig(t, cfg)
	at := r.clock.Now()
	want := []string{r.put("hr/shop_t", at, "h"), r.put("other_t", at, "o"), r.put("sales/shop_t", at, "s")}
	r.clock.Advance(11 * time.Minute)
	got, res := r.tick()
	if !slices.Equal(got, want) {
		t.Fatalf("handed over %v, want %v", got, want)
	}
	var folders []string
	for _, f := range res.Folders {
		folders = append(folders, f.Source.dir()+f.Folder)
		var w watermark
		if _, err := (&reconcileTick{p: r.p}).load(r.ctx, f.Source.key(f.Folder), &w); err != nil {
			t.Fatal(err)
		}
		if !w.Newest.Equal(at.Truncate(time.Minute)) {
			t.Errorf("folder %s: newest time folder %v, want %v", f.Folder, w.Newest, at.Truncate(time.Minute))
		}
	}
	slices.Sort(folders)
	if !slices.Equal(folders, []string{"stream/hr/shop_t", "stream/other_t", "stream/sales/shop_t"}) {
		t.Fatalf("table folders %v, want each stream's own", folders)
	}
}
