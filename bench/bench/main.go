package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/benchchild"
	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	quick := flag.Bool("quick", false, "smaller data: 10 MB decode, 100k-row merge, no 10M-row table, 100k-event backfill")
	out := flag.String("out", "RESULTS.md", "where to write the results (with --only: only when given)")
	only := flag.String("only", "", "run only these scenarios, comma-separated: "+strings.Join(scenarios, ", "))
	keep := flag.Bool("keep", false, "keep the temporary data directory")
	cpuProfile := flag.String("driver-cpuprofile", "", "write a CPU profile of this driver process (the scenarios it runs in-process, such as sustained; not the merge child's) to this file")
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
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	outSet := false
	flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
	if *only != "" && !outSet {
		// A partial run must not overwrite the committed full results.
		*out = ""
	}
	if err := run(ctx, *quick, *out, *keep, selected); err != nil {
		pprof.StopCPUProfile()
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
	// latencyColdMs is the warm-up file's latency on the freshly started
	// stack and latencyFirstMs the first file of a new table on the warm
	// stack (median of the emulator's new tables), in ms; 0 = not measured
	// (or an emulator that predates the figure).
	latencyColdMs, latencyFirstMs float64
	// Backfill end to end; 0 = not measured.
	backfillRatio, backfillEventsPerS, backfillPeakMiB, backfillStageMBs float64
	// scd2Ratio is an scd2 merge's time over the current-mode merge's of
	// the same batch; 0 = not measured.
	scd2Ratio float64
	// backfillScaleRatio is a 10M-event backfill's time per event over a
	// 1M-event one's, and backfillScalePeakMiB the larger one's peak; 0 =
	// not measured.
	backfillScaleRatio, backfillScalePeakMiB float64
	// mergeUsPerChangedRow is the clustered merge's median time over the
	// rows its batch changes, in µs, into the tables of mergeSizes (100k,
	// 1M, 10M rows); 0 = not measured.
	mergeUsPerChangedRow [3]float64
	// The sustained scenario: the highest rate whose lag stayed bounded,
	// in events/s, the p50 and p99 lag at it (ms), the cores the loop
	// kept busy at it, and the highest peak RSS of its steps; 0 = not
	// measured.
	sustainedEventsPerS, sustainedP50, sustainedP99, sustainedCores, sustainedPeakMiB float64
}

// scenarios are the scenario names --only accepts, in the order they run.
var scenarios = []string{"decode", "merge", "latency", "backfill", "backfill_scale", "scd2", "reconcile", "sustained", "backfill_100M"}

// onlyOnRequest are the scenarios a full run leaves out: they take longer
// than the rest together, or more disk than a bench machine may have.
var onlyOnRequest = []string{"backfill_100M"}

