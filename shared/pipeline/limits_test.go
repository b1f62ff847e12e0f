package pipeline

import (
	"context"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TestMergeBatchesFollowTheConfiguredLimits: staging records each file's
// source bytes, and a merge cuts its batches by the configured source
// bytes, the unit users size a backfill in, and a batch into steps (key
// ranges) by the configured events.
func TestMergeBatchesFollowTheConfiguredLimits(t *testing.T) {
	files := []dssim.File{
		jsonlFile("a", 10, `{"id":1,"n":1}`, `{"id":2,"n":2}`),
		jsonlFile("b", 20, `{"id":3,"n":3}`, `{"id":4,"n":4}`),
		jsonlFile("c", 30, `{"id":5,"n":5}`, `{"id":6,"n":6}`),
	}
	fileBytes := int64(len(files[0].Data))
	for _, f := range files {
		if int64(len(f.Data)) != fileBytes {
			t.Fatalf("test files differ in size (%d and %d bytes); the source-byte cases assume equal files", len(f.Data), fileBytes)
		}
	}
	for _, tc := range []struct {
		name           string
		cfg            config.Config
		batches, steps int
	}{
		{"default limits merge the three files in one batch", config.Config{}, 1, 1},
		{"an event limit of four events merges one batch in two key ranges of three events", config.Config{BatchMaxEvents: 4}, 1, 2},
		{"a source-byte limit of two files' bytes takes two files, then one", config.Config{BatchMaxSourceBytes: 2 * fileBytes}, 2, 2},
		{"an event limit of one event merges one batch in a step per key", config.Config{BatchMaxEvents: 1}, 1, 6},
		{"a file larger than the source-byte limit is merged alone", config.Config{BatchMaxSourceBytes: 1}, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			source := objstore.NewMemory()
			p := newPipeline(t, source, tc.cfg)
			for _, n := range write(t, ctx, source, files) {
				if res, err := p.Stage(ctx, n); err != nil || res.Quarantined != "" {
					t.Fatalf("stage %s: %+v %v", n.Name, res, err)
				}
				rec, err := p.Registry.File(ctx, coord.FileID(n.Bucket, n.Name, n.Generation))
				if err != nil {
					t.Fatalf("registry record of %s: %v", n.Name, err)
				}
				if rec.SourceBytes != fileBytes || rec.Events != 2 {
					t.Fatalf("registry record of %s: %d source bytes and %d events, want %d and 2", n.Name, rec.SourceBytes, rec.Events, fileBytes)
				}
			}
			mr, err := p.MergeTable(ctx, "shop.t")
			if err != nil {
				t.Fatalf("merge: %v", err)
			}
			if mr.Batches != tc.batches || mr.Steps != tc.steps || mr.Files != len(files) || mr.Result.Events != 6 {
				t.Fatalf("merge = %d batches in %d steps, %d files, %d events; want %d batches in %d steps, %d files, 6 events",
					mr.Batches, mr.Steps, mr.Files, mr.Result.Events, tc.batches, tc.steps, len(files))
			}
			if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 6 {
				t.Fatalf("current state holds %d rows, want 6", len(rows))
			}
		})
	}
}
