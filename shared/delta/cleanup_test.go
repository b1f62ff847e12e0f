package delta

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// dailyTable commits version 0 and then one append per day for days
// 1..10, checkpointing every 3 versions (at 3, 6 and 9).
func dailyTable(t *testing.T, conf map[string]string) (*Table, objstore.Store, time.Time) {
	t.Helper()
	clock := newClock()
	start := clock.Now()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	if conf == nil {
		conf = map[string]string{}
	}
	conf["delta.checkpointInterval"] = "3"
	snap := createTable(t, tbl, nil, conf)
	for day := 1; day <= 10; day++ {
		clock.Advance(24 * time.Hour)
		snap = appendFiles(t, snap, fmt.Sprintf("day-%02d.parquet", day))
	}
	return tbl, store, start
}

func TestCleanupLog(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		conf     map[string]string
		now      time.Duration // after the table's start
		opts     CleanupOptions
		oldest   int64 // oldest reconstructable version afterwards; 0 = nothing deleted
		deletedN int
	}{
		{"everything expired keeps the newest checkpoint and what follows", nil, 60 * 24 * time.Hour, CleanupOptions{}, 9, 9 + 2},
		{"a cutoff in the middle keeps the checkpoint before it", nil, (30 + 5) * 24 * time.Hour, CleanupOptions{}, 3, 3},
		{"nothing expired deletes nothing", nil, 20 * 24 * time.Hour, CleanupOptions{}, 0, 0},
		{"an explicit retention wins over the default", nil, 12 * 24 * time.Hour, CleanupOptions{Retention: 5 * 24 * time.Hour}, 6, 6 + 1},
		{"delta.logRetentionDuration sets the default", map[string]string{"delta.logRetentionDuration": "interval 1 week"}, 15 * 24 * time.Hour, CleanupOptions{}, 6, 6 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl, store, start := dailyTable(t, tt.conf)
			want := mustSnapshot(t, tbl)
			opts := tt.opts
			opts.Now = func() time.Time { return start.Add(tt.now) }
			res, err := tbl.CleanupLog(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Deleted) != tt.deletedN {
				t.Errorf("deleted %d files %v, want %d", len(res.Deleted), res.Deleted, tt.deletedN)
			}
			sameSnapshot(t, mustSnapshot(t, Open(store)), want)
			if _, err := tbl.SnapshotAt(ctx, tt.oldest); err != nil {
				t.Errorf("oldest kept version %d does not load: %v", tt.oldest, err)
			}
			if tt.oldest > 0 {
				if res.OldestVersion != tt.oldest {
					t.Errorf("OldestVersion = %d, want %d", res.OldestVersion, tt.oldest)
				}
				if _, err := tbl.SnapshotAt(ctx, tt.oldest-1); !errors.Is(err, ErrVersionNotFound) {
					t.Errorf("version %d still loads (err %v); its log should be gone", tt.oldest-1, err)
				}
				if ok, _ := exists(ctx, store, commitName(tt.oldest)); !ok {
					t.Errorf("commit %d of the kept checkpoint was deleted", tt.oldest)
				}
				h, err := tbl.History(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				if h[len(h)-1].Version != tt.oldest {
					t.Errorf("oldest history entry %d, want %d", h[len(h)-1].Version, tt.oldest)
				}
			}
		})
	}
}

func TestCleanupLogHonoursEnableExpiredLogCleanup(t *testing.T) {
	tbl, _, start := dailyTable(t, map[string]string{"delta.enableExpiredLogCleanup": "false"})
	res, err := tbl.CleanupLog(context.Background(), CleanupOptions{Now: func() time.Time { return start.Add(90 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 0 {
		t.Fatalf("deleted %v from a table with cleanup disabled", res.Deleted)
	}
	if _, err := tbl.SnapshotAt(context.Background(), 0); err != nil {
		t.Fatalf("version 0 lost: %v", err)
	}
}
