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
	"text/tabwriter"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// singleSource serves every bucket name from one store: the embedded run
// reads one folder (or one gs:// prefix) of Datastream output.
type singleSource struct{ store objstore.Store }

func (s singleSource) Bucket(context.Context, string) (objstore.Store, error) { return s.store, nil }

// openStore opens the source, the lake or a table, which the caller closes;
// a local one that must exist must be a directory.
func openStore(ctx context.Context, url, what string, mustExist bool) (objstore.Store, error) {
	if mustExist {
		if err := mustBeDir(url, what); err != nil {
			return nil, err
		}
	}
	s, err := objstore.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	return s, nil
}

// mustBeDir checks that a local store that must exist is a directory (a
// bucket is not checked).
func mustBeDir(url, what string) error {
	if !strings.Contains(url, "://") {
		if st, err := os.Stat(url); err != nil || !st.IsDir() {
			return configError{fmt.Errorf("%s %s: not a directory", what, url)}
		}
	}
	return nil
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
	ctx, ops := opcount.Start(ctx)
	r := &runner{p: p, source: source, parallel: max(1, *parallel), stderr: stderr,
		tables: map[string]*tableSummary{}, held: map[string]string{}, poll: time.Second, ops: ops}
	switch {
	case *watch:
		r.busy = fmt.Sprintf("trying again within %s", *interval) // the next merging pass tries again
		err := p.Watch(ctx, pipeline.WatchOptions{RunOptions: r.options(), Interval: *interval, Report: r.add})
		if ctx.Err() == nil {
			return err
		}
		fmt.Fprintln(stderr, "stopping")
		return r.finish(context.WithoutCancel(ctx), stdout)
	case *noWait:
		r.busy = "not waiting (--no-wait)"
	default:
		r.wait, r.busy = true, "waiting"
	}
	if err := r.pass(ctx); err != nil {
		return err
	}
	return r.finish(ctx, stdout)
}

// tableSummary is one table's line of run's summary: what this run's
// passes did, and the files left now, by any run.
type tableSummary struct {
	pipeline.TableRun
	pending, quarantined []coord.FileRecord
}

type runner struct {
	p        *pipeline.Pipeline
	source   objstore.Store
	parallel int
	stderr   io.Writer
	// wait makes a pass wait for tables whose lease another live process
	// holds, looking again every poll; busy ends the message that says so.
	wait bool
	poll time.Duration
	busy string
	// held is, per table whose lease another process holds, the lease
	// last announced ("lease held by host/pid until 13:02:11"), so that a
	// wait is announced once per holder and the summary can say it.
	held    map[string]string
	tables  map[string]*tableSummary
	skipped int // files staging skipped
	ignored int // objects of the source that are no data files, as the last pass listed them
	// ops counts the run's calls as the cloud services would bill them.
	ops *opcount.Counter
}

func (r *runner) table(tableID string) *tableSummary {
	t := r.tables[tableID]
	if t == nil {
		t = &tableSummary{TableRun: pipeline.TableRun{StateVersion: -1, HistoryVersion: -1}}
		r.tables[tableID] = t
	}
	return t
}

// pass stages every new file under the source, merges every table with
// pending work and maintains the tables it touched (pipeline.RunOnce), and
// adds what it did to the summary.
func (r *runner) pass(ctx context.Context) error {
	res, err := r.p.RunOnce(ctx, r.options())
	if err != nil {
		return err
	}
	r.add(res)
	return nil
}

func (r *runner) options() pipeline.RunOptions {
	return pipeline.RunOptions{
		Source: r.source, Parallel: r.parallel,
		Progress: r.progress, Busy: r.announce, Wait: r.wait, Poll: r.poll,
	}
}

// add adds what a pass did to the summary.
func (r *runner) add(res pipeline.RunResult) {
	r.skipped += res.Skipped
	if res.Listed {
		r.ignored = res.Ignored
	}
	for _, id := range res.Merged {
		delete(r.held, id)
	}
	for id, tr := range res.Tables {
		r.table(id).Add(*tr)
	}
}

