package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
)

// longRound is one round of the backfill_100M scenario.
type longRound struct {
	backfillRun
	rowsBefore  int64         // history rows before the round
	generate    time.Duration // writing the round's files (not measured work)
	lakeBytes   int64         // the lake's size once the round ended
	sourceBytes int64
}

// perEvent is ms of the round's phase over its events, in µs.
func (r longRound) perEvent(ms float64) float64 { return ms * 1000 / float64(r.Events) }

// backfillLongScenario loads one backfill of 100M events (1M in quick
// mode) into one table in rounds of 10 files of 1M events (733 MB) each,
// as a long backfill arrives: each round's files are written, staged and
// merged by the backfill child (under the merge function's memory limit,
// `deletion_vectors: on`, oldest first) and the table then maintained as
// the scheduled compact function would between two rounds; the round's
// source files are deleted once merged, so the source never holds more
// than a round (the whole load is 73 GB of JSON lines). It tells whether
// the cost per event stays flat as the table grows tenfold past the
// backfill_scale scenario's 10M rows: each round is measured on its own,
// the table holding every earlier round's rows. It is not part of a full
// run (about 30 minutes and 40 GB of disk); run it with --only.
func backfillLongScenario(ctx context.Context, rep *report, tmp string, quick bool) error {
	spec, perRound := backfillbench.Spec{Events: 100_000_000, Files: 100, OneTimestamp: true}, 10
	if quick {
		spec, perRound = backfillbench.Spec{Events: 1_000_000, Files: 10, OneTimestamp: true}, 2
	}
	dir := filepath.Join(tmp, "backfill-long")
	defer os.RemoveAll(dir)
	source, lake := filepath.Join(dir, "source"), filepath.Join(dir, "lake")
	gen := backfillbench.NewGenerator(source, spec)
	limited := rep.child.withEnv(fmt.Sprintf("GOMEMLIMIT=%dMiB", backfillMemLimitMiB))
	var rounds []longRound
	var events, keys int64
	for !gen.Done() {
		start := time.Now()
		d, err := gen.Next(perRound)
		if err != nil {
			return err
		}
		syscall.Sync()
		r := longRound{rowsBefore: events, generate: time.Since(start), sourceBytes: d.Bytes}
		logf("backfill_100M: round %d: %d events in %d files (%.0f MB) written in %v; staging, merging and maintaining", len(rounds)+1, d.Events, len(d.Paths), mb(d.Bytes), r.generate.Round(time.Second))
		maxRSS, err := limited.run(ctx, []string{"-backfill", "-source", source, "-lake", lake, "-dv", "-in-order", "-maintain"}, "", "", &r.ChildResult)
		if err != nil {
			return fmt.Errorf("backfill_100M: round %d: %w", len(rounds)+1, err)
		}
		r.peakKiB = max(r.PeakKiB, maxRSS)
		events += int64(d.Events)
		keys += int64(d.Keys)
		if r.Events != int64(d.Events) || r.HistoryRows != events || r.StateRows != keys {
			return fmt.Errorf("backfill_100M: round %d: %d events staged, %d history and %d state rows; want %d, %d and %d", len(rounds)+1, r.Events, r.HistoryRows, r.StateRows, d.Events, events, keys)
		}
		for _, p := range d.Paths {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		if r.lakeBytes, err = backfillbench.DirBytes(lake, ""); err != nil {
			return err
		}
		logf("backfill_100M: round %d: stage %.0f ms, merge %.0f ms, maintain %.0f ms (%d compacted, %d folded, %.0f MB left); %.2f µs/event staged+merged; %d state files, %d history files; peak %d MiB; lake %.1f GB",
			len(rounds)+1, r.StageMillis, r.MergeMillis, r.MaintainMillis, r.Compacted, r.Folded, mb(r.CompactionLeftBytes), r.perEvent(r.TotalMillis), r.StateFiles, r.HistoryFiles, r.peakKiB>>10, float64(r.lakeBytes)/1e9)
		rounds = append(rounds, r)
	}
	reportLongBackfill(rep, spec, perRound, rounds)
	return nil
}

// reportLongBackfill writes the backfill_100M section.
func reportLongBackfill(rep *report, spec backfillbench.Spec, perRound int, rounds []longRound) {
	first, last := rounds[0], rounds[len(rounds)-1]
	rep.add("## Backfill of %dM rows\n", spec.Events/1_000_000)
	rep.add("One backfill of %d events of the backfill_scale scenario's table (UUID keys random in value and in read order, every first read at one source timestamp, one event in %d a re-read of a key read earlier, possibly in an earlier round), in %d JSONL files of %d events, loaded in rounds of %d files: each round's files are written, then the backfill child (GOMEMLIMIT=%dMiB, `deletion_vectors: on`, files staged oldest first) stages them, merges the table in the default batches and maintains it once (`Pipeline.Maintain`: compaction within `compaction_max_bytes`, checkpoints, vacuum, merged staged files deleted), as the scheduled compact function would between two rounds of a long load; then the round's source files are deleted. One run; each round is a fresh process (a cold instance). Per event: the phase's wall time over the round's events.\n",
		spec.Events, backfillbench.RereadEvery, spec.Files, spec.Events/spec.Files, perRound, backfillMemLimitMiB)
	rep.add("| round | rows before | staging per event | merge per event | maintenance (files compacted; folded; left) | stage + merge per event | CPU per event (stage + merge + maintain) | state / history files after | peak RSS | lake after |")
	rep.add("|---|---|---|---|---|---|---|---|---|---|")
	for i, r := range rounds {
		rep.add("| %d | %d | %.2f µs | %.2f µs | %.1f s (%d; %d; %.0f MB) | %.2f µs | %.2f µs | %d / %d | %d MiB | %.1f GB |", i+1, r.rowsBefore,
			r.perEvent(r.StageMillis), r.perEvent(r.MergeMillis), r.MaintainMillis/1000, r.Compacted, r.Folded, mb(r.CompactionLeftBytes),
			r.perEvent(r.TotalMillis), r.perEvent(r.StageCPUMillis+r.MergeCPUMillis+r.MaintainCPUMillis), r.StateFiles, r.HistoryFiles, r.peakKiB>>10, float64(r.lakeBytes)/1e9)
	}
	rep.add("")
	peak := slices.MaxFunc(rounds, func(a, b longRound) int { return int(a.peakKiB - b.peakKiB) })
	cpu := func(r longRound) float64 {
		return r.perEvent(r.StageCPUMillis + r.MergeCPUMillis + r.MaintainCPUMillis)
	}
	for _, base := range []struct {
		name string
		r    longRound
	}{{"the first's (into an empty table)", first}, {"the second's (the first into a table of a round's rows)", rounds[min(1, len(rounds)-1)]}} {
		rep.add("- The last round (into %d rows) against %s: %.2f× the stage + merge time per event, merge alone %.2f×, CPU per event with maintenance %.2f×.",
			last.rowsBefore, base.name, last.perEvent(last.TotalMillis)/base.r.perEvent(base.r.TotalMillis), last.perEvent(last.MergeMillis)/base.r.perEvent(base.r.MergeMillis), cpu(last)/cpu(base.r))
	}
	rep.add("- Peak RSS %d MiB (bound %d).\n", peak.peakKiB>>10, backfillMaxPeakMiB)
}
