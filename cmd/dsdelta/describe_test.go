package main

import (
	"encoding/json"
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

const (
	data0File0 = "part-00000-0441e99a-c421-400e-83a1-212aa6c84c73-c000.snappy.parquet"
	data0File1 = "part-00001-34c8c673-3f44-4fa7-b94e-07357ec28a7d-c000.snappy.parquet"
)

// snapshotData0WithStats copies snapshot-data0 (two files of 5 rows, no
// stats) and gives its first file stats, as most writers would.
func snapshotData0WithStats(t *testing.T) string {
	t.Helper()
	dir := copyDeltaFixture(t, "snapshot-data0")
	commit := filepath.Join(dir, "_delta_log", "00000000000000000000.json")
	b, err := os.ReadFile(commit)
	if err != nil {
		t.Fatal(err)
	}
	withStats := strings.Replace(string(b), `"dataChange":true}}`, `"dataChange":true,"stats":"{\"numRecords\":5}"}}`, 1)
	if withStats == string(b) || !strings.Contains(withStats, data0File0+`","partitionValues":{},"size":650,"modificationTime":1603723967000,"dataChange":true,"stats"`) {
		t.Fatal("could not add stats to the first file")
	}
	if err := os.WriteFile(commit, []byte(withStats), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDescribeReportsWhatTheLogSaysWhenDataFilesAreBroken(t *testing.T) {
	tests := []struct {
		name        string
		damage      func(t *testing.T, dir string)
		records     int64 // -1: unknown
		counted     int64
		problem     string // "" = every count known
		problemFile string
	}{
		{"a deleted file without stats leaves its records unknown", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, data0File1)); err != nil {
				t.Fatal(err)
			}
		}, -1, 5, "missing", data0File1},
		{"a corrupt file without stats leaves its records unknown", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, data0File1), []byte("PAR1 garbage PAR1"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, -1, 5, "unreadable", data0File1},
		{"a deleted file with stats is counted from its stats", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, data0File0)); err != nil {
				t.Fatal(err)
			}
		}, 10, 10, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := snapshotData0WithStats(t)
			tt.damage(t, dir)

			out, errOut, code := cli(t, "describe", dir, "--json")
			if code != 0 {
				t.Fatalf("describe --json: exit %d\n%s\n%s", code, out, errOut)
			}
			var got describeOutput
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got.NumFiles != 2 || got.SizeBytes != 1300 {
				t.Errorf("files %d, size %d; want the log's 2 files of 1300 bytes", got.NumFiles, got.SizeBytes)
			}
			if tt.records < 0 && got.NumRecords != nil {
				t.Errorf("num_records = %d, want null (unknown)", *got.NumRecords)
			}
			if tt.records >= 0 && (got.NumRecords == nil || *got.NumRecords != tt.records) {
				t.Errorf("num_records = %v, want %d", got.NumRecords, tt.records)
			}
			if got.RecordsCounted != tt.counted {
				t.Errorf("records_counted = %d, want %d", got.RecordsCounted, tt.counted)
			}
			if tt.problem == "" {
				if len(got.UncountedFiles) != 0 {
					t.Errorf("uncounted files = %+v, want none", got.UncountedFiles)
				}
			} else if len(got.UncountedFiles) != 1 || got.UncountedFiles[0].Path != tt.problemFile ||
				got.UncountedFiles[0].Problem != tt.problem || got.UncountedFiles[0].SizeBytes != 650 || got.UncountedFiles[0].Error == "" {
				t.Errorf("uncounted files = %+v, want %s %s", got.UncountedFiles, tt.problem, tt.problemFile)
			}

			out, errOut, code = cli(t, "describe", dir)
			if code != 0 {
				t.Fatalf("describe: exit %d\n%s\n%s", code, out, errOut)
			}
			if tt.problem != "" {
				if got := describeField(out, "records"); !strings.HasPrefix(got, "unknown (5 counted") {
					t.Errorf("records = %q, want unknown with 5 counted:\n%s", got, out)
				}
				if got := describeField(out, tt.problem+" file"); !strings.HasPrefix(got, tt.problemFile) {
					t.Errorf("%s file = %q, want %s:\n%s", tt.problem, got, tt.problemFile, out)
				}
			}
		})
	}
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
