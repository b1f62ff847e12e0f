package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

func cmdSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("simulate", stderr)
	out := fs.String("out", "", "folder or gs://bucket/prefix to write Datastream files into (required)")
	seed := fs.Uint64("seed", 1, "random seed (the same seed writes the same changes; with --fixed-dates, the same files)")
	rows := fs.Int("rows", 25, "rows per table before the stream starts (backfill)")
	changes := fs.Int("changes", 150, "CDC changes per table")
	perFile := fs.Int("events-per-file", 40, "events per file at most")
	dup := fs.Float64("duplicate-events", 0.05, "fraction of events written twice, in two files")
	redeliver := fs.Float64("redeliver-files", 0.05, "fraction of files written twice")
	reference := fs.String("reference", "", "also write the expected final state of every table as JSON lines to this local file")
	fixedDates := fs.Bool("fixed-dates", false, "date the stream from 2026-01-05T10:00:00Z, as tests do, instead of ending it now")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if *out == "" {
		fs.Usage()
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	opts := dssim.Options{
		Seed: *seed, EventsPerFile: *perFile, DuplicateEvents: *dup, RedeliveredFiles: *redeliver, Shuffle: true,
		Tables: []dssim.TableSpec{
			{Source: dssim.MySQL, Database: "shop", Table: "customers", Format: dssim.JSONL, InitialRows: *rows, Changes: *changes},
			{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", Format: dssim.Avro, InitialRows: *rows, Changes: *changes},
			{Source: dssim.PostgreSQL, Database: "public", Table: "order_lines", Format: dssim.JSONLGz, InitialRows: *rows, Changes: *changes},
		},
	}
	if !*fixedDates {
		// Ending now makes the lag that status shows for the lake read
		// true, as it would for a live stream.
		opts.End = time.Now()
	}
	res, err := dssim.Run(opts)
	if err != nil {
		return err
	}
	store, err := objstore.Open(ctx, *out)
	if err != nil {
		return err
	}
	defer store.Close()
	for _, f := range res.Files {
		if _, err := store.Write(ctx, f.Name, bytes.NewReader(f.Data), objstore.WriteOptions{}); err != nil {
			return fmt.Errorf("write %s: %w", f.Name, err)
		}
	}
	fmt.Fprintf(stdout, "wrote %d Datastream files for %d tables into %s\n", len(res.Files), len(res.Tables), store.URL())
	if *reference != "" {
		return writeReference(ctx, *reference, res)
	}
	return nil
}

// writeReference writes {"table":..., "row":{...}} per expected row, sorted.
func writeReference(ctx context.Context, file string, res *dssim.Result) error {
	dir, name := objstore.Split(file)
	store, err := objstore.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer store.Close()
	var lines []string
	for id, t := range res.Tables {
		for _, row := range t.Rows {
			b, err := value.AppendRowJSON(nil, t.Schema, row)
			if err != nil {
				return err
			}
			tb, _ := json.Marshal(id)
			lines = append(lines, fmt.Sprintf(`{"table":%s,"row":%s}`, tb, b))
		}
	}
	sort.Strings(lines)
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	_, err = store.Write(ctx, name, &buf, objstore.WriteOptions{})
	return err
}
