package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

type statusOutput struct {
	Table              string   `json:"table"`
	LagSeconds         *float64 `json:"lag_seconds"`
	SinceCommitSeconds *float64 `json:"since_last_commit_seconds"`
	Pending            int64    `json:"pending_files"`
	Quarantined        int64    `json:"quarantined_files"`
	StateVersion       int64    `json:"state_version"`
	HistoryVersion     int64    `json:"history_version"`
	LastBatch          int64    `json:"last_batch"`
	LeaseHolder        string   `json:"lease_holder,omitempty"`
}

// tableStatuses is what status reads of a coordination backend.
type tableStatuses interface {
	Statuses(ctx context.Context) ([]coord.TableStatus, error)
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	lakeURL := fs.String("lake", "", "the lake (folder or gs://bucket/prefix): table versions are read from it, and with no --project its local coordination")
	project := fs.String("project", "", "Google Cloud project of a deployment: read Firestore coordination (FIRESTORE_EMULATOR_HOST is honoured)")
	database := fs.String("firestore-database", firestore.DefaultDatabaseID, "Firestore database of the deployment")
	prefix := fs.String("firestore-prefix", "", "collection prefix (emulator tests)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	var c tableStatuses
	var lake objstore.Store
	if *lakeURL != "" {
		var err error
		if lake, err = openStore(ctx, *lakeURL, "lake", true); err != nil {
			return err
		}
		defer lake.Close()
	}
	switch {
	case *project != "":
		client, err := firestore.NewClientWithDatabase(ctx, *project, *database)
		if err != nil {
			return fmt.Errorf("firestore: %w", err)
		}
		defer client.Close()
		if c, err = firestorecoord.New(ctx, client, firestorecoord.Options{Prefix: *prefix}); err != nil {
			return err
		}
	case lake != nil:
		var err error
		if c, err = coord.NewLocal(lake, coord.LocalOptions{}); err != nil {
			return err
		}
	default:
		fs.Usage()
		return fmt.Errorf("%w: give --project (a deployment) or --lake (an embedded run)", errUsage)
	}
	tables, err := c.Statuses(ctx)
	if err != nil {
		return err
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].Table < tables[j].Table })
	// With the lake at hand, report the tables' own versions (maintenance
	// commits too), not only the last batch's.
	if lake != nil {
		for i, t := range tables {
			tabs, err := pipeline.TableSetIn(lake, t.Table)
			if err != nil {
				continue // a quarantine record whose table is unknown
			}
			if s, err := delta.Open(tabs.State).Snapshot(ctx); err == nil {
				tables[i].StateVersion = s.Version()
			}
			if s, err := delta.Open(tabs.History).Snapshot(ctx); err == nil {
				tables[i].HistoryVersion = s.Version()
			}
		}
	}
	now := time.Now()
	secs := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		s := now.Sub(t).Seconds()
		return &s
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, t := range tables {
			if err := enc.Encode(statusOutput{Table: t.Table, LagSeconds: secs(t.LastSourceTime), SinceCommitSeconds: secs(t.LastCommitTime),
				Pending: t.Pending, Quarantined: t.Quarantined, StateVersion: t.StateVersion, HistoryVersion: t.HistoryVersion,
				LastBatch: t.LastBatchSeq, LeaseHolder: t.LeaseHolder}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tlag\tsince commit\tpending\tquarantined\tstate v\thistory v\tbatch\tlease")
	for _, t := range tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", t.Table, dur(secs(t.LastSourceTime)), dur(secs(t.LastCommitTime)),
			t.Pending, t.Quarantined, ver(t.StateVersion), ver(t.HistoryVersion), t.LastBatchSeq, t.LeaseHolder)
	}
	return tw.Flush()
}

func dur(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s) * time.Second).Round(time.Second).String()
}
