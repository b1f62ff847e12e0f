package mergebench

import (
	"context"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestPlanBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   int64
		mode   string
		minKey int64 // smallest key an update or delete may hit
	}{
		{"a clustered batch into a small table draws from the whole table", 50_000, "clustered", 1},
		{"a clustered batch into a large table stays in the hot window", 1_000_000, "clustered", 1_000_000 - HotWindow + 1},
		{"a random batch draws from the whole key space", 1_000_000, "random", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanBatch(tc.rows, tc.mode)
			if len(plan) != BatchSize {
				t.Fatalf("batch has %d changes, want %d", len(plan), BatchSize)
			}
			seen := map[int64]bool{}
			var upd, ins, del int
			var lowest int64 = tc.rows
			for _, c := range plan {
				if seen[c.id] {
					t.Fatalf("key %d appears twice", c.id)
				}
				seen[c.id] = true
				switch {
				case c.insert:
					ins++
					if c.id <= tc.rows {
						t.Errorf("insert of existing key %d", c.id)
					}
				case c.delete:
					del++
				default:
					upd++
				}
				if !c.insert {
					if c.id < tc.minKey || c.id > tc.rows {
						t.Errorf("update/delete of key %d outside [%d, %d]", c.id, tc.minKey, tc.rows)
					}
					lowest = min(lowest, c.id)
				}
			}
			if upd != BatchUpdates || ins != BatchInserts || del != BatchDeletes {
				t.Errorf("mix = %d updates, %d inserts, %d deletes; want %d, %d, %d", upd, ins, del, BatchUpdates, BatchInserts, BatchDeletes)
			}
			if tc.mode == "random" && lowest > tc.rows/10 {
				t.Errorf("random batch never touched the first tenth of the keys (lowest %d)", lowest)
			}
		})
	}
}

func TestPlanBatchIsDeterministic(t *testing.T) {
	a, b := PlanBatch(1_000_000, "random"), PlanBatch(1_000_000, "random")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("change %d differs between runs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

func TestBuildBatchOrdersAfterTheBaseRows(t *testing.T) {
	b, err := BuildBatch(PlanBatch(100_000, "clustered"))
	if err != nil {
		t.Fatal(err)
	}
	base := BaseStateRow(100_000)[len(SourceSchema.Fields)+3].([]byte)
	for _, c := range b.Changes {
		if string(c.Order) <= string(base) {
			t.Fatalf("change of key %v has order %x, not after the base rows' %x", c.Key, c.Order, base)
		}
	}
}

// TestSCD2TableTakesTheBatchAsTheRuleSays: the scd2 base table is what the
// merge expects of one (its last versions record the keys' last change),
// so the batch extends it: a version per update and insert, deletes close
// the current version. Compacted, it keeps its closed versions in a file
// of their own, which the merge neither reads nor rewrites.
func TestSCD2TableTakesTheBatchAsTheRuleSays(t *testing.T) {
	ctx := context.Background()
	d := TableDirs{Root: t.TempDir()}
	const keys = 20_000
	files, _, err := BuildSCD2Table(ctx, d, keys)
	if err != nil {
		t.Fatal(err)
	}
	closed := closedOnlyFiles(t, ctx, d)
	if files != 2 || len(closed) != 1 {
		t.Fatalf("%d files, %d of closed versions only; want the closed versions in one file and the open ones in another", files, len(closed))
	}
	plan := PlanBatch(keys, "clustered")
	b, err := BuildBatch(plan)
	if err != nil {
		t.Fatal(err)
	}
	tabs, err := d.TableSet()
	if err != nil {
		t.Fatal(err)
	}
	res, err := cdc.Apply(ctx, tabs, 1, b, cdc.Options{Mode: cdc.ModeSCD2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted != BatchUpdates+BatchInserts || res.Updated != BatchUpdates+BatchDeletes || res.Deleted != 0 {
		t.Fatalf("versions inserted %d, updated %d, deleted %d; want %d, %d, 0", res.Inserted, res.Updated, res.Deleted, BatchUpdates+BatchInserts, BatchUpdates+BatchDeletes)
	}
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := snap.NumRecords(); n != 2*keys+BatchUpdates+BatchInserts {
		t.Fatalf("%d versions after the batch, want %d", n, 2*keys+BatchUpdates+BatchInserts)
	}
	if res.FilesRead != 1 || res.FilesRewritten != 1 {
		t.Fatalf("the merge read %d state files and rewrote %d, want the file of open versions only", res.FilesRead, res.FilesRewritten)
	}
	if after := closedOnlyFiles(t, ctx, d); len(after) != 1 || after[0] != closed[0] {
		t.Fatalf("files of closed versions %v after the merge, want %v untouched", after, closed)
	}
}

// closedOnlyFiles are the paths of the state files in d whose statistics
// show no open version (no null valid-to).
func closedOnlyFiles(t *testing.T, ctx context.Context, d TableDirs) []string {
	t.Helper()
	store, err := objstore.NewLocal(d.State())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range snap.Files() {
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := st.NullCountOf(cdc.ColValidTo); ok && n == 0 {
			out = append(out, f.Path)
		}
	}
	return out
}
