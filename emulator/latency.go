package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
}

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
	sim, err := dssim.Run(dssim.Options{Seed: 3, Tables: specs, EventsPerFile: 3, Prefix: s.Options().SourcePrefix})
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
		w := s.Storage().Bucket(bucket).Object(f.Name).NewWriter(ctx)
		if _, err := w.Write(f.Data); err != nil {
			return LatencyResult{}, err
		}
		if err := w.Close(); err != nil {
			return LatencyResult{}, err
		}
		sent = append(sent, written{id: coord.FileID(bucket, f.Name, w.Attrs().Generation), at: time.Now()})
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
		for {
			rec, err := co.File(ctx, w.id)
			if err == nil && rec.State == coord.StateMerged && !rec.DoneAt.IsZero() {
				lat = append(lat, rec.DoneAt.Sub(w.at))
				break
			}
			if time.Now().After(deadline) {
				return LatencyResult{}, fmt.Errorf("file %s not merged after 3 minutes (state %q)", w.id, rec.State)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return LatencyResult{Files: len(lat), P50: q(0.50), P99: q(0.99), Max: lat[len(lat)-1]}, nil
}
