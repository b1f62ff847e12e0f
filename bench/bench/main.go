package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/benchchild"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	quick := flag.Bool("quick", false, "smaller data: 10 MB decode, 100k-row merge, no 10M-row table, 100k-event backfill")
	out := flag.String("out", "RESULTS.md", "where to write the results (with --only: only when given)")
	only := flag.String("only", "", "run only these scenarios, comma-separated: "+strings.Join(scenarios, ", "))
	keep := flag.Bool("keep", false, "keep the temporary data directory")
	child := flag.Bool("merge-child", false, "internal: run as the child, with the child: flags (used by the driver)")
	childFlags := benchchild.Register(flag.CommandLine)
	flag.Parse()
	ctx := context.Background()
	// The engine logs progress at info; keep the benchmark output readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if *child {
		if err := childFlags.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	selected, err := selectScenarios(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if *only != "" && !outSet {
		// A partial run must not overwrite the committed full results.
		*out = ""
	}
	if err := run(ctx, *quick, *out, *keep, selected); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// report accumulates the figures RESULTS.md and the SUMMARY line need.
type report struct {
	quick    bool
	started  time.Time
	machine  machine
	goVer    string
	duckVer  string
	lines    []string // markdown body
	notes    []string
	profiles []string
	findings []string
	child    childRunner

	decodeRatio, mergeRatio, scalingRatio float64 // 0 = not measured
	// randomDVRatio is the random batch with deletion vectors into 10M rows
	// over the same into 100k; 0 = not measured.
	randomDVRatio          float64
	peakMiB                float64
	latencyP50, latencyP99 float64 // ms; 0 = not measured
	// Backfill end to end; 0 = not measured.
	backfillRatio, backfillEventsPerS, backfillPeakMiB, backfillStageMBs float64
	// scd2Ratio is an scd2 merge's time over the current-mode merge's of
	// the same batch; 0 = not measured.
	scd2Ratio float64
	// backfillScaleRatio is a 10M-event backfill's time per event over a
	// 1M-event one's, and backfillScalePeakMiB the larger one's peak; 0 =
	// not measured.
	backfillScaleRatio, backfillScalePeakMiB float64
}

// scenarios are the scenario names --only accepts, in the order they run.
var scenarios = []string{"decode", "merge", "latency", "backfill", "backfill_scale", "scd2", "reconcile"}

// selectScenarios parses --only; empty selects every scenario.
func selectScenarios(only string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(only) == "" {
		for _, s := range scenarios {
			out[s] = true
		}
		return out, nil
	}
	for _, s := range strings.Split(only, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(scenarios, s) {
			return nil, fmt.Errorf("--only: unknown scenario %q (have %s)", s, strings.Join(scenarios, ", "))
		}
		out[s] = true
	}
	return out, nil
}

func (r *report) add(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	r.lines = append(r.lines, line)
}

func logf(format string, a ...any) { fmt.Printf(format+"\n", a...) }

func run(ctx context.Context, quick bool, outPath string, keep bool, selected map[string]bool) error {
	rep := &report{quick: quick, started: time.Now(), machine: describeMachine(), goVer: runtime.Version()}
	tmp, err := os.MkdirTemp("", "dsdelta-bench-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	logf("bench: data in %s (quick=%v)", tmp, quick)

	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT version()").Scan(&rep.duckVer); err != nil {
		return fmt.Errorf("duckdb version: %w", err)
	}
	var threads int
	_ = db.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&threads)
	rep.notes = append(rep.notes, "The bench module resolves a few shared dependencies newer than the main module does, because duckdb-go requires them (minimal version selection): klauspost/compress v1.18.3 (main: v1.18.2; it provides the snappy encoder), pierrec/lz4 v4.1.25, andybalholm/brotli v1.2.0. dsdelta's code is the same; the compression library differs by a patch release.")
	rep.notes = append(rep.notes, fmt.Sprintf("DuckDB runs in-process with its default %d threads; dsdelta's decode and merge as the functions run them (GOMAXPROCS=%d).", threads, runtime.GOMAXPROCS(0)))

	if selected["merge"] || selected["backfill"] || selected["backfill_scale"] || selected["scd2"] {
		var childNote string
		rep.child, childNote = prepareChild(ctx, tmp)
		if rep.child.exe == "" {
			return fmt.Errorf("prepare merge child: %s", childNote)
		}
		rep.notes = append(rep.notes, childNote)
	}

	if selected["decode"] {
		if err := decodeScenario(ctx, rep, db, tmp, quick); err != nil {
			return err
		}
	}
	if selected["merge"] {
		if err := mergeScenarios(ctx, rep, db, tmp, quick); err != nil {
			return err
		}
	}
	if selected["latency"] {
		latencyScenario(ctx, rep, quick)
	}
	if selected["backfill"] {
		if err := backfillScenario(ctx, rep, db, tmp, quick); err != nil {
			return err
		}
	}
	if selected["backfill_scale"] {
		if err := backfillScaleScenario(ctx, rep, tmp, quick); err != nil {
			return err
		}
	}
	if selected["scd2"] {
		if err := scd2Scenario(ctx, rep, tmp, quick); err != nil {
			return err
		}
	}
	if selected["reconcile"] {
		if err := reconcileScenario(ctx, rep, quick); err != nil {
			return err
		}
	}

	if outPath == "" {
		// --only without --out: the sections on stdout, RESULTS.md kept.
		fmt.Println(strings.Join(rep.lines, "\n"))
		for _, f := range rep.findings {
			fmt.Println("- " + f)
		}
		logf("bench: --only: RESULTS.md not rewritten (pass --out FILE for the whole report, profiles included)")
	} else {
		md := rep.markdown()
		if err := os.WriteFile(outPath, []byte(md), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", outPath, err)
		}
		logf("bench: wrote %s", outPath)
	}
	fmt.Println(rep.summary())
	return nil
}

