package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Targets of the backfill scenario (issue 12, raised by issue 31 item 2).
const (
	backfillMaxRatio      = 1.0     // dsdelta's time / DuckDB's
	backfillMinEventsPerS = 400_000 // end to end, on 2 cores
	backfillMaxPeakMiB    = 512
	backfillMinStageMBs   = 100 // MB of JSONL per second of staging
	// backfillMemLimitMiB is the child's GOMEMLIMIT: the merge function's
	// in a 512 MiB instance (four fifths, as terraform sets it), the
	// memory the peak target is about.
	backfillMemLimitMiB = 409
)

// backfillPayload is the type dsdelta infers for the backfill table's
// payload from the JSON values of a first backfill (no table yet): strings,
// numbers with a fraction as decimal(38, their scale), integers as long, ISO
// timestamps with Z as timestamp. DuckDB is given the same types.
const backfillPayload = `STRUCT(id VARCHAR, email VARCHAR, name VARCHAR, balance DECIMAL(38,2), created_at TIMESTAMPTZ, is_active BIGINT, notes VARCHAR)`

// backfillColumns are the source columns, as the state tables hold them.
const backfillColumns = "id, email, name, balance, created_at, is_active, notes"

// backfillRun is one run of the dsdelta side: the child's figures and its
// peak RSS.
type backfillRun struct {
	backfillbench.ChildResult
	// peakKiB is the greater of the child's VmHWM of each phase and its
	// rusage maxrss where that is the child's own (childMaxRSS).
	peakKiB int64
}

func (r backfillRun) eventsPerS() float64 { return float64(r.Events) / (r.TotalMillis / 1000) }

func (r backfillRun) stageMBs() float64 { return mb(r.SourceBytes) / (r.StageMillis / 1000) }

// cores is how many cores a phase kept busy on average.
func cores(cpuMillis, wallMillis float64) float64 { return cpuMillis / wallMillis }

func backfillScenario(ctx context.Context, rep *report, db *sql.DB, tmp string, quick bool) error {
	spec := backfillbench.Spec{Events: 1_000_000, Files: 20}
	if quick {
		spec = backfillbench.Spec{Events: 100_000, Files: 4}
	}
	dir := filepath.Join(tmp, "backfill")
	logf("backfill: generating %d events in %d JSONL files", spec.Events, spec.Files)
	d, err := backfillbench.Generate(filepath.Join(dir, "source"), spec)
	if err != nil {
		return err
	}
	// Written back now, the files do not compete with the measured runs
	// for the disk; both sides then read them from the page cache.
	syscall.Sync()

	// The verdict rule, in full and quick runs alike: on a shared 2-core
	// machine a single run of either side varied by up to half its time
	// from one run to the next.
	limited := rep.child.withEnv(fmt.Sprintf("GOMEMLIMIT=%dMiB", backfillMemLimitMiB))
	lake := filepath.Join(dir, "lake")
	dsRuns, duckRuns, err := backfillRounds(ctx, limited, db, d, dir, lake, verdictRuns)
	if err != nil {
		return err
	}

	// For information, the same job at the runtime's defaults: no memory
	// limit, a collection each time the heap doubles. Its peak is what
	// the job's live memory needs with that slack, not the limit.
	logf("backfill: dsdelta at the runtime's defaults (information)")
	defaults, err := backfillInChild(ctx, rep.child, d.Dir, lake+"-defaults", "", "")
	if err != nil {
		return err
	}
	if err := os.RemoveAll(lake + "-defaults"); err != nil {
		return err
	}

	f := backfillFiguresOf(d, dsRuns, duckRuns)
	rep.backfillRatio, rep.backfillEventsPerS = f.ratio, f.eventsPerS
	rep.backfillPeakMiB, rep.backfillStageMBs = float64(f.ds.peakKiB)/1024, f.stageMBs
	reportBackfill(rep, spec, d, f, defaults)

	missedCPU := f.ratio > backfillMaxRatio || f.eventsPerS < backfillMinEventsPerS || f.stageMBs < backfillMinStageMBs
	missedPeak := rep.backfillPeakMiB > backfillMaxPeakMiB
	return profileBackfill(ctx, rep, limited, d, dir, tmp, missedCPU, missedPeak)
}

