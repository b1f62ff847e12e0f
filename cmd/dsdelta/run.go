package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// singleSource serves every bucket name from one store: the embedded run
// reads one folder (or one gs:// prefix) of Datastream output.
type singleSource struct{ store objstore.Store }

func (s singleSource) Bucket(context.Context, string) (objstore.Store, error) { return s.store, nil }

// openStore opens the source, the lake or a table, which the caller closes;
// a local one that must exist must be a directory.
func openStore(ctx context.Context, url, what string, mustExist bool) (objstore.Store, error) {
	if mustExist && !strings.Contains(url, "://") {
		if st, err := os.Stat(url); err != nil || !st.IsDir() {
			return nil, configError{fmt.Errorf("%s %s: not a directory", what, url)}
		}
	}
	s, err := objstore.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	return s, nil
}

// localPipeline builds the embedded pipeline: local coordination in the
// lake under _dsdelta/.
func localPipeline(ctx context.Context, source, lake objstore.Store, cfg config.Config, logger *slog.Logger) (*pipeline.Pipeline, error) {
	c, err := coord.NewLocal(lake, coord.LocalOptions{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open local coordination in %s: %w", lake.URL(), err)
	}
	host, _ := os.Hostname()
	return &pipeline.Pipeline{
		Lake: lake, Sources: singleSource{source}, Coordination: pipeline.Coordinate(c), Config: cfg,
		Holder: fmt.Sprintf("cli-%s-%d", host, os.Getpid()), Logger: logger,
	}, nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	src := fs.String("source", "", "Datastream output: a folder or gs://bucket/prefix (required)")
	lakeURL := fs.String("lake", "", "where the Delta tables go: a folder or gs://bucket/prefix (required)")
	cfgFile := fs.String("config", "", "configuration file (YAML or JSON)")
	watch := fs.Bool("watch", false, "keep running and pick up new files as they appear")
	interval := fs.Duration("interval", 5*time.Second, "with --watch, how often to look for new files")
	parallel := fs.Int("parallel", runtime.NumCPU(), "files decoded at once")
	noWait := fs.Bool("no-wait", false, "leave the files of a table whose lease another live run holds pending, instead of waiting for it")
	verbose := fs.Bool("v", false, "log every file and batch")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if *src == "" || *lakeURL == "" {
		fs.Usage()
		return fmt.Errorf("%w: --source and --lake are required", errUsage)
	}
	var cfg config.Config
	if *cfgFile != "" {
		var err error
		if cfg, err = config.Load(*cfgFile); err != nil {
			return configError{err}
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	source, err := openStore(ctx, *src, "source", true)
	if err != nil {
		return err
	}
	defer source.Close()
	lake, err := openStore(ctx, *lakeURL, "lake", false)
	if err != nil {
		return err
	}
	defer lake.Close()
	p, err := localPipeline(ctx, source, lake, cfg, logger)
	if err != nil {
		return err
	}
	r := &runner{p: p, source: source, cfg: cfg, parallel: max(1, *parallel), stderr: stderr,
		seen: map[string]bool{}, tables: map[string]*tableSummary{}, held: map[string]string{}, poll: time.Second}
	switch {
	case *watch:
		r.busy = fmt.Sprintf("trying again in %s", *interval) // the next pass waits
	case *noWait:
		r.busy = "not waiting (--no-wait)"
	default:
		r.wait, r.busy = true, "waiting"
	}
	for {
		if err := r.pass(ctx); err != nil {
			return err
		}
		if !*watch {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(stderr, "stopping")
			return r.finish(context.WithoutCancel(ctx), stdout)
		case <-time.After(*interval):
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return r.finish(ctx, stdout)
}

// tableSummary is one table's line of run's summary.
type tableSummary struct {
	stagedFiles, stagedEvents, mergedFiles, mergedEvents int64 // by this run
	inserted, updated, deleted, stale                    int64 // keys and events, by this run
	stateVersion, historyVersion                         int64
	pending, quarantined                                 []coord.FileRecord // left now, by any run
}

type runner struct {
	p        *pipeline.Pipeline
	source   objstore.Store
	cfg      config.Config
	parallel int
	stderr   io.Writer
	// wait makes a pass wait for tables whose lease another live process
	// holds, looking again every poll; busy ends the message that says so.
	wait bool
	poll time.Duration
	busy string
	mu   sync.Mutex
	seen map[string]bool // name@generation already staged in this process
	// held is, per table whose lease another process holds, the lease
	// last announced ("lease held by host/pid until 13:02:11"), so that a
	// wait is announced once per holder and the summary can say it.
	held    map[string]string
	tables  map[string]*tableSummary
	skipped int
}

func (r *runner) table(id string) *tableSummary {
	t := r.tables[id]
	if t == nil {
		t = &tableSummary{stateVersion: -1, historyVersion: -1}
		r.tables[id] = t
	}
	return t
}

// pass stages every new file under the source, merges every table with
// pending work and maintains the tables it touched.
func (r *runner) pass(ctx context.Context) error {
	var files []datastream.SourceFile
	err := r.source.List(ctx, "", "", func(info objstore.Info) error {
		key := fmt.Sprintf("%s@%d", info.Name, info.Generation)
		if r.seen[key] || !r.cfg.IsDataFile(info.Name) {
			return nil
		}
		files = append(files, datastream.SourceFile{Name: info.Name, Generation: info.Generation, Size: info.Size})
		return nil
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", r.source.URL(), err)
	}
	start := time.Now()
	var done int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.parallel)
	for _, f := range files {
		g.Go(func() error {
			res, err := r.p.Stage(gctx, f)
			if err != nil {
				return err
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[fmt.Sprintf("%s@%d", f.Name, f.Generation)] = true
			done++
			switch {
			case res.Skipped != "":
				r.skipped++
			case res.Quarantined != "":
				// Counted by finish, from the registry.
			case !res.Duplicate:
				t := r.table(res.Table)
				t.stagedFiles++
				t.stagedEvents += res.Events
			}
			if len(files) >= 50 && (done%50 == 0 || done == int64(len(files))) {
				fmt.Fprintf(r.stderr, "staged %d/%d files (%.0f files/s)\n", done, len(files), float64(done)/time.Since(start).Seconds())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	statuses, err := r.p.Status.Tables(ctx)
	if err != nil {
		return err
	}
	sort.Slice(statuses, func(i, j int) bool { return statuses[i].Table < statuses[j].Table })
	var busy []string
	for _, st := range statuses {
		if st.Pending == 0 && st.OpenBatchSeq == 0 {
			continue
		}
		merged, err := r.merge(ctx, st.Table)
		if err != nil {
			return err
		}
		if !merged {
			busy = append(busy, st.Table)
		}
	}
	if err := r.waitFor(ctx, busy); err != nil {
		return err
	}
	// Versions as the tables hold them now (maintenance commits too).
	statuses, err = r.p.Status.Tables(ctx)
	if err != nil {
		return err
	}
	for _, st := range statuses {
		t := r.table(st.Table)
		tabs, err := r.p.Tables(st.Table)
		if err != nil {
			continue // a quarantine record of a file whose table is unknown
		}
		if s, err := delta.Open(tabs.State).Snapshot(ctx); err == nil {
			t.stateVersion = s.Version()
		}
		if s, err := delta.Open(tabs.History).Snapshot(ctx); err == nil {
			t.historyVersion = s.Version()
		}
	}
	return nil
}

// merge merges a table's pending files and maintains it. It reports false
// when another process holds the table's lease, so nothing was merged.
func (r *runner) merge(ctx context.Context, table string) (bool, error) {
	mr, err := r.p.MergeTable(ctx, table)
	if err != nil {
		return false, err
	}
	// A busy result may follow batches merged before the lease was lost.
	t := r.table(table)
	t.mergedFiles += int64(mr.Files)
	t.mergedEvents += mr.Result.Events
	t.inserted += mr.Result.Inserted
	t.updated += mr.Result.Updated
	t.deleted += mr.Result.Deleted + mr.Result.Buried
	t.stale += mr.Result.Stale
	if mr.Busy {
		return false, nil
	}
	delete(r.held, table)
	if _, err := r.p.Maintain(ctx, table); err != nil {
		return false, err
	}
	return true, nil
}

// waitFor announces the tables whose lease another process holds and, when
// the run waits, merges each once its lease is free. The lease of a process
// gone from this host is taken over by the merge itself, so what is waited
// for is a live process, or one on another host until its lease expires.
func (r *runner) waitFor(ctx context.Context, busy []string) error {
	for len(busy) > 0 {
		for _, table := range busy {
			if err := r.announce(ctx, table); err != nil {
				return err
			}
		}
		if !r.wait {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.poll):
		}
		var still []string
		for _, table := range busy {
			merged, err := r.merge(ctx, table)
			if err != nil {
				return err
			}
			if !merged {
				still = append(still, table)
			}
		}
		busy = still
	}
	return nil
}

// announce says on stderr who holds a table's lease, once per holder.
func (r *runner) announce(ctx context.Context, table string) error {
	st, err := r.p.Status.Status(ctx, table)
	if err != nil {
		return fmt.Errorf("lease of %s: %w", table, err)
	}
	if st.LeaseHolder == "" {
		return nil // released meanwhile: the next look merges
	}
	who := st.LeaseProcess
	if who == "" {
		who = st.LeaseHolder
	}
	held := fmt.Sprintf("lease held by %s until %s", who, st.LeaseExpires.Local().Format(time.TimeOnly))
	if prev, ok := r.held[table]; !ok || !strings.HasPrefix(prev, "lease held by "+who+" ") {
		fmt.Fprintf(r.stderr, "%s: %s; %s\n", table, held, r.busy)
	}
	r.held[table] = held
	return nil
}

// errIncomplete marks a run that finished with files it could see not
// merged: exit code 3.
var errIncomplete = errors.New("not everything merged")

// pendingShown bounds the pending files named per table; they only wait
// for a run, unlike quarantined files, which each need a fix.
const pendingShown = 20

// finish prints the summary and returns errIncomplete when files are left
// pending (staged or in an open batch, by any run) or quarantined (those
// whose source this run saw: a quarantined file deleted from the source
// since is only counted).
func (r *runner) finish(ctx context.Context, w io.Writer) error {
	statuses, err := r.p.Status.Tables(ctx)
	if err != nil {
		return err
	}
	var pending, quarantined, unseen int
	for _, st := range statuses {
		if st.Pending == 0 && st.OpenBatchSeq == 0 && st.Quarantined == 0 {
			continue
		}
		files, err := r.p.Registry.ListFiles(ctx, st.Table, "")
		if err != nil {
			return err
		}
		t := r.table(st.Table)
		t.pending, t.quarantined = nil, nil
		for _, f := range files {
			switch {
			case f.State == coord.StateStaged || f.State == coord.StateBatched:
				t.pending = append(t.pending, f)
			case f.State != coord.StateQuarantined:
			case r.seen[fmt.Sprintf("%s@%d", f.Name, f.Generation)]:
				t.quarantined = append(t.quarantined, f)
			default:
				unseen++
			}
		}
		pending += len(t.pending)
		quarantined += len(t.quarantined)
	}
	r.print(w)
	if unseen > 0 {
		fmt.Fprintf(w, "%d quarantined files not in the source any more are not counted (dsdelta status --lake)\n", unseen)
	}
	if pending+quarantined == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d files pending, %d quarantined (named above)", errIncomplete, pending, quarantined)
}

func (r *runner) print(w io.Writer) {
	ids := make([]string, 0, len(r.tables))
	for id := range r.tables {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tstaged files\tstaged events\tmerged files\tmerged events\tinserted\tupdated\tdeleted\tstale\tpending\tquarantined\tstate v\thistory v\t")
	for _, id := range ids {
		t := r.tables[id]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", id,
			t.stagedFiles, t.stagedEvents, t.mergedFiles, t.mergedEvents, t.inserted, t.updated, t.deleted, t.stale,
			len(t.pending), len(t.quarantined), ver(t.stateVersion), ver(t.historyVersion))
	}
	tw.Flush()
	fmt.Fprint(w, `staged: files and change events this run staged; merged: those this run merged, whichever run staged them
inserted, updated, deleted: keys of the current-state table this run changed; stale: events ignored, older than the stored row
pending, quarantined: files not merged now, whichever run staged them; state v, history v: versions of the Delta tables
`)
	if r.skipped > 0 {
		fmt.Fprintf(w, "%d files skipped (not Datastream data files, empty, or excluded)\n", r.skipped)
	}
	for _, id := range ids {
		t := r.tables[id]
		for _, f := range t.quarantined {
			fmt.Fprintf(w, "quarantined: %s: %s\n", f.Name, f.Reason)
		}
		for i, f := range t.pending {
			if i == pendingShown {
				fmt.Fprintf(w, "pending: %d more files of %s\n", len(t.pending)-i, id)
				break
			}
			fmt.Fprintf(w, "pending: %s (%s)\n", f.Name, id)
		}
		if held := r.held[id]; held != "" && len(t.pending) > 0 {
			fmt.Fprintf(w, "%s: %d files pending: %s\n", id, len(t.pending), held)
		}
	}
}

func ver(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
