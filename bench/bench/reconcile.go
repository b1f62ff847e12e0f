package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// listCounter counts the list calls and objects listed of a store.
type listCounter struct {
	objstore.Store
	mu           sync.Mutex
	calls, items int
}

// List counts one call per thousand objects listed, as Cloud Storage
// pages them, and at least one.
func (c *listCounter) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	n := 0
	err := c.Store.List(ctx, prefix, startAt, func(info objstore.Info) error {
		n++
		return fn(info)
	})
	c.mu.Lock()
	c.calls += 1 + max(n-1, 0)/1000
	c.items += n
	c.mu.Unlock()
	return err
}

func (c *listCounter) take() (calls, items int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, items, c.calls, c.items = c.calls, c.items, 0, 0
	return calls, items
}

// reconcileScenario measures what a reconcile tick costs on a prefix of
// 100k objects (10k in quick mode) in 20 table folders, one minute folder
// per object over the last days, of which 1% never had their
// notification: the first pass (every object looked up), the ticks that
// hand the lost ones over, and a tick on the caught-up stream. The source
// and the registry are in memory (coord.Local), so the figures are calls
// and objects, which is what Cloud Storage and Firestore bill, and the
// time of the reconcile's own work.
func reconcileScenario(ctx context.Context, rep *report, quick bool) error {
	total := 100_000
	if quick {
		total = 10_000
	}
	const folders = 20
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	mem := objstore.NewMemoryAt(clock)
	src := &listCounter{Store: mem}
	lake := objstore.NewMemory()
	co, err := coord.NewLocal(lake, coord.LocalOptions{Now: clock})
	if err != nil {
		return err
	}
	const bucket = "ds"
	p := &pipeline.Pipeline{Lake: lake, Coordination: pipeline.Coordinate(co), Now: clock,
		Config: config.Config{}, Logger: slog.New(slog.DiscardHandler)}
	logf("reconcile: writing %d objects, registering 99%%", total)
	perFolder := total / folders
	lost := 0
	for i := range perFolder {
		advance(time.Minute) // the objects span perFolder minutes
		for f := range folders {
			at := now.Add(-30 * time.Second)
			name := fmt.Sprintf("stream/db_t%02d/%s/%040x_mysql-cdc-binlog_%d_0_0.jsonl", f, at.Format("2006/01/02/15/04"), i*folders+f, i)
			info, err := mem.Write(ctx, name, strings.NewReader("{}\n"), objstore.WriteOptions{})
			if err != nil {
				return err
			}
			if (i*folders+f)%100 == 99 {
				lost++
				continue
			}
			id := coord.FileID(bucket, name, info.Generation)
			if _, _, err := co.RegisterFile(ctx, coord.FileRecord{ID: id, Table: fmt.Sprintf("db.t%02d", f), Bucket: bucket, Name: name,
				Generation: info.Generation, Size: info.Size, StagedPath: "_staging/x/" + id + ".json", Events: 1}); err != nil {
				return err
			}
		}
	}
	advance(15 * time.Minute)
	src.take()
	rep.add("## Reconcile: listing cost per tick\n")
	rep.add("A prefix of %d objects in %d table folders (one file a minute each), %d (1%%) never notified; default bounds (%d files handed over, %d objects listed a tick). Source and registry in memory: list calls are counted as Cloud Storage pages them (1,000 objects a call, plus one per folder to find the folders), look-ups as registry reads.\n",
		total, folders, lost, config.DefaultReconcileMaxFiles, config.DefaultReconcileMaxListed)
	rep.add("| tick | objects listed | list calls | looked up | handed over | unregistered | time |")
	rep.add("|---|---|---|---|---|---|---|")
	handed := 0
	for tick := 1; tick <= 20; tick++ {
		var got []datastream.SourceFile
		start := time.Now()
		res, err := p.Reconcile(ctx, pipeline.ReconcileOptions{
			Sources: []pipeline.Source{{Store: src, Bucket: bucket, Prefix: "stream"}},
			Announce: pipeline.AnnounceFunc(func(_ context.Context, files []datastream.SourceFile) error {
				got = append(got, files...)
				return nil
			}),
		})
		if err != nil {
			return fmt.Errorf("reconcile tick %d: %w", tick, err)
		}
		took := time.Since(start)
		calls, items := src.take()
		unreg := 0
		for _, f := range res.Folders {
			unreg += f.Unregistered
		}
		rep.add("| %d | %d | %d | %d | %d | %d | %s |", tick, items, calls, res.Looked, len(got), unreg, took.Round(time.Millisecond))
		logf("reconcile: tick %d listed %d in %d calls, looked up %d, handed over %d in %s", tick, items, calls, res.Looked, len(got), took.Round(time.Millisecond))
		handed += len(got)
		for _, f := range got { // onfile stages what it is handed
			if _, _, err := co.RegisterFile(ctx, coord.FileRecord{ID: coord.FileID(f.Bucket, f.Name, f.Generation), Table: "db.t", Bucket: f.Bucket,
				Name: f.Name, Generation: f.Generation, Size: f.Size, StagedPath: "_staging/x/y.json", Events: 1}); err != nil {
				return err
			}
		}
		if tick >= 3 && len(got) == 0 && res.Complete && res.Looked == 0 {
			break
		}
		advance(10 * time.Minute)
	}
	rep.add("")
	if handed != lost {
		rep.findings = append(rep.findings, fmt.Sprintf("reconcile: handed over %d files, %d were never notified", handed, lost))
	}
	rep.add("Every never-notified file was handed over %s; a tick on the caught-up prefix lists the last `reconcile_lookback` of each folder and looks nothing up.\n",
		map[bool]string{true: "exactly once", false: fmt.Sprintf("%d times for %d files", handed, lost)}[handed == lost])
	return nil
}
