package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/dssim"
)

func main() {
	if isFunctionServer() {
		if err := serveFunction(); err != nil {
			fmt.Fprintln(os.Stderr, "function server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal a second one ends the emulator at once;
		// the supervisors still stop every child.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "emulator:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.DataDir, "data-dir", "", "directory for the processes' logs and the Pub/Sub emulator's data (default: a temporary directory, removed on exit)")
	fs.IntVar(&o.BasePort, "ports", 9085, "first of six consecutive ports: Pub/Sub, Firestore, GCS, onfile, merge, compact (0 = free ports)")
	fs.StringVar(&o.Project, "project", "dsdelta-local", "project id the emulators serve")
	fs.StringVar(&o.SourceBucket, "source-bucket", "datastream", "bucket Datastream writes to")
	fs.StringVar(&o.SourcePrefix, "source-prefix", "", "path prefix of the stream in the source bucket")
	fs.StringVar(&o.LakeBucket, "lake-bucket", "lake", "bucket holding the Delta tables")
	fs.DurationVar(&o.Tick, "tick", time.Minute, "compaction schedule (0 disables the scheduler)")
	fs.DurationVar(&o.MergeBudget, "merge-budget", DefaultMergeBudget, "time budget of one merge invocation")
	fs.DurationVar(&o.LeaseTTL, "lease-ttl", 30*time.Second, "table lease time to live")
	fs.StringVar(&o.LogLevel, "log-level", "info", "functions' log level (debug, info, warn, error)")
	configFile := fs.String("config", "", "the functions' configuration file (YAML or JSON), as terraform passes it to them in DSDELTA_CONFIG (default: the defaults)")
	quiet := fs.Bool("quiet", false, "do not copy the functions' logs to the terminal (they stay in the data dir)")
	simulate := fs.Bool("simulate", false, "write a simulated Datastream stream into the source bucket once the stack runs")
	var sim SimulateOptions
	fs.Uint64Var(&sim.Seed, "seed", 1, "simulator seed")
	fs.IntVar(&sim.Rows, "rows", 20, "simulator: rows per table before the stream starts")
	fs.IntVar(&sim.Changes, "changes", 80, "simulator: CDC changes per table")
	fs.BoolVar(&sim.FixedDates, "fixed-dates", false, "simulator: date the stream from 2026-01-05T10:00:00Z, as tests do, instead of ending it now")
	latency := fs.Duration("latency", 0, "measure finalize-to-merged latency: after a warm-up file and the first files of 3 new tables, trickle files across 20 tables for this long, print a LATENCY line, stop")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *configFile != "" {
		var err error
		if o.Config, err = readConfig(*configFile); err != nil {
			return err
		}
	}
	if !*quiet {
		o.FunctionLogs = stdout
	}
	fmt.Fprintln(stdout, "starting the Pub/Sub and Firestore emulators, fake-gcs-server and the functions...")
	s, err := Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stdout, "stopping...")
		s.Close()
		fmt.Fprintln(stdout, "stopped")
	}()
	if *latency > 0 {
		r, err := MeasureLatency(ctx, s, LatencyOptions{Duration: *latency, Tables: 20, Interval: 250 * time.Millisecond}, stderr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "LATENCY p50_ms=%d p99_ms=%d max_ms=%d files=%d tables=20 cold_ms=%d first_ms=%d\n", r.P50.Milliseconds(), r.P99.Milliseconds(), r.Max.Milliseconds(), r.Files, r.ColdStart.Milliseconds(), r.FirstFile.Milliseconds())
		return nil
	}
	printSummary(stdout, s)
	if *simulate {
		opts := SimulationOptions(sim, s.Options().SourcePrefix)
		res, err := Simulate(ctx, s.Storage(), s.Options().SourceBucket, opts)
		if err != nil {
			return err
		}
		printSimulation(stdout, res)
	}
	<-ctx.Done()
	return nil
}

// readConfig returns the text of a configuration file once shared/config
// accepts it, as the functions will read it; a bad file is a usage error
// that names the file and the setting.
func readConfig(file string) (string, error) {
	if _, err := config.Load(file); err != nil {
		return "", fmt.Errorf("%w: --config: %w", errUsage, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: --config: %w", errUsage, err)
	}
	return string(b), nil
}

func printSummary(w io.Writer, s *Stack) {
	o := s.Options()
	env := s.EmulatorEnv()
	fmt.Fprintf(w, `
dsdelta emulator stack is running (Ctrl-C stops everything)
  Pub/Sub emulator    %s
  Firestore emulator  %s
  fake-gcs-server     %s   buckets: gs://%s (source, notifications -> %s), gs://%s (lake)
  onfile function     %s   push subscriptions "onfile" on %s (through the drop filter %s) and %q on %s (dead letters -> %s)
  merge function      %s   push subscription "merge" on %s
  compact function    %s   push subscription "compact" on %s, scheduled every %s
  dead letters        pull subscription %q
  logs                %s

Use the CLI against it from another shell:
`, hostOf(env, "PUBSUB_EMULATOR_HOST"), hostOf(env, "FIRESTORE_EMULATOR_HOST"), hostOf(env, "STORAGE_EMULATOR_HOST"),
		o.SourceBucket, TopicNotifications, o.LakeBucket,
		s.FunctionURL(FuncOnFile), TopicNotifications, s.drops.URL(), "onfile-reconcile", TopicReconcile, TopicDeadLetter,
		s.FunctionURL(FuncMerge), TopicMerge,
		s.FunctionURL(FuncCompact), TopicCompact, tickText(o.Tick),
		SubscriptionDeadLetters, s.DataDir())
	for _, kv := range env {
		fmt.Fprintf(w, "  export %s\n", kv)
	}
	fmt.Fprintf(w, "  go run ./cmd/dsdelta status --project %s\n", o.Project)
	fmt.Fprintf(w, "  go run ./cmd/dsdelta simulate --out gs://%s%s\n\n", o.SourceBucket, prefixPath(o.SourcePrefix))
}

func printSimulation(w io.Writer, res *dssim.Result) {
	var tables []string
	for id, t := range res.Tables {
		tables = append(tables, fmt.Sprintf("%s (%s, %s, %d rows expected)", id, t.Spec.Source, t.Spec.Format, len(t.Rows)))
	}
	fmt.Fprintf(w, "simulator wrote %d Datastream files for: %s\n", len(res.Files), strings.Join(tables, ", "))
}

func hostOf(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

func tickText(d time.Duration) string {
	if d <= 0 {
		return "never"
	}
	return d.String()
}

func prefixPath(p string) string {
	if p == "" {
		return ""
	}
	return "/" + p
}
