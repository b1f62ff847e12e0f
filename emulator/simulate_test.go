package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/dssim"
)

// newestSourceTime decodes every file of a simulation and returns its
// newest event's source timestamp.
func newestSourceTime(t *testing.T, res *dssim.Result) time.Time {
	t.Helper()
	var newest time.Time
	for _, f := range res.Files {
		err := datastream.All(context.Background(), bytes.NewReader(f.Data), f.Name, datastream.Options{}, func(ev datastream.Event) error {
			if ts := ev.SourceTimestamp.Time(); ts.After(newest) {
				newest = ts
			}
			return nil
		})
		if err != nil {
			t.Fatalf("decode %s: %v", f.Name, err)
		}
	}
	return newest
}

// TestTheSimulatorDatesItsStreamFromNow: go run ./emulator --simulate
// writes a stream whose newest change is minutes old at most, so that
// dsdelta status shows a lag that reads true; --fixed-dates keeps dssim's
// dates in January 2026.
func TestTheSimulatorDatesItsStreamFromNow(t *testing.T) {
	for _, tt := range []struct {
		name        string
		fixed       bool
		after, upTo time.Time
	}{
		{"the default simulation's newest event is at most a few minutes old", false, time.Now().Add(-5 * time.Minute), time.Now().Add(time.Minute)},
		{"with fixed dates the newest event is on 2026-01-05", true, time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := dssim.Run(SimulationOptions(SimulateOptions{Seed: 1, FixedDates: tt.fixed}, ""))
			if err != nil {
				t.Fatal(err)
			}
			if newest := newestSourceTime(t, res); newest.Before(tt.after) || newest.After(tt.upTo) {
				t.Fatalf("newest event at %v, want between %v and %v", newest, tt.after, tt.upTo)
			}
		})
	}
}
