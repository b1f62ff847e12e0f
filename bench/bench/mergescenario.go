package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// mergeSizes are the state tables the merge scenarios merge into, in rows;
// --quick leaves the last out.
func mergeSizes() []int64 { return []int64{100_000, 1_000_000, 10_000_000} }

// mergeModes are the batches merged into each table (mergebench.PlanBatch).
func mergeModes() []string { return []string{"clustered", "random", mergebench.ModeRandomDV} }

// mergeTable is a state table of the merge scenarios, built once and reset
// to its files after each merge.
type mergeTable struct {
	rows  int64
	d     mergebench.TableDirs
	base  map[string]bool
	snap  *delta.Snapshot
	files int
	bytes int64
}

// mergeCase is one (table size, batch mode) merge, run by run.
type mergeCase struct {
	t         *mergeTable
	mode      string
	batchFile string
	ds        []mergebench.ChildResult
	// duck is DuckDB's time of each run, in ms; duckFailed that a run of
	// it failed (the case then has no DuckDB figure).
	duck        []float64
	duckFailed  bool
	touched     int
	touchedRows int64
	afterRows   int64
}

func (c *mergeCase) rows() int64 { return c.t.rows }

// first is the first run: the figures every run of the case shares (files
// rewritten, row groups re-encoded, rows changed).
func (c *mergeCase) first() mergebench.ChildResult { return c.ds[0] }

func (c *mergeCase) dsMillis() []float64 { return each(c.ds, childMillis) }

func (c *mergeCase) duckOK() bool { return !c.duckFailed && len(c.duck) == len(c.ds) }

// peakKiB is the highest peak RSS of the case's runs.
func (c *mergeCase) peakKiB() int64 {
	return int64(slices.Max(each(c.ds, func(r mergebench.ChildResult) float64 { return float64(r.PeakKiB) })))
}

// usPerChangedRow is the median merge time over the rows the batch
// changed (updated, inserted, deleted), in µs: flat as long as the merge
// costs what the batch costs, whatever the table's size.
func (c *mergeCase) usPerChangedRow() float64 {
	r := c.first()
	return medianOf(c.dsMillis()) * 1000 / float64(r.Updated+r.Inserted+r.Deleted)
}

func mergeScenarios(ctx context.Context, rep *report, db *sql.DB, tmp string, quick bool) error {
	sizes := mergeSizes()
	mergeRows := int64(1_000_000)
	if quick {
		sizes = sizes[:2]
		mergeRows = 100_000
	}
	var cases []*mergeCase
	for _, n := range sizes {
		t, err := buildMergeTable(ctx, tmp, n)
		if err != nil {
			return err
		}
		for _, mode := range mergeModes() {
			batchFile, err := mergebench.WriteBatchParquet(ctx, filepath.Join(tmp, fmt.Sprintf("batch-%d-%s", n, mode)), mergebench.PlanBatch(n, mode))
			if err != nil {
				return err
			}
			cases = append(cases, &mergeCase{t: t, mode: mode, batchFile: batchFile})
		}
	}
	// The verdict rule: every case in turn (sizes and modes), each
	// dsdelta run followed by DuckDB's on the same files, so a ratio's
	// two sides, and a scaling ratio's two sizes, meet the same spells of
	// load on the host.
	sides := make([]func(int) error, len(cases))
	for i, c := range cases {
		sides[i] = func(int) error { return runMergeCase(ctx, rep, db, tmp, c) }
	}
	if err := interleave(verdictRuns, sides...); err != nil {
		return err
	}
	find := func(rows int64, mode string) *mergeCase {
		for _, c := range cases {
			if c.rows() == rows && c.mode == mode {
				return c
			}
		}
		return nil
	}
	reportMergeVsDuck(rep, find(mergeRows, "clustered"))
	scal := reportScaling(rep, cases, sizes, find)
	largest := sizes[len(sizes)-1]
	top, random := find(largest, "clustered"), find(largest, "random")
	rep.peakMiB = float64(max(top.peakKiB(), random.peakKiB())) / 1024
	rep.add("## Memory\n")
	rep.add("Peak RSS (VmHWM of a child process that only builds the batch and runs the merge, default GOGC, no GOMEMLIMIT), the highest of the runs, for the %s-row table: clustered %d MiB, random %d MiB. Of that, %d MiB was resident at process start and %d MiB once the %d-change batch was built, before the merge started. Target ≤ 256 MiB: %.0f MiB %s\n",
		humanRows(largest), top.peakKiB()>>10, random.peakKiB()>>10, top.first().StartKiB>>10, top.first().BeforeKiB>>10, mergebench.BatchSize, rep.peakMiB, met(rep.peakMiB <= 256))
	return profileMerges(ctx, rep, tmp, mergeRows, largest, scal, top, random)
}

