package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// showLines runs show --format jsonl with args and returns its lines,
// sorted.
func showLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, errOut, code := cli(t, append([]string{"show", "--format", "jsonl"}, args...)...)
	if code != 0 {
		t.Fatalf("show %v: exit %d\n%s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] == "" {
		lines = nil
	}
	slices.Sort(lines)
	return lines
}

// showInts returns the values of column col of the rows show prints.
func showInts(t *testing.T, col string, args ...string) []int64 {
	t.Helper()
	var out []int64
	for _, l := range showLines(t, args...) {
		var row map[string]int64
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("row %s: %v", l, err)
		}
		out = append(out, row[col])
	}
	slices.Sort(out)
	return out
}

// TestShowAndDescribeOfSparkTablesWithDeletionVectors: show leaves out the
// rows Spark's deletion vectors delete, and time travel to the version
// before the DELETE shows them; describe counts the live rows and names
// the reader feature an engine needs.
func TestShowAndDescribeOfSparkTablesWithDeletionVectors(t *testing.T) {
	cases := []struct {
		table, col     string
		before, after  []int64
		readerFeatures string
	}{
		{"basic-dv-no-checkpoint", "id", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int64{2, 3, 4, 5, 6, 7, 8, 9}, "deletionVectors"},
		{"table-with-dv-small", "value", []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int64{1, 2, 3, 4, 5, 6, 7, 8}, "deletionVectors, columnMapping"},
	}
	for _, tc := range cases {
		t.Run(tc.table+" shows its live rows at each version", func(t *testing.T) {
			dir := copyDeltaFixture(t, tc.table)
			if got := showInts(t, tc.col, dir); !slices.Equal(got, tc.after) {
				t.Errorf("show = %v, want %v", got, tc.after)
			}
			if got := showInts(t, tc.col, dir, "--version", "1"); !slices.Equal(got, tc.after) {
				t.Errorf("show --version 1 = %v, want %v", got, tc.after)
			}
			if got := showInts(t, tc.col, dir, "--version", "0"); !slices.Equal(got, tc.before) {
				t.Errorf("show --version 0 = %v, want %v", got, tc.before)
			}
			hist, errOut, code := cli(t, "history", "--json", dir)
			if code != 0 {
				t.Fatalf("history: %s", errOut)
			}
			stamps := map[int64]string{}
			for _, l := range strings.Split(strings.TrimSpace(hist), "\n") {
				var h historyOutput
				if err := json.Unmarshal([]byte(l), &h); err != nil {
					t.Fatal(err)
				}
				stamps[h.Version] = h.Timestamp
			}
			if got := showInts(t, tc.col, dir, "--timestamp", stamps[0]); !slices.Equal(got, tc.before) {
				t.Errorf("show --timestamp %s (version 0) = %v, want %v", stamps[0], got, tc.before)
			}
			if got := showInts(t, tc.col, dir, "--timestamp", stamps[1]); !slices.Equal(got, tc.after) {
				t.Errorf("show --timestamp %s (version 1) = %v, want %v", stamps[1], got, tc.after)
			}
		})
		t.Run(tc.table+" describes its reader features and live records", func(t *testing.T) {
			dir := copyDeltaFixture(t, tc.table)
			out, errOut, code := cli(t, "describe", dir)
			if code != 0 {
				t.Fatalf("describe: exit %d %s", code, errOut)
			}
			if got := describeField(out, "reader features"); got != tc.readerFeatures {
				t.Errorf("reader features = %q, want %q:\n%s", got, tc.readerFeatures, out)
			}
			if !strings.Contains(out, "engines without deletion vector support cannot read this table") {
				t.Errorf("describe does not say engines without deletion vectors cannot read the table:\n%s", out)
			}
			if got, want := describeField(out, "records"), "8"; got != want {
				t.Errorf("records = %q, want %q", got, want)
			}
			if got := describeField(out, "deletion vectors"); !strings.Contains(got, "deleting 2 rows") {
				t.Errorf("deletion vectors = %q, want 2 rows deleted", got)
			}
			js, errOut, code := cli(t, "describe", "--json", dir)
			if code != 0 {
				t.Fatalf("describe --json: exit %d %s", code, errOut)
			}
			var d describeOutput
			if err := json.Unmarshal([]byte(js), &d); err != nil {
				t.Fatal(err)
			}
			if len(d.ReaderRequirements) == 0 || d.ReaderRequirements[0].Feature != "deletionVectors" || d.DeletionVectors.DeletedRows != 2 ||
				d.NumRecords == nil || *d.NumRecords != 8 {
				t.Errorf("describe --json: requirements %+v, deletion vectors %+v, records %v", d.ReaderRequirements, d.DeletionVectors, d.NumRecords)
			}
		})
	}
}

func TestDescribeOfATableWithoutReaderFeaturesNamesNone(t *testing.T) {
	dir := copyDeltaFixture(t, "snapshot-data0")
	out, _, code := cli(t, "describe", dir)
	if code != 0 || strings.Contains(out, "reader features") || strings.Contains(out, "deletion vectors") {
		t.Errorf("describe of a (1,2) table: exit %d\n%s", code, out)
	}
}

