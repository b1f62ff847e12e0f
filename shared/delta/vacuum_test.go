package delta

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// futureClock starts at the real time so that objects the memory store
// stamps with the real time age as the clock advances.
func futureClock() *testClock { return &testClock{now: time.Now()} }

func objectNames(t testing.TB, store objstore.Store) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	if err := store.List(context.Background(), "", "", func(i objstore.Info) error { names[i.Name] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return names
}

func TestVacuumNeverDeletesFilesOfRetainedVersions(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("random history %d", seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 42))
			clock := futureClock()
			store := objstore.NewMemory()
			tbl := OpenWith(store, Options{Now: clock.Now})
			snap := createTable(t, tbl, []string{"dt"}, map[string]string{"delta.checkpointInterval": "5"})
			type version struct {
				ts    time.Time
				files []string
			}
			history := []version{{clock.Now(), nil}}
			var orphans []string
			n := 0
			newFile := func() Add {
				n++
				dt := fmt.Sprintf("2026-01-%02d", 1+n%3)
				name := fmt.Sprintf("dt=%s/part-%04d.parquet", dt, n)
				putFile(t, store, name)
				return dataFile(name, 1, map[string]*string{"dt": strp(dt)})
			}
			for step := 0; step < 40; step++ {
				clock.Advance(time.Duration(rng.IntN(36)) * time.Hour)
				tx := snap.NewTransaction(Operation{Name: "WRITE"})
				switch live := snap.Files(); {
				case rng.IntN(5) == 0:
					orphan := fmt.Sprintf("dt=2026-01-01/orphan-%d.parquet", step)
					putFile(t, store, orphan)
					orphans = append(orphans, orphan)
					continue
				case len(live) > 0 && rng.IntN(2) == 0:
					victim := live[rng.IntN(len(live))]
					tx.ReadFiles(victim.Path)
					tx.Remove(victim.Remove(clock.Now().UnixMilli(), true))
					if rng.IntN(2) == 0 {
						tx.Add(newFile())
					}
				default:
					tx.Add(newFile())
				}
				var err error
				if snap, err = tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				history = append(history, version{clock.Now(), filePaths(snap.Files())})
			}
			clock.Advance(8 * 24 * time.Hour) // every object is now older than the cutoff
			res, err := tbl.Vacuum(ctx, VacuumOptions{})
			if err != nil {
				t.Fatal(err)
			}
			left := objectNames(t, store)
			retained := 0
			for i, v := range history {
				// Version i is visible as of some time ≥ cutoff unless a
				// later version was committed before the cutoff.
				if i+1 < len(history) && !history[i+1].ts.After(res.Cutoff) {
					continue
				}
				retained++
				for _, f := range v.files {
					if !left[f] {
						t.Errorf("version %d (at %s, cutoff %s) lost %s", i, v.ts, res.Cutoff, f)
					}
				}
			}
			if retained == 0 {
				t.Fatal("no version within retention: the test checks nothing")
			}
			for _, o := range orphans {
				if left[o] {
					t.Errorf("orphan %s older than the cutoff survived", o)
				}
			}
			for _, f := range res.Files {
				if left[f] {
					t.Errorf("reported %s as deleted, but it exists", f)
				}
			}
			if latest := mustSnapshot(t, tbl); latest.Version() != snap.Version()+2 {
				t.Errorf("latest version %d, want %d (VACUUM START and END recorded)", latest.Version(), snap.Version()+2)
			}
		})
	}
}

