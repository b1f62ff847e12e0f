package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
	"github.com/dsdelta/dsdelta/shared/value"
)

// verbSource is the source schema of the maintenance tests' tables.
var verbSource = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "note", Type: value.String, Nullable: true},
}}

// ourLake is a dsdelta table set db.t in a folder, merged by cdc.Apply;
// seq numbers its batches and pos orders its events.
type ourLake struct {
	t    *testing.T
	tabs cdc.TableSet
	dir  string // the current-state table's folder
	seq  int64
	pos  uint64
	// now stamps the tombstones of the next batches.
	now time.Time
	// source is the batches' source schema, verbSource unless set, and
	// row the row of key id in batch seq.
	source value.StructType
	row    func(id, seq int64) []any
}

func newOurLake(t *testing.T) *ourLake {
	t.Helper()
	root := t.TempDir()
	store, err := objstore.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tabs := pipeline.TableSetBeside(store, "t", "db.t")
	return &ourLake{t: t, tabs: tabs, dir: filepath.Join(root, "t"), now: time.Now(), source: verbSource,
		row: func(id, seq int64) []any { return []any{id, fmt.Sprintf("batch %d", seq)} }}
}

// apply merges one batch: an upsert of each id in ids (a note naming the
// batch), or a delete of each id in dels.
func (l *ourLake) apply(ids, dels []int64) {
	l.t.Helper()
	l.seq++
	b := cdc.Batch{Source: l.source, Key: []string{"id"}}
	for i, id := range append(slices.Clone(ids), dels...) {
		l.pos++
		del := i >= len(ids)
		op, ct := datastream.OpUpsert, "UPDATE-INSERT"
		if del {
			op, ct = datastream.OpDelete, "DELETE"
		}
		ts := value.MicrosOf(l.now)
		ev := datastream.Event{
			KeyNames: []string{"id"}, KeyValues: []any{id}, Op: op,
			Order:           datastream.OrderKey{Bytes: binary.BigEndian.AppendUint64([]byte{1}, l.pos), Text: fmt.Sprintf("pos:%d", l.pos)},
			SourceTimestamp: ts, ReadMethod: datastream.CDC, ChangeType: ct, Schema: l.source,
			Row:  l.row(id, l.seq),
			Meta: datastream.Metadata{UUID: fmt.Sprintf("u%d", l.pos), SourceTimestamp: ts, ChangeType: ct, IsDeleted: del},
		}
		c, err := cdc.ChangeFromHistory(cdc.HistoryRow(ev), l.source, []int{0})
		if err != nil {
			l.t.Fatal(err)
		}
		b.Changes = append(b.Changes, c)
	}
	now := l.now
	if _, err := cdc.Apply(context.Background(), l.tabs, l.seq, b, cdc.Options{Now: func() time.Time { return now }}); err != nil {
		l.t.Fatalf("merge batch %d: %v", l.seq, err)
	}
}

// ids returns from, from+1, ... to-1.
func ids(from, to int64) []int64 {
	var out []int64
	for id := from; id < to; id++ {
		out = append(out, id)
	}
	return out
}

// smallFiles merges n batches of ten new keys each: the state gets n
// small files, keys 10i to 10i+9 in file i.
func (l *ourLake) smallFiles(n int) {
	l.t.Helper()
	for i := range int64(n) {
		l.apply(ids(10*i, 10*i+10), nil)
	}
}

// hookStore runs hook before the first times writes of an object that
// match: the hook's work then lands between the verb's read of the table
// and its commit.
type hookStore struct {
	objstore.Store
	match func(name string) bool
	times atomic.Int32
	hook  func()
}

func (s *hookStore) Write(ctx context.Context, name string, r io.Reader, o objstore.WriteOptions) (objstore.Info, error) {
	if s.match(name) && s.times.Add(-1) >= 0 {
		s.hook()
	}
	return s.Store.Write(ctx, name, r, o)
}