// backfillRounds runs the backfill runs times on each side, in turn
// (dsdelta, DuckDB, dsdelta, ...), and checks each run's output: its row
// counts, and dsdelta's current state against DuckDB's of the same round.
// The first round's lake stays (for --keep); the others' outputs are
// removed, as the disk of the 2-core machine is small.
func backfillRounds(ctx context.Context, child childRunner, db *sql.DB, d backfillbench.Data, dir, lake string, runs int) ([]backfillRun, []duckResult, error) {
	var ds []backfillRun
	var duck []duckResult
	lakeOf := func(r int) string {
		if r == 0 {
			return lake
		}
		return fmt.Sprintf("%s-%d", lake, r)
	}
	dsSide := func(r int) error {
		logf("backfill: dsdelta (stage %d files, merge) in a child process, run %d of %d", len(d.Paths), r+1, runs)
		got, err := backfillInChild(ctx, child, d.Dir, lakeOf(r), "", "")
		if err != nil {
			return err
		}
		if got.MemLimitMiB != backfillMemLimitMiB || !got.GCPacedByLimit {
			return fmt.Errorf("dsdelta backfill ran with a %d MiB memory limit (collections paced by it: %v); want %d MiB, paced", got.MemLimitMiB, got.GCPacedByLimit, backfillMemLimitMiB)
		}
		if got.Events != int64(d.Events) || got.HistoryRows != int64(d.Events) || got.StateRows != int64(d.Keys) {
			return fmt.Errorf("dsdelta backfill staged %d events, wrote %d history and %d state rows; want %d, %d and %d", got.Events, got.HistoryRows, got.StateRows, d.Events, d.Events, d.Keys)
		}
		logf("backfill: dsdelta %.0f ms (staging %.0f ms at %.0f MB/s, merge %.0f ms), %.0f events/s, peak %.0f MiB", got.TotalMillis, got.StageMillis, got.stageMBs(), got.MergeMillis, got.eventsPerS(), float64(got.peakKiB)/1024)
		ds = append(ds, got)
		return nil
	}
	duckSide := func(r int) error {
		logf("backfill: DuckDB, run %d of %d", r+1, runs)
		out := filepath.Join(dir, fmt.Sprintf("duckdb-%d", r))
		dr, err := duckBackfill(ctx, db, d.Paths, out)
		if err != nil {
			return err
		}
		if dr.history != int64(d.Events) || dr.state != int64(d.Keys) {
			return fmt.Errorf("duckdb backfill wrote %d history and %d state rows; want %d and %d", dr.history, dr.state, d.Events, d.Keys)
		}
		logf("backfill: duckdb %v", dr.elapsed)
		duck = append(duck, dr)
		diff, err := stateDifference(ctx, db, lakeOf(r), filepath.Join(out, "state.parquet"))
		if err != nil {
			return err
		}
		if diff != 0 {
			return fmt.Errorf("backfill: dsdelta's and DuckDB's current state differ in %d rows", diff)
		}
		if r == 0 {
			return nil
		}
		return errors.Join(os.RemoveAll(lakeOf(r)), os.RemoveAll(out))
	}
	err := interleave(runs, dsSide, duckSide)
	return ds, duck, err
}

// backfillFigures are the backfill's figures by the verdict rule.
type backfillFigures struct {
	// dsMillis and duckMillis are each side's total, run by run.
	dsMillis, duckMillis []float64
	// dsStage and dsMerge are dsdelta's phases, run by run; duckLoad and
	// duckWrite DuckDB's.
	dsStage, dsMerge, duckLoad, duckWrite []float64
	// ds and duck are each side's median run (by total), for the figures
	// a run carries beside its time; ds's peaks are the highest of all its
	// runs, and so is duck's.
	ds   backfillRun
	duck duckResult
	// ratio divides the medians; eventsPerS and stageMBs are of dsdelta's
	// median total and median staging time.
	ratio, eventsPerS, stageMBs float64
}

