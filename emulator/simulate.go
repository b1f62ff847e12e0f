package main

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/dssim"
)

// SimulateOptions size a simulated Datastream stream.
type SimulateOptions struct {
	Seed          uint64
	Rows          int // rows per table before the stream starts (backfill)
	Changes       int // CDC changes per table
	EventsPerFile int
	// FixedDates dates the stream from dssim's fixed start, as tests do;
	// otherwise it ends now, so that the lag status shows reads true.
	FixedDates bool
}

// DefaultTables are the simulated source tables: all three sources, JSON
// lines (plain and gzip) and Avro.
func DefaultTables(rows, changes int) []dssim.TableSpec {
	return []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", Format: dssim.JSONL, InitialRows: rows, Changes: changes},
		{Source: dssim.MySQL, Database: "shop", Table: "accounts", Format: dssim.Avro, InitialRows: rows, Changes: changes},
		{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", Format: dssim.Avro, InitialRows: rows, Changes: changes},
		{Source: dssim.PostgreSQL, Database: "public", Table: "order_lines", Format: dssim.JSONLGz, InitialRows: rows, Changes: changes},
		{Source: dssim.PostgreSQL, Database: "public", Table: "invoices", Format: dssim.JSONL, InitialRows: rows, Changes: changes},
	}
}

// SimulationOptions are the dssim options the emulator's simulator uses:
// the default tables, with duplicated events, re-delivered files and
// shuffled delivery, ending now unless o.FixedDates.
func SimulationOptions(o SimulateOptions, prefix string) dssim.Options {
	if o.Rows <= 0 {
		o.Rows = 20
	}
	if o.Changes <= 0 {
		o.Changes = 80
	}
	if o.EventsPerFile <= 0 {
		o.EventsPerFile = 25
	}
	opts := dssim.Options{
		Seed: o.Seed, Tables: DefaultTables(o.Rows, o.Changes), Prefix: prefix, EventsPerFile: o.EventsPerFile,
		DuplicateEvents: 0.05, RedeliveredFiles: 0.1, Shuffle: true,
	}
	if !o.FixedDates {
		opts.End = time.Now()
	}
	return opts
}

// Simulate runs the Datastream simulator and writes its files into bucket
// through the GCS JSON API, in the simulator's (shuffled) delivery order,
// so that every write fires an object notification. It returns the
// simulation, whose Tables hold the reference state.
func Simulate(ctx context.Context, client *storage.Client, bucket string, opts dssim.Options) (*dssim.Result, error) {
	res, err := dssim.Run(opts)
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	for _, f := range res.Files {
		if err := writeObject(ctx, client, bucket, f.Name, f.Data); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// writeObject uploads one object in a single request.
func writeObject(ctx context.Context, client *storage.Client, bucket, name string, data []byte) error {
	w := client.Bucket(bucket).Object(name).NewWriter(ctx)
	w.ChunkSize = 0 // one request, no resumable upload
	if _, err := w.Write(data); err != nil {
		w.Close()
		return fmt.Errorf("write gs://%s/%s: %w", bucket, name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write gs://%s/%s: %w", bucket, name, err)
	}
	return nil
}
