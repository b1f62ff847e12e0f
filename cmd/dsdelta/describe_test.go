package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
)

// copyDeltaFixture copies a Spark-written fixture table so a test may
// break it.
func copyDeltaFixture(t *testing.T, name string) string {
	t.Helper()
	src := fixture.Path(t, "delta", name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestDescribeReadsATableWithAV2Checkpoint(t *testing.T) {
	dir := copyDeltaFixture(t, "snapshot-data0")
	logDir := filepath.Join(dir, "_delta_log")
	b, err := os.ReadFile(filepath.Join(logDir, "00000000000000000000.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Version 1 upgrades the table to V2 checkpoints; its JSON checkpoint
	// (PROTOCOL.md "UUID-named checkpoint") then replaces commit 0.
	protocol := `{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["v2Checkpoint"],"writerFeatures":["v2Checkpoint"]}}`
	upgrade := `{"commitInfo":{"timestamp":1603723970000,"operation":"SET TBLPROPERTIES"}}` + "\n" + protocol + "\n"
	if err := os.WriteFile(filepath.Join(logDir, "00000000000000000001.json"), []byte(upgrade), 0o644); err != nil {
		t.Fatal(err)
	}
	checkpoint := []string{`{"checkpointMetadata":{"version":1,"tags":{}}}`, protocol}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, `{"metaData"`) || strings.HasPrefix(line, `{"add"`) {
			checkpoint = append(checkpoint, strings.Replace(line, `"dataChange":true`, `"dataChange":false`, 1))
		}
	}
	if len(checkpoint) != 5 {
		t.Fatalf("checkpoint lines = %q", checkpoint)
	}
	name := "00000000000000000001.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json"
	if err := os.WriteFile(filepath.Join(logDir, name), []byte(strings.Join(checkpoint, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(logDir, "00000000000000000000.json")); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := cli(t, "describe", dir)
	if code != 0 {
		t.Fatalf("describe: exit %d\n%s\n%s", code, out, errOut)
	}
	for key, want := range map[string]string{"files": "2", "records": "10", "last checkpoint": "1"} {
		if got := describeField(out, key); got != want {
			t.Errorf("%s = %q, want %q:\n%s", key, got, want, out)
		}
	}
	for key, want := range map[string]string{"version": "1 (", "protocol": "reader 3, writer 7 (reader features [v2Checkpoint]"} {
		if got := describeField(out, key); !strings.HasPrefix(got, want) {
			t.Errorf("%s = %q, want %q…:\n%s", key, got, want, out)
		}
	}
}

// describeField returns the value of the first line of describe's text
// output whose key is key.
func describeField(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, key+"  "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