// buildMergeTable writes a state table of n rows under tmp, flushed to
// disk.
func buildMergeTable(ctx context.Context, tmp string, n int64) (*mergeTable, error) {
	t := &mergeTable{rows: n, d: mergebench.TableDirs{Root: filepath.Join(tmp, fmt.Sprintf("table-%d", n))}}
	logf("merge: building a %d-row state table", n)
	var err error
	if t.files, t.bytes, err = mergebench.BuildStateTable(ctx, t.d, n); err != nil {
		return nil, err
	}
	// The build leaves hundreds of MB for the kernel to write back;
	// flushed now, that write-back does not land in a measured merge
	// (whose own commit waits on fsync).
	syscall.Sync()
	if t.base, err = mergebench.ListFiles(t.d.State()); err != nil {
		return nil, err
	}
	store, err := objstore.NewLocal(t.d.State())
	if err != nil {
		return nil, err
	}
	if t.snap, err = delta.Open(store).Snapshot(ctx); err != nil {
		return nil, fmt.Errorf("read base table: %w", err)
	}
	return t, nil
}

// runMergeCase runs the case's merge once in a child, checks it, resets
// the table, and runs DuckDB's rewrite of the same files.
func runMergeCase(ctx context.Context, rep *report, db *sql.DB, tmp string, c *mergeCase) error {
	n, d := c.rows(), c.t.d
	r, err := mergeInChild(ctx, rep.child, d.Root, n, c.mode, "", "")
	if err != nil {
		return err
	}
	c.ds = append(c.ds, r)
	touched, after, err := touchedFiles(ctx, d, c.t.snap)
	if err != nil {
		return err
	}
	c.touched, c.afterRows = len(touched), after
	c.touchedRows = fileRows(c.t.snap, d.State(), touched)
	if err := mergebench.ResetTable(d, c.t.base); err != nil {
		return err
	}
	if want := n + mergebench.BatchInserts - mergebench.BatchDeletes; c.afterRows != want {
		return fmt.Errorf("merge into %d rows (%s): table holds %d rows after, want %d", n, c.mode, c.afterRows, want)
	}
	outFile := filepath.Join(tmp, "duck-out.parquet")
	t, got, err := duckMerge(ctx, db, touched, c.batchFile, outFile)
	os.Remove(outFile)
	if err != nil {
		if !c.duckFailed {
			rep.notes = append(rep.notes, fmt.Sprintf("DuckDB merge into %s rows (%s) failed: %v", humanRows(n), c.mode, err))
		}
		c.duckFailed = true
	} else {
		if wantRows := c.touchedRows - (r.Updated + r.Deleted) + (r.Inserted + r.Updated); got != wantRows {
			return fmt.Errorf("duckdb merge into %d rows (%s) wrote %d rows, dsdelta's result needs %d", n, c.mode, got, wantRows)
		}
		c.duck = append(c.duck, secs(t)*1000)
	}
	logf("merge: %d rows %s, run %d: dsdelta %.0f ms (peak %d MiB, %d/%d files rewritten, %d deletion vectors), duckdb %v", n, c.mode, len(c.ds), r.Millis, r.PeakKiB>>10, r.Rewritten, c.t.files, r.DeletionVectors, t)
	return nil
}