// logCommit matches the commit files of a Delta log.
func logCommit(name string) bool {
	return strings.HasPrefix(name, "_delta_log/") && strings.HasSuffix(name, ".json")
}

func dataFile(name string) bool {
	return strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, "_delta_log/")
}

// hooked wraps the Delta table in dir, running hook before the first
// times writes that match.
func hooked(t *testing.T, dir string, match func(string) bool, times int32, hook func()) *hookStore {
	t.Helper()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := &hookStore{Store: store, match: match, hook: hook}
	s.times.Store(times)
	return s
}

// mustVerify runs dsdelta verify on the current-state table in dir.
func mustVerify(t *testing.T, dir string) {
	t.Helper()
	if out, errOut, code := cli(t, "verify", dir); code != 0 {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
}

func numFiles(t *testing.T, dir string) int {
	t.Helper()
	snap, _ := dvTable(t, dir)
	return snap.NumFiles()
}

func TestOptimizeOfOurTable(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(6)
	rows := showLines(t, l.dir)
	v := mustSnapshotOf(t, l.dir).Version()

	out, errOut, code := cli(t, "optimize", "--dry-run", l.dir)
	if code != 0 || !strings.Contains(out, "would rewrite 6 files") {
		t.Fatalf("optimize --dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := mustSnapshotOf(t, l.dir).Version(); got != v {
		t.Fatalf("a dry run committed version %d", got)
	}

	out, errOut, code = cli(t, "optimize", l.dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("optimized in version %d: 6 files", v+1)) ||
		!strings.Contains(out, fmt.Sprintf("before: version %d, 6 files", v)) || !strings.Contains(out, fmt.Sprintf("after:  version %d, 1 files", v+1)) {
		t.Fatalf("optimize: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := showLines(t, l.dir); !slices.Equal(got, rows) {
		t.Errorf("rows after optimize differ:\n%v\nwant\n%v", got, rows)
	}
	mustVerify(t, l.dir)
	if out, _, code := cli(t, "optimize", l.dir); code != 0 || !strings.Contains(out, "nothing to optimize") {
		t.Fatalf("optimize again: exit %d\n%s", code, out)
	}
}

// mustSnapshotOf reads the latest snapshot of the Delta table in dir.
func mustSnapshotOf(t *testing.T, dir string) *delta.Snapshot {
	t.Helper()
	snap, _ := dvTable(t, dir)
	return snap
}

func TestOptimizeOfSparkTables(t *testing.T) {
	t.Run("thirty small files of a checkpointed table are packed into one", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-with-checkpoint")
		rows := showLines(t, dir)
		out, errOut, code := cli(t, "optimize", dir)
		if code != 0 || !strings.Contains(out, "30 files") || numFiles(t, dir) != 1 {
			t.Fatalf("optimize: exit %d, %d files\n%s\n%s", code, numFiles(t, dir), out, errOut)
		}
		if got := showLines(t, dir); !slices.Equal(got, rows) || len(rows) != 150 {
			t.Errorf("rows after optimize: %d, want the %d before", len(got), len(rows))
		}
	})
	t.Run("--max-bytes packs a bin a run and says what it left, until nothing is left", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-with-checkpoint")
		rows := showLines(t, dir)
		var largest int64
		for _, f := range mustSnapshotOf(t, dir).Files() {
			largest = max(largest, f.Size)
		}
		// Bins of about ten of the thirty files: several runs.
		target := strconv.FormatInt(10*largest, 10)
		runs := 0
		for ; ; runs++ {
			out, errOut, code := cli(t, "optimize", "--target-file-bytes", target, "--max-bytes", "1", dir)
			if code != 0 {
				t.Fatalf("optimize: exit %d\n%s\n%s", code, out, errOut)
			}
			if strings.Contains(out, "nothing to optimize") {
				break
			}
			if left := strings.Contains(out, "left for another run by --max-bytes"); runs == 0 && !left {
				t.Fatalf("the first run does not say it left files:\n%s", out)
			}
			if runs == 30 {
				t.Fatalf("30 runs and still something to optimize: %d files", numFiles(t, dir))
			}
		}
		if runs < 3 || numFiles(t, dir) > 4 {
			t.Errorf("%d runs left %d files; want at least 3 runs (one bin each) and at most 4 files", runs, numFiles(t, dir))
		}
		if got := showLines(t, dir); !slices.Equal(got, rows) {
			t.Errorf("rows after optimize differ")
		}
		if _, errOut, code := cli(t, "optimize", "--max-bytes", "-1", dir); code != 2 || !strings.Contains(errOut, "--max-bytes") {
			t.Errorf("--max-bytes -1: exit %d, want 2 naming the flag\n%s", code, errOut)
		}
	})
	t.Run("deletion vectors are folded", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-dv-no-checkpoint")
		rows := showLines(t, dir)
		out, errOut, code := cli(t, "optimize", dir)
		if code != 0 || !strings.Contains(out, "folding 1 deletion vectors (2 rows purged)") {
			t.Fatalf("optimize: exit %d\n%s\n%s", code, out, errOut)
		}
		if got := showLines(t, dir); !slices.Equal(got, rows) {
			t.Errorf("rows after optimize:\n%v\nwant\n%v", got, rows)
		}
		for _, f := range mustSnapshotOf(t, dir).Files() {
			if f.DeletionVector != nil {
				t.Errorf("file %s still has a deletion vector", f.Path)
			}
		}
	})
	t.Run("a deleted share outside (0, 1] is a usage error", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-dv-no-checkpoint")
		v := mustSnapshotOf(t, dir).Version()
		for _, share := range []string{"0", "1.5", "-1"} {
			out, errOut, code := cli(t, "optimize", "--max-deleted-share", share, dir)
			if code != 2 || !strings.Contains(errOut, "--max-deleted-share") {
				t.Fatalf("--max-deleted-share %s: exit %d, want 2 naming the flag\n%s\n%s", share, code, out, errOut)
			}
		}
		if got := mustSnapshotOf(t, dir).Version(); got != v {
			t.Fatalf("a refused optimize committed version %d", got)
		}
	})
	t.Run("a table with column mapping is refused, naming the feature", func(t *testing.T) {
		dir := copyDeltaFixture(t, "table-with-dv-small")
		v := mustSnapshotOf(t, dir).Version()
		for _, args := range [][]string{{"optimize", dir}, {"optimize", "--dry-run", dir}} {
			out, errOut, code := cli(t, args...)
			if code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "columnMapping") {
				t.Fatalf("%v: exit %d, want 1 naming columnMapping\n%s\n%s", args, code, out, errOut)
			}
		}
		if got := mustSnapshotOf(t, dir).Version(); got != v {
			t.Fatalf("a refused optimize committed version %d", got)
		}
	})
}