// progress says on stderr how far a large staging is, every 50 files.
func (r *runner) progress(pr pipeline.StageProgress) {
	if pr.Total >= 50 && (pr.Done%50 == 0 || pr.Done == pr.Total) {
		fmt.Fprintf(r.stderr, "staged %d/%d files (%.0f files/s)\n", pr.Done, pr.Total, float64(pr.Done)/pr.Elapsed.Seconds())
	}
}

// announce says on stderr who holds a table's lease, once per holder.
func (r *runner) announce(st coord.TableStatus) {
	who := st.LeaseProcess
	if who == "" {
		who = st.LeaseHolder
	}
	held := fmt.Sprintf("lease held by %s until %s", who, st.LeaseExpires.Local().Format(time.TimeOnly))
	if prev, ok := r.held[st.Table]; !ok || !strings.HasPrefix(prev, "lease held by "+who+" ") {
		fmt.Fprintf(r.stderr, "%s: %s; %s\n", st.Table, held, r.busy)
	}
	r.held[st.Table] = held
}

// errIncomplete marks a run (or a replay) that finished with files it
// could see not merged: exit code 3.
var errIncomplete = errors.New("not everything merged")

// pendingShown bounds the pending files named per table; they only wait
// for a run, unlike quarantined files, which each need a fix.
const pendingShown = 20

// finish prints the summary and returns errIncomplete when files are left
// pending (staged or in an open batch, by any run) or quarantined (those
// whose source this run saw: a quarantined file deleted from the source
// since is only counted).
func (r *runner) finish(ctx context.Context, w io.Writer) error {
	unmerged, err := r.p.Unmerged(ctx)
	if err != nil {
		return err
	}
	var pending, quarantined, unseen int
	for _, u := range unmerged {
		t := r.table(u.Table)
		t.pending, t.quarantined = u.Pending, nil
		for _, f := range u.Quarantined {
			there, err := r.inSource(ctx, f)
			if err != nil {
				return err
			}
			if there {
				t.quarantined = append(t.quarantined, f)
			} else {
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
	return incomplete(pending, quarantined)
}

// incomplete is the error of a command that finished with files left
// pending or quarantined, which it has named on stdout: exit code 3. It is
// nil when none is left.
func incomplete(pending, quarantined int) error {
	if pending+quarantined == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d files pending, %d quarantined (named above)", errIncomplete, pending, quarantined)
}

// inSource reports whether the source still holds the generation of a
// registered file.
func (r *runner) inSource(ctx context.Context, f coord.FileRecord) (bool, error) {
	info, err := r.source.Stat(ctx, f.Name)
	if errors.Is(err, objstore.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look for %s in the source: %w", f.Name, err)
	}
	return info.Generation == f.Generation, nil
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
			t.StagedFiles, t.StagedEvents, t.MergedFiles, t.MergedEvents, t.Inserted, t.Updated, t.Deleted, t.Stale,
			len(t.pending), len(t.quarantined), ver(t.StateVersion), ver(t.HistoryVersion))
	}
	tw.Flush()
	fmt.Fprint(w, `staged: files and change events this run staged; merged: those this run merged, whichever run staged them
inserted, updated, deleted: keys of the current-state table this run changed; stale: events ignored, older than the stored row
pending, quarantined: files not merged now, whichever run staged them; state v, history v: versions of the Delta tables
`)
	if n := r.skipped + r.ignored; n > 0 {
		fmt.Fprintf(w, "%d files skipped (not Datastream data files, empty, or excluded)\n", n)
	}
	if c := r.ops.Counts(); c != (opcount.Counts{}) {
		fmt.Fprintf(w, "operations, as the cloud would bill them: %d storage class A, %d class B; %d Firestore reads, %d writes, %d deletes; %d Pub/Sub publishes\n",
			c.GCSClassA, c.GCSClassB, c.FirestoreReads, c.FirestoreWrites, c.FirestoreDeletes, c.PubSubPublishes)
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