// reportMergeVsDuck writes the Merge section: the clustered batch into the
// table of the merge target, against DuckDB.
func reportMergeVsDuck(rep *report, m *mergeCase) {
	rep.add("## Merge\n")
	rep.add("%d changes (%d updates, %d inserts, %d deletes, distinct keys) into a %s-row current-state table written by dsdelta (key-sorted, files rolled at %d MiB and row groups at %d rows as compaction leaves them, snappy). dsdelta = `cdc.Apply` (history append, tombstones, state lookup + copy-on-write rewrite + commit) in a child process; DuckDB = one `COPY (SELECT t.* FROM read_parquet(touched files) t ANTI JOIN batch USING key UNION ALL SELECT upserts FROM batch) TO out.parquet (FORMAT parquet, COMPRESSION snappy)` over the same files dsdelta rewrote, reading the batch from a parquet file written beforehand; both write the same rows (checked by count). %d runs of each, in turn with the other merges of the Scaling section (each dsdelta run followed by DuckDB's): times are min – median – max, the ratio divides the medians.\n",
		mergebench.BatchSize, mergebench.BatchUpdates, mergebench.BatchInserts, mergebench.BatchDeletes, humanRows(m.rows()), mergebench.TargetFileBytes>>20, delta.DefaultRowGroupRows, len(m.ds))
	rep.add("| table | files rewritten | row groups re-encoded / copied | dsdelta | DuckDB | dsdelta / DuckDB | target |")
	rep.add("|---|---|---|---|---|---|---|")
	f := m.first()
	if m.duckOK() {
		rep.mergeRatio = medianRatio(m.dsMillis(), m.duck)
		rep.add("| %s rows, clustered batch | %d of %d (%s rows) | %d / %d | %s ms | %s ms | %s | ≤ 1.0× %s |\n", humanRows(m.rows()), m.touched, m.t.files, humanRows(m.touchedRows), f.RowGroupsDecoded, f.RowGroupsCopied, spread("%.0f", m.dsMillis()), spread("%.0f", m.duck), ratioCell(m.dsMillis(), m.duck), met(rep.mergeRatio <= 1.0))
	} else {
		rep.add("| %s rows, clustered batch | %d of %d | %d / %d | %s ms | unavailable | NA | ≤ 1.0× not measured |\n", humanRows(m.rows()), m.touched, m.t.files, f.RowGroupsDecoded, f.RowGroupsCopied, spread("%.0f", m.dsMillis()))
	}
	rep.add("dsdelta's time includes work the baseline does not do (the history append of %d rows, the tombstone commit, the key lookup that finds which files to rewrite, the order checks and the Delta commit), so the ratio is conservative for dsdelta. DuckDB rewrites the touched files whole; dsdelta re-encodes only the row groups that hold a changed key and splices the others verbatim (the design's pruned copy-on-write), which is where most of the difference comes from.\n", mergebench.BatchSize)
}

// reportScaling writes the Scaling section and sets the scaling ratios and
// the costs per changed row; it returns the clustered batch's largest
// size over its smallest, measured with --quick too.
func reportScaling(rep *report, cases []*mergeCase, sizes []int64, find func(int64, string) *mergeCase) float64 {
	largest := sizes[len(sizes)-1]
	rep.add("## Scaling\n")
	rep.add("The same %d-change mix into tables of growing size. *clustered*: updates and deletes hit the %s most recent keys (auto-increment keys, hot recent rows), inserts append new keys; *random*: updates and deletes are drawn uniformly from the whole key space. Tables are key-sorted either way, and written to disk (sync) before they are measured. %d runs of every case, the cases in turn (all sizes and modes, then again), so both sides of a ratio meet the same spells of load: times are min – median – max; per changed row = the median time over the %d rows the batch changes; × 100k = the median over the median of the 100k case of the same mode; peak RSS is the highest of the runs.\n", mergebench.BatchSize, humanRows(mergebench.HotWindow), verdictRuns, mergebench.BatchSize)
	rep.add("| rows | mode | files (MB) | files rewritten (rows) | row groups re-encoded / copied | rows re-encoded | dsdelta | per changed row | × 100k | DuckDB | dsdelta / DuckDB | peak RSS |")
	rep.add("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range cases {
		b, f := find(sizes[0], c.mode), c.first()
		duck, ratio := "unavailable", "NA"
		if c.duckOK() {
			duck = spread("%.0f", c.duck) + " ms"
			ratio = fmt.Sprintf("%.2f×", medianRatio(c.dsMillis(), c.duck))
		}
		rep.add("| %s | %s | %d (%.0f) | %d (%s) | %d / %d | %s | %s ms | %.2f µs | %.2f× | %s | %s | %d MiB |", humanRows(c.rows()), c.mode, c.t.files, mb(c.t.bytes), f.Rewritten, humanRows(c.touchedRows), f.RowGroupsDecoded, f.RowGroupsCopied, humanRows(f.RowsReencoded),
			spread("%.0f", c.dsMillis()), c.usPerChangedRow(), medianRatio(c.dsMillis(), b.dsMillis()), duck, ratio, c.peakKiB()>>10)
	}
	for i, n := range mergeSizes() {
		if c := find(n, "clustered"); c != nil {
			rep.mergeUsPerChangedRow[i] = c.usPerChangedRow()
		}
	}
	top, base := find(largest, "clustered"), find(sizes[0], "clustered")
	scal := medianRatio(top.dsMillis(), base.dsMillis())
	if largest == 10_000_000 {
		rep.scalingRatio = scal
		rep.add("\nTarget: 10M / 100k ≤ 2× for the clustered batch: %s %s\n", ratioCell(top.dsMillis(), base.dsMillis()), met(scal <= 2))
		rep.add("A merge's cost follows the row groups it re-encodes, not the table: the clustered batch into %s rows rewrites %d of %d files, copies %d row groups of them verbatim and re-encodes %d (%s rows, at most %d rows each). A random batch touches nearly every row group of a table, so it re-encodes nearly all of it: that is the cost of copy-on-write without deletion vectors, and why compaction keeps files key-sorted.\n", humanRows(largest), top.first().Rewritten, top.t.files, top.first().RowGroupsCopied, top.first().RowGroupsDecoded, humanRows(top.first().RowsReencoded), delta.DefaultRowGroupRows)
	} else {
		rep.add("\nTarget: 10M / 100k ≤ 2× for the clustered batch: not measured with --quick (the 10M table is skipped); %s / 100k = %s.\n", humanRows(largest), ratioCell(top.dsMillis(), base.dsMillis()))
	}
	// Random keys with deletion vectors (mode random-dv, deletion_vectors:
	// on; the key-sorted table is upgraded by the merge's commit): the
	// files holding a changed key get a vector, not a rewrite.
	dvTop, dvBase := find(largest, mergebench.ModeRandomDV), find(sizes[0], mergebench.ModeRandomDV)
	dvScal := medianRatio(dvTop.dsMillis(), dvBase.dsMillis())
	if largest == 10_000_000 {
		rep.randomDVRatio = dvScal
		rep.add("Target: 10M / 100k ≤ 3× for the random batch with deletion vectors (%s): %s %s; it marked rows of %d files in deletion vectors and rewrote %d.\n", mergebench.ModeRandomDV, ratioCell(dvTop.dsMillis(), dvBase.dsMillis()), met(dvScal <= 3), dvTop.first().DeletionVectors, dvTop.first().Rewritten)
	} else {
		rep.add("Target: 10M / 100k ≤ 3× for the random batch with deletion vectors (%s): not measured with --quick; %s / 100k = %s.\n", mergebench.ModeRandomDV, humanRows(largest), ratioCell(dvTop.dsMillis(), dvBase.dsMillis()))
	}
	return scal
}