func TestVacuumOptions(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*Table, objstore.Store, *testClock) {
		clock := futureClock()
		store := objstore.NewMemory()
		tbl := OpenWith(store, Options{Now: clock.Now})
		snap := createTable(t, tbl, nil, nil)
		putFile(t, store, "live.parquet")
		putFile(t, store, "gone.parquet")
		snap = appendFiles(t, snap, "live.parquet", "gone.parquet")
		tx := snap.NewTransaction(Operation{Name: "DELETE"})
		tx.Remove(snap.Files()[0].Remove(clock.Now().UnixMilli(), true)) // gone.parquet sorts first
		if _, err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		putFile(t, store, "orphan.parquet")
		putFile(t, store, "_staging/tmp.parquet")
		putFile(t, store, ".hidden.parquet")
		putFile(t, store, "_SUCCESS")
		putFile(t, store, "part=1/.part-1.parquet.crc")
		putFile(t, store, "_change_data/cdc-1.parquet")
		return tbl, store, clock
	}
	t.Run("a dry run lists the expired files and deletes nothing", func(t *testing.T) {
		tbl, store, clock := setup(t)
		clock.Advance(8 * 24 * time.Hour)
		before := objectNames(t, store)
		res, err := tbl.Vacuum(ctx, VacuumOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"_change_data/cdc-1.parquet", "gone.parquet", "orphan.parquet"}
		if !slices.Equal(res.Files, want) || !res.DryRun {
			t.Errorf("dry run files = %v, want %v", res.Files, want)
		}
		if after := objectNames(t, store); len(after) != len(before) {
			t.Errorf("dry run changed the store: %d objects, before %d", len(after), len(before))
		}
	})
	t.Run("a real run deletes the expired files and keeps hidden and live ones", func(t *testing.T) {
		tbl, store, clock := setup(t)
		clock.Advance(8 * 24 * time.Hour)
		if _, err := tbl.Vacuum(ctx, VacuumOptions{}); err != nil {
			t.Fatal(err)
		}
		left := objectNames(t, store)
		for _, name := range []string{"live.parquet", "_staging/tmp.parquet", ".hidden.parquet", "_SUCCESS", "part=1/.part-1.parquet.crc"} {
			if !left[name] {
				t.Errorf("%s was deleted", name)
			}
		}
		for _, name := range []string{"gone.parquet", "orphan.parquet", "_change_data/cdc-1.parquet"} {
			if left[name] {
				t.Errorf("%s survived", name)
			}
		}
		h, err := tbl.History(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 2 || h[0].Operation != "VACUUM END" || h[1].Operation != "VACUUM START" || h[1].Metrics["numFilesToDelete"] != "3" || h[0].Metrics["numDeletedFiles"] != "3" {
			t.Errorf("history = %+v, want VACUUM END after VACUUM START", h)
		}
	})
	t.Run("tombstones within retention and recently written files are kept", func(t *testing.T) {
		tbl, store, clock := setup(t)
		clock.Advance(24 * time.Hour)
		res, err := tbl.Vacuum(ctx, VacuumOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) != 0 {
			t.Errorf("deleted %v one day after the removal, want nothing", res.Files)
		}
		if left := objectNames(t, store); !left["gone.parquet"] || !left["orphan.parquet"] {
			t.Error("a file within retention was deleted")
		}
	})
	t.Run("a retention below the table's minimum is refused unless forced", func(t *testing.T) {
		tbl, store, _ := setup(t)
		_, err := tbl.Vacuum(ctx, VacuumOptions{Retention: time.Hour})
		if !errors.Is(err, ErrRetentionTooShort) {
			t.Fatalf("err = %v, want ErrRetentionTooShort", err)
		}
		res, err := tbl.Vacuum(ctx, VacuumOptions{Retention: time.Nanosecond, Force: true, Now: func() time.Time { return time.Now().Add(time.Minute) }})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(res.Files, "gone.parquet") || objectNames(t, store)["live.parquet"] == false {
			t.Errorf("forced vacuum deleted %v", res.Files)
		}
	})
	t.Run("the table's deletedFileRetentionDuration sets the default", func(t *testing.T) {
		clock := futureClock()
		store := objstore.NewMemory()
		tbl := OpenWith(store, Options{Now: clock.Now})
		createTable(t, tbl, nil, map[string]string{"delta.deletedFileRetentionDuration": "interval 2 days"})
		putFile(t, store, "orphan.parquet")
		clock.Advance(3 * 24 * time.Hour)
		res, err := tbl.Vacuum(ctx, VacuumOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Retention != 48*time.Hour || !slices.Equal(res.Files, []string{"orphan.parquet"}) {
			t.Errorf("retention %s, files %v; want 48h and the orphan", res.Retention, res.Files)
		}
	})
}

func TestVacuumKeepsDeletionVectorFiles(t *testing.T) {
	store := copyStore(t, fixtureStore(t, "basic-dv-no-checkpoint"), nil)
	orphan := "part-99999-orphan.parquet"
	putFile(t, store, orphan)
	res, err := Open(store).Vacuum(context.Background(), VacuumOptions{Force: true, Retention: time.Nanosecond,
		Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Files, []string{orphan}) {
		t.Errorf("deleted %v, want only the orphan", res.Files)
	}
	left := objectNames(t, store)
	if !left["deletion_vector_899cef78-06b3-4c14-b024-03860e62cd40.bin"] {
		t.Error("the live deletion vector file was deleted")
	}
	// The table is writable (deletionVectors is a feature this package
	// writes), so vacuum records its VACUUM START and END commits.
	if s := mustSnapshot(t, Open(store)); s.Version() != 3 {
		t.Errorf("version = %d, want 3: VACUUM START and END commits", s.Version())
	}
}

func TestVacuumChecksTheProtocolFirst(t *testing.T) {
	_, store := fixtureCopy(t, "snapshot-data0")
	putCommit(t, store, 1, `{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["someFutureFeature"]}}`+"\n")
	before := objectNames(t, store)
	_, err := Open(store).Vacuum(context.Background(), VacuumOptions{Force: true, Retention: time.Nanosecond})
	if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), "someFutureFeature") {
		t.Fatalf("err = %v, want ErrUnsupportedFeature naming someFutureFeature", err)
	}
	if after := objectNames(t, store); len(after) != len(before) {
		t.Error("vacuum deleted files of a table it refused")
	}
}

