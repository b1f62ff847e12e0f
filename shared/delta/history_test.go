package delta

import (
	"context"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestHistoryNewestFirst(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, nil, nil)
	clock.Advance(time.Minute)
	tx := snap.NewTransaction(Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append"}})
	tx.Add(dataFile("a.parquet", 3, nil))
	tx.SetMetrics(map[string]string{"numFiles": "1", "numOutputRows": "3"})
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := tbl.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 {
		t.Fatalf("history has %d entries, want 2", len(h))
	}
	w := h[0]
	if w.Version != 1 || w.Operation != "WRITE" || w.Parameters["mode"] != "Append" || w.Metrics["numOutputRows"] != "3" ||
		w.ReadVersion == nil || *w.ReadVersion != 0 || w.IsBlindAppend == nil || !*w.IsBlindAppend ||
		!w.Timestamp.Equal(clock.Now()) || w.EngineInfo != "dsdelta/"+EngineVersion {
		t.Errorf("newest entry = %+v", w)
	}
	if h[1].Version != 0 || h[1].Operation != "CREATE TABLE" || h[1].ReadVersion != nil {
		t.Errorf("oldest entry = %+v", h[1])
	}
	t.Run("limit returns only the newest entries", func(t *testing.T) {
		h, err := tbl.History(ctx, 1)
		if err != nil || len(h) != 1 || h[0].Version != 1 {
			t.Fatalf("History(1) = %+v, %v", h, err)
		}
	})
}

func TestHistoryOfSparkTables(t *testing.T) {
	tests := []struct {
		table    string
		versions int
		newestOp string
	}{
		{"snapshot-data2-deleted", 5, "DELETE"},
		{"basic-with-inserts-updates", 2, "UPDATE"},
		{"deltalog-getChanges", 3, "Manual Update"},
		{"delta-0.1.0", 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			h, err := Open(fixtureStore(t, tt.table)).History(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != tt.versions || h[0].Operation != tt.newestOp {
				t.Fatalf("%d entries, newest %q; want %d, %q", len(h), h[0].Operation, tt.versions, tt.newestOp)
			}
			for i := 1; i < len(h); i++ {
				if !h[i].Timestamp.Before(h[i-1].Timestamp) || h[i].Version != h[i-1].Version-1 {
					t.Errorf("entries %d and %d are not strictly newest first", i-1, i)
				}
			}
		})
	}
}

func TestStringMapRendersNonStringValuesAsJSON(t *testing.T) {
	got := stringMap(map[string]any{"s": "x", "n": float64(3), "b": true, "null": nil, "o": map[string]any{"k": "v"}})
	want := map[string]string{"s": "x", "n": "3", "b": "true", "null": "null", "o": `{"k":"v"}`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