// profileMerges profiles a merge for each merge target missed: CPU for
// the time targets, the heap for the peak.
func profileMerges(ctx context.Context, rep *report, tmp string, mergeRows, largest int64, scal float64, top, random *mergeCase) error {
	type job struct {
		rows      int64
		mode      string
		cpu, heap bool
		why       string
	}
	var jobs []job
	if rep.mergeRatio > 1.0 {
		jobs = append(jobs, job{rows: mergeRows, mode: "clustered", cpu: true, why: "merge vs DuckDB"})
	}
	if (rep.scalingRatio > 2 || (rep.scalingRatio == 0 && scal > 2)) && largest != mergeRows {
		jobs = append(jobs, job{rows: largest, mode: "clustered", cpu: true, why: "scaling"})
	}
	if rep.peakMiB > 256 {
		// Profile the mode that made the highest peak.
		worst := "clustered"
		if random.peakKiB() > top.peakKiB() {
			worst = "random"
		}
		jobs = append(jobs, job{rows: largest, mode: worst, heap: true, why: "peak memory"})
	}
	for i, j := range jobs {
		d := mergebench.TableDirs{Root: filepath.Join(tmp, fmt.Sprintf("table-%d", j.rows))}
		base, err := mergebench.ListFiles(d.State())
		if err != nil {
			return err
		}
		cpu, heap := "", ""
		if j.cpu {
			cpu = filepath.Join(tmp, fmt.Sprintf("merge-%d.cpu.pprof", i))
		}
		if j.heap {
			heap = filepath.Join(tmp, fmt.Sprintf("merge-%d.heap.pprof", i))
		}
		logf("profile: %s (%s rows)", j.why, humanRows(j.rows))
		r, err := mergeInChild(ctx, rep.child, d.Root, j.rows, j.mode, cpu, heap)
		if err != nil {
			return err
		}
		if err := mergebench.ResetTable(d, base); err != nil {
			return err
		}
		if j.cpu {
			rep.profiles = append(rep.profiles, pprofTop(fmt.Sprintf("CPU, for %s: merge of the %s batch into %s rows (%.0f ms under the profiler)", j.why, j.mode, humanRows(j.rows), r.Millis), cpu))
			rep.findings = append(rep.findings, mergeCPUFindings(j.why, humanRows(j.rows), cpu)...)
		}
		if j.heap {
			rep.profiles = append(rep.profiles, pprofTop(fmt.Sprintf("Heap in use at the highest RSS seen, for %s: merge of the %s batch into %s rows (peak RSS %d MiB under the profiler)", j.why, j.mode, humanRows(j.rows), r.PeakKiB>>10), heap, "-sample_index=inuse_space"))
			rep.findings = append(rep.findings, heapFindings(humanRows(j.rows), j.mode, r, heap)...)
		}
	}
	return nil
}
