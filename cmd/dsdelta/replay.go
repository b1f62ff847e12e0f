package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	src := fs.String("source", "", "Datastream output: a folder (embedded runs) or gs://bucket[/prefix] (required)")
	lakeURL := fs.String("lake", "", "the lake: a folder or gs://bucket/prefix (required)")
	project := fs.String("project", "", "Google Cloud project of a deployment: use its Firestore coordination")
	database := fs.String("firestore-database", firestore.DefaultDatabaseID, "Firestore database of the deployment")
	cfgFile := fs.String("config", "", "configuration file (YAML or JSON), as the deployment uses it")
	all := fs.Bool("all", false, "re-stage every data file under --source (already staged files are skipped)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *src == "" || *lakeURL == "" {
		fs.Usage()
		return fmt.Errorf("%w: --source and --lake are required", errUsage)
	}
	var cfg config.Config
	if *cfgFile != "" {
		if cfg, err = config.Load(*cfgFile); err != nil {
			return configError{err}
		}
	}
	lake, err := openStore(ctx, *lakeURL, "lake", false)
	if err != nil {
		return err
	}
	defer lake.Close()
	source, err := openStore(ctx, *src, "source", true)
	if err != nil {
		return err
	}
	defer source.Close()
	var (
		c       pipeline.Coordinator
		sources pipeline.Sources = singleSource{source}
		bucket  string
		prefix  string
	)
	if strings.HasPrefix(*src, "gs://") {
		bucket, prefix, _ = strings.Cut(strings.TrimPrefix(*src, "gs://"), "/")
		prefix = strings.Trim(prefix, "/")
		// A deployment's registry names each file's bucket: one client
		// opens them all.
		client, err := storage.NewClient(ctx)
		if err != nil {
			return fmt.Errorf("storage client: %w", err)
		}
		defer client.Close()
		buckets := gcsstore.NewBuckets(client)
		defer buckets.Close()
		sources = buckets
	}
	if *project != "" {
		client, err := firestore.NewClientWithDatabase(ctx, *project, *database)
		if err != nil {
			return fmt.Errorf("firestore: %w", err)
		}
		defer client.Close()
		if c, err = firestorecoord.New(ctx, client, firestorecoord.Options{}); err != nil {
			return err
		}
	} else if c, err = coord.NewLocal(lake, coord.LocalOptions{}); err != nil {
		return err
	}
	host, _ := os.Hostname()
	p := &pipeline.Pipeline{Lake: lake, Sources: sources, Coordination: pipeline.Coordinate(c), Config: cfg, Holder: fmt.Sprintf("replay-%s-%d", host, os.Getpid())}
	res, err := p.Replay(ctx, pipeline.ReplayOptions{Source: source, Bucket: bucket, Prefix: prefix, Files: pos, All: *all})
	for _, f := range res.StillBad {
		fmt.Fprintf(stdout, "still bad: %s: %s\n", f.File.Name, f.Quarantined)
	}
	if err != nil {
		return err
	}
	for _, id := range res.Busy {
		fmt.Fprintf(stdout, "%s: lease held by another process; its replayed files are staged and wait for that merge\n", id)
	}
	fmt.Fprintf(stdout, "%d files staged, %d merged, %d still quarantined, %d already staged or skipped\n", res.Staged, res.Staged-res.Pending, len(res.StillBad), res.Skipped)
	// A file still bad was read from the source just now, so it counts as
	// run counts a quarantined file whose source is there.
	return incomplete(res.Pending, len(res.StillBad))
}