func backfillFiguresOf(d backfillbench.Data, ds []backfillRun, duck []duckResult) backfillFigures {
	f := backfillFigures{
		dsMillis:   each(ds, func(r backfillRun) float64 { return r.TotalMillis }),
		dsStage:    each(ds, func(r backfillRun) float64 { return r.StageMillis }),
		dsMerge:    each(ds, func(r backfillRun) float64 { return r.MergeMillis }),
		duckMillis: each(duck, func(r duckResult) float64 { return secs(r.elapsed) * 1000 }),
		duckLoad:   each(duck, func(r duckResult) float64 { return secs(r.load) * 1000 }),
		duckWrite:  each(duck, func(r duckResult) float64 { return secs(r.elapsed-r.load) * 1000 }),
	}
	f.ds, f.duck = ds[medianIndex(f.dsMillis)], duck[medianIndex(f.duckMillis)]
	for _, r := range ds {
		f.ds.peakKiB, f.ds.StagePeakKiB, f.ds.MergePeakKiB = max(f.ds.peakKiB, r.peakKiB), max(f.ds.StagePeakKiB, r.StagePeakKiB), max(f.ds.MergePeakKiB, r.MergePeakKiB)
	}
	for _, r := range duck {
		f.duck.peakKiB = max(f.duck.peakKiB, r.peakKiB)
	}
	f.ratio = medianRatio(f.dsMillis, f.duckMillis)
	f.eventsPerS = float64(d.Events) / (medianOf(f.dsMillis) / 1000)
	f.stageMBs = mb(f.ds.SourceBytes) / (medianOf(f.dsStage) / 1000)
	return f
}