func decodeScenario(ctx context.Context, rep *report, db *sql.DB, tmp string, quick bool) error {
	want := int64(50 << 20)
	if quick {
		want = 10 << 20
	}
	dir := filepath.Join(tmp, "decode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	logf("decode: generating ~%d MB of Datastream events", want>>20)
	d, err := genDecodeData(dir, want)
	if err != nil {
		return err
	}
	// Runs of about 100 ms, alternating between the sides: the best of
	// nine, as the best of five let one burst of other work on the
	// machine move the ratio from 0.77× to 1.05× between full runs.
	const reps = 9
	var dsJSON, dsAvro, duck []time.Duration
	for i := range reps {
		t, n, err := dsDecode(ctx, []string{d.JSONPath}, d.Schema)
		if err != nil {
			return err
		}
		if n != d.Events {
			return fmt.Errorf("dsdelta decoded %d JSON events, want %d", n, d.Events)
		}
		dsJSON = append(dsJSON, t)
		t, n, err = duckDecode(ctx, db, d.JSONPath)
		if err != nil {
			return err
		}
		if n != d.Events {
			return fmt.Errorf("duckdb read %d JSON rows, want %d", n, d.Events)
		}
		duck = append(duck, t)
		t, n, err = dsDecode(ctx, d.AvroPaths, d.Schema)
		if err != nil {
			return err
		}
		if n != d.Events {
			return fmt.Errorf("dsdelta decoded %d Avro events, want %d", n, d.Events)
		}
		dsAvro = append(dsAvro, t)
		logf("decode: run %d: dsdelta json %v, duckdb json %v, dsdelta avro %v", i+1, dsJSON[i], duck[i], dsAvro[i])
	}
	j, k, a := slices.Min(dsJSON), slices.Min(duck), slices.Min(dsAvro)
	// Both sides decode on all cores; DuckDB's single-thread time is for
	// information (what one core of it does).
	var duck1 []time.Duration
	if err := setThreads(ctx, db, 1); err != nil {
		return err
	}
	for range reps {
		t, _, err := duckDecode(ctx, db, d.JSONPath)
		if err != nil {
			return err
		}
		duck1 = append(duck1, t)
	}
	if err := setThreads(ctx, db, 0); err != nil {
		return err
	}
	k1 := slices.Min(duck1)
	var dropped []time.Duration
	for range reps {
		t, _, err := dsDecodeKeeping(ctx, []string{d.JSONPath}, d.Schema, false)
		if err != nil {
			return err
		}
		dropped = append(dropped, t)
	}
	j0 := slices.Min(dropped)
	rep.decodeRatio = secs(j) / secs(k)
	var avroNote string
	if _, err := db.ExecContext(ctx, "LOAD avro"); err != nil {
		avroNote = "DuckDB's avro extension is not bundled and cannot be installed offline (" + firstLine(err.Error()) + "), so Avro is dsdelta only."
	} else {
		avroNote = "DuckDB's avro extension loaded but is not used: the Avro row is dsdelta only."
	}
	rep.add("## Decode\n")
	rep.add("%d events of a simulated MySQL table (dssim seed 7): one %.1f MB JSONL file, and the same events as %d Avro files (%.1f MB). Best of %d runs.\n", d.Events, mb(d.JSONBytes), len(d.AvroPaths), mb(d.AvroBytes), reps)
	rep.add("| input | dsdelta | DuckDB | dsdelta / DuckDB | target |")
	rep.add("|---|---|---|---|---|")
	rep.add("| JSONL → typed rows | %s (%.0f MB/s) | %s (%.0f MB/s) | %.2f× | ≤ 1.0× %s |", dur(j), mb(d.JSONBytes)/secs(j), dur(k), mb(d.JSONBytes)/secs(k), rep.decodeRatio, met(rep.decodeRatio <= 1.0))
	rep.add("| JSONL → typed rows, DuckDB limited to 1 thread (information) | %s | %s | %.2f× | — |", dur(j), dur(k1), secs(j)/secs(k1))
	rep.add("| JSONL → typed rows, dsdelta dropping each event once decoded (information: decoding without keeping) | %s | %s | %.2f× | — |", dur(j0), dur(k), secs(j0)/secs(k))
	rep.add("| Avro → typed rows | %s (%.0f MB/s, %.2f× the JSONL time) | n/a | n/a | — |\n", dur(a), mb(d.AvroBytes)/secs(a), secs(a)/secs(j))
	rep.add("How it is made fair: both sides parse every field of every event and keep all rows in memory. dsdelta decodes with the table's known schema (as the pipeline does once a table exists) into `datastream.Events` through `Reader.AppendTo`, exactly as the pipeline's staging keeps a file's events, so every `Event` (typed payload, metadata, ordering key) stays in memory; DuckDB runs `CREATE TABLE ev AS SELECT * FROM read_json(file, format='newline_delimited', columns={...})` with every column typed explicitly (timestamps as TIMESTAMPTZ, balance as DECIMAL(12,2), source_metadata and payload as STRUCTs), so there is no sampling pass. The file is in the page cache for both. %s\n", avroNote)
	if rep.decodeRatio > 1.0 {
		prof := filepath.Join(tmp, "decode.cpu.pprof")
		if err := profileInProcess(prof, func() error {
			// Repeat so the profile has enough samples to rank functions.
			for range 8 {
				if _, _, err := dsDecode(ctx, []string{d.JSONPath}, d.Schema); err != nil {
					return err
				}
			}
			return nil
		}); err == nil {
			rep.findings = append(rep.findings, decodeFindings(prof, secs(j)/secs(k), secs(j)/secs(k1), secs(j0)/secs(k))...)
			rep.profiles = append(rep.profiles, pprofTop("CPU, for JSON decode: dsdelta JSONL decode, 8 runs ("+dur(j)+" each vs DuckDB "+dur(k)+")", prof))
		} else {
			rep.notes = append(rep.notes, "decode profile failed: "+err.Error())
		}
	}
	return nil
}

// mergeCase is one (table size, batch mode) merge.
type mergeCase struct {
	rows        int64
	mode        string
	ds          mergebench.ChildResult
	duck        time.Duration
	duckOK      bool
	files       int
	bytes       int64
	touched     int
	touchedRows int64
	afterRows   int64
}

func mergeScenarios(ctx context.Context, rep *report, db *sql.DB, tmp string, quick bool) error {
	sizes := []int64{100_000, 1_000_000, 10_000_000}
	mergeRows := int64(1_000_000)
	if quick {
		sizes = sizes[:2]
		mergeRows = 100_000
	}
	largest := sizes[len(sizes)-1]
	var cases []*mergeCase
	for _, n := range sizes {
		d := mergebench.TableDirs{Root: filepath.Join(tmp, fmt.Sprintf("table-%d", n))}
		logf("merge: building a %d-row state table", n)
		files, bytes, err := mergebench.BuildStateTable(ctx, d, n)
		if err != nil {
			return err
		}
		// The build leaves hundreds of MB for the kernel to write back;
		// flushed now, that write-back does not land in a measured merge
		// (whose own commit waits on fsync).
		syscall.Sync()
		base, err := mergebench.ListFiles(d.State())
		if err != nil {
			return err
		}
		store, err := objstore.NewLocal(d.State())
		if err != nil {
			return err
		}
		baseSnap, err := delta.Open(store).Snapshot(ctx)
		if err != nil {
			return fmt.Errorf("read base table: %w", err)
		}
		for _, mode := range []string{"clustered", "random", mergebench.ModeRandomDV} {
			c := &mergeCase{rows: n, mode: mode, files: files, bytes: bytes}
			plan := mergebench.PlanBatch(n, mode)
			batchFile, err := mergebench.WriteBatchParquet(ctx, filepath.Join(tmp, fmt.Sprintf("batch-%d-%s", n, mode)), plan)
			if err != nil {
				return err
			}
			// The batches that carry targets, clustered and random with
			// deletion vectors, are best of 3, as one run of a merge of
			// 50 ms moves its ratio by tenths; random without them is for
			// information (and the 10M one takes seconds): one run.
			reps := 1
			if mode == "clustered" || mode == mergebench.ModeRandomDV {
				reps = 3
			}
			for i := range reps {
				r, err := mergeInChild(ctx, rep.child, d.Root, n, mode, "", "")
				if err != nil {
					return err
				}
				if i == 0 || r.Millis < c.ds.Millis {
					peak := max(c.ds.PeakKiB, r.PeakKiB)
					c.ds = r
					c.ds.PeakKiB = peak
				}
				touched, after, err := touchedFiles(ctx, d, baseSnap)
				if err != nil {
					return err
				}
				c.touched, c.afterRows = len(touched), after
				c.touchedRows = fileRows(baseSnap, d.State(), touched)
				if err := mergebench.ResetTable(d, base); err != nil {
					return err
				}
				outFile := filepath.Join(tmp, "duck-out.parquet")
				t, got, err := duckMerge(ctx, db, touched, batchFile, outFile)
				os.Remove(outFile)
				if err != nil {
					rep.notes = append(rep.notes, "DuckDB merge failed: "+err.Error())
					continue
				}
				wantRows := c.touchedRows - int64(c.ds.Updated+c.ds.Deleted) + int64(c.ds.Inserted+c.ds.Updated)
				if got != wantRows {
					return fmt.Errorf("duckdb merge into %d rows (%s) wrote %d rows, dsdelta's result needs %d", n, mode, got, wantRows)
				}
				if !c.duckOK || t < c.duck {
					c.duck, c.duckOK = t, true
				}
			}
			want := n + mergebench.BatchInserts - mergebench.BatchDeletes
			if c.afterRows != want {
				return fmt.Errorf("merge into %d rows (%s): table holds %d rows after, want %d", n, mode, c.afterRows, want)
			}
			logf("merge: %d rows %s: dsdelta %.0f ms (peak %d MiB, %d/%d files rewritten, %d deletion vectors), duckdb %v", n, mode, c.ds.Millis, c.ds.PeakKiB>>10, c.ds.Rewritten, files, c.ds.DeletionVectors, c.duck)
			cases = append(cases, c)
		}
	}
	find := func(rows int64, mode string) *mergeCase {
		for _, c := range cases {
			if c.rows == rows && c.mode == mode {
				return c
			}
		}
		return nil
	}

	// Merge vs DuckDB.
	m := find(mergeRows, "clustered")
	rep.add("## Merge\n")
	rep.add("%d changes (%d updates, %d inserts, %d deletes, distinct keys) into a %s-row current-state table written by dsdelta (key-sorted, files rolled at %d MiB and row groups at %d rows as compaction leaves them, snappy). dsdelta = `cdc.Apply` (history append, tombstones, state lookup + copy-on-write rewrite + commit) in a child process, best of 3; DuckDB = one `COPY (SELECT t.* FROM read_parquet(touched files) t ANTI JOIN batch USING key UNION ALL SELECT upserts FROM batch) TO out.parquet (FORMAT parquet, COMPRESSION snappy)` over the same files dsdelta rewrote, reading the batch from a parquet file written beforehand; both write the same rows (checked by count).\n",
		mergebench.BatchSize, mergebench.BatchUpdates, mergebench.BatchInserts, mergebench.BatchDeletes, humanRows(mergeRows), mergebench.TargetFileBytes>>20, delta.DefaultRowGroupRows)
	rep.add("| table | files rewritten | row groups re-encoded / copied | dsdelta | DuckDB | dsdelta / DuckDB | target |")
	rep.add("|---|---|---|---|---|---|---|")
	if m.duckOK {
		rep.mergeRatio = m.ds.Millis / (secs(m.duck) * 1000)
		rep.add("| %s rows, clustered batch | %d of %d (%s rows) | %d / %d | %.0f ms | %.0f ms | %.2f× | ≤ 1.0× %s |\n", humanRows(m.rows), m.touched, m.files, humanRows(m.touchedRows), m.ds.RowGroupsDecoded, m.ds.RowGroupsCopied, m.ds.Millis, secs(m.duck)*1000, rep.mergeRatio, met(rep.mergeRatio <= 1.0))
	} else {
		rep.add("| %s rows, clustered batch | %d of %d | %d / %d | %.0f ms | unavailable | NA | ≤ 1.0× not measured |\n", humanRows(m.rows), m.touched, m.files, m.ds.RowGroupsDecoded, m.ds.RowGroupsCopied, m.ds.Millis)
	}
	rep.add("dsdelta's time includes work the baseline does not do (the history append of %d rows, the tombstone commit, the key lookup that finds which files to rewrite, the order checks and the Delta commit), so the ratio is conservative for dsdelta. DuckDB rewrites the touched files whole; dsdelta re-encodes only the row groups that hold a changed key and splices the others verbatim (the design's pruned copy-on-write), which is where most of the difference comes from.\n", mergebench.BatchSize)

	// Scaling.
	rep.add("## Scaling\n")
	rep.add("The same %d-change mix into tables of growing size. *clustered*: updates and deletes hit the %s most recent keys (auto-increment keys, hot recent rows), inserts append new keys; *random*: updates and deletes are drawn uniformly from the whole key space. Tables are key-sorted either way, and written to disk (sync) before they are measured. Clustered and random-dv (they carry targets): best of 3 runs; random: one run. Ratio = time / time of the 100k case of the same mode.\n", mergebench.BatchSize, humanRows(mergebench.HotWindow))
	rep.add("| rows | mode | files (MB) | files rewritten (rows) | row groups re-encoded / copied | rows re-encoded | dsdelta | × 100k | DuckDB | dsdelta / DuckDB | peak RSS |")
	rep.add("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range cases {
		b := find(sizes[0], c.mode)
		duck, ratio := "unavailable", "NA"
		if c.duckOK {
			duck = fmt.Sprintf("%.0f ms", secs(c.duck)*1000)
			ratio = fmt.Sprintf("%.2f×", c.ds.Millis/(secs(c.duck)*1000))
		}
		rep.add("| %s | %s | %d (%.0f) | %d (%s) | %d / %d | %s | %.0f ms | %.2f× | %s | %s | %d MiB |", humanRows(c.rows), c.mode, c.files, mb(c.bytes), c.ds.Rewritten, humanRows(c.touchedRows), c.ds.RowGroupsDecoded, c.ds.RowGroupsCopied, humanRows(c.ds.RowsReencoded), c.ds.Millis, c.ds.Millis/b.ds.Millis, duck, ratio, c.ds.PeakKiB>>10)
	}
	top := find(largest, "clustered")
	scal := top.ds.Millis / find(sizes[0], "clustered").ds.Millis
	if largest == 10_000_000 {
		rep.scalingRatio = scal
		rep.add("\nTarget: 10M / 100k ≤ 2× for the clustered batch: %.2f× %s\n", scal, met(scal <= 2))
		rep.add("A merge's cost follows the row groups it re-encodes, not the table: the clustered batch into %s rows rewrites %d of %d files, copies %d row groups of them verbatim and re-encodes %d (%s rows, at most %d rows each). A random batch touches nearly every row group of a table, so it re-encodes nearly all of it: that is the cost of copy-on-write without deletion vectors, and why compaction keeps files key-sorted.\n", humanRows(largest), top.ds.Rewritten, top.files, top.ds.RowGroupsCopied, top.ds.RowGroupsDecoded, humanRows(top.ds.RowsReencoded), delta.DefaultRowGroupRows)
	} else {
		rep.add("\nTarget: 10M / 100k ≤ 2× for the clustered batch: not measured with --quick (the 10M table is skipped); %s / 100k = %.2f×.\n", humanRows(largest), scal)
	}
	// Random keys with deletion vectors (mode random-dv, deletion_vectors:
	// on; the key-sorted table is upgraded by the merge's commit): the
	// files holding a changed key get a vector, not a rewrite.
	dvTop, dvBase := find(largest, mergebench.ModeRandomDV), find(sizes[0], mergebench.ModeRandomDV)
	dvScal := dvTop.ds.Millis / dvBase.ds.Millis
	if largest == 10_000_000 {
		rep.randomDVRatio = dvScal
		rep.add("Target: 10M / 100k ≤ 3× for the random batch with deletion vectors (%s): %.2f× %s; it marked rows of %d files in deletion vectors and rewrote %d.\n", mergebench.ModeRandomDV, dvScal, met(dvScal <= 3), dvTop.ds.DeletionVectors, dvTop.ds.Rewritten)
	} else {
		rep.add("Target: 10M / 100k ≤ 3× for the random batch with deletion vectors (%s): not measured with --quick; %s / 100k = %.2f×.\n", mergebench.ModeRandomDV, humanRows(largest), dvScal)
	}

	// Memory.
	peak := max(top.ds.PeakKiB, find(largest, "random").ds.PeakKiB)
	rep.peakMiB = float64(peak) / 1024
	rep.add("## Memory\n")
	rep.add("Peak RSS (VmHWM of a child process that only builds the batch and runs the merge, default GOGC, no GOMEMLIMIT) for the %s-row table: clustered %d MiB, random %d MiB. Of that, %d MiB was resident at process start and %d MiB once the %d-change batch was built, before the merge started. Target ≤ 256 MiB: %.0f MiB %s\n",
		humanRows(largest), top.ds.PeakKiB>>10, find(largest, "random").ds.PeakKiB>>10, top.ds.StartKiB>>10, top.ds.BeforeKiB>>10, mergebench.BatchSize, rep.peakMiB, met(rep.peakMiB <= 256))

	// Profiles where targets are missed.
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
		if find(largest, "random").ds.PeakKiB > top.ds.PeakKiB {
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

// profileInProcess CPU-profiles fn into path.
func profileInProcess(path string, fn func() error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if err := startCPUProfile(f); err != nil {
		return err
	}
	err = fn()
	stopCPUProfile()
	return err
}

// pprofTop renders `go tool pprof -top` of a profile as a markdown section.
func pprofTop(title, prof string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", title)
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintf(&b, "profile written to %s, but no go tool to summarise it: %v\n", prof, err)
		return b.String()
	}
	out, err := exec.Command(goBin, append(append([]string{"tool", "pprof", "-top", "-nodecount=25"}, extra...), prof)...).Output()
	if err != nil {
		fmt.Fprintf(&b, "go tool pprof failed: %v\n", err)
		return b.String()
	}
	b.WriteString("```\n")
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		b.WriteString(l + "\n")
	}
	b.WriteString("```\n\n")
	fmt.Fprintf(&b, "And by cumulative time:\n\n")
	out, err = exec.Command(goBin, append(append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=30"}, extra...), prof)...).Output()
	if err == nil {
		b.WriteString("```\n")
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
				continue
			}
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("# dsdelta benchmarks\n\n")
	b.WriteString("Generated by `go run ./bench")
	if r.quick {
		b.WriteString(" --quick")
	}
	fmt.Fprintf(&b, "` (from bench/) on %s; do not edit by hand.\n\n", r.started.UTC().Format(time.RFC3339))
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores\n- Memory: %.1f GiB\n- Kernel: %s\n- Go: %s (%s/%s)\n- DuckDB: %s via github.com/duckdb/duckdb-go/v2\n", r.machine.CPUModel, r.machine.Cores, r.machine.MemGiB, r.machine.Kernel, r.goVer, runtime.GOOS, runtime.GOARCH, r.duckVer)
	b.WriteString("- Other work may share the machine: compare the ratios within one run, not absolute times across runs.\n\n")
	b.WriteString("## Targets\n\n| target | figure | status |\n|---|---|---|\n")
	row := func(name string, v float64, format string, ok func(float64) bool) {
		if v == 0 {
			fmt.Fprintf(&b, "| %s | NA | not measured |\n", name)
			return
		}
		fmt.Fprintf(&b, "| %s | "+format+" | %s |\n", name, v, met(ok(v)))
	}
	row("merge ≤ 1.0× DuckDB", r.mergeRatio, "%.2f×", func(v float64) bool { return v <= 1 })
	row("10M / 100k ≤ 2× (clustered)", r.scalingRatio, "%.2f×", func(v float64) bool { return v <= 2 })
	row("peak RSS ≤ 256 MiB", r.peakMiB, "%.2f MiB", func(v float64) bool { return v <= 256 })
	row("JSON decode ≤ 1.0× DuckDB", r.decodeRatio, "%.2f×", func(v float64) bool { return v <= 1 })
	row("latency p50 ≤ 2 s", r.latencyP50, "%.2f ms", func(v float64) bool { return v <= 2000 })
	row("latency p99 ≤ 2 s", r.latencyP99, "%.2f ms", func(v float64) bool { return v <= 2000 })
	row(fmt.Sprintf("backfill ≤ %.1f× DuckDB", backfillMaxRatio), r.backfillRatio, "%.2f×", func(v float64) bool { return v <= backfillMaxRatio })
	row(fmt.Sprintf("backfill ≥ %dk events/s", backfillMinEventsPerS/1000), r.backfillEventsPerS, "%.0f events/s", func(v float64) bool { return v >= backfillMinEventsPerS })
	row(fmt.Sprintf("backfill peak RSS ≤ %d MiB", backfillMaxPeakMiB), r.backfillPeakMiB, "%.0f MiB", func(v float64) bool { return v <= backfillMaxPeakMiB })
	row(fmt.Sprintf("backfill staging ≥ %d MB/s of JSONL", backfillMinStageMBs), r.backfillStageMBs, "%.1f MB/s", func(v float64) bool { return v >= backfillMinStageMBs })
	row(fmt.Sprintf("backfill 10M / 1M per event ≤ %.1f×", backfillScaleMaxRatio), r.backfillScaleRatio, "%.2f×", func(v float64) bool { return v <= backfillScaleMaxRatio })
	row(fmt.Sprintf("backfill 10M peak RSS ≤ %d MiB", backfillMaxPeakMiB), r.backfillScalePeakMiB, "%.0f MiB", func(v float64) bool { return v <= backfillMaxPeakMiB })
	row(fmt.Sprintf("scd2 merge ≤ %.0f× current", scd2MaxRatio), r.scd2Ratio, "%.2f×", func(v float64) bool { return v <= scd2MaxRatio })
	b.WriteString("\n")
	for _, l := range r.lines {
		b.WriteString(l + "\n")
	}
	b.WriteString(r.historyMarkdown(thisChange))
	if len(r.findings) > 0 {
		b.WriteString("\n## What the profiles show\n\n")
		b.WriteString("Figures are shares of the profiled run (cum = the function and its callees); the full listings follow.\n\n")
		for _, f := range r.findings {
			b.WriteString("- " + f + "\n")
		}
	}
	if len(r.profiles) > 0 {
		b.WriteString("\n## Profiles of missed targets\n\n")
		b.WriteString("CPU profiles (pprof) of the dsdelta side; flat = time in the function itself, cum = including callees.\n\n")
		for _, p := range r.profiles {
			b.WriteString(p + "\n")
		}
	}
	if len(r.notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range r.notes {
			b.WriteString("- " + n + "\n")
		}
	}
	b.WriteString("\n```\n" + r.summary() + "\n```\n")
	return b.String()
}

func (r *report) summary() string {
	f := func(v float64, format string) string {
		if v == 0 {
			return "NA"
		}
		return fmt.Sprintf(format, v)
	}
	return fmt.Sprintf("SUMMARY decode_json_vs_duckdb=%s merge_vs_duckdb=%s scaling_10M_over_100k=%s random_10M_over_100k=%s peak_mib=%s latency_p50_ms=%s latency_p99_ms=%s backfill_vs_duckdb=%s backfill_events_per_s=%s backfill_peak_mib=%s backfill_10M_over_1M=%s backfill_10M_peak_mib=%s scd2_vs_current=%s",
		f(r.decodeRatio, "%.2f"), f(r.mergeRatio, "%.2f"), f(r.scalingRatio, "%.2f"), f(r.randomDVRatio, "%.2f"), f(r.peakMiB, "%.0f"), f(r.latencyP50, "%.0f"), f(r.latencyP99, "%.0f"),
		f(r.backfillRatio, "%.2f"), f(r.backfillEventsPerS, "%.0f"), f(r.backfillPeakMiB, "%.0f"), f(r.backfillScaleRatio, "%.2f"), f(r.backfillScalePeakMiB, "%.0f"), f(r.scd2Ratio, "%.2f"))
}

func met(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// setThreads sets DuckDB's thread count; 0 restores the default.
func setThreads(ctx context.Context, db *sql.DB, n int) error {
	q := "RESET threads"
	if n > 0 {
		q = fmt.Sprintf("SET threads = %d", n)
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("duckdb %s: %w", q, err)
	}
	return nil
}

func secs(d time.Duration) float64 { return d.Seconds() }
func mb(n int64) float64           { return float64(n) / 1e6 }
func dur(d time.Duration) string   { return fmt.Sprintf("%.0f ms", secs(d)*1000) }

func humanRows(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	if n >= 1_000_000 {
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
	if n >= 10_000 {
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
