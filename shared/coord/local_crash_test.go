package coord_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// errCrash stands for a process dying at a write: the write does not happen
// and nothing after it in the same call does either.
var errCrash = errors.New("injected crash")

// crashStore fails the next write whose name contains a fragment, once.
type crashStore struct {
	objstore.Store
	mu       sync.Mutex
	fragment string
}

func (s *crashStore) crashAt(fragment string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fragment = fragment
}

func (s *crashStore) Write(ctx context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	s.mu.Lock()
	crash := s.fragment != "" && strings.Contains(name, s.fragment)
	if crash {
		s.fragment = ""
	}
	s.mu.Unlock()
	if crash {
		return objstore.Info{}, errCrash
	}
	return s.Store.Write(ctx, name, r, opts)
}

// TestLocalRecoversFromCrashes interrupts the local backend between the
// single-object writes of one call and checks that the next call, as a
// restarted process would make it, finds a consistent state.
func TestLocalRecoversFromCrashes(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*crashStore, coordtest.Coordinator, *coordtest.Clock) {
		store := &crashStore{Store: objstore.NewMemory()}
		clock := coordtest.NewClock()
		return store, newLocal(t, store, clock.Now), clock
	}
	f := func(n int) coord.FileRecord {
		r := processFile(n)
		r.Table = "db.t"
		return r
	}
	t.Run("a registration that died before writing its record is redone by the re-delivery", func(t *testing.T) {
		store, c, _ := setup(t)
		store.crashAt("/files/")
		if _, _, err := c.RegisterFile(ctx, f(1)); !errors.Is(err, errCrash) {
			t.Fatalf("RegisterFile = %v, want the injected crash", err)
		}
		if p, err := c.Pending(ctx, "db.t", 0); err != nil || len(p) != 0 {
			t.Fatalf("Pending after the crash = %d files, %v; want none (the marker has no record)", len(p), err)
		}
		rec, created, err := c.RegisterFile(ctx, f(1))
		if err != nil || !created {
			t.Fatalf("re-delivery: created = %v, err = %v; want a new record", created, err)
		}
		p, err := c.Pending(ctx, "db.t", 0)
		if err != nil || len(p) != 1 || p[0].ID != rec.ID {
			t.Fatalf("Pending = %v, %v; want the one file", p, err)
		}
		if s, err := c.Status(ctx, "db.t"); err != nil || s.Pending != 1 {
			t.Fatalf("Status = %+v, %v; want 1 pending", s, err)
		}
		// The orphaned marker goes once it is older than the cutoff; the
		// live one stays.
		if _, err := c.Expire(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Expire: %v", err)
		}
		var markers []string
		if err := store.List(ctx, "_dsdelta/coord/pending/", "", func(i objstore.Info) error {
			markers = append(markers, i.Name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(markers) != 1 || !strings.HasSuffix(markers[0], rec.ID) {
			t.Fatalf("markers after Expire = %v, want only the live file's", markers)
		}
	})
	t.Run("a batch formed but not marked is resumed whole and its files leave pending", func(t *testing.T) {
		store, c, _ := setup(t)
		for n := range 3 {
			if _, _, err := c.RegisterFile(ctx, f(n)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := c.Acquire(ctx, "db.t", "m", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		store.crashAt("/batches/") // right after the table document committed the batch
		if _, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 2}); !errors.Is(err, errCrash) {
			t.Fatalf("NextBatch = %v, want the injected crash", err)
		}
		if p, err := c.Pending(ctx, "db.t", 0); err != nil || len(p) != 1 {
			t.Fatalf("Pending after the crash = %d files, %v; want 1 (two are in the open batch)", len(p), err)
		}
		b, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10})
		if err != nil || b.Seq != 1 || len(b.Files) != 2 {
			t.Fatalf("resumed NextBatch = seq %d with %d files, %v; want seq 1 with 2", b.Seq, len(b.Files), err)
		}
		for _, rec := range b.Files {
			if rec.State != coord.StateBatched || rec.BatchSeq != 1 {
				t.Fatalf("resumed file %+v, want batched in batch 1", rec)
			}
		}
		if s, err := c.Status(ctx, "db.t"); err != nil || s.Pending != 1 || s.OpenBatchSeq != 1 {
			t.Fatalf("Status = %+v, %v; want 1 pending and batch 1 open", s, err)
		}
	})
	t.Run("a completion that died before closing the batch is redone without counting twice", func(t *testing.T) {
		store, c, _ := setup(t)
		for n := range 2 {
			if _, _, err := c.RegisterFile(ctx, f(n)); err != nil {
				t.Fatal(err)
			}
		}
		l, err := c.Acquire(ctx, "db.t", "m", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10})
		if err != nil {
			t.Fatal(err)
		}
		store.crashAt("/tables/") // after the files were marked merged
		if err := c.CompleteBatch(ctx, l, b, coord.BatchStats{Inserted: 2}); !errors.Is(err, errCrash) {
			t.Fatalf("CompleteBatch = %v, want the injected crash", err)
		}
		again, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10})
		if err != nil || again.Seq != b.Seq {
			t.Fatalf("NextBatch after the crash = seq %d, %v; want the open batch %d", again.Seq, err, b.Seq)
		}
		if err := c.CompleteBatch(ctx, l, again, coord.BatchStats{Inserted: 2}); err != nil {
			t.Fatalf("CompleteBatch again: %v", err)
		}
		s, err := c.Status(ctx, "db.t")
		if err != nil || s.Files != 2 || s.Batches != 1 || s.Inserted != 2 || s.OpenBatchSeq != 0 || s.Pending != 0 {
			t.Fatalf("Status = %+v, %v; want 2 files in 1 batch, counted once", s, err)
		}
		if _, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10}); !errors.Is(err, coord.ErrNoWork) {
			t.Fatalf("NextBatch after completion = %v, want ErrNoWork", err)
		}
	})
	t.Run("a takeover that died before writing leaves the gone holder's lease to the next acquisition", func(t *testing.T) {
		store, c, clock := setup(t)
		old, b := holdBatch(t, c, "gone", 2, 1)
		editLease(t, store, "db.t", func(_ *testing.T, p map[string]any) { p["pid"] = gonePID })
		clock.Advance(time.Second)
		store.crashAt("/tables/")
		if _, err := c.Acquire(ctx, "db.t", "next", time.Minute); !errors.Is(err, errCrash) {
			t.Fatalf("Acquire = %v, want the injected crash", err)
		}
		l, err := c.Acquire(ctx, "db.t", "again", time.Minute)
		if err != nil || l.Token != old.Token+1 {
			t.Fatalf("Acquire after the crash = token %d, %v; want the takeover with token %d", l.Token, err, old.Token+1)
		}
		wantLost(t, c, old, b)
		again, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10})
		if err != nil || again.Seq != b.Seq || len(again.Files) != 1 {
			t.Fatalf("NextBatch after the takeover = seq %d with %d files, %v; want batch %d with its 1 file", again.Seq, len(again.Files), err, b.Seq)
		}
	})
}
