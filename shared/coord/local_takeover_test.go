package coord_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// gonePID is a pid no process can have: above Linux's largest pid_max
// (2^22) and the other systems' limits.
const gonePID = 1 << 30

// editLease rewrites the lease in a table's coordination document as
// another process would have written it; edit changes the recorded process.
func editLease(t *testing.T, store objstore.Store, tableID string, edit func(t *testing.T, process map[string]any)) {
	t.Helper()
	ctx := context.Background()
	name := "_dsdelta/coord/tables/" + tableID + ".json"
	r, err := store.NewReader(ctx, name, 0, -1)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc map[string]any
	err = dec.Decode(&doc)
	r.Close()
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	lease, _ := doc["lease"].(map[string]any)
	process, _ := lease["process"].(map[string]any)
	if process == nil {
		t.Fatalf("the lease of %s records no holder process: %v", tableID, doc["lease"])
	}
	edit(t, process)
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Write(ctx, name, bytes.NewReader(data), objstore.WriteOptions{}); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

// holdBatch registers files of table db.t, takes its lease for an hour as
// holder and opens a batch of batchFiles of them.
func holdBatch(t *testing.T, c coordtest.Coordinator, holder string, files, batchFiles int) (coord.Lease, coord.Batch) {
	t.Helper()
	ctx := context.Background()
	for n := range files {
		r := processFile(n)
		r.Table = "db.t"
		if _, _, err := c.RegisterFile(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Acquire(ctx, "db.t", holder, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: batchFiles})
	if err != nil {
		t.Fatal(err)
	}
	return l, b
}

// wantLost checks that every use of a lease that was taken over fails with
// ErrLeaseLost, so its holder can neither go on nor commit.
func wantLost(t *testing.T, c coordtest.Coordinator, old coord.Lease, b coord.Batch) {
	t.Helper()
	ctx := context.Background()
	if err := c.CheckLease(ctx, old); !errors.Is(err, coord.ErrLeaseLost) {
		t.Errorf("CheckLease of the old lease = %v, want ErrLeaseLost", err)
	}
	if _, err := c.Renew(ctx, old, time.Minute); !errors.Is(err, coord.ErrLeaseLost) {
		t.Errorf("Renew of the old lease = %v, want ErrLeaseLost", err)
	}
	if _, err := c.NextBatch(ctx, old, old.Table, coord.BatchLimits{}); !errors.Is(err, coord.ErrLeaseLost) {
		t.Errorf("NextBatch with the old lease = %v, want ErrLeaseLost", err)
	}
	if err := c.CompleteBatch(ctx, old, b, coord.BatchStats{}); !errors.Is(err, coord.ErrLeaseLost) {
		t.Errorf("CompleteBatch with the old lease = %v, want ErrLeaseLost", err)
	}
	if err := c.Release(ctx, old); !errors.Is(err, coord.ErrLeaseLost) {
		t.Errorf("Release of the old lease = %v, want ErrLeaseLost", err)
	}
}

// TestLocalTakesOverLeasesOfGoneProcesses checks that a lease whose holder
// process no longer exists on this host is taken over at once, before it
// expires, and that every other lease is not.
func TestLocalTakesOverLeasesOfGoneProcesses(t *testing.T) {
	ctx := context.Background()
	// holdAndLeave has a first process take the lease of db.t and form a
	// batch, then makes the lease look as edit says.
	holdAndLeave := func(t *testing.T, edit func(*testing.T, map[string]any)) (objstore.Store, *coordtest.Clock, coord.Lease, coord.Batch) {
		t.Helper()
		store, clock := objstore.NewMemory(), coordtest.NewClock()
		l, b := holdBatch(t, newLocal(t, store, clock.Now), "first/1", 3, 2)
		editLease(t, store, "db.t", edit)
		return store, clock, l, b
	}
	takenOver := []struct {
		name string
		edit func(*testing.T, map[string]any)
	}{
		{"a holder whose pid no longer exists", func(t *testing.T, p map[string]any) { p["pid"] = gonePID }},
		{"a holder whose pid now belongs to a process started at another time", func(t *testing.T, p map[string]any) {
			if p["start"] == nil {
				t.Skip("no process start times on this system")
			}
			start, _ := p["start"].(json.Number).Int64()
			p["start"] = start + 1
		}},
	}
	for _, tc := range takenOver {
		t.Run("the lease of "+tc.name+" is taken over at once with a greater token", func(t *testing.T) {
			store, clock, old, b := holdAndLeave(t, tc.edit)
			clock.Advance(time.Second) // the old lease has most of its hour left
			next := newLocal(t, store, clock.Now)
			l, err := next.Acquire(ctx, "db.t", "next/1", time.Minute)
			if err != nil {
				t.Fatalf("Acquire beside a gone holder = %v, want a takeover", err)
			}
			if l.Token <= old.Token {
				t.Fatalf("takeover token %d, want > %d", l.Token, old.Token)
			}
			wantLost(t, next, old, b)
			resumed, err := next.NextBatch(ctx, l, "db.t", coord.BatchLimits{Files: 10})
			if err != nil || resumed.Seq != b.Seq || len(resumed.Files) != len(b.Files) {
				t.Fatalf("NextBatch after the takeover = seq %d with %d files, %v; want the gone holder's batch %d with %d",
					resumed.Seq, len(resumed.Files), err, b.Seq, len(b.Files))
			}
			if err := next.CompleteBatch(ctx, l, resumed, coord.BatchStats{}); err != nil {
				t.Fatalf("CompleteBatch after the takeover: %v", err)
			}
		})
	}
	notTakenOver := []struct {
		name string
		edit func(*testing.T, map[string]any)
	}{
		{"a live process", func(*testing.T, map[string]any) {}},
		{"a process on another host", func(t *testing.T, p map[string]any) { p["host"], p["pid"] = "elsewhere.example", gonePID }},
		{"a process whose identity was not recorded", func(t *testing.T, p map[string]any) {
			for k := range p {
				delete(p, k)
			}
		}},
	}
	for _, tc := range notTakenOver {
		t.Run("the lease of "+tc.name+" is held until it expires", func(t *testing.T) {
			store, clock, old, _ := holdAndLeave(t, tc.edit)
			next := newLocal(t, store, clock.Now)
			clock.Advance(time.Hour - time.Second)
			_, err := next.Acquire(ctx, "db.t", "next/1", time.Minute)
			if !errors.Is(err, coord.ErrLeaseHeld) {
				t.Fatalf("Acquire = %v, want ErrLeaseHeld", err)
			}
			if err := next.CheckLease(ctx, old); err != nil {
				t.Fatalf("the holder lost its lease: %v", err)
			}
			clock.Advance(time.Second)
			l, err := next.Acquire(ctx, "db.t", "next/1", time.Minute)
			if err != nil || l.Token <= old.Token {
				t.Fatalf("Acquire after expiry = token %d, %v; want > %d", l.Token, err, old.Token)
			}
		})
	}
	t.Run("a lease held by a live process names the host and pid in ErrLeaseHeld and in the status", func(t *testing.T) {
		store, clock, _, _ := holdAndLeave(t, func(*testing.T, map[string]any) {})
		next := newLocal(t, store, clock.Now)
		_, err := next.Acquire(ctx, "db.t", "next/1", time.Minute)
		self := coord.CurrentProcess()
		if want := fmt.Sprintf("%s/%d", self.Host, self.PID); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Acquire = %v, want ErrLeaseHeld naming %s", err, want)
		}
		s, err := next.Status(ctx, "db.t")
		if err != nil || s.LeaseHolder != "first/1" || s.LeaseProcess != self.String() {
			t.Fatalf("Status = holder %q process %q, %v; want first/1 and %s", s.LeaseHolder, s.LeaseProcess, err, self)
		}
	})
	t.Run("concurrent takers of a gone holder's lease produce exactly one winner", func(t *testing.T) {
		dir := t.TempDir()
		store, err := objstore.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		first := newLocal(t, store, nil)
		old, err := first.Acquire(ctx, "db.t", "first/1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		editLease(t, store, "db.t", func(t *testing.T, p map[string]any) { p["pid"] = gonePID })
		const workers = 6
		cs := make([]coordtest.Coordinator, workers)
		for i := range cs {
			s, err := objstore.NewLocal(dir) // one store per taker, as separate processes have
			if err != nil {
				t.Fatal(err)
			}
			cs[i] = newLocal(t, s, nil)
		}
		won, held, err := coordtest.AcquireAtOnce(ctx, "db.t", time.Hour, cs...)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if len(won) != 1 || held != workers-1 {
			t.Fatalf("%d winners and %d ErrLeaseHeld, want 1 and %d: the winner is alive, so nobody takes it over", len(won), held, workers-1)
		}
		if won[0].Token != old.Token+1 {
			t.Fatalf("winner's token %d, want %d: one takeover", won[0].Token, old.Token+1)
		}
		wantLost(t, first, old, coord.Batch{Table: "db.t", Seq: 1})
	})
}
