package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// tableSetAt resolves the table set (the three tables) from the
// current-state table's URL: its history and tombstones are its siblings
// (pipeline.TableSetBeside). The caller closes their stores with
// closeStores.
func tableSetAt(ctx context.Context, url string) (tabs cdc.TableSet, closeStores func(), err error) {
	url = strings.TrimRight(url, "/")
	if err := mustBeDir(url, "table"); err != nil {
		return cdc.TableSet{}, nil, err
	}
	// The folder the table is in, and its name there.
	dirURL, name := ".", url
	if i := strings.LastIndex(url, "/"); i >= 0 {
		dirURL, name = url[:i], url[i+1:]
		if dirURL == "" || strings.HasSuffix(dirURL, "/") { // "/t", "file:///t", "gs://bucket"
			dirURL = url[:i+1]
		}
	}
	dir, err := openStore(ctx, dirURL, "table", false)
	if err != nil {
		return cdc.TableSet{}, nil, err
	}
	closeDir := func() { _ = dir.Close() }
	defer func() {
		if err != nil {
			closeDir()
		}
	}()
	tabs = pipeline.TableSetBeside(dir, name, "")
	if err := mustBeDir(tabs.History.URL(), "table"); err != nil {
		return cdc.TableSet{}, nil, fmt.Errorf("history table beside %s: %w", url, err)
	}
	state := tabs.State
	snap, err := delta.Open(state).Snapshot(ctx)
	if err != nil {
		return cdc.TableSet{}, nil, fmt.Errorf("%s: %w", url, err)
	}
	id := snap.Configuration()[cdc.PropTable]
	if id == "" || snap.Configuration()[cdc.PropRole] != "state" {
		return cdc.TableSet{}, nil, fmt.Errorf("%s is not a dsdelta current-state table (no %s property)", url, cdc.PropTable)
	}
	tabs.ID = id
	return tabs, closeDir, nil
}

func printVerify(w io.Writer, url string, r cdc.VerifyResult) {
	fmt.Fprintf(w, "%s: %d history events, %d rows expected, %d rows in the table, %d mismatches\n", url, r.HistoryEvents, r.ExpectedRows, r.ActualRows, r.Total)
	for _, m := range r.Mismatches {
		fmt.Fprintf(w, "  key %s: %s\n", m.Key, m.Reason)
	}
	if r.Total > len(r.Mismatches) {
		fmt.Fprintf(w, "  ... and %d more\n", r.Total-len(r.Mismatches))
	}
}

// replayFlags sets the usage and the flags verify and rebuild share: the
// memory bound of their passes over the history, and progress logging.
func replayFlags(fs *flag.FlagSet, usage string) func() cdc.Replay {
	maxKeys := fs.Int("max-keys", cdc.DefaultReplayMaxKeys, "keys held in memory per pass over the history (about 100 bytes each; a rebuild also holds their rows, 128 MiB at most)")
	verbose := fs.Bool("v", false, "log each pass over the history")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags] TABLE\n%s\n"+
			"The history is replayed in passes over ranges of keys, each holding at most\n"+
			"--max-keys keys: memory stays bounded whatever the table's size, and a\n"+
			"larger table (or a lower --max-keys) takes more passes.\n", fs.Name(), usage)
		fs.PrintDefaults()
	}
	return func() cdc.Replay {
		r := cdc.Replay{MaxKeys: *maxKeys}
		if *verbose {
			r.Logger = slog.New(slog.NewTextHandler(fs.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		return r
	}
}

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	replay := replayFlags(fs, "Compares the current-state table TABLE with the replay of its history (TABLE_log).")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "verify")
	if err != nil {
		return err
	}
	tabs, closeStores, err := tableSetAt(ctx, url)
	if err != nil {
		return err
	}
	defer closeStores()
	r, err := replay().Verify(ctx, tabs)
	if err != nil {
		return err
	}
	printVerify(stdout, url, r)
	if !r.OK() {
		return fmt.Errorf("%s: current state differs from the replay of its history (%d mismatches); 'dsdelta rebuild %s' recreates it", url, r.Total, url)
	}
	return nil
}

func cmdRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rebuild", stderr)
	mode := fs.String("mode", "", "recreate the table in this mode (current, soft_delete, scd2); default: the table's own mode. The merge refuses a table whose mode differs from its configuration's, so set the same mode there")
	replay := replayFlags(fs, "Recreates the current-state table TABLE and its tombstones from its history\n(TABLE_log), in one commit each, then verifies it. --mode changes the table's\nmode: the table is recreated from its history under the new mode's rule.")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	m, err := cdc.ParseMode(*mode)
	if *mode != "" && err != nil {
		return configError{fmt.Errorf("--mode: %w", err)}
	}
	url, err := tableArg(fs, pos, "rebuild")
	if err != nil {
		return err
	}
	tabs, closeStores, err := tableSetAt(ctx, url)
	if err != nil {
		return err
	}
	defer closeStores()
	rp := replay()
	if *mode != "" {
		rp.Mode = m
	}
	r, err := rp.Rebuild(ctx, tabs)
	if err != nil {
		return err
	}
	printVerify(stdout, url, r)
	if !r.OK() {
		return fmt.Errorf("%s: rebuilt table still differs from its history", url)
	}
	return nil
}
