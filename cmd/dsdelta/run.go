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
			return nil, fmt.Errorf("%s %s: not a directory", what, url)
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
	c, err := coord.NewLocal(lake, coord.LocalOptions{})
	if err != nil {
		return nil, fmt.Errorf("open local coordination in %s: %w", lake.URL(), err)
	}
	host, _ := os.Hostname()
	return &pipeline.Pipeline{
		Lake: lake, Sources: singleSource{source}, Coord: c, Config: cfg,
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
			return err
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
	r := &runner{p: p, source: source, cfg: cfg, parallel: max(1, *parallel), stderr: stderr, seen: map[string]bool{}, tables: map[string]*tableSummary{}}
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
			r.print(stdout)
			return nil
		case <-time.After(*interval):
		}
	}
	r.print(stdout)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

type tableSummary struct {
	files, events, inserted, updated, deleted, stale, quarantined int64
	stateVersion, historyVersion                                  int64
}

type runner struct {
	p        *pipeline.Pipeline
	source   objstore.Store
	cfg      config.Config
	parallel int
	stderr   io.Writer
	mu       sync.Mutex
	seen     map[string]bool // name@generation already staged in this process
	tables   map[string]*tableSummary
	skipped  int
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
				r.table(tableOrUnknown(res.Table)).quarantined++
			case !res.Duplicate:
				t := r.table(res.Table)
				t.files++
				t.events += res.Events
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
	statuses, err := r.p.Coord.Tables(ctx)
	if err != nil {
		return err
	}
	sort.Slice(statuses, func(i, j int) bool { return statuses[i].Table < statuses[j].Table })
	for _, st := range statuses {
		if st.Pending == 0 && st.OpenBatchSeq == 0 {
			continue
		}
		mr, err := r.p.MergeTable(ctx, st.Table)
		if err != nil {
			return err
		}
		t := r.table(st.Table)
		t.inserted += mr.Result.Inserted
		t.updated += mr.Result.Updated
		t.deleted += mr.Result.Deleted + mr.Result.Buried
		t.stale += mr.Result.Stale
		t.quarantined += int64(mr.Quarantined)
		if _, err := r.p.Maintain(ctx, st.Table); err != nil {
			return err
		}
	}
	// Versions as the tables hold them now (maintenance commits too).
	statuses, err = r.p.Coord.Tables(ctx)
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

func tableOrUnknown(t string) string {
	if t == "" {
		return "(unknown table)"
	}
	return t
}

func (r *runner) print(w io.Writer) {
	ids := make([]string, 0, len(r.tables))
	for id := range r.tables {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tfiles\tevents\tinserted\tupdated\tdeleted\tstale\tquarantined\tstate v\thistory v\t")
	for _, id := range ids {
		t := r.tables[id]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", id, t.files, t.events, t.inserted, t.updated, t.deleted, t.stale, t.quarantined, ver(t.stateVersion), ver(t.historyVersion))
	}
	tw.Flush()
	if r.skipped > 0 {
		fmt.Fprintf(w, "%d files skipped (not Datastream data files, empty, or excluded)\n", r.skipped)
	}
	ctx := context.Background()
	statuses, _ := r.p.Coord.Tables(ctx)
	for _, st := range statuses {
		if st.Quarantined == 0 {
			continue
		}
		q, err := r.p.Coord.ListFiles(ctx, st.Table, coord.StateQuarantined)
		if err != nil && !errors.Is(err, coord.ErrNotFound) {
			continue
		}
		for _, f := range q {
			fmt.Fprintf(w, "quarantined: %s: %s\n", f.Name, f.Reason)
		}
	}
}

func ver(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
