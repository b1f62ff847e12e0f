package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
)

// Target of the backfill_scale scenario (issue 31 item 0): a backfill ten
// times larger costs at most this much more per event.
const backfillScaleMaxRatio = 1.3

// backfillScaleRuns is how many runs each size gets, interleaved (small,
// large, small, ...), so that a slow spell of the host falls on both.
const backfillScaleRuns = 3

// scaleRun is one run of one size of the backfill_scale scenario.
type scaleRun struct {
	backfillRun
	size int // index into the sizes
}

// perEventMicros is the run's end-to-end time per event.
func (r scaleRun) perEventMicros() float64 { return r.TotalMillis * 1000 / float64(r.Events) }

// mergePerEventMicros is the merge phase's time per event: the part that
// would grow with the table.
func (r scaleRun) mergePerEventMicros() float64 { return r.MergeMillis * 1000 / float64(r.Events) }

// backfillScaleScenario measures how a backfill's cost per event grows
// with its size: the backfill scenario's table and files (UUID keys, one
// event in 50 a re-read), but every event at one source timestamp, as a
// real backfill file's, at 1M and 10M events (100k and 1M in quick mode),
// run as the backfill scenario's dsdelta side is (a child process under
// the merge function's memory limit, every file staged, then merged in
// the default batches).
func backfillScaleScenario(ctx context.Context, rep *report, tmp string, quick bool) error {
	specs := []backfillbench.Spec{{Events: 1_000_000, Files: 20, OneTimestamp: true}, {Events: 10_000_000, Files: 200, OneTimestamp: true}}
	runs := backfillScaleRuns
	if quick {
		specs = []backfillbench.Spec{{Events: 100_000, Files: 2, OneTimestamp: true}, {Events: 1_000_000, Files: 20, OneTimestamp: true}}
		runs = 2
	}
	dir := filepath.Join(tmp, "backfill-scale")
	defer os.RemoveAll(dir)
	var data []backfillbench.Data
	for i, spec := range specs {
		logf("backfill_scale: generating %d events in %d JSONL files", spec.Events, spec.Files)
		d, err := backfillbench.Generate(filepath.Join(dir, fmt.Sprintf("source-%d", i)), spec)
		if err != nil {
			return err
		}
		data = append(data, d)
	}
	syscall.Sync()
	limited := rep.child.withEnv(fmt.Sprintf("GOMEMLIMIT=%dMiB", backfillMemLimitMiB))
	var all []scaleRun
	for r := range runs {
		for i, d := range data {
			logf("backfill_scale: %d events, run %d of %d", d.Events, r+1, runs)
			lake := filepath.Join(dir, "lake")
			got, err := backfillInChild(ctx, limited, d.Dir, lake, "", "", "-dv")
			if err != nil {
				return err
			}
			if got.Events != int64(d.Events) || got.HistoryRows != int64(d.Events) || got.StateRows != int64(d.Keys) {
				return fmt.Errorf("backfill_scale: %d events staged, %d history and %d state rows; want %d, %d and %d", got.Events, got.HistoryRows, got.StateRows, d.Events, d.Events, d.Keys)
			}
			run := scaleRun{got, i}
			logf("backfill_scale: %.0f ms (staging %.0f, merge %.0f), %.2f µs/event, peak %d MiB", got.TotalMillis, got.StageMillis, got.MergeMillis, run.perEventMicros(), got.peakKiB>>10)
			all = append(all, run)
			if err := os.RemoveAll(lake); err != nil {
				return err
			}
		}
	}
	per := func(size int, f func(scaleRun) float64) []float64 {
		var xs []float64
		for _, r := range all {
			if r.size == size {
				xs = append(xs, f(r))
			}
		}
		return xs
	}
	total := func(r scaleRun) float64 { return r.perEventMicros() }
	merge := func(r scaleRun) float64 { return r.mergePerEventMicros() }
	ratio := medianOf(per(1, total)) / medianOf(per(0, total))
	mergeRatio := medianOf(per(1, merge)) / medianOf(per(0, merge))
	peak := slices.Max(per(1, func(r scaleRun) float64 { return float64(r.peakKiB) / 1024 }))
	rep.backfillScaleRatio, rep.backfillScalePeakMiB = ratio, peak

	small, large := data[0], data[1]
	rep.add("## Backfill scale\n")
	rep.add("The backfill scenario's table and files (UUID keys random in value and in read order, one event in %d a re-read of a key read earlier), but every first read at one source timestamp and every re-read a minute later, as a real backfill file carries one timestamp for all its rows, so source-time bounds prune nothing. %d and %d events (%.0f MB and %.0f MB of JSONL), each run as the backfill scenario's dsdelta side (a child under GOMEMLIMIT=%dMiB: every file staged, then merged in the default batches, %s) with `deletion_vectors: on` (the re-reads update keys scattered over the whole table, which copy-on-write would rewrite in every batch), %d runs of each size interleaved. Figures: min – median – max over the runs; the ratio divides the medians.\n",
		backfillbench.RereadEvery, small.Events, large.Events, mb(small.Bytes), mb(large.Bytes), backfillMemLimitMiB, batchLimits(), runs)
	rep.add("| events | batches | total per event | merge per event | peak RSS |")
	rep.add("|---|---|---|---|---|")
	for i, d := range data {
		batches := per(i, func(r scaleRun) float64 { return float64(r.Batches) })
		rep.add("| %d | %.0f | %s µs | %s µs | %.0f MiB |", d.Events, batches[0], spread(per(i, total)), spread(per(i, merge)),
			slices.Max(per(i, func(r scaleRun) float64 { return float64(r.peakKiB) / 1024 })))
	}
	rep.add("")
	rep.add("| target | figure | status |")
	rep.add("|---|---|---|")
	rep.add("| %d events ≤ %.1f× the per-event time of %d | %.2f× (merge alone %.2f×) | %s |", large.Events, backfillScaleMaxRatio, small.Events, ratio, mergeRatio, met(ratio <= backfillScaleMaxRatio))
	rep.add("| peak RSS ≤ %d MiB | %.0f MiB | %s |\n", backfillMaxPeakMiB, peak, met(peak <= backfillMaxPeakMiB))
	return nil
}

// medianOf is the median of xs (0 for none).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// spread renders xs as min – median – max.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "NA"
	}
	return fmt.Sprintf("%.2f – %.2f – %.2f", slices.Min(xs), medianOf(xs), slices.Max(xs))
}