// selectScenarios parses --only; empty selects every scenario but those
// run only on request.
func selectScenarios(only string) (map[string]bool, error) {
	out := map[string]bool{}
	if strings.TrimSpace(only) == "" {
		for _, s := range scenarios {
			if !slices.Contains(onlyOnRequest, s) {
				out[s] = true
			}
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

	if selected["merge"] || selected["backfill"] || selected["backfill_scale"] || selected["scd2"] || selected["sustained"] || selected["backfill_100M"] {
		var childNote string
		rep.child, childNote = prepareChild(ctx, tmp)
		if rep.child.exe == "" {
			return fmt.Errorf("prepare merge child: %s", childNote)
		}
		rep.notes = append(rep.notes, childNote)
	}

	// The sustained scenario runs first: its peak RSS is this process's,
	// which the scenarios run in process (DuckDB's queries, the decode,
	// the reconcile) would otherwise have grown past what its loop takes
	// (a full run after them read 2,464 MiB where the loop alone peaks
	// at about 360).
	if selected["sustained"] {
		if err := sustainedScenario(ctx, rep, tmp, quick); err != nil {
			return err
		}
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
	if selected["backfill_100M"] {
		if err := backfillLongScenario(ctx, rep, tmp, quick); err != nil {
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
	b.WriteString("## Targets\n\n")
	fmt.Fprintf(&b, "Each ratio divides the medians of at least %d runs of each side, run in turn (A, B, A, B, ...), and each rate is of the median time; the sections show min – median – max. A peak is the highest of the runs; the latency percentiles are of one run's files. See bench/README.md, \"Verdicts\".\n\n", verdictRuns)
	b.WriteString("| target | figure | status |\n|---|---|---|\n")
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
	row(fmt.Sprintf("JSON decode ≤ %.1f× DuckDB", decodeMaxRatio), r.decodeRatio, "%.2f×", func(v float64) bool { return v <= decodeMaxRatio })
	row("latency p50 ≤ 2 s", r.latencyP50, "%.2f ms", func(v float64) bool { return v <= 2000 })
	row("latency p99 ≤ 2 s", r.latencyP99, "%.2f ms", func(v float64) bool { return v <= 2000 })
	row(fmt.Sprintf("first file of a new table ≤ %d ms on a warm stack", firstFileMaxMs), r.latencyFirstMs, "%.0f ms", func(v float64) bool { return v <= firstFileMaxMs })
	row(fmt.Sprintf("backfill ≤ %.1f× DuckDB", backfillMaxRatio), r.backfillRatio, "%.2f×", func(v float64) bool { return v <= backfillMaxRatio })
	row(fmt.Sprintf("backfill ≥ %dk events/s", backfillMinEventsPerS/1000), r.backfillEventsPerS, "%.0f events/s", func(v float64) bool { return v >= backfillMinEventsPerS })
	row(fmt.Sprintf("backfill peak RSS ≤ %d MiB", backfillMaxPeakMiB), r.backfillPeakMiB, "%.0f MiB", func(v float64) bool { return v <= backfillMaxPeakMiB })
	row(fmt.Sprintf("backfill staging ≥ %d MB/s of JSONL", backfillMinStageMBs), r.backfillStageMBs, "%.1f MB/s", func(v float64) bool { return v >= backfillMinStageMBs })
	row(fmt.Sprintf("backfill 10M / 1M per event ≤ %.1f×", backfillScaleMaxRatio), r.backfillScaleRatio, "%.2f×", func(v float64) bool { return v <= backfillScaleMaxRatio })
	row(fmt.Sprintf("backfill 10M peak RSS ≤ %d MiB", backfillMaxPeakMiB), r.backfillScalePeakMiB, "%.0f MiB", func(v float64) bool { return v <= backfillMaxPeakMiB })
	row(fmt.Sprintf("scd2 merge ≤ %.0f× current", scd2MaxRatio), r.scd2Ratio, "%.2f×", func(v float64) bool { return v <= scd2MaxRatio })
	row(fmt.Sprintf("sustained ≥ %dk events/s, lag p99 ≤ %s", sustainedMinEventsPerS/1000, lagBound), r.sustainedEventsPerS, "%.0f events/s", func(v float64) bool { return v >= sustainedMinEventsPerS })
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
	return fmt.Sprintf("SUMMARY decode_json_vs_duckdb=%s merge_vs_duckdb=%s scaling_10M_over_100k=%s random_10M_over_100k=%s peak_mib=%s latency_p50_ms=%s latency_p99_ms=%s backfill_vs_duckdb=%s backfill_events_per_s=%s backfill_peak_mib=%s backfill_10M_over_1M=%s backfill_10M_peak_mib=%s scd2_vs_current=%s merge_us_per_changed_row_100k=%s merge_us_per_changed_row_1M=%s merge_us_per_changed_row_10M=%s latency_cold_ms=%s latency_first_ms=%s sustained_events_per_s=%s sustained_p50_ms=%s sustained_p99_ms=%s sustained_cores=%s sustained_peak_mib=%s",
		f(r.decodeRatio, "%.2f"), f(r.mergeRatio, "%.2f"), f(r.scalingRatio, "%.2f"), f(r.randomDVRatio, "%.2f"), f(r.peakMiB, "%.0f"), f(r.latencyP50, "%.0f"), f(r.latencyP99, "%.0f"),
		f(r.backfillRatio, "%.2f"), f(r.backfillEventsPerS, "%.0f"), f(r.backfillPeakMiB, "%.0f"), f(r.backfillScaleRatio, "%.2f"), f(r.backfillScalePeakMiB, "%.0f"), f(r.scd2Ratio, "%.2f"),
		f(r.mergeUsPerChangedRow[0], "%.2f"), f(r.mergeUsPerChangedRow[1], "%.2f"), f(r.mergeUsPerChangedRow[2], "%.2f"),
		f(r.latencyColdMs, "%.0f"), f(r.latencyFirstMs, "%.0f"),
		f(r.sustainedEventsPerS, "%.0f"), f(r.sustainedP50, "%.0f"), f(r.sustainedP99, "%.0f"), f(r.sustainedCores, "%.2f"), f(r.sustainedPeakMiB, "%.0f"))
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