// reportBackfill writes the backfill's section.
func reportBackfill(rep *report, spec backfillbench.Spec, d backfillbench.Data, f backfillFigures, defaults backfillRun) {
	ds, duck := f.ds, f.duck
	rep.add("## Backfill\n")
	rep.add("%d events of one MySQL table (`%s`: a UUID-shaped string primary key, random in value and in read order, and the six other columns of the decode table) as a Datastream full-dump backfill writes them — read_method `%s`, empty log position, change_type INSERT, whole-second source timestamps, one folder under the backfill's start minute — in %d JSONL files of %.1f MB each (%.0f MB), written once before the runs. One event in %d reads again a key the backfill read at least %v before (a restarted backfill chunk), with other values, so the current state holds %d keys. %d runs each side, in turn (dsdelta %s ms; DuckDB %s ms): times are min – median – max, the ratio divides the medians, the rates are of the median times, the other figures of each side's median run, and peak RSS is the highest of the runs.\n",
		d.Events, backfillbench.TableID, backfillbench.ReadMethod, spec.Files, mb(d.Bytes)/float64(spec.Files), mb(d.Bytes), backfillbench.RereadEvery, backfillbench.RereadAfter, d.Keys, len(f.dsMillis), joinf("%.0f", f.dsMillis), joinf("%.0f", f.duckMillis))
	rep.add("| | total | staging | merge | events/s | peak RSS |")
	rep.add("|---|---|---|---|---|---|")
	rep.add("| dsdelta | %s ms | %s ms (%.0f MB/s of JSONL; %d files, %d at a time, %.1f cores busy; %.0f MB of staged Parquet) | %s ms (%d batch(es), %.1f cores busy, %d staged rows decoded) | %.0f | %.0f MiB (staging %d MiB, merge %d MiB) |",
		spread("%.0f", f.dsMillis), spread("%.0f", f.dsStage), f.stageMBs, ds.Files, ds.Parallel, cores(ds.StageCPUMillis, ds.StageMillis), mb(ds.StagedBytes), spread("%.0f", f.dsMerge), ds.Batches, cores(ds.MergeCPUMillis, ds.MergeMillis), ds.StagedRowsRead, f.eventsPerS, float64(ds.peakKiB)/1024, ds.StagePeakKiB>>10, ds.MergePeakKiB>>10)
	rep.add("| dsdelta at the runtime's defaults (information: no memory limit, GOGC=100; one run) | %.0f ms | %.0f ms | %.0f ms | %.0f | %.0f MiB (staging %d MiB, merge %d MiB) |",
		defaults.TotalMillis, defaults.StageMillis, defaults.MergeMillis, defaults.eventsPerS(), float64(defaults.peakKiB)/1024, defaults.StagePeakKiB>>10, defaults.MergePeakKiB>>10)
	rep.add("| DuckDB | %s ms | %s ms (read and type the JSON into a table) | %s ms (write history and state) | %.0f | %d MiB (the driver's own high-water mark over the job; DuckDB's default memory limit is 80%% of RAM) |",
		spread("%.0f", f.duckMillis), spread("%.0f", f.duckLoad), spread("%.0f", f.duckWrite), float64(d.Events)/(medianOf(f.duckMillis)/1000), duck.peakKiB>>10)
	rep.add("| dsdelta / DuckDB | %s | | | | |\n", ratioCell(f.dsMillis, f.duckMillis))
	dsCPU := (ds.StageCPUMillis + ds.MergeCPUMillis) / 1000
	rep.add("CPU time of the median runs (user and system; information: less moved than wall time by other work on the machine, though not free of it): dsdelta %.2f s (staging %.2f s, merge %.2f s), DuckDB %.2f s, %.2f×.\n",
		dsCPU, ds.StageCPUMillis/1000, ds.MergeCPUMillis/1000, secs(duck.cpu), dsCPU/secs(duck.cpu))
	if pairs, median := pairRatios(f.dsMillis, f.duckMillis); len(pairs) > 1 {
		rep.add("Run by run (information: each dsdelta run against the DuckDB run right after it, which met the same moment's load on the host): %s×; median %.2f×. The target compares the medians of each side.\n", joinf("%.2f", pairs), median)
	}
	rep.add("| target | figure | status |")
	rep.add("|---|---|---|")
	rep.add("| dsdelta ≤ %.1f× DuckDB | %.2f× | %s |", backfillMaxRatio, f.ratio, met(f.ratio <= backfillMaxRatio))
	rep.add("| ≥ %d events/s end to end | %.0f | %s |", backfillMinEventsPerS, f.eventsPerS, met(f.eventsPerS >= backfillMinEventsPerS))
	rep.add("| peak RSS ≤ %d MiB | %.0f MiB | %s |", backfillMaxPeakMiB, rep.backfillPeakMiB, met(rep.backfillPeakMiB <= backfillMaxPeakMiB))
	rep.add("| staging ≥ %d MB/s of JSONL | %.1f MB/s | %s |\n", backfillMinStageMBs, f.stageMBs, met(f.stageMBs >= backfillMinStageMBs))
	rep.add("dsdelta = the embedded pipeline as `dsdelta run` wires it (local object stores for the source and the lake, local coordination, default configuration: batches of at most %s), in a child process that links dsdelta but not DuckDB: `pipeline.Stage` of every file, %d at a time, then `pipeline.MergeTable`; no maintenance (compaction) is run. Total = from listing the source to the merge's last commit. Peak RSS is the child's high-water mark (the greater of its VmHWM and the kernel's rusage maxrss when that exceeds the driver's own high-water mark: a child started by vfork and exec inherits the driver's mark in its maxrss). The child runs as the merge function does in a 512 MiB instance: GOMEMLIMIT=%dMiB, four fifths of it as terraform sets it, under which dsdelta collects when the heap reaches the limit rather than each time it doubles (package memlimit; the row at the runtime's defaults shows the same job without it); the staging and merge figures are each phase's high-water mark, reset between them; the merge starts with what staging left resident (%d MiB), as in `dsdelta run` (earlier runs returned it to the system first, which made the merge fault its whole heap in again). The merge inserted %d rows and collapsed %d older reads of a key.\n",
		batchLimits(), ds.Parallel, backfillMemLimitMiB, ds.MergeStartKiB>>10, ds.Inserted, ds.Collapsed)
	rep.add("How it is made fair: both sides read the same files from the page cache, parse every field with the same explicit types (dsdelta infers them from the values, as for a table's first backfill; DuckDB gets them in `read_json(files, columns={...})`, payload `%s`, so there is no sampling pass), and write the same two tables as snappy Parquet: the history — every event with its metadata (source date, op, change type, timestamps, read method, position, the binary ordering key, uuid, is_deleted, source file), partitioned by source date — and the current state, the latest event per key by the binary ordering key dsdelta uses for backfill rows (`0x00 | source timestamp | rank`, computed in SQL), deletes left out. DuckDB runs `CREATE TEMP TABLE` from `read_json`, then `COPY ... TO history (PARTITION_BY (_ds_source_date))` and `COPY (... QUALIFY row_number() OVER (PARTITION BY id ORDER BY _ds_order DESC) = 1) TO state.parquet`, timed together. The two current states are checked equal row for row (`EXCEPT ALL` both ways), and the row counts of both histories. dsdelta does more than the baseline: a staged Parquet file per source file and its registry entry, the tombstone table, the history's record number and generation columns, Delta commits, and an fsync of every file before it is published; DuckDB's files are not synced.\n", backfillPayload)
}

