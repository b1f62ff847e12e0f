package delta

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestEveryFixtureTableLoads(t *testing.T) {
	tests := []struct {
		name       string
		version    int64
		files      int
		reader     int
		writer     int
		partitions []string
		records    int64 // -1: some file has no stats
		checkpoint int64
	}{
		{"basic-dv-no-checkpoint", 1, 2, 3, 7, nil, 8, -1},
		{"basic-with-checkpoint", 14, 30, 1, 2, nil, 150, 10},
		{"basic-with-inserts-updates", 1, 2, 1, 2, nil, 100, -1},
		{"corrupted-last-checkpoint-kernel", 11, 2, 1, 2, nil, 100, 10},
		{"data-reader-array-primitives", 0, 2, 1, 2, nil, -1, -1},
		{"data-reader-date-types-UTC", 0, 2, 1, 2, nil, -1, -1},
		{"data-reader-escaped-chars", 2, 3, 1, 2, []string{"_2"}, -1, -1},
		{"data-reader-map", 0, 2, 1, 2, nil, -1, -1},
		{"data-reader-nested-struct", 0, 2, 1, 2, nil, -1, -1},
		{"data-reader-partition-values", 0, 3, 1, 2, []string{"as_int", "as_long", "as_byte", "as_short", "as_boolean", "as_float", "as_double", "as_string", "as_string_lit_null", "as_date", "as_timestamp", "as_big_decimal"}, -1, -1},
		{"data-reader-primitives", 0, 2, 1, 2, nil, -1, -1},
		{"data-skipping-basic-stats-all-types", 0, 1, 1, 2, nil, 1, -1},
		{"decimal-various-scale-precision", 0, 1, 1, 2, nil, 3, -1},
		{"delta-0.1.0", 3, 3, 1, 1, []string{"id"}, -1, 3},
		{"deltalog-getChanges", 2, 0, 1, 2, nil, 0, -1},
		{"kernel-timestamp-TIMESTAMP_MICROS", 0, 5, 1, 2, []string{"part"}, 5, -1},
		{"multi-part-checkpoint", 1, 10, 1, 2, nil, 31, 1},
		{"snapshot-data0", 0, 2, 1, 2, nil, -1, -1},
		{"snapshot-data2-deleted", 4, 3, 1, 2, nil, -1, -1},
		{"table-with-columnmapping-mode-name", 0, 2, 2, 5, nil, 6, -1},
		{"table-with-dv-small", 1, 1, 3, 7, nil, 8, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name+" loads its latest version", func(t *testing.T) {
			s := mustSnapshot(t, Open(fixtureStore(t, tt.name)))
			if s.Version() != tt.version {
				t.Errorf("version = %d, want %d", s.Version(), tt.version)
			}
			if got := len(s.Files()); got != tt.files {
				t.Errorf("live files = %d, want %d", got, tt.files)
			}
			if p := s.Protocol(); p.MinReaderVersion != tt.reader || p.MinWriterVersion != tt.writer {
				t.Errorf("protocol = %+v, want (%d,%d)", p, tt.reader, tt.writer)
			}
			if got := s.PartitionColumns(); !slices.Equal(got, tt.partitions) && !(len(got) == 0 && len(tt.partitions) == 0) {
				t.Errorf("partition columns = %v, want %v", got, tt.partitions)
			}
			n, ok := s.NumRecords()
			switch {
			case tt.records < 0 && ok:
				t.Errorf("NumRecords = %d, true; want unknown (files without stats)", n)
			case tt.records >= 0 && (!ok || n != tt.records):
				t.Errorf("NumRecords = %d, %v; want %d", n, ok, tt.records)
			}
			if s.CheckpointVersion() != tt.checkpoint {
				t.Errorf("checkpoint version = %d, want %d", s.CheckpointVersion(), tt.checkpoint)
			}
			if len(s.Schema().Fields) == 0 {
				t.Error("schema has no fields")
			}
			if !slices.IsSortedFunc(s.Files(), func(a, b Add) int { return strings.Compare(a.Path, b.Path) }) {
				t.Error("files are not sorted by path")
			}
		})
	}
}

