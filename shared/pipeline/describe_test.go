package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// deltaFixtureIn puts a Spark-written fixture table in a memory store,
// with the objects of replace replaced (nil: left out).
func deltaFixtureIn(t *testing.T, name string, replace map[string][]byte) objstore.Store {
	t.Helper()
	src := fixture.Path(t, "delta", name)
	store := objstore.NewMemory()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, ok := replace[rel]
		if !ok {
			if b, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		if b == nil {
			return nil
		}
		_, err = store.Write(context.Background(), filepath.ToSlash(rel), bytes.NewReader(b), objstore.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func TestDescribeSaysWhatTheLogAndTheFilesHold(t *testing.T) {
	const data0File1 = "part-00001-34c8c673-3f44-4fa7-b94e-07357ec28a7d-c000.snappy.parquet"
	tests := []struct {
		name         string
		table        string
		replace      map[string][]byte
		records      int64 // -1: unknown
		counted      int64
		requirements []string
		dvFiles      int
		dvRows       int64
		uncounted    string // the problem of the one uncounted file, if any
	}{
		{"a table of deletion vectors names their reader feature and counts the live rows", "table-with-dv-small", nil,
			8, 8, []string{"deletionVectors", "columnMapping"}, 1, 2, ""},
		{"reader version 2 implies column mapping", "table-with-columnmapping-mode-name", nil,
			6, 6, []string{"columnMapping"}, 0, 0, ""},
		{"a file without stats is counted from its footer", "snapshot-data0", nil,
			10, 10, []string{}, 0, 0, ""},
		{"a missing file leaves the records unknown", "snapshot-data0", map[string][]byte{data0File1: nil},
			-1, 5, []string{}, 0, 0, "missing"},
		{"an unreadable file leaves the records unknown", "snapshot-data0", map[string][]byte{data0File1: []byte("PAR1 garbage PAR1")},
			-1, 5, []string{}, 0, 0, "unreadable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := delta.Open(deltaFixtureIn(t, tt.table, tt.replace)).Snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			d, err := Describe(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			if tt.records < 0 && d.NumRecords != nil {
				t.Errorf("num records = %d, want unknown", *d.NumRecords)
			}
			if tt.records >= 0 && (d.NumRecords == nil || *d.NumRecords != tt.records) {
				t.Errorf("num records = %v, want %d", d.NumRecords, tt.records)
			}
			if d.RecordsCounted != tt.counted {
				t.Errorf("records counted = %d, want %d", d.RecordsCounted, tt.counted)
			}
			var features []string
			for _, r := range d.ReaderRequirements {
				features = append(features, r.Feature)
			}
			if !slices.Equal(features, tt.requirements) {
				t.Errorf("reader requirements = %v, want %v", features, tt.requirements)
			}
			if d.DeletionVectors.Files != tt.dvFiles || d.DeletionVectors.DeletedRows != tt.dvRows {
				t.Errorf("deletion vectors = %+v, want %d files deleting %d rows", d.DeletionVectors, tt.dvFiles, tt.dvRows)
			}
			switch {
			case tt.uncounted == "" && len(d.UncountedFiles) != 0:
				t.Errorf("uncounted files = %+v, want none", d.UncountedFiles)
			case tt.uncounted != "" && (len(d.UncountedFiles) != 1 || d.UncountedFiles[0].Path != data0File1 || d.UncountedFiles[0].Problem != tt.uncounted):
				t.Errorf("uncounted files = %+v, want %s %s", d.UncountedFiles, tt.uncounted, data0File1)
			}
		})
	}
}

func TestDescribeFailsOnlyWhenItsContextEnds(t *testing.T) {
	snap, err := delta.Open(deltaFixtureIn(t, "snapshot-data0", nil)).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Describe(ctx, snap); err == nil {
		t.Error("Describe with an ended context read the files' footers anyway")
	}
}