// profileBackfill profiles a run of the dsdelta side for each kind of
// target the backfill missed: CPU for the time and rate targets, the heap
// for the peak.
func profileBackfill(ctx context.Context, rep *report, limited childRunner, d backfillbench.Data, dir, tmp string, missedCPU, missedPeak bool) error {
	for _, p := range []struct {
		on   bool
		kind string
	}{{missedCPU, "cpu"}, {missedPeak, "heap"}} {
		if !p.on {
			continue
		}
		prof := filepath.Join(tmp, "backfill."+p.kind+".pprof")
		cpu, heap := "", ""
		if p.kind == "cpu" {
			cpu = prof
		} else {
			heap = prof
		}
		logf("profile: backfill %s", p.kind)
		r, err := backfillInChild(ctx, limited, d.Dir, filepath.Join(dir, "lake-"+p.kind), cpu, heap)
		if err != nil {
			return err
		}
		if cpu != "" {
			rep.profiles = append(rep.profiles, pprofTop(fmt.Sprintf("CPU, for the backfill: stage %d files and merge (%.0f ms under the profiler: staging %.0f ms, merge %.0f ms)", r.Files, r.TotalMillis, r.StageMillis, r.MergeMillis), cpu))
			rep.findings = append(rep.findings, backfillCPUFindings(cpu, r)...)
		} else {
			rep.profiles = append(rep.profiles, pprofTop(fmt.Sprintf("Heap in use at the highest RSS seen, for the backfill (peak RSS %d MiB under the profiler)", r.peakKiB>>10), heap, "-sample_index=inuse_space"))
			rep.findings = append(rep.findings, backfillHeapFindings(heap, r)...)
		}
	}
	return nil
}

// batchLimits names the default batch limits the merge runs with.
func batchLimits() string {
	var c config.Config
	return fmt.Sprintf("%d files, %d MiB of Datastream files or %d MiB of staged Parquet, each merged in key-range steps of at most %d events", c.MaxFiles(), c.MaxSourceBytes()>>20, c.MaxBytes()>>20, c.MaxEvents())
}

// backfillInChild runs the dsdelta side in the child program, into a new
// lake.
func backfillInChild(ctx context.Context, child childRunner, source, lake, cpuProfile, heapProfile string, extra ...string) (backfillRun, error) {
	var r backfillRun
	if err := os.RemoveAll(lake); err != nil {
		return r, fmt.Errorf("clear %s: %w", lake, err)
	}
	args := append([]string{"-backfill", "-source", source, "-lake", lake}, extra...)
	maxRSS, err := child.run(ctx, args, cpuProfile, heapProfile, &r.ChildResult)
	if err != nil {
		return r, fmt.Errorf("backfill child: %w", err)
	}
	r.peakKiB = max(r.PeakKiB, maxRSS)
	return r, nil
}

// duckResult is the DuckDB side of the backfill.
type duckResult struct {
	elapsed, load  time.Duration // load: read_json into the table
	cpu            time.Duration // this process's CPU time over the job: DuckDB's threads
	history, state int64         // rows written
	// peakKiB is the driver's high-water RSS over the job: DuckDB's use
	// plus the driver's small own.
	peakKiB int64
}

