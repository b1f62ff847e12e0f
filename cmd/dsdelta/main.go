package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/dsdelta/dsdelta/shared/memlimit"
	_ "github.com/dsdelta/dsdelta/shared/objstore/gcsstore" // gs:// URLs
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	summary string
}

func commands() map[string]command {
	return map[string]command{
		"describe":          {cmdDescribe, "describe a Delta table: version, protocol, schema, files, records"},
		"history":           {cmdHistory, "list a Delta table's commits (like DESCRIBE HISTORY)"},
		"show":              {cmdShow, "print a Delta table's rows, at the latest or an older version"},
		"decode":            {cmdDecode, "print the change events of a Datastream file, one JSON object per line"},
		"verify":            {cmdVerify, "check a current-state table against the replay of its history table"},
		"rebuild":           {cmdRebuild, "recreate a current-state table (and its tombstones) from its history"},
		"simulate":          {cmdSimulate, "write realistic Datastream output (MySQL, Oracle, PostgreSQL) for trying dsdelta out"},
		"status":            {cmdStatus, "per table lag, pending and quarantined files, versions (deployment or embedded lake)"},
		"replay":            {cmdReplay, "stage quarantined (or named, or all) files again after a fix, and merge them"},
		"run":               {cmdRun, "stage, merge and maintain Datastream output into Delta tables (embedded)"},
		"optimize":          {cmdOptimize, "bin-pack a Delta table's small files (clustered by key for ours) and fold deletion vectors"},
		"vacuum":            {cmdVacuum, "delete the files of a Delta table that no version within the retention references"},
		"checkpoint":        {cmdCheckpoint, "write a checkpoint of a Delta table at its latest version"},
		"expire-tombstones": {cmdExpireTombstones, "remove the tombstones older than the retention from a dsdelta tombstone table"},
		"repair-stats":      {cmdRepairStats, "repair the footer and add.stats bounds older releases wrote wrong in a Delta table"},
	}
}

// errUsage marks a command line a command refuses: exit code 2, its
// reason on stderr.
var errUsage = errors.New("usage")

// errFlags is errUsage for flags the flag package refused, which has
// printed why and the command's usage already.
var errFlags = fmt.Errorf("%w: flags", errUsage)

// configError marks a bad argument or configuration that is not explained
// by a usage message: it is printed and exits 2, like a usage error.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A run given GOMEMLIMIT collects by it (memlimit); in main, not
	// realMain, which the tests call in their own process.
	memlimit.Apply()
	os.Exit(realMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Libraries log progress at info; a CLI user sees warnings and errors
	// unless a command asks for more (run -v).
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cmds := commands()
	if len(args) == 2 && args[0] == "help" {
		// "help VERB" is "VERB -h": one text per command, its flags'.
		if c, ok := cmds[args[1]]; ok {
			return exitCode(stderr, args[1], c.run(ctx, []string{"-h"}, stdout, stderr))
		}
		fmt.Fprintf(stderr, "dsdelta: unknown command %q\n", args[1])
		usage(stderr, cmds)
		return 2
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "dsdelta: unknown command %q\n", args[0])
		usage(stderr, cmds)
		return 2
	}
	return exitCode(stderr, args[0], c.run(ctx, args[1:], stdout, stderr))
}

// exitCode reports a command's error on stderr and returns its exit code.
func exitCode(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFlags):
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "dsdelta %s: %s\n", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	}
	fmt.Fprintf(stderr, "dsdelta %s: %v\n", name, err)
	switch {
	case errors.As(err, new(configError)):
		return 2
	case errors.Is(err, errIncomplete):
		return 3
	}
	return 1
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: dsdelta COMMAND [flags] ...")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-17s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "Run 'dsdelta help COMMAND' (or 'dsdelta COMMAND -h') for a command's flags.")
}

// newFlags returns a FlagSet that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("dsdelta "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseInterleaved parses flags that may appear before or after positional
// arguments ("show TABLE --limit 3" as well as "show --limit 3 TABLE").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errFlags, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