// dvTable opens the Delta table in dir.
func dvTable(t *testing.T, dir string) (*delta.Snapshot, objstore.Store) {
	t.Helper()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	snap, err := delta.Open(store).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap, store
}

// enableDeletionVectors upgrades the table in dir to the deletionVectors
// feature, as an ALTER TABLE would.
func enableDeletionVectors(t *testing.T, dir string) {
	t.Helper()
	snap, _ := dvTable(t, dir)
	md := snap.Metadata()
	md.Configuration[delta.PropEnableDeletionVectors] = "true"
	tx := snap.NewTransaction(delta.Operation{Name: "SET TBLPROPERTIES"})
	tx.SetProtocol(snap.Protocol().WithReaderWriterFeature(delta.FeatureDeletionVectors))
	tx.SetMetadata(md)
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// deleteWithVector marks the rows at positions pos of the first live file
// of the table in dir that has no vector deleted by a deletion vector, the
// way a merge does; with move, the same rows are appended in a new file
// in the same commit (an update that changed nothing), so the table's rows
// stay the same. It returns the rows deleted, as show prints them.
func deleteWithVector(t *testing.T, dir string, move bool, pos ...uint64) int {
	t.Helper()
	ctx := context.Background()
	snap, store := dvTable(t, dir)
	i := slices.IndexFunc(snap.Files(), func(a delta.Add) bool { return a.DeletionVector == nil })
	if i < 0 {
		t.Fatal("no file without a deletion vector")
	}
	f := snap.Files()[i]
	w := delta.NewRollingWriter(ctx, store, delta.WriteOptions{Schema: snap.Schema(), PartitionColumns: snap.PartitionColumns(), DataChange: true}, 1<<30)
	var n uint64
	err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
		defer func() { n++ }()
		if move && slices.Contains(pos, n) {
			return w.Write(row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	dvs, err := delta.WriteDeletionVectors(ctx, store, "", []*roaring64.Bitmap{roaring64.BitmapOf(pos...)})
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(delta.Operation{Name: "MERGE"})
	tx.ReadFiles(f.Path)
	tx.Remove(f.Remove(snap.Timestamp().UnixMilli(), true))
	tx.Add(f.WithDeletionVector(&dvs[0]))
	tx.Add(moved...)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return len(pos)
}

// TestVerifyRebuildAndShowOfAStateTableWithDeletionVectors: a current-state
// table whose rows were moved by deletion vectors verifies; one whose row
// a vector deleted is missing that row in verify and show (and has it at
// the version before); rebuild recreates it without vectors.
func TestVerifyRebuildAndShowOfAStateTableWithDeletionVectors(t *testing.T) {
	table, want := simulatedTable(t, "30", "60", "4")
	rows := showLines(t, table)
	if len(rows) < 4 {
		t.Fatalf("the state table has %d rows", len(rows))
	}

	enableDeletionVectors(t, table)
	deleteWithVector(t, table, true, 0, 2)
	if got := showLines(t, table); !slices.Equal(got, rows) {
		t.Errorf("show after rows moved by a deletion vector:\n%v\nwant\n%v", got, rows)
	}
	if got, errOut, code := cli(t, "verify", table); code != 0 || got != want {
		t.Fatalf("verify after rows moved: exit %d\n%s\nwant\n%s\n%s", code, got, want, errOut)
	}
	out, _, _ := cli(t, "describe", table)
	if got := describeField(out, "records"); got != strconv.Itoa(len(rows)) {
		t.Errorf("records = %s, want %d:\n%s", got, len(rows), out)
	}

	moved, _ := dvTable(t, table)
	deleteWithVector(t, table, false, 1)
	got := showLines(t, table)
	if len(got) != len(rows)-1 {
		t.Fatalf("show after a row deleted by a deletion vector: %d rows, want %d", len(got), len(rows)-1)
	}
	if got := showLines(t, table, "--version", strconv.Itoa(int(moved.Version()))); !slices.Equal(got, rows) {
		t.Errorf("show --version %d (before the delete) differs from the rows before", moved.Version())
	}
	out, errOut, code := cli(t, "verify", table)
	if code == 0 || !strings.Contains(out, "1 mismatches") || !strings.Contains(out, "missing") {
		t.Fatalf("verify after a row deleted: exit %d\n%s\n%s", code, out, errOut)
	}
	out, _, _ = cli(t, "describe", table)
	if got := describeField(out, "records"); got != strconv.Itoa(len(rows)-1) {
		t.Errorf("records = %s, want %d", got, len(rows)-1)
	}

	if out, errOut, code := cli(t, "rebuild", table); code != 0 || out != want {
		t.Fatalf("rebuild: exit %d\n%s\nwant\n%s\n%s", code, out, want, errOut)
	}
	if got := showLines(t, table); !slices.Equal(got, rows) {
		t.Errorf("show after rebuild differs from the rows before")
	}
	rebuilt, _ := dvTable(t, table)
	for _, f := range rebuilt.Files() {
		if f.DeletionVector != nil {
			t.Errorf("rebuilt file %s has a deletion vector", f.Path)
		}
	}
}
