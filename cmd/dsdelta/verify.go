package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// stateTables resolves the three tables from the current-state table's URL:
// its history and tombstones are the siblings "<url>_log" and
// "<url>_tombstones". The caller closes their stores with closeStores.
func stateTables(ctx context.Context, url string) (tabs cdc.Tables, closeStores func(), err error) {
	url = strings.TrimRight(url, "/")
	var opened []objstore.Store
	closeStores = func() {
		for _, s := range opened {
			_ = s.Close()
		}
	}
	defer func() {
		if err != nil {
			closeStores()
		}
	}()
	open := func(u string, mustExist bool) (objstore.Store, error) {
		s, err := openStore(ctx, u, "table", mustExist)
		if err == nil {
			opened = append(opened, s)
		}
		return s, err
	}
	state, err := open(url, true)
	if err != nil {
		return cdc.Tables{}, nil, err
	}
	hist, err := open(url+pipeline.HistorySuffix, true)
	if err != nil {
		return cdc.Tables{}, nil, fmt.Errorf("history table beside %s: %w", url, err)
	}
	tomb, err := open(url+pipeline.TombstoneSuffix, false)
	if err != nil {
		return cdc.Tables{}, nil, err
	}
	snap, err := delta.Open(state).Snapshot(ctx)
	if err != nil {
		return cdc.Tables{}, nil, fmt.Errorf("%s: %w", url, err)
	}
	id := snap.Configuration()[cdc.PropTable]
	if id == "" || snap.Configuration()[cdc.PropRole] != "state" {
		return cdc.Tables{}, nil, fmt.Errorf("%s is not a dsdelta current-state table (no %s property)", url, cdc.PropTable)
	}
	return cdc.Tables{ID: id, State: state, History: hist, Tombstones: tomb}, closeStores, nil
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

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "verify")
	if err != nil {
		return err
	}
	tabs, closeStores, err := stateTables(ctx, url)
	if err != nil {
		return err
	}
	defer closeStores()
	r, err := cdc.Verify(ctx, tabs)
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
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "rebuild")
	if err != nil {
		return err
	}
	tabs, closeStores, err := stateTables(ctx, url)
	if err != nil {
		return err
	}
	defer closeStores()
	r, err := cdc.Rebuild(ctx, tabs, 0)
	if err != nil {
		return err
	}
	printVerify(stdout, url, r)
	if !r.OK() {
		return fmt.Errorf("%s: rebuilt table still differs from its history", url)
	}
	return nil
}
