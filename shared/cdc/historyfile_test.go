package cdc

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// stagedHistoryFile writes the history rows of events as staging writes a
// dated part, in schema source, and returns it as a HistoryFile.
func stagedHistoryFile(t *testing.T, store objstore.Store, source value.StructType, rows [][]any) HistoryFile {
	t.Helper()
	ctx := context.Background()
	hs := HistorySchema(source)
	adds, err := writeRows(ctx, store, delta.WriteOptions{Schema: hs, Dir: "_staging", PartitionColumns: []string{ColSourceDate},
		PartitionValues: map[string]any{ColSourceDate: rows[0][0]}, DataChange: true}, rows, 0)
	if err != nil || len(adds) != 1 {
		t.Fatalf("write a staged part: %d files, %v", len(adds), err)
	}
	return HistoryFile{Store: store, Add: adds[0], Schema: hs, Rows: int64(len(rows))}
}

// historyOrders reads the history's ordering keys and the value of column
// col of each row, by order.
func historyOrders(t *testing.T, tabs TableSet, col string) map[string]any {
	t.Helper()
	ctx := context.Background()
	snap, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.History, snap.Metadata(), f, delta.ReadOptions{Columns: []string{ColOrder, col}}, func(row []any) error {
			k := fmt.Sprintf("%x", row[0])
			if _, dup := out[k]; dup {
				t.Fatalf("event %s twice in the history", k)
			}
			out[k] = row[1]
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestHistoryFilesAreCopiedOrTheirRowsWritten: a batch's history file in
// the history's schema is added as a copy, its changes (InHistory) left
// out of the rows written; one of a narrower schema than the history's is
// read and its rows written in the history's. Either way the
// history holds every event once and the state all of them.
func TestHistoryFilesAreCopiedOrTheirRowsWritten(t *testing.T) {
	ctx := context.Background()
	wider := value.StructType{Fields: append(slices.Clone(testSource.Fields), value.Field{Name: "extra", Type: value.String, Nullable: true})}
	for _, tc := range []struct {
		name   string
		source value.StructType // of the batch
		copied bool
	}{
		{"the history's schema: copied", testSource, true},
		{"a history schema wider than the file's: written", wider, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tabs := memTables()
			root := objstore.NewMemory()
			var fileRows [][]any
			var b Batch
			b.Source, b.Key = tc.source, []string{"id", "region"}
			for n := range uint64(20) {
				ev := genEvent(n+1, int64(n%7), "eu", false, int64(n))
				row := HistoryRow(ev)
				fileRows = append(fileRows, row)
				h := row
				if !value.Equal(tc.source, testSource) {
					h = append(slices.Clone(row), nil)
				}
				c, err := ChangeFromHistory(h, tc.source, []int{0, 1})
				if err != nil {
					t.Fatal(err)
				}
				c.InHistory = n < 15 // the file's events; the others are written
				b.Changes = append(b.Changes, c)
			}
			b.HistoryFiles = []HistoryFile{stagedHistoryFile(t, root, testSource, fileRows[:15])}
			res, err := Apply(ctx, tabs, 1, b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if copied := res.HistoryFilesCopied == 1 && res.HistoryRowsCopied == 15; copied != tc.copied {
				t.Fatalf("history files copied %d (%d rows), want copied %v", res.HistoryFilesCopied, res.HistoryRowsCopied, tc.copied)
			}
			got := historyOrders(t, tabs, "note")
			if len(got) != 20 {
				t.Fatalf("the history holds %d events, want 20", len(got))
			}
			for _, c := range b.Changes {
				if note := got[fmt.Sprintf("%x", c.Order)]; note != c.Row[3] {
					t.Fatalf("event %x: note %v, want %v", c.Order, note, c.Row[3])
				}
			}
			if res.Keys != 7 || res.Inserted != 7 {
				t.Fatalf("state: %d keys, %d inserted; want 7 of each", res.Keys, res.Inserted)
			}
		})
	}
}

// TestAStepOfManyUpsertsWritesKeyRangesOnAllCores: the upserts of a large
// step are written into files of key ranges apart from each other, one per
// core, and the state holds each key's last change once.
func TestAStepOfManyUpsertsWritesKeyRangesOnAllCores(t *testing.T) {
	ctx := context.Background()
	tabs := memTables()
	b := Batch{Source: testSource, Key: []string{"id", "region"}}
	want := map[string]string{}
	for n := range uint64(1000) {
		ev := genEvent(n+1, int64(n*7919%600), "eu", false, int64(n))
		b.Changes = append(b.Changes, toChange(t, ev))
		want[KeyText([]any{ev.Row[0], ev.Row[1]})] = ev.Row[3].(string) // later changes win
	}
	_, err := Apply(ctx, tabs, 1, b, Options{upsertRowsPerFile: 100})
	if err != nil {
		t.Fatal(err)
	}
	files := min(runtime.GOMAXPROCS(0), 600/100)
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.NumFiles() != files {
		t.Fatalf("%d state files for 600 upserts at 100 a file on %d cores, want %d", snap.NumFiles(), runtime.GOMAXPROCS(0), files)
	}
	type span struct{ lo, hi int64 }
	var spans []span
	for _, f := range snap.Files() {
		st, err := delta.ParseStats(f.Stats)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, ok := st.MinMax("id", value.Long)
		if !ok {
			t.Fatalf("state file %s without key bounds", f.Path)
		}
		spans = append(spans, span{lo.(int64), hi.(int64)})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo <= spans[i-1].hi {
			t.Fatalf("state files' keys overlap: %v", spans)
		}
	}
	got := readState(t, ctx, tabs)
	if len(got) != len(want) {
		t.Fatalf("%d state rows, want %d", len(got), len(want))
	}
	for k, note := range want {
		if got[k][3] != note {
			t.Fatalf("key %s: note %v, want %s", k, got[k][3], note)
		}
	}
}
