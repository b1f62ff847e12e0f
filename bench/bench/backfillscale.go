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

func (r scaleRun) peakMiB() float64 { return float64(r.peakKiB) / 1024 }

// backfillScaleScenario measures how a backfill's cost per event grows
// with its size: the backfill scenario's table and files (UUID keys, one
// event in 50 a re-read), but every event at one source timestamp, as a
// real backfill file's, at 1M and 10M events (100k and 1M in quick mode),
// run as the backfill scenario's dsdelta side is (a child process under
// the merge function's memory limit, every file staged, then merged in
// the default batches).
func backfillScaleScenario(ctx context.Context, rep *report, tmp string, quick bool) error {
	specs := []backfillbench.Spec{{Events: 1_000_000, Files: 20, OneTimestamp: true}, {Events: 10_000_000, Files: 200, OneTimestamp: true}}
	if quick {
		specs = []backfillbench.Spec{{Events: 100_000, Files: 2, OneTimestamp: true}, {Events: 1_000_000, Files: 20, OneTimestamp: true}}
	}
	// Both sizes, in turn (small, large, small, ...), in full and quick
	// runs alike: the verdict rule.
	runs := verdictRuns
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
	lake := filepath.Join(dir, "lake")
	// Oldest file first, as `dsdelta run` and the reconcile hand files
	// over and notifications arrive: the target's runs.
	inOrder, err := scaleRuns(ctx, limited, data, lake, runs, "-dv", "-in-order")
	if err != nil {
		return err
	}
	// In name order, which Datastream's names shuffle: a re-read of a key
	// is often merged before its first read, a late event the history
	// must be read to place (information, one run of each size).
	shuffled, err := scaleRuns(ctx, limited, data, lake, 1, "-dv")
	if err != nil {
		return err
	}
	ratio, mergeRatio := scaleRatios(inOrder)
	peak := slices.Max(perSize(inOrder, 1, scaleRun.peakMiB))
	rep.backfillScaleRatio, rep.backfillScalePeakMiB = ratio, peak
	shuffledRatio, shuffledMerge := scaleRatios(shuffled)

	small, large := data[0], data[1]
	rep.add("## Backfill scale\n")
	rep.add("The backfill scenario's table and files (UUID keys random in value and in read order, one event in %d a re-read of a key read earlier), but every first read at one source timestamp and every re-read a minute later, as a real backfill file carries one timestamp for all its rows, so source-time bounds prune nothing. %d and %d events (%.0f MB and %.0f MB of JSONL), each run as the backfill scenario's dsdelta side (a child under GOMEMLIMIT=%dMiB: every file staged, then merged in the default batches, %s) with `deletion_vectors: on` (the re-reads update keys scattered over the whole table, which copy-on-write would rewrite in every batch). Files are staged oldest first, as `dsdelta run` and the reconcile hand them over; %d runs of each size interleaved; then one run of each with the files in name order, which Datastream's names shuffle (information). Figures: min – median – max over the runs; the ratio divides the medians.\n",
		backfillbench.RereadEvery, small.Events, large.Events, mb(small.Bytes), mb(large.Bytes), backfillMemLimitMiB, batchLimits(), runs)
	rep.add("| events | order | batches | total per event | merge per event | late events | peak RSS |")
	rep.add("|---|---|---|---|---|---|---|")
	for _, set := range []struct {
		name string
		runs []scaleRun
	}{{"oldest first", inOrder}, {"name order", shuffled}} {
		for i, d := range data {
			first := perSize(set.runs, i, func(r scaleRun) float64 { return float64(r.Batches) })
			rep.add("| %d | %s | %.0f | %s µs | %s µs | %.0f | %.0f MiB |", d.Events, set.name, first[0], spread("%.2f", perSize(set.runs, i, scaleRun.perEventMicros)),
				spread("%.2f", perSize(set.runs, i, scaleRun.mergePerEventMicros)), perSize(set.runs, i, func(r scaleRun) float64 { return float64(r.Stale) })[0],
				slices.Max(perSize(set.runs, i, scaleRun.peakMiB)))
		}
	}
	rep.add("")
	rep.add("In name order, %d events cost %.2f× the per-event time of %d (merge alone %.2f×): the late events' duplicate check reads the history (see docs/backfill.md).\n", large.Events, shuffledRatio, small.Events, shuffledMerge)
	rep.add("| target | figure | status |")
	rep.add("|---|---|---|")
	rep.add("| %d events ≤ %.1f× the per-event time of %d | %s; merge alone %.2f× | %s |", large.Events, backfillScaleMaxRatio, small.Events,
		ratioCell(perSize(inOrder, 1, scaleRun.perEventMicros), perSize(inOrder, 0, scaleRun.perEventMicros)), mergeRatio, met(ratio <= backfillScaleMaxRatio))
	rep.add("| peak RSS ≤ %d MiB | %.0f MiB | %s |\n", backfillMaxPeakMiB, peak, met(peak <= backfillMaxPeakMiB))
	return nil
}

// scaleRuns runs the child on each size's files, runs times, sizes
// interleaved, with the extra child flags.
func scaleRuns(ctx context.Context, child childRunner, data []backfillbench.Data, lake string, runs int, extra ...string) ([]scaleRun, error) {
	var all []scaleRun
	sides := make([]func(int) error, len(data))
	for i, d := range data {
		sides[i] = func(r int) error {
			logf("backfill_scale: %d events %v, run %d of %d", d.Events, extra, r+1, runs)
			got, err := backfillInChild(ctx, child, d.Dir, lake, "", "", extra...)
			if err != nil {
				return err
			}
			if got.Events != int64(d.Events) || got.HistoryRows != int64(d.Events) || got.StateRows != int64(d.Keys) {
				return fmt.Errorf("backfill_scale: %d events staged, %d history and %d state rows; want %d, %d and %d", got.Events, got.HistoryRows, got.StateRows, d.Events, d.Events, d.Keys)
			}
			run := scaleRun{got, i}
			logf("backfill_scale: %.0f ms (staging %.0f, merge %.0f), %.2f µs/event, %d late, peak %d MiB", got.TotalMillis, got.StageMillis, got.MergeMillis, run.perEventMicros(), got.Stale, got.peakKiB>>10)
			all = append(all, run)
			return os.RemoveAll(lake)
		}
	}
	if err := interleave(runs, sides...); err != nil {
		return nil, err
	}
	return all, nil
}

// perSize is f of the runs of size index size.
func perSize(runs []scaleRun, size int, f func(scaleRun) float64) []float64 {
	var xs []float64
	for _, r := range runs {
		if r.size == size {
			xs = append(xs, f(r))
		}
	}
	return xs
}

// scaleRatios are the large size's median time per event over the small
// one's, end to end and for the merge alone.
func scaleRatios(runs []scaleRun) (total, merge float64) {
	total = medianRatio(perSize(runs, 1, scaleRun.perEventMicros), perSize(runs, 0, scaleRun.perEventMicros))
	merge = medianRatio(perSize(runs, 1, scaleRun.mergePerEventMicros), perSize(runs, 0, scaleRun.mergePerEventMicros))
	return total, merge
}