// TestOptimizeBesideAConcurrentMerge: a merge that rewrites files the
// optimize read commits between the optimize's snapshot and its commit.
// The optimize loses, tries again from a fresh snapshot and commits; when
// merges beat it twice it gives up, having committed nothing. Either way
// the table holds exactly the merges' rows.
func TestOptimizeBesideAConcurrentMerge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		races int32
		lost  bool
	}{
		{"a merge that wins once makes the optimize try again and commit", 1, false},
		{"merges that win twice make the optimize give up cleanly", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newOurLake(t)
			l.smallFiles(6)
			var race atomic.Int32
			store := hooked(t, l.dir, dataFile, tc.races, func() {
				// Updates a key of the first and of the last file:
				// both are rewritten and removed.
				race.Add(1)
				l.apply([]int64{1, 51}, nil)
			})
			var out, errOut bytes.Buffer
			err := optimizeTable(context.Background(), store, l.dir, pipeline.CompactOptions{TargetFileBytes: config.DefaultTargetFileBytes}, &out, retryLogger(&errOut))
			if race.Load() != tc.races {
				t.Fatalf("%d merges ran during the optimize, want %d", race.Load(), tc.races)
			}
			if !strings.Contains(errOut.String(), "trying again from a fresh snapshot") {
				t.Errorf("the optimize did not say it tried again:\n%s", errOut.String())
			}
			switch {
			case tc.lost && !errors.Is(err, delta.ErrConflict):
				t.Fatalf("optimize = %v, want a conflict\n%s", err, out.String())
			case !tc.lost && (err != nil || !strings.Contains(out.String(), "optimized in version")):
				t.Fatalf("optimize = %v\n%s\n%s", err, out.String(), errOut.String())
			}
			h, err := delta.Open(store).History(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			optimizes := 0
			for _, e := range h {
				if e.Operation == "OPTIMIZE" {
					optimizes++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[tc.lost]; optimizes != want {
				t.Errorf("%d OPTIMIZE commits, want %d", optimizes, want)
			}
			mustVerify(t, l.dir)
			got := showLines(t, l.dir)
			if len(got) != 60 || !strings.Contains(strings.Join(got, "\n"), fmt.Sprintf(`"id":51,"note":"batch %d"`, l.seq)) {
				t.Errorf("rows after the race: %d, want 60 with the last merge's update", len(got))
			}
		})
	}
}

// TestAMergeBesideAConcurrentOptimize is the other order: the optimize
// commits between a merge's read of the current state and its commit,
// removing the files the merge rewrites. The merge loses, plans again from
// the optimized table and commits its update.
func TestAMergeBesideAConcurrentOptimize(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(6)
	var optimized atomic.Bool
	l.tabs.State = hooked(t, l.dir, logCommit, 1, func() {
		if out, errOut, code := cli(t, "optimize", l.dir); code != 0 || !strings.Contains(out, "optimized in version") {
			t.Errorf("optimize during the merge: exit %d\n%s\n%s", code, out, errOut)
		}
		optimized.Store(true)
	})
	l.apply([]int64{1, 51}, []int64{2})
	if !optimized.Load() {
		t.Fatal("the optimize did not run during the merge")
	}
	h, err := delta.Open(l.tabs.State).History(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Operation != "MERGE" || h[1].Operation != "OPTIMIZE" {
		t.Errorf("last commits %s then %s, want OPTIMIZE then MERGE", h[1].Operation, h[0].Operation)
	}
	mustVerify(t, l.dir)
	got := strings.Join(showLines(t, l.dir), "\n")
	if n := len(showLines(t, l.dir)); n != 59 || !strings.Contains(got, fmt.Sprintf(`"id":51,"note":"batch %d"`, l.seq)) {
		t.Errorf("rows after the race: %d, want 59 with the merge's update", n)
	}
}

// ageDataFiles sets the modification time of every file of the table in
// dir outside its log to d ago, so that only the log's tombstones keep
// them from vacuum.
func ageDataFiles(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.Contains(p, "_delta_log") {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVacuumKeepsWhatAReaderOfThePreviousVersionNeeds: the files an
// optimize removed stay, within the retention, for a reader of the
// version before it, even once their modification time is past the
// retention; an unreferenced file is deleted; a retention below the
// table's is refused unless forced, and forcing it deletes them.
func TestVacuumKeepsWhatAReaderOfThePreviousVersionNeeds(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(4)
	prev := mustSnapshotOf(t, l.dir).Version()
	rows := showLines(t, l.dir, "--version", fmt.Sprint(prev))
	if _, errOut, code := cli(t, "optimize", l.dir); code != 0 {
		t.Fatalf("optimize: %s", errOut)
	}
	orphan := filepath.Join(l.dir, "part-orphan.parquet")
	if err := os.WriteFile(orphan, []byte("written by a writer that died"), 0o644); err != nil {
		t.Fatal(err)
	}
	ageDataFiles(t, l.dir, 30*24*time.Hour)

	out, errOut, code := cli(t, "vacuum", "--dry-run", l.dir)
	if code != 0 || !strings.Contains(out, "would delete 1 files") || !strings.Contains(out, "part-orphan.parquet") {
		t.Fatalf("vacuum --dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = cli(t, "vacuum", l.dir)
	if code != 0 || !strings.Contains(out, "deleted 1 files") || !strings.Contains(out, "data files: 6 files") ||
		!strings.Contains(out, "(VACUUM START)") {
		t.Fatalf("vacuum: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the unreferenced file is still there: %v", err)
	}
	if got := showLines(t, l.dir, "--version", fmt.Sprint(prev)); !slices.Equal(got, rows) {
		t.Fatalf("a reader of version %d after vacuum:\n%v\nwant\n%v", prev, got, rows)
	}

	out, errOut, code = cli(t, "vacuum", "--retain", "1h", l.dir)
	if code != 2 || !strings.Contains(errOut, "delta.deletedFileRetentionDuration") || !strings.Contains(errOut, "--force") {
		t.Fatalf("vacuum --retain 1h: exit %d, want 2 naming the table's retention\n%s\n%s", code, out, errOut)
	}
	time.Sleep(20 * time.Millisecond) // the optimize's removes are older than the retention below
	if out, errOut, code := cli(t, "vacuum", "--retain", "10ms", "--force", l.dir); code != 0 || !strings.Contains(out, "deleted 4 files") {
		t.Fatalf("vacuum --retain 10ms --force: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, _, code := cli(t, "show", "--version", fmt.Sprint(prev), l.dir); code == 0 {
		t.Errorf("version %d still reads after a forced vacuum deleted its files", prev)
	}
	if got := showLines(t, l.dir); !slices.Equal(got, rows) {
		t.Errorf("the latest version after a forced vacuum:\n%v\nwant\n%v", got, rows)
	}
}

func TestVacuumOfSparkTables(t *testing.T) {
	t.Run("files an overwrite and a delete removed long ago are deleted, and the vacuum recorded", func(t *testing.T) {
		dir := copyDeltaFixture(t, "snapshot-data2-deleted")
		rows := showLines(t, dir)
		live := numFiles(t, dir)
		if out, _, code := cli(t, "vacuum", dir); code != 0 || !strings.Contains(out, "deleted 0 files") {
			t.Fatalf("vacuum of files copied just now: exit %d\n%s", code, out)
		}
		ageDataFiles(t, dir, 30*24*time.Hour)
		out, errOut, code := cli(t, "vacuum", dir)
		if code != 0 || strings.Contains(out, "deleted 0 files") || !strings.Contains(out, fmt.Sprintf("→ %d files", live)) ||
			!strings.Contains(out, "(VACUUM END)") {
			t.Fatalf("vacuum: exit %d\n%s\n%s", code, out, errOut)
		}
		if got := showLines(t, dir); !slices.Equal(got, rows) {
			t.Errorf("rows after vacuum: %d, want %d", len(got), len(rows))
		}
	})
	t.Run("a table dsdelta cannot write is vacuumed as its protocol allows, without a commit", func(t *testing.T) {
		dir := copyDeltaFixture(t, "table-with-dv-small")
		v := mustSnapshotOf(t, dir).Version()
		out, errOut, code := cli(t, "vacuum", dir)
		if code != 0 || !strings.Contains(out, "committed: nothing") {
			t.Fatalf("vacuum: exit %d\n%s\n%s", code, out, errOut)
		}
		if got := mustSnapshotOf(t, dir).Version(); got != v {
			t.Errorf("vacuum committed version %d to a table dsdelta cannot write", got)
		}
	})
}

// TestVacuumBesideAConcurrentMerge: a merge writes and commits files
// between vacuum's read of the table and its deletes; they are fresh, so
// kept, and the table stays whole.
func TestVacuumBesideAConcurrentMerge(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(3)
	ageDataFiles(t, l.dir, 30*24*time.Hour)
	store := hooked(t, l.dir, logCommit, 1, func() {
		l.apply([]int64{1, 100}, []int64{2})
	})
	var out bytes.Buffer
	if err := vacuumTable(context.Background(), store, l.dir, delta.VacuumOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "deleted 0 files") {
		t.Errorf("vacuum beside a merge:\n%s", out.String())
	}
	mustVerify(t, l.dir)
	if got := showLines(t, l.dir); len(got) != 30 {
		t.Errorf("%d rows after the merge and the vacuum, want 30", len(got))
	}
}

func TestCheckpoint(t *testing.T) {
	t.Run("our table gets a checkpoint at its latest version, once", func(t *testing.T) {
		l := newOurLake(t)
		l.smallFiles(3)
		v := mustSnapshotOf(t, l.dir).Version()
		out, errOut, code := cli(t, "checkpoint", "--dry-run", l.dir)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("would write the checkpoint of version %d", v)) || mustSnapshotOf(t, l.dir).CheckpointVersion() >= 0 {
			t.Fatalf("checkpoint --dry-run: exit %d\n%s\n%s", code, out, errOut)
		}
		rows := showLines(t, l.dir)
		out, errOut, code = cli(t, "checkpoint", l.dir)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("wrote the checkpoint of version %d", v)) {
			t.Fatalf("checkpoint: exit %d\n%s\n%s", code, out, errOut)
		}
		if got := mustSnapshotOf(t, l.dir).CheckpointVersion(); got != v {
			t.Fatalf("the table loads from checkpoint %d, want %d", got, v)
		}
		if got := showLines(t, l.dir); !slices.Equal(got, rows) {
			t.Errorf("rows read from the checkpoint differ")
		}
		if out, _, code := cli(t, "checkpoint", l.dir); code != 0 || !strings.Contains(out, "has a checkpoint already") {
			t.Fatalf("checkpoint again: exit %d\n%s", code, out)
		}
	})
	t.Run("a Spark table checkpointed at 10 gets one at 14", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-with-checkpoint")
		rows := showLines(t, dir)
		if out, errOut, code := cli(t, "checkpoint", dir); code != 0 || !strings.Contains(out, "previous checkpoint: 10; commits replayed on open: 4 → 0") {
			t.Fatalf("checkpoint: exit %d\n%s\n%s", code, out, errOut)
		}
		if got := mustSnapshotOf(t, dir).CheckpointVersion(); got != 14 {
			t.Fatalf("checkpoint version %d, want 14", got)
		}
		if got := showLines(t, dir); !slices.Equal(got, rows) {
			t.Errorf("rows read from the checkpoint differ")
		}
	})
	t.Run("a table dsdelta cannot write is refused, naming why", func(t *testing.T) {
		dir := copyDeltaFixture(t, "table-with-dv-small")
		if out, errOut, code := cli(t, "checkpoint", dir); code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "columnMapping") {
			t.Fatalf("checkpoint: exit %d\n%s\n%s", code, out, errOut)
		}
	})
}

// TestCheckpointBesideAConcurrentMerge: a merge commits while the
// checkpoint of the version before it is written; the table loads the
// checkpoint and the merge's commit after it.
func TestCheckpointBesideAConcurrentMerge(t *testing.T) {
	l := newOurLake(t)
	l.smallFiles(3)
	v := mustSnapshotOf(t, l.dir).Version()
	store := hooked(t, l.dir, func(name string) bool { return strings.Contains(name, ".checkpoint.") }, 1, func() {
		l.apply([]int64{1, 100}, []int64{2})
	})
	var out bytes.Buffer
	if err := checkpointTable(context.Background(), store, l.dir, false, &out); err != nil {
		t.Fatal(err)
	}
	snap := mustSnapshotOf(t, l.dir)
	if snap.CheckpointVersion() != v || snap.Version() != v+1 {
		t.Fatalf("table at version %d from checkpoint %d, want %d from %d", snap.Version(), snap.CheckpointVersion(), v+1, v)
	}
	mustVerify(t, l.dir)
}

// tombstoneRows counts the rows of the tombstone table of l.
func tombstoneRows(t *testing.T, l *ourLake) int {
	t.Helper()
	return len(showLines(t, l.dir+"_tombstones"))
}

func TestExpireTombstones(t *testing.T) {
	l := newOurLake(t)
	l.now = time.Now().Add(-10 * 24 * time.Hour)
	l.apply(ids(0, 10), nil)
	l.apply(nil, []int64{1, 2, 3})
	l.now = time.Now()
	l.apply(nil, []int64{4})
	tomb := l.dir + "_tombstones"
	v := mustSnapshotOf(t, tomb).Version()

	out, errOut, code := cli(t, "expire-tombstones", "--dry-run", tomb)
	if code != 0 || !strings.Contains(out, "would expire 3 tombstones") || mustSnapshotOf(t, tomb).Version() != v {
		t.Fatalf("expire-tombstones --dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	// The current-state table stands for its tombstones.
	out, errOut, code = cli(t, "expire-tombstones", l.dir)
	if code != 0 || !strings.Contains(out, "expired 3 tombstones") || !strings.Contains(out, "t_tombstones") {
		t.Fatalf("expire-tombstones: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := tombstoneRows(t, l); n != 1 {
		t.Errorf("%d tombstones left, want 1", n)
	}
	mustVerify(t, l.dir)
	if out, _, code := cli(t, "expire-tombstones", tomb); code != 0 || !strings.Contains(out, "nothing committed") {
		t.Fatalf("expire-tombstones again: exit %d\n%s", code, out)
	}

	for _, tc := range []struct{ name, table, want string }{
		{"a history table is refused", l.dir + "_log", "a dsdelta history table"},
		{"a Spark table is refused", copyDeltaFixture(t, "snapshot-data0"), "not a dsdelta table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, errOut, code := cli(t, "expire-tombstones", tc.table); code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, want 1 saying %q\n%s\n%s", code, tc.want, out, errOut)
			}
		})
	}
}

// TestExpireTombstonesBesideAConcurrentMerge: a merge appends tombstones
// between the expiry's read and its commit (the hook runs before the
// expiry writes its commit file; every tombstone it reads expires, so it
// writes no data file). Merges append blindly, so the expiry commits
// after the merge's version, without trying again, and keeps the merge's
// tombstones.
func TestExpireTombstonesBesideAConcurrentMerge(t *testing.T) {
	l := newOurLake(t)
	l.now = time.Now().Add(-10 * 24 * time.Hour)
	l.apply(ids(0, 10), nil)
	for id := range int64(8) { // eight small files, which expiry merges
		l.apply(nil, []int64{id})
	}
	l.now = time.Now()
	tomb := l.dir + "_tombstones"
	v := mustSnapshotOf(t, tomb).Version()
	var raced atomic.Bool
	store := hooked(t, tomb, logCommit, 1, func() { l.apply(nil, []int64{8, 9}); raced.Store(true) })
	var out, errOut bytes.Buffer
	err := expireTable(context.Background(), store, tomb, cdc.ExpireOptions{Retention: 7 * 24 * time.Hour, TargetFileBytes: config.DefaultTargetFileBytes}, &out, retryLogger(&errOut))
	if err != nil || !raced.Load() || !strings.Contains(out.String(), "expired 8 tombstones deleted before") ||
		!strings.Contains(out.String(), fmt.Sprintf("in version %d", v+2)) || errOut.Len() > 0 {
		t.Fatalf("expire = %v (merge raced: %v), want version %d after the merge's\n%s\n%s", err, raced.Load(), v+2, out.String(), errOut.String())
	}
	if n := tombstoneRows(t, l); n != 2 {
		t.Errorf("%d tombstones left, want the merge's 2", n)
	}
	mustVerify(t, l.dir)
}
