package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/gcstest"
)

// TestVerbsOnABucket runs the maintenance verbs on a table in a bucket (a
// fake-gcs-server), as on a folder: each reads and commits through the
// gs:// store, and the table reads the same rows after them.
func TestVerbsOnABucket(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(4)
	rows := showLines(t, l.dir)

	host := gcstest.Start(t)
	t.Setenv("STORAGE_EMULATOR_HOST", host) // objstore.Open builds its client from the environment
	client, err := gcstest.NewClient(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	bucket := gcstest.NewBucket(t, client)
	err = filepath.WalkDir(l.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(l.dir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		w := client.Bucket(bucket).Object("lake/t/" + filepath.ToSlash(rel)).NewWriter(context.Background())
		if _, err := w.Write(data); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		t.Fatalf("upload the table: %v", err)
	}
	url := fmt.Sprintf("gs://%s/lake/t", bucket)

	steps := []struct {
		args []string
		want string
	}{
		{[]string{"optimize", "--dry-run", url}, "would rewrite 4 files"},
		{[]string{"optimize", url}, "after:  version"},
		{[]string{"optimize", url}, "nothing to optimize"},
		{[]string{"checkpoint", url}, "wrote the checkpoint of version"},
		{[]string{"vacuum", "--dry-run", url}, ""},
		{[]string{"repair-stats", url}, "nothing to repair"},
	}
	for _, s := range steps {
		out, errOut, code := cli(t, s.args...)
		if code != 0 || !strings.Contains(out, s.want) {
			t.Fatalf("%s: exit %d, want output with %q\n%s\n%s", strings.Join(s.args, " "), code, s.want, out, errOut)
		}
	}
	if got := showLines(t, url); !slices.Equal(got, rows) {
		t.Errorf("rows in the bucket after the verbs differ:\n%v\nwant\n%v", got, rows)
	}
	// The checkpoint is in the bucket: the last checkpoint file names it.
	if _, err := client.Bucket(bucket).Object("lake/t/_delta_log/_last_checkpoint").Attrs(t.Context()); err != nil {
		t.Errorf("no _last_checkpoint in the bucket after checkpoint: %v", err)
	}
	if _, errOut, code := cli(t, "vacuum", "--retain", "1h", url); code == 0 || !strings.Contains(errOut, "--force overrides") {
		t.Errorf("vacuum --retain 1h on the bucket: exit %d, want a refusal\n%s", code, errOut)
	}
}
