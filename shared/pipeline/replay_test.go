package pipeline

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestReplay(t *testing.T) {
	ctx := context.Background()
	good := jsonlFile("a", 10, `{"id":1,"n":5}`)
	bad := jsonlFile("b", 20, `{"id":2,"n":6}`, `{"id":3,"n":"abc"}`)
	fixed := jsonlFile("b", 20, `{"id":2,"n":6}`, `{"id":3,"n":7}`)
	// setup stages good and bad, merges, and returns the pipeline with
	// bad quarantined.
	setup := func(t *testing.T) (*Pipeline, objstore.Store) {
		t.Helper()
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{})
		if res := stageAll(t, ctx, p, source, "shop.t", good, bad); res[1].Quarantined == "" {
			t.Fatal("the bad file was not quarantined")
		}
		return p, source
	}
	fix := func(t *testing.T, source objstore.Store) {
		t.Helper()
		if _, err := source.Write(ctx, fixed.Name, bytes.NewReader(fixed.Data), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("by default the quarantined files are staged again and their tables merged", func(t *testing.T) {
		p, source := setup(t)
		fix(t, source)
		res, err := p.Replay(ctx, ReplayOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		if res.Staged != 1 || res.Skipped != 0 || len(res.StillBad) != 0 || !reflect.DeepEqual(res.Merged, []string{"shop.t"}) {
			t.Fatalf("Replay = %+v, want the fixed file staged and shop.t merged", res)
		}
		if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 3 || rows[`{"id":3}`] != `{"id":3,"n":7}` {
			t.Errorf("state = %v, want the fixed file's rows merged", rows)
		}
		if q, err := p.Registry.ListFiles(ctx, "shop.t", coord.StateQuarantined); err != nil || len(q) != 0 {
			t.Errorf("quarantined after the replay: %v, %v; want none", q, err)
		}
	})

	t.Run("a table whose lease another process holds is reported busy, its files pending", func(t *testing.T) {
		p, source := setup(t)
		fix(t, source)
		if _, err := p.Leaser.Acquire(ctx, "shop.t", "merging-instance/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		res, err := p.Replay(ctx, ReplayOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		if res.Staged != 1 || len(res.Merged) != 0 || !reflect.DeepEqual(res.Busy, []string{"shop.t"}) || res.Pending != 1 {
			t.Fatalf("Replay = %+v, want the fixed file staged and shop.t busy with it pending", res)
		}
		if pending, err := p.Registry.Pending(ctx, "shop.t", 10); err != nil || len(pending) != 1 {
			t.Errorf("pending after the replay: %v, %v; want the fixed file", pending, err)
		}
	})

	t.Run("a file still bad is reported with its reason and nothing is merged", func(t *testing.T) {
		p, source := setup(t)
		res, err := p.Replay(ctx, ReplayOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		if res.Staged != 0 || len(res.Merged) != 0 || len(res.StillBad) != 1 {
			t.Fatalf("Replay = %+v, want one file still bad and nothing merged", res)
		}
		if sb := res.StillBad[0]; sb.File.Name != bad.Name || !strings.Contains(sb.Quarantined, `"abc"`) {
			t.Errorf("still bad = %s: %s, want %s with the bad value", sb.File.Name, sb.Quarantined, bad.Name)
		}
	})

	t.Run("named files are staged again, those already staged are skipped", func(t *testing.T) {
		p, source := setup(t)
		fix(t, source)
		res, err := p.Replay(ctx, ReplayOptions{Source: source, Files: []string{good.Name, fixed.Name}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Staged != 1 || res.Skipped != 1 || !reflect.DeepEqual(res.Merged, []string{"shop.t"}) {
			t.Fatalf("Replay = %+v, want the fixed file staged and the good one skipped", res)
		}
	})

	t.Run("all stages every data file under the source not staged yet", func(t *testing.T) {
		p, source := setup(t)
		fix(t, source)
		other := jsonlFile("c", 30, `{"id":4,"n":8}`)
		if _, err := source.Write(ctx, other.Name, bytes.NewReader(other.Data), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := source.Write(ctx, "shop_t/notes.txt", strings.NewReader("not data"), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		res, err := p.Replay(ctx, ReplayOptions{Source: source, All: true})
		if err != nil {
			t.Fatal(err)
		}
		// good is a duplicate; fixed (a new generation) and other are new.
		if res.Staged != 2 || res.Skipped != 1 || len(res.StillBad) != 0 {
			t.Fatalf("Replay = %+v, want two files staged and one skipped", res)
		}
		if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 4 {
			t.Errorf("state = %v, want 4 rows", rows)
		}
	})

	t.Run("a named file missing from the source is an error naming it", func(t *testing.T) {
		p, source := setup(t)
		_, err := p.Replay(ctx, ReplayOptions{Source: source, Files: []string{"shop_t/missing.jsonl"}})
		if err == nil || !strings.Contains(err.Error(), "shop_t/missing.jsonl") {
			t.Fatalf("Replay of a missing file: %v, want an error naming it", err)
		}
	})

	t.Run("files of a deployment are named with the source's prefix in its bucket", func(t *testing.T) {
		// A lake of its own: setup's files, named without a bucket, are
		// of another stream, which would feed shop.t already.
		bucket := objstore.NewMemory()
		p := newPipeline(t, bucket, config.Config{})
		source := objstore.Sub(bucket, "ds")
		fix(t, source)
		res, err := p.Replay(ctx, ReplayOptions{Source: source, Bucket: "b", Prefix: "ds", Files: []string{fixed.Name}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Staged != 1 {
			t.Fatalf("Replay = %+v, want the file staged", res)
		}
		recs, err := p.Registry.ListFiles(ctx, "shop.t", "")
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, r := range recs {
			found = found || (r.Bucket == "b" && r.Name == "ds/"+fixed.Name)
		}
		if !found {
			t.Errorf("no registry record of gs://b/ds/%s in %+v", fixed.Name, recs)
		}
	})
}