func TestHiddenFromVacuum(t *testing.T) {
	tests := []struct {
		name   string
		hidden bool
	}{
		{"part-0.parquet", false},
		{"dt=2026-01-01/part-0.parquet", false},
		{"_ds_date=2026-01-01/part-0.parquet", false},
		{"_change_data/cdc.parquet", false},
		{"_delta_log/00000000000000000000.json", true},
		{"_delta_log/_last_checkpoint", true},
		{"_staging/x.parquet", true},
		{".tmp/x.parquet", true},
		{"dt=1/.part-0.parquet.crc", true},
		{"_SUCCESS", true},
		{"dt=1/_committed_123", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hiddenFromVacuum(tt.name); got != tt.hidden {
				t.Fatalf("hiddenFromVacuum(%q) = %v, want %v", tt.name, got, tt.hidden)
			}
		})
	}
}

func TestVacuumOnALocalDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := futureClock()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, []string{"dt"}, nil)
	putFile(t, store, "dt=a/live.parquet")
	putFile(t, store, "dt=b/orphan.parquet")
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("dt=a/live.parquet", 1, map[string]*string{"dt": strp("a")}))
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(8 * 24 * time.Hour)
	res, err := tbl.Vacuum(ctx, VacuumOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Files, []string{"dt=b/orphan.parquet"}) {
		t.Fatalf("deleted %v, want the orphan", res.Files)
	}
	left := objectNames(t, store)
	if !left["dt=a/live.parquet"] || left["dt=b/orphan.parquet"] {
		t.Errorf("objects left: %v", left)
	}
	if s := mustSnapshot(t, tbl); len(s.Files()) != 1 {
		t.Errorf("live files after vacuum = %v", filePaths(s.Files()))
	}
}
