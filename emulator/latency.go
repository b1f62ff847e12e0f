package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/dssim"
)

// LatencyOptions shape the latency measurement.
type LatencyOptions struct {
	Duration time.Duration // how long files trickle in
	Tables   int           // tables the trickle rotates over
	Interval time.Duration // time between two files
}

// LatencyResult is finalize → merged latency over the trickled files.
type LatencyResult struct {
	Files    int
	P50, P99 time.Duration
	Max      time.Duration
	// ColdStart is the latency of the warm-up file, merged before the
	// trickle starts and not counted in the percentiles: the first
	// requests of the freshly started functions and emulators.
	ColdStart time.Duration
	// FirstFile is the median latency of the first file of a new table on
	// the warm stack: after the warm-up, the first file of each of
	// NewTables tables, uploaded one at a time, each once the one before
	// is merged. Not counted in the percentiles either.
	FirstFile time.Duration
}

// NewTables is how many new tables the latency measurement starts, one
// after another, for LatencyResult.FirstFile.
const NewTables = 3

// MeasureLatency writes small Datastream files at a steady trickle across
// many tables and measures, per file, the time from its upload (the object
// finalize) to the commit of the batch that merged it into the current-state
// table (the registry's DoneAt, set right after that commit).
func MeasureLatency(ctx context.Context, s *Stack, o LatencyOptions, log io.Writer) (LatencyResult, error) {
	for _, kv := range s.EmulatorEnv() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			os.Setenv(k, v)
		}
	}
	fs, err := firestore.NewClient(ctx, s.Options().Project)
	if err != nil {
		return LatencyResult{}, err
	}
	defer fs.Close()
	co, err := firestorecoord.New(ctx, fs, firestorecoord.Options{})
	if err != nil {
		return LatencyResult{}, err
	}
	files := int(o.Duration / o.Interval)
	perTable := files/o.Tables + 1
	var specs []dssim.TableSpec
	for i := 0; i < o.Tables; i++ {
		specs = append(specs, dssim.TableSpec{Source: dssim.MySQL, Database: "lat", Table: fmt.Sprintf("t%02d", i), Format: dssim.JSONL, InitialRows: 0, Changes: perTable * 3})
	}
	// A table of its own warms the stack up: every process's first
	// requests (connections, the emulators' JIT) would otherwise land on
	// the first files of the trickle, whatever the pipeline does.
	warm := dssim.TableSpec{Source: dssim.MySQL, Database: "lat", Table: "warmup", Format: dssim.JSONL, InitialRows: 0, Changes: 3}
	// Tables of their own, started on the warm stack, time what a new
	// table's first file costs beyond a known table's: its claim, the
	// creation of its three Delta tables.
	var fresh []dssim.TableSpec
	for i := range NewTables {
		fresh = append(fresh, dssim.TableSpec{Source: dssim.MySQL, Database: "lat", Table: fmt.Sprintf("new%d", i), Format: dssim.JSONL, InitialRows: 0, Changes: 3})
	}
	all := append(append(slices.Clone(specs), warm), fresh...)
	sim, err := dssim.Run(dssim.Options{Seed: 3, Tables: all, EventsPerFile: 3, Prefix: s.Options().SourcePrefix})
	if err != nil {
		return LatencyResult{}, err
	}
	byTable := map[string][]dssim.File{}
	for _, f := range sim.Files {
		byTable[f.Table] = append(byTable[f.Table], f)
	}
	type written struct {
		id string
		at time.Time
	}
	var sent []written
	bucket := s.Options().SourceBucket
	upload := func(f dssim.File) (written, error) {
		w := s.Storage().Bucket(bucket).Object(f.Name).NewWriter(ctx)
		if _, err := w.Write(f.Data); err != nil {
			return written{}, err
		}
		if err := w.Close(); err != nil {
			return written{}, err
		}
		return written{id: coord.FileID(bucket, f.Name, w.Attrs().Generation), at: time.Now()}, nil
	}
	// merged waits for a file's merge and returns its latency.
	merged := func(w written, deadline time.Time) (time.Duration, error) {
		for {
			rec, err := co.File(ctx, w.id)
			if err == nil && rec.State == coord.StateMerged && !rec.DoneAt.IsZero() {
				return rec.DoneAt.Sub(w.at), nil
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("file %s not merged in time (state %q)", w.id, rec.State)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var res LatencyResult
	if wf := byTable[warm.ID()]; len(wf) > 0 {
		w, err := upload(wf[0])
		if err != nil {
			return LatencyResult{}, err
		}
		if res.ColdStart, err = merged(w, time.Now().Add(2*time.Minute)); err != nil {
			return LatencyResult{}, fmt.Errorf("warm-up: %w", err)
		}
		fmt.Fprintf(log, "latency: warm-up file merged %v after its upload\n", res.ColdStart)
	}
	var firsts []time.Duration
	for _, spec := range fresh {
		wf := byTable[spec.ID()]
		if len(wf) == 0 {
			continue
		}
		w, err := upload(wf[0])
		if err != nil {
			return LatencyResult{}, err
		}
		d, err := merged(w, time.Now().Add(2*time.Minute))
		if err != nil {
			return LatencyResult{}, fmt.Errorf("first file of table %s: %w", spec.ID(), err)
		}
		fmt.Fprintf(log, "latency: first file of the new table %s merged %v after its upload\n", spec.ID(), d)
		firsts = append(firsts, d)
	}
	if len(firsts) > 0 {
		slices.Sort(firsts)
		res.FirstFile = firsts[len(firsts)/2]
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for i := 0; i < files; i++ {
		spec := specs[i%o.Tables]
		queue := byTable[spec.ID()]
		if len(queue) == 0 {
			continue
		}
		f := queue[0]
		byTable[spec.ID()] = queue[1:]
		w, err := upload(f)
		if err != nil {
			return LatencyResult{}, err
		}
		sent = append(sent, w)
		select {
		case <-ctx.Done():
			return LatencyResult{}, ctx.Err()
		case <-tick.C:
		}
	}
	fmt.Fprintf(log, "latency: wrote %d files across %d tables; waiting for their merges\n", len(sent), o.Tables)
	deadline := time.Now().Add(3 * time.Minute)
	var lat []time.Duration
	for _, w := range sent {
		d, err := merged(w, deadline)
		if err != nil {
			return LatencyResult{}, err
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	res.Files, res.P50, res.P99, res.Max = len(lat), q(0.50), q(0.99), lat[len(lat)-1]
	return res, nil
}
