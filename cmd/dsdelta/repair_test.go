package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// scoreLake is a lake whose table has a double column, score, which an
// older release's rewrite could leave with bounds no row has: three
// batches of ten keys, score = id.
func scoreLake(t *testing.T) *ourLake {
	l := newOurLake(t)
	l.source = value.StructType{Fields: append(slices.Clone(verbSource.Fields), value.Field{Name: "score", Type: value.Double, Nullable: true})}
	l.row = func(id, seq int64) []any { return []any{id, fmt.Sprintf("batch %d", seq), float64(id)} }
	l.smallFiles(3)
	return l
}

// damageStats commits the file of keys 0 to 9 of the state table of l again with
// the score bounds an older release's rewrite left after dropping the
// rows that held them, as it did; it returns the file's path.
func damageStats(t *testing.T, l *ourLake) string {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.Open(l.tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f delta.Add
	var st delta.Stats
	for _, f = range snap.Files() {
		if st, err = delta.ParseStats(f.Stats); err != nil {
			t.Fatal(err)
		}
		if lo, _, _ := st.MinMax("id", value.Long); lo == int64(0) {
			break // the file of keys 0 to 9, which a merge of key 1 rewrites
		}
	}
	st.MinValues["score"], st.MaxValues["score"] = json.RawMessage("-1000.0"), json.RawMessage("1000.0")
	b, _ := json.Marshal(st)
	f.Stats, f.DataChange = string(b), false
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
	tx.Add(f)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return f.Path
}

// scoreBounds returns the score bounds the stats of file path claim.
func scoreBounds(t *testing.T, dir, path string) (lo, hi any) {
	t.Helper()
	for _, f := range mustSnapshotOf(t, dir).Files() {
		if f.Path == path {
			st, err := delta.ParseStats(f.Stats)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi, _ := st.MinMax("score", value.Double)
			return lo, hi
		}
	}
	return nil, nil
}

func TestRepairStats(t *testing.T) {
	t.Run("bounds no row has are restated, the data untouched, once", func(t *testing.T) {
		l := scoreLake(t)
		path := damageStats(t, l)
		rows := showLines(t, l.dir)
		v := mustSnapshotOf(t, l.dir).Version()
		out, errOut, code := cli(t, "repair-stats", "--dry-run", l.dir)
		if code != 0 || !strings.Contains(out, "would repair 0 files with unsigned wide-decimal footer bounds (0 bytes), 1 files with bounds no row has") ||
			!strings.Contains(out, "restated:  "+path) || mustSnapshotOf(t, l.dir).Version() != v {
			t.Fatalf("repair-stats --dry-run: exit %d\n%s\n%s", code, out, errOut)
		}
		out, errOut, code = cli(t, "repair-stats", l.dir)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("repaired in version %d", v+1)) || !strings.Contains(out, "restated:  "+path) {
			t.Fatalf("repair-stats: exit %d\n%s\n%s", code, out, errOut)
		}
		if lo, hi := scoreBounds(t, l.dir, path); lo != 0.0 || hi != 9.0 {
			t.Errorf("score bounds [%v, %v] after the repair, want the rows' [0, 9]", lo, hi)
		}
		if got := showLines(t, l.dir); !slices.Equal(got, rows) {
			t.Errorf("rows after the repair differ")
		}
		mustVerify(t, l.dir)
		if out, _, code := cli(t, "repair-stats", l.dir); code != 0 || !strings.Contains(out, "statistics clean") || !strings.Contains(out, "3 files written by dsdelta checked") {
			t.Fatalf("repair-stats again: exit %d\n%s", code, out)
		}
	})
	t.Run("a clean table of ours is left alone", func(t *testing.T) {
		l := scoreLake(t)
		v := mustSnapshotOf(t, l.dir).Version()
		if out, _, code := cli(t, "repair-stats", l.dir); code != 0 || !strings.Contains(out, "statistics clean") || mustSnapshotOf(t, l.dir).Version() != v {
			t.Fatalf("repair-stats: exit %d\n%s", code, out)
		}
	})
	t.Run("a Spark table is left alone", func(t *testing.T) {
		dir := copyDeltaFixture(t, "basic-with-checkpoint")
		v := mustSnapshotOf(t, dir).Version()
		if out, errOut, code := cli(t, "repair-stats", dir); code != 0 || !strings.Contains(out, "statistics clean") || mustSnapshotOf(t, dir).Version() != v {
			t.Fatalf("repair-stats: exit %d\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("a table dsdelta cannot write is refused, naming why", func(t *testing.T) {
		dir := copyDeltaFixture(t, "table-with-dv-small")
		if out, errOut, code := cli(t, "repair-stats", dir); code != 1 || !strings.Contains(errOut, "refused") || !strings.Contains(errOut, "columnMapping") {
			t.Fatalf("repair-stats: exit %d\n%s\n%s", code, out, errOut)
		}
	})
}

// TestRepairStatsBesideAConcurrentMerge: a merge that rewrites the
// damaged file commits between the repair's read and its commit, or the
// repair commits between the merge's read and its commit. Either way the
// file the merge removed stays removed (a repair's add of it again would
// bring its rows back), the merge's update is there, and the table
// verifies.
func TestRepairStatsBesideAConcurrentMerge(t *testing.T) {
	for _, repairFirst := range []bool{false, true} {
		name := map[bool]string{false: "the merge commits first", true: "the repair commits first"}[repairFirst]
		t.Run(name, func(t *testing.T) {
			l := scoreLake(t)
			path := damageStats(t, l)
			var raced atomic.Bool
			if repairFirst {
				l.tabs.State = hooked(t, l.dir, logCommit, 1, func() {
					if out, errOut, code := cli(t, "repair-stats", l.dir); code != 0 || !strings.Contains(out, "repaired in version") {
						t.Errorf("repair-stats during the merge: exit %d\n%s\n%s", code, out, errOut)
					}
					raced.Store(true)
				})
				l.apply([]int64{1}, nil)
			} else {
				store := hooked(t, l.dir, logCommit, 1, func() { l.apply([]int64{1}, nil); raced.Store(true) })
				var out, errOut strings.Builder
				if err := repairTable(context.Background(), store, l.dir, false, &out, retryLogger(&errOut)); err != nil {
					t.Fatalf("repair = %v\n%s", err, out.String())
				}
				if !strings.Contains(errOut.String(), "trying again from a fresh snapshot") || !strings.Contains(out.String(), "statistics clean") {
					t.Errorf("the repair did not lose, try again and find the merge's file clean:\n%s\n%s", out.String(), errOut.String())
				}
			}
			if !raced.Load() {
				t.Fatal("the race did not happen")
			}
			for _, f := range mustSnapshotOf(t, l.dir).Files() {
				if f.Path == path {
					t.Errorf("the file the merge rewrote, %s, is in the table again", path)
				}
			}
			mustVerify(t, l.dir)
			got := strings.Join(showLines(t, l.dir), "\n")
			if n := len(showLines(t, l.dir)); n != 30 || !strings.Contains(got, fmt.Sprintf(`"id":1,"note":"batch %d"`, l.seq)) {
				t.Errorf("rows after the race: %d, want 30 with the merge's update", n)
			}
			if out, _, code := cli(t, "repair-stats", l.dir); code != 0 || !strings.Contains(out, "statistics clean") {
				t.Errorf("repair-stats after the race: exit %d\n%s", code, out)
			}
		})
	}
}