func TestFixtureDetails(t *testing.T) {
	ctx := context.Background()
	t.Run("delta-0.1.0 keeps txn appId txnId at version 0 from its checkpoint", func(t *testing.T) {
		s := mustSnapshot(t, Open(fixtureStore(t, "delta-0.1.0")))
		if v, ok := s.TxnVersion("txnId"); !ok || v != 0 {
			t.Fatalf("TxnVersion(txnId) = %d, %v; want 0, true", v, ok)
		}
		if _, ok := s.TxnVersion("other"); ok {
			t.Error("TxnVersion(other) found a txn that was never written")
		}
	})
	t.Run("deltalog-getChanges has fakeAppId at 3 and no live files", func(t *testing.T) {
		s := mustSnapshot(t, Open(fixtureStore(t, "deltalog-getChanges")))
		if v, ok := s.TxnVersion("fakeAppId"); !ok || v != 3 {
			t.Fatalf("TxnVersion(fakeAppId) = %d, %v; want 3", v, ok)
		}
		if len(s.Files()) != 0 {
			t.Errorf("files = %v, want none", filePaths(s.Files()))
		}
		if len(s.Tombstones()) != 1 || s.Tombstones()[0].Path != "fake/path/1" {
			t.Errorf("tombstones = %+v, want fake/path/1", s.Tombstones())
		}
	})
	t.Run("table-with-dv-small's live file carries its deletion vector", func(t *testing.T) {
		s := mustSnapshot(t, Open(fixtureStore(t, "table-with-dv-small")))
		f := s.Files()[0]
		if f.DeletionVector == nil || f.DeletionVector.StorageType != "u" || f.DeletionVector.Cardinality != 2 {
			t.Fatalf("deletion vector = %+v, want a 'u' DV of 2 rows", f.DeletionVector)
		}
		if len(s.Tombstones()) != 1 || s.Tombstones()[0].DeletionVector != nil {
			t.Errorf("tombstones = %+v, want the DV-less remove", s.Tombstones())
		}
	})
	t.Run("data-reader-partition-values keeps null partition values as nil", func(t *testing.T) {
		s := mustSnapshot(t, Open(fixtureStore(t, "data-reader-partition-values")))
		nulls := 0
		for _, f := range s.Files() {
			if v, ok := f.PartitionValues["as_int"]; ok && v == nil {
				nulls++
			}
		}
		if nulls != 1 {
			t.Errorf("files with a null as_int partition = %d, want 1", nulls)
		}
	})
	t.Run("basic-with-checkpoint's checkpoint matches a replay of its JSON commits", func(t *testing.T) {
		tbl := Open(fixtureStore(t, "basic-with-checkpoint"))
		seg, err := tbl.loadSegment(ctx, 12)
		if err != nil {
			t.Fatal(err)
		}
		fromCheckpoint, err := tbl.replay(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := listLog(ctx, tbl.store, 0)
		if err != nil {
			t.Fatal(err)
		}
		delete(l.checkpoints, 10)
		seg, err = l.segmentFor(12, false)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := tbl.replay(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		if fromCheckpoint.CheckpointVersion() != 10 || fromJSON.CheckpointVersion() != -1 {
			t.Fatalf("checkpoint versions = %d, %d", fromCheckpoint.CheckpointVersion(), fromJSON.CheckpointVersion())
		}
		sameSnapshot(t, fromCheckpoint, fromJSON)
	})
}

func TestFixtureTimeTravelByVersion(t *testing.T) {
	tests := []struct {
		table      string
		version    int64
		files      int
		records    int64
		checkpoint int64
	}{
		{"basic-with-checkpoint", 0, 2, 10, -1},
		{"basic-with-checkpoint", 5, 12, 60, -1},
		{"basic-with-checkpoint", 9, 20, 100, -1},
		{"basic-with-checkpoint", 10, 22, 110, 10},
		{"basic-with-checkpoint", 12, 26, 130, 10},
		{"deltalog-getChanges", 0, 1, -1, -1},
		{"deltalog-getChanges", 1, 0, 0, -1},
		{"corrupted-last-checkpoint-kernel", 10, -1, -1, 10},
		{"multi-part-checkpoint", 0, 1, 1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.table+" at an older version", func(t *testing.T) {
			s, err := Open(fixtureStore(t, tt.table)).SnapshotAt(context.Background(), tt.version)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version() != tt.version || s.CheckpointVersion() != tt.checkpoint {
				t.Errorf("version, checkpoint = %d, %d; want %d, %d", s.Version(), s.CheckpointVersion(), tt.version, tt.checkpoint)
			}
			if tt.files >= 0 && len(s.Files()) != tt.files {
				t.Errorf("files = %d, want %d", len(s.Files()), tt.files)
			}
			if n, ok := s.NumRecords(); tt.records >= 0 && (!ok || n != tt.records) {
				t.Errorf("NumRecords = %d, %v; want %d", n, ok, tt.records)
			}
		})
	}
	t.Run("snapshot-data2-deleted has the right file set at every version", func(t *testing.T) {
		want := [][]string{
			{"part-00000-0441e99a", "part-00001-34c8c673"},
			{"part-00000-0441e99a", "part-00000-64680d94", "part-00001-34c8c673", "part-00001-b8249b87"},
			{"part-00000-842017c2", "part-00001-e62ca5a1"},
			{"part-00000-842017c2", "part-00000-cb078bc1", "part-00001-9bf4b8f8", "part-00001-e62ca5a1"},
			{"part-00000-cb078bc1", "part-00000-d83dafd8", "part-00001-9bf4b8f8"},
		}
		tbl := Open(fixtureStore(t, "snapshot-data2-deleted"))
		for v, w := range want {
			s, err := tbl.SnapshotAt(context.Background(), int64(v))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range filePaths(s.Files()) {
				got = append(got, p[:len("part-00000-0441e99a")])
			}
			if !slices.Equal(got, w) {
				t.Errorf("version %d files = %v, want %v", v, got, w)
			}
		}
	})
	t.Run("a version after the latest is not found", func(t *testing.T) {
		_, err := Open(fixtureStore(t, "snapshot-data0")).SnapshotAt(context.Background(), 1)
		if !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("err = %v, want ErrVersionNotFound", err)
		}
	})
}

func TestLastCheckpointHintIsOnlyAHint(t *testing.T) {
	write := func(t *testing.T, dir, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "_delta_log", "_last_checkpoint"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"an empty _last_checkpoint falls back to listing", func(t *testing.T, dir string) { write(t, dir, "") }},
		{"a corrupt _last_checkpoint falls back to listing", func(t *testing.T, dir string) { write(t, dir, "{not json") }},
		{"a missing _last_checkpoint falls back to listing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "_delta_log", "_last_checkpoint")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a stale _last_checkpoint pointing at an older version still finds the newest checkpoint", func(t *testing.T, dir string) {
			write(t, dir, `{"version":0,"size":3}`)
		}},
		{"a _last_checkpoint naming a checkpoint that does not exist falls back to listing", func(t *testing.T, dir string) {
			write(t, dir, `{"version":12,"size":3}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, store := fixtureCopy(t, "basic-with-checkpoint")
			tt.setup(t, dir)
			s := mustSnapshot(t, Open(store))
			if n, _ := s.NumRecords(); s.Version() != 14 || s.CheckpointVersion() != 10 || n != 150 {
				t.Fatalf("version %d, checkpoint %d, records %d; want 14, 10, 150", s.Version(), s.CheckpointVersion(), n)
			}
		})
	}
}

func TestCheckpointSelection(t *testing.T) {
	ctx := context.Background()
	t.Run("an incomplete multi-part checkpoint is ignored", func(t *testing.T) {
		dir, store := fixtureCopy(t, "multi-part-checkpoint")
		if err := os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000001.checkpoint.0000000002.0000000002.parquet")); err != nil {
			t.Fatal(err)
		}
		s := mustSnapshot(t, Open(store))
		if n, _ := s.NumRecords(); s.CheckpointVersion() != -1 || n != 31 {
			t.Fatalf("checkpoint %d, records %d; want a JSON replay (-1) with 31 records", s.CheckpointVersion(), n)
		}
	})
	t.Run("a gap between versions is a corrupt log", func(t *testing.T) {
		dir, store := fixtureCopy(t, "snapshot-data2-deleted")
		if err := os.Remove(filepath.Join(dir, "_delta_log", "00000000000000000002.json")); err != nil {
			t.Fatal(err)
		}
		_, err := Open(store).Snapshot(ctx)
		if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), "commit 2 is missing") {
			t.Fatalf("err = %v, want ErrCorruptLog naming commit 2", err)
		}
	})
	t.Run("commits before a checkpoint are not needed", func(t *testing.T) {
		dir, store := fixtureCopy(t, "basic-with-checkpoint")
		for v := 0; v < 10; v++ {
			if err := os.Remove(filepath.Join(dir, "_delta_log", commitName(int64(v))[len(logDir):])); err != nil {
				t.Fatal(err)
			}
		}
		s := mustSnapshot(t, Open(store))
		if n, _ := s.NumRecords(); n != 150 {
			t.Errorf("records = %d, want 150", n)
		}
		if _, err := Open(store).SnapshotAt(ctx, 5); !errors.Is(err, ErrVersionNotFound) {
			t.Errorf("SnapshotAt(5) err = %v, want ErrVersionNotFound", err)
		}
	})
}

func TestParseLogName(t *testing.T) {
	tests := []struct {
		name        string
		ok          bool
		kind        logFileKind
		version     int64
		part, parts int
	}{
		{"_delta_log/00000000000000000007.json", true, kindCommit, 7, 0, 0},
		{"_delta_log/00000000000000000010.checkpoint.parquet", true, kindCheckpoint, 10, 0, 0},
		{"_delta_log/00000000000000000001.checkpoint.0000000002.0000000003.parquet", true, kindCheckpointPart, 1, 2, 3},
		{"_delta_log/00000000000000000001.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet", true, kindCheckpointUUID, 1, 0, 0},
		{"_delta_log/00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json", true, kindCheckpointUUID, 10, 0, 0},
		{"_delta_log/00000000000000000010.checkpoint..json", true, kindOther, 10, 0, 0},
		{"_delta_log/00000000000000000010.checkpoint.a.b.json", true, kindOther, 10, 0, 0},
		{"_delta_log/00000000000000000010.checkpoint.1.2.parquet", true, kindOther, 10, 0, 0},
		{"_delta_log/_sidecars/016ae953-37a9-438e-8683-9a9a4a79a395.parquet", false, 0, 0, 0, 0},
		{"_delta_log/00000000000000000003.crc", true, kindCRC, 3, 0, 0},
		{"_delta_log/00000000000000000003.00000000000000000005.compacted.json", true, kindOther, 3, 0, 0},
		{"_delta_log/.00000000000000000003.json.crc", false, 0, 0, 0, 0},
		{"_delta_log/_last_checkpoint", false, 0, 0, 0, 0},
		{"_delta_log/_sidecars/00000000000000000003.json", false, 0, 0, 0, 0},
		{"part-0000.parquet", false, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lf, ok := parseLogName(objstore.Info{Name: tt.name})
			if ok != tt.ok || (ok && (lf.kind != tt.kind || lf.version != tt.version || lf.part != tt.part || lf.parts != tt.parts)) {
				t.Fatalf("parseLogName = %+v, %v; want kind %d v%d part %d/%d ok %v", lf, ok, tt.kind, tt.version, tt.part, tt.parts, tt.ok)
			}
		})
	}
}

func TestParseCommitToleratesUnknownActionsAndFields(t *testing.T) {
	in := `{"commitInfo":{"timestamp":5,"inCommitTimestamp":7,"operation":"WRITE","operationParameters":{"mode":"Append","n":3},"weird":[1]}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2,"future":true}}

{"sidecar":{"path":"x"}}
{"checkpointMetadata":{"version":1}}
{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,"newField":{"x":1}}}
`
	c, err := parseCommit(3, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if c.info == nil || c.info.Operation != "WRITE" || c.ict == nil || *c.ict != 7 || c.timestampMs() != 7 {
		t.Fatalf("commitInfo = %+v, ict %v; want WRITE with inCommitTimestamp 7", c.info, c.ict)
	}
	st := newState()
	for i := range c.actions {
		st.apply(&c.actions[i], false)
	}
	if st.protocol == nil || len(st.files) != 1 {
		t.Fatalf("state = %+v, want the protocol and one file", st)
	}
	t.Run("a line that is not JSON is a corrupt log", func(t *testing.T) {
		_, err := parseCommit(4, []byte("{\"add\":\n"))
		var syntax *json.SyntaxError
		if !errors.Is(err, ErrCorruptLog) || !errors.As(err, &syntax) {
			t.Fatalf("err = %v, want ErrCorruptLog wrapping the JSON syntax error", err)
		}
	})
}

func FuzzParseCommit(f *testing.F) {
	f.Add([]byte(`{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}`))
	f.Add([]byte(`{"commitInfo":{"timestamp":1}}` + "\n" + `{"remove":{"path":"a","dataChange":true}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCommit(0, b)
		if err != nil {
			return
		}
		st := newState()
		for i := range c.actions {
			st.apply(&c.actions[i], false)
		}
	})
}

// listRecorder records the startAt of every List call.
type listRecorder struct {
	objstore.Store
	starts []string
}

func (l *listRecorder) List(ctx context.Context, prefix, startAt string, fn func(objstore.Info) error) error {
	l.starts = append(l.starts, startAt)
	return l.Store.List(ctx, prefix, startAt, fn)
}

func TestLoadingWithAValidHintListsFromTheCheckpoint(t *testing.T) {
	rec := &listRecorder{Store: fixtureStore(t, "basic-with-checkpoint")}
	s := mustSnapshot(t, Open(rec))
	if s.Version() != 14 {
		t.Fatalf("version = %d", s.Version())
	}
	want := []string{"_delta_log/00000000000000000010"}
	if !slices.Equal(rec.starts, want) {
		t.Fatalf("List startAt = %q, want %q (no listing from version 0)", rec.starts, want)
	}
}
