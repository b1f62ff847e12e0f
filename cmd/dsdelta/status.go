package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/dsdelta/dsdelta/shared/config"
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
	// UnregisteredFiles and OldestUnmergedAge are the view from the
	// source's side (with --source only): objects past the grace period
	// the registry does not know, and the age of the oldest object not
	// merged, the lake's true lag. UnregisteredAtLeast says the listing's
	// bounds stopped short.
	UnregisteredFiles   *int     `json:"unregistered_files,omitempty"`
	UnregisteredAtLeast bool     `json:"unregistered_at_least,omitempty"`
	OldestUnmergedAge   *float64 `json:"oldest_unmerged_age_seconds,omitempty"`
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	lakeURL := fs.String("lake", "", "the lake (folder or gs://bucket/prefix): table versions are read from it, and with no --project its local coordination")
	project := fs.String("project", "", "Google Cloud project of a deployment: read Firestore coordination (FIRESTORE_EMULATOR_HOST is honoured)")
	database := fs.String("firestore-database", firestore.DefaultDatabaseID, "Firestore database of the deployment")
	prefix := fs.String("firestore-prefix", "", "collection prefix (emulator tests)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	sourceURL := fs.String("source", "", "the Datastream output (folder, or gs://bucket/prefix of a deployment): also report files the registry does not know and the age of the oldest file not merged")
	cfgFile := fs.String("config", "", "configuration file (reconcile_grace and the reconcile's bounds)")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	var cfg config.Config
	if *cfgFile != "" {
		var err error
		if cfg, err = config.Load(*cfgFile); err != nil {
			return configError{err}
		}
	}
	var c pipeline.Coordinator
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
	var lags map[string]*pipeline.SourceLag
	if *sourceURL != "" {
		if lags, err = sourceLags(ctx, *sourceURL, *project == "", pipeline.Coordinate(c), cfg); err != nil {
			return err
		}
		for table := range lags {
			if !slices.ContainsFunc(tables, func(t coord.TableStatus) bool { return t.Table == table }) {
				tables = append(tables, coord.TableStatus{Table: table, StateVersion: -1, HistoryVersion: -1})
			}
		}
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
			out := statusOutput{Table: t.Table, LagSeconds: secs(t.LastSourceTime), SinceCommitSeconds: secs(t.LastCommitTime),
				Pending: t.Pending, Quarantined: t.Quarantined, StateVersion: t.StateVersion, HistoryVersion: t.HistoryVersion,
				LastBatch: t.LastBatchSeq, LeaseHolder: t.LeaseHolder}
			if lags != nil {
				l := lagOf(lags, t.Table)
				out.UnregisteredFiles, out.UnregisteredAtLeast = &l.Unregistered, l.AtLeast
				out.OldestUnmergedAge = secs(l.OldestUnmerged)
				if out.OldestUnmergedAge == nil {
					zero := 0.0
					out.OldestUnmergedAge = &zero
				}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	header := "table\tlag\tsince commit\tpending\tquarantined\tstate v\thistory v\tbatch\tlease"
	if lags != nil {
		header += "\tunregistered\toldest unmerged"
	}
	fmt.Fprintln(tw, header)
	for _, t := range tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s", t.Table, dur(secs(t.LastSourceTime)), dur(secs(t.LastCommitTime)),
			t.Pending, t.Quarantined, ver(t.StateVersion), ver(t.HistoryVersion), t.LastBatchSeq, t.LeaseHolder)
		if lags != nil {
			l := lagOf(lags, t.Table)
			n := strconv.Itoa(l.Unregistered)
			if l.AtLeast {
				n = ">=" + n
			}
			age := "0s"
			if !l.OldestUnmerged.IsZero() {
				age = dur(secs(l.OldestUnmerged))
			}
			fmt.Fprintf(tw, "\t%s\t%s", n, age)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// lagOf is a table's lag from the source's side, zero when it has none.
func lagOf(lags map[string]*pipeline.SourceLag, table string) pipeline.SourceLag {
	if l := lags[table]; l != nil {
		return *l
	}
	return pipeline.SourceLag{Table: table}
}

// sourceLags looks at the source from the registry's side: an embedded
// run's source folder (or bucket prefix, whose files it names relative to
// the prefix, in the empty bucket), or a deployment's bucket and prefix.
func sourceLags(ctx context.Context, url string, embedded bool, co pipeline.Coordination, cfg config.Config) (map[string]*pipeline.SourceLag, error) {
	var src pipeline.Source
	if embedded {
		store, err := openStore(ctx, url, "source", true)
		if err != nil {
			return nil, err
		}
		defer store.Close()
		src = pipeline.Source{Store: store}
	} else {
		bucket, prefix, ok := strings.Cut(strings.TrimPrefix(url, "gs://"), "/")
		if !strings.HasPrefix(url, "gs://") || bucket == "" {
			return nil, configError{fmt.Errorf("--source %q: a deployment's source is gs://bucket[/prefix]", url)}
		}
		store, err := openStore(ctx, "gs://"+bucket, "source", false)
		if err != nil {
			return nil, err
		}
		defer store.Close()
		src = pipeline.Source{Store: store, Bucket: bucket}
		if ok {
			src.Prefix = prefix
		}
	}
	p := &pipeline.Pipeline{Coordination: co, Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	return p.SourceLags(ctx, p.Streams(src), embedded)
}

func dur(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s) * time.Second).Round(time.Second).String()
}