// duckBackfill is the baseline: the JSONL files into a typed table with the
// history's metadata columns, then the history (all of it, partitioned by
// source date) and the state (latest per key by the ordering key, deletes
// left out) as snappy Parquet under out.
func duckBackfill(ctx context.Context, db *sql.DB, paths []string, out string) (duckResult, error) {
	var r duckResult
	if err := os.RemoveAll(out); err != nil {
		return r, fmt.Errorf("clear %s: %w", out, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return r, fmt.Errorf("create %s: %w", out, err)
	}
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = sqlString(p)
	}
	// The ordering key of a backfill row, byte for byte as dsdelta builds
	// it (datastream.BuildOrder): 0x00, the source timestamp in
	// microseconds with the sign bit flipped (big-endian), then the rank
	// (0 for UPDATE-DELETE, else 1). The source date is taken from the
	// epoch so no time zone setting is involved.
	load := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE bf AS SELECT
  DATE '1970-01-01' + CAST(epoch_us(source_timestamp) // 86400000000 AS INTEGER) AS _ds_source_date,
  CASE WHEN source_metadata.is_deleted OR source_metadata.change_type IN ('DELETE', 'UPDATE-DELETE') THEN 'delete' ELSE 'upsert' END AS _ds_op,
  source_metadata.change_type AS _ds_change_type,
  source_timestamp AS _ds_source_timestamp,
  read_timestamp AS _ds_read_timestamp,
  read_method AS _ds_read_method,
  'backfill' AS _ds_position,
  unhex('00' || lpad(to_hex(epoch_us(source_timestamp)::UBIGINT + 9223372036854775808::UBIGINT), 16, '0')
    || CASE WHEN source_metadata.change_type = 'UPDATE-DELETE' THEN '00' ELSE '01' END) AS _ds_order,
  uuid AS _ds_uuid,
  source_metadata.is_deleted AS _ds_is_deleted,
  filename AS _ds_source_file,
  payload.*
FROM read_json([%s], format='newline_delimited', filename=true, columns=%s)`, strings.Join(quoted, ", "), duckJSONColumns(backfillPayload))
	history := fmt.Sprintf(`COPY (SELECT * FROM bf) TO %s (FORMAT parquet, COMPRESSION snappy, PARTITION_BY (_ds_source_date))`, sqlString(filepath.Join(out, "history")))
	state := fmt.Sprintf(`COPY (
  SELECT %s, _ds_source_timestamp, _ds_change_type, _ds_position, _ds_order FROM bf
  QUALIFY row_number() OVER (PARTITION BY id ORDER BY _ds_order DESC) = 1 AND _ds_op = 'upsert'
) TO %s (FORMAT parquet, COMPRESSION snappy)`, backfillColumns, sqlString(filepath.Join(out, "state.parquet")))
	// DuckDB loads its JSON reader on first use: not part of the job.
	warm := fmt.Sprintf(`SELECT * FROM read_json(%s, format='newline_delimited', columns=%s) LIMIT 1`, quoted[0], duckJSONColumns(backfillPayload))
	if _, err := db.ExecContext(ctx, warm); err != nil {
		return r, fmt.Errorf("duckdb backfill: warm up: %w", err)
	}
	mergebench.ResetPeakRSS()
	start, startCPU := time.Now(), backfillbench.CPUTime()
	for i, q := range []string{load, history, state, "DROP TABLE bf"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return r, fmt.Errorf("duckdb backfill: %s: %w", firstLine(q), err)
		}
		if i == 0 {
			r.load = time.Since(start)
		}
	}
	r.elapsed, r.cpu = time.Since(start), backfillbench.CPUTime()-startCPU
	r.peakKiB, _ = mergebench.PeakRSSKiB()
	counts := []struct {
		dst *int64
		src string
	}{{&r.history, filepath.Join(out, "history", "*", "*.parquet")}, {&r.state, filepath.Join(out, "state.parquet")}}
	for _, c := range counts {
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+sqlString(c.src)+")").Scan(c.dst); err != nil {
			return r, fmt.Errorf("count duckdb backfill output %s: %w", c.src, err)
		}
	}
	return r, nil
}

// stateDifference counts the rows in which dsdelta's current-state table
// (its live files) and DuckDB's state file differ, both ways.
func stateDifference(ctx context.Context, db *sql.DB, lake, duckState string) (int64, error) {
	dir := filepath.Join(lake, backfillbench.Database, backfillbench.Table)
	store, err := objstore.NewLocal(dir)
	if err != nil {
		return 0, err
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("read dsdelta's state table: %w", err)
	}
	var files []string
	for _, a := range snap.Files() {
		files = append(files, sqlString(filepath.Join(dir, a.Path)))
	}
	// Timestamps as epoch microseconds: the two writers annotate them
	// differently (TIMESTAMP vs TIMESTAMPTZ) for the same instants.
	cols := "id, email, name, balance, epoch_us(created_at), is_active, notes, epoch_us(_ds_source_timestamp), _ds_change_type, _ds_position, _ds_order"
	ds := fmt.Sprintf("SELECT %s FROM read_parquet([%s])", cols, strings.Join(files, ", "))
	duck := fmt.Sprintf("SELECT %s FROM read_parquet(%s)", cols, sqlString(duckState))
	var n int64
	q := fmt.Sprintf("SELECT count(*) FROM ((%s EXCEPT ALL %s) UNION ALL (%s EXCEPT ALL %s))", ds, duck, duck, ds)
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("compare the backfill states: %w", err)
	}
	return n, nil
}
