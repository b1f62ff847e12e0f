package coordtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

// Clock is a manual clock for lease expiry; its zero value is not usable,
// use NewClock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Coordinator is what the suite checks: every method of a backend, which
// the use cases ask for in parts (pipeline.Leaser, Registry, Batches,
// Status, Expirer and Watermarks document them). The suite is a consumer
// of its own and does not import pipeline, which backends never see.
type Coordinator interface {
	Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (coord.Lease, error)
	Renew(ctx context.Context, l coord.Lease, ttl time.Duration) (coord.Lease, error)
	Release(ctx context.Context, l coord.Lease) error
	CheckLease(ctx context.Context, l coord.Lease) error

	RegisterFile(ctx context.Context, f coord.FileRecord) (rec coord.FileRecord, created bool, err error)
	Quarantine(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error)
	Skip(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error)
	File(ctx context.Context, id string) (coord.FileRecord, error)
	Files(ctx context.Context, ids []string) (map[string]coord.FileRecord, error)
	Pending(ctx context.Context, tableID string, limit int) ([]coord.FileRecord, error)
	ListFiles(ctx context.Context, tableID string, state coord.FileState) ([]coord.FileRecord, error)

	NextBatch(ctx context.Context, l coord.Lease, tableID string, lim coord.BatchLimits) (coord.Batch, error)
	CompleteBatch(ctx context.Context, l coord.Lease, b coord.Batch, stats coord.BatchStats) error

	Statuses(ctx context.Context) ([]coord.TableStatus, error)
	Status(ctx context.Context, tableID string) (coord.TableStatus, error)

	Expire(ctx context.Context, before time.Time) (int, error)

	Watermark(ctx context.Context, key string) (data []byte, rev int64, err error)
	PutWatermark(ctx context.Context, key string, data []byte, rev int64) (int64, error)
	ListWatermarks(ctx context.Context, prefix string, fn func(key string, data []byte) error) error
}

// NewFunc returns a fresh, empty coordinator for test t whose clock is now.
// Each call must return a coordinator isolated from those of other tests.
type NewFunc func(t *testing.T, now func() time.Time) Coordinator

// ttl is the lease duration of the suite; only the manual clock moves time.
const ttl = 30 * time.Second

// Run runs the conformance suite against the coordinators newCoordinator
// returns.
func Run(t *testing.T, newCoordinator NewFunc) {
	t.Run("Lease", func(t *testing.T) { testLease(t, newCoordinator) })
	t.Run("Registry", func(t *testing.T) { testRegistry(t, newCoordinator) })
	t.Run("Skip", func(t *testing.T) { testSkip(t, newCoordinator) })
	t.Run("Files", func(t *testing.T) { testFiles(t, newCoordinator) })
	t.Run("Batches", func(t *testing.T) { testBatches(t, newCoordinator) })
	t.Run("Status", func(t *testing.T) { testStatus(t, newCoordinator) })
	t.Run("Expire", func(t *testing.T) { testExpire(t, newCoordinator) })
	t.Run("Watermarks", func(t *testing.T) { testWatermarks(t, newCoordinator) })
	t.Run("Validation", func(t *testing.T) { testValidation(t, newCoordinator) })
}

// suiteCase is one named case of a suite; it makes its own coordinator.
type suiteCase struct {
	name string
	run  func(t *testing.T, newCoordinator NewFunc)
}

// runCases runs each case as a subtest of its name.
func runCases(t *testing.T, newCoordinator NewFunc, cases []suiteCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newCoordinator) })
	}
}

// env is what one test case works with.
type env struct {
	t     *testing.T
	ctx   context.Context
	c     Coordinator
	clock *Clock
}

func newEnv(t *testing.T, newCoordinator NewFunc) *env {
	clock := NewClock()
	return &env{t: t, ctx: context.Background(), c: newCoordinator(t, clock.Now), clock: clock}
}

func (e *env) acquire(tableID, holder string) coord.Lease {
	e.t.Helper()
	l, err := e.c.Acquire(e.ctx, tableID, holder, ttl)
	if err != nil {
		e.t.Fatalf("Acquire(%s, %s): %v", tableID, holder, err)
	}
	return l
}

// file returns a record of a source file of table; n makes it distinct.
func file(tableID string, n int, size int64) coord.FileRecord {
	base := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	return coord.FileRecord{
		Table:         tableID,
		Bucket:        "source",
		Name:          fmt.Sprintf("prefix/%s/2026/02/01/00/00/file-%04d.jsonl", tableID, n),
		Generation:    int64(1000 + n),
		Size:          size,
		StagedPath:    fmt.Sprintf("_staging/%s/%04d.parquet", tableID, n),
		Events:        int64(10 * n),
		MinSourceTime: base.Add(time.Duration(n) * time.Minute),
		MaxSourceTime: base.Add(time.Duration(n)*time.Minute + 30*time.Second),
	}
}

func (e *env) register(f coord.FileRecord) coord.FileRecord {
	e.t.Helper()
	rec, created, err := e.c.RegisterFile(e.ctx, f)
	if err != nil {
		e.t.Fatalf("RegisterFile(%s): %v", f.Name, err)
	}
	if !created {
		e.t.Fatalf("RegisterFile(%s) created = false for a new file", f.Name)
	}
	return rec
}

func (e *env) file(id string) coord.FileRecord {
	e.t.Helper()
	rec, err := e.c.File(e.ctx, id)
	if err != nil {
		e.t.Fatalf("File(%s): %v", id, err)
	}
	return rec
}

// registerN registers files 1..n of table, each of size bytes.
func (e *env) registerN(tableID string, n int, size int64) []coord.FileRecord {
	e.t.Helper()
	out := make([]coord.FileRecord, n)
	for i := range n {
		out[i] = e.register(file(tableID, i+1, size))
	}
	return out
}

func (e *env) status(tableID string) coord.TableStatus {
	e.t.Helper()
	s, err := e.c.Status(e.ctx, tableID)
	if err != nil {
		e.t.Fatalf("Status(%s): %v", tableID, err)
	}
	return s
}

func (e *env) nextBatch(l coord.Lease, tableID string, lim coord.BatchLimits) coord.Batch {
	e.t.Helper()
	b, err := e.c.NextBatch(e.ctx, l, tableID, lim)
	if err != nil {
		e.t.Fatalf("NextBatch(%s): %v", tableID, err)
	}
	return b
}

func ids(files []coord.FileRecord) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.ID
	}
	return out
}

func equalIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error = %v, want %v", what, err, want)
	}
}

// leaseCases are the Lease suite's cases.
var leaseCases = []suiteCase{
	{"acquire grants a lease with a positive token that expires after the ttl", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		l := e.acquire("db.t", "a")
		if l.Table != "db.t" || l.Holder != "a" || l.Token <= 0 {
			t.Fatalf("lease = %+v, want table db.t, holder a, positive token", l)
		}
		if want := e.clock.Now().Add(ttl); !l.Expires.Equal(want) {
			t.Fatalf("expires = %s, want %s", l.Expires, want)
		}
		if err := e.c.CheckLease(e.ctx, l); err != nil {
			t.Fatalf("CheckLease of a fresh lease: %v", err)
		}
	}},
	{"a second holder gets ErrLeaseHeld while the lease is live", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.acquire("db.t", "a")
		e.clock.Advance(ttl - time.Second)
		_, err := e.c.Acquire(e.ctx, "db.t", "b", ttl)
		wantErr(t, "Acquire by b", err, coord.ErrLeaseHeld)
	}},
	{"an expired lease is taken over with a greater token and the old one is lost", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		a := e.acquire("db.t", "a")
		e.clock.Advance(ttl)
		wantErr(t, "CheckLease after expiry", e.c.CheckLease(e.ctx, a), coord.ErrLeaseLost)
		b := e.acquire("db.t", "b")
		if b.Token <= a.Token {
			t.Fatalf("takeover token %d, want > %d", b.Token, a.Token)
		}
		wantErr(t, "CheckLease of the old lease", e.c.CheckLease(e.ctx, a), coord.ErrLeaseLost)
		_, err := e.c.Renew(e.ctx, a, ttl)
		wantErr(t, "Renew of the old lease", err, coord.ErrLeaseLost)
		wantErr(t, "Release of the old lease", e.c.Release(e.ctx, a), coord.ErrLeaseLost)
		if err := e.c.CheckLease(e.ctx, b); err != nil {
			t.Fatalf("the new lease must survive the old holder's release: %v", err)
		}
	}},
	{"renew extends the expiry and keeps the token", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		l := e.acquire("db.t", "a")
		e.clock.Advance(ttl - time.Second)
		r, err := e.c.Renew(e.ctx, l, ttl)
		if err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if r.Token != l.Token || !r.Expires.Equal(e.clock.Now().Add(ttl)) {
			t.Fatalf("renewed = %+v, want token %d expiring at %s", r, l.Token, e.clock.Now().Add(ttl))
		}
		e.clock.Advance(ttl - time.Second)
		if err := e.c.CheckLease(e.ctx, r); err != nil {
			t.Fatalf("CheckLease within the renewed ttl: %v", err)
		}
		_, err = e.c.Acquire(e.ctx, "db.t", "b", ttl)
		wantErr(t, "Acquire within the renewed ttl", err, coord.ErrLeaseHeld)
	}},
	{"renew after expiry returns ErrLeaseLost even when nobody took over", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		l := e.acquire("db.t", "a")
		e.clock.Advance(ttl + time.Second)
		_, err := e.c.Renew(e.ctx, l, ttl)
		wantErr(t, "Renew", err, coord.ErrLeaseLost)
	}},
	{"release lets another holder acquire at once with a greater token", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		a := e.acquire("db.t", "a")
		if err := e.c.Release(e.ctx, a); err != nil {
			t.Fatalf("Release: %v", err)
		}
		wantErr(t, "CheckLease after release", e.c.CheckLease(e.ctx, a), coord.ErrLeaseLost)
		b := e.acquire("db.t", "b")
		if b.Token <= a.Token {
			t.Fatalf("token after release %d, want > %d", b.Token, a.Token)
		}
	}},
	{"the same holder acquiring again gets a new token and loses the old lease", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		a1 := e.acquire("db.t", "a")
		a2 := e.acquire("db.t", "a")
		if a2.Token <= a1.Token {
			t.Fatalf("second token %d, want > %d", a2.Token, a1.Token)
		}
		wantErr(t, "CheckLease of the first lease", e.c.CheckLease(e.ctx, a1), coord.ErrLeaseLost)
	}},
	{"leases of different tables are independent", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.acquire("db.t1", "a")
		e.acquire("db.t2", "b")
	}},
	{"racing takers hold the lease one at a time with strictly increasing tokens", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		const workers, rounds = 3, 3
		var holders atomic.Int32
		var mu sync.Mutex
		var tokens []int64
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := fmt.Sprintf("w%d", w)
				for won := 0; won < rounds; {
					l, err := e.c.Acquire(e.ctx, "db.race", holder, ttl)
					if errors.Is(err, coord.ErrLeaseHeld) {
						time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("Acquire by %s: %w", holder, err)
						return
					}
					if n := holders.Add(1); n != 1 {
						errs <- fmt.Errorf("%d holders at once after %s won token %d", n, holder, l.Token)
						return
					}
					mu.Lock()
					tokens = append(tokens, l.Token)
					mu.Unlock()
					if err := e.c.CheckLease(e.ctx, l); err != nil {
						errs <- fmt.Errorf("CheckLease by the winner %s: %w", holder, err)
						return
					}
					holders.Add(-1)
					if err := e.c.Release(e.ctx, l); err != nil {
						errs <- fmt.Errorf("Release by %s: %w", holder, err)
						return
					}
					won++
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(tokens) != workers*rounds {
			t.Fatalf("%d acquisitions, want %d", len(tokens), workers*rounds)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("tokens not strictly increasing in acquisition order: %v", tokens)
			}
		}
	}},
	{"concurrent acquirers of a free lease produce exactly one winner", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		const workers = 8
		cs := make([]Coordinator, workers)
		for i := range cs {
			cs[i] = e.c
		}
		won, held, err := AcquireAtOnce(e.ctx, "db.once", ttl, cs...)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if len(won) != 1 || held != workers-1 {
			t.Fatalf("%d winners and %d ErrLeaseHeld, want 1 and %d", len(won), held, workers-1)
		}
	}},
}

func testLease(t *testing.T, newCoordinator NewFunc) {
	runCases(t, newCoordinator, leaseCases)
}

// AcquireAtOnce has each of cs acquire table's lease at the same time, as
// holder "w<i>", and returns the leases won and how many got ErrLeaseHeld;
// any other error is returned.
func AcquireAtOnce(ctx context.Context, tableID string, ttl time.Duration, cs ...Coordinator) (won []coord.Lease, held int, err error) {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, tableID, fmt.Sprintf("w%d", i), ttl)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, l)
			case errors.Is(err, coord.ErrLeaseHeld):
				held++
			default:
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return won, held, errors.Join(errs...)
}

// sourceCreated is a source object's creation time, in whole seconds so
// that every backend stores it exactly.
var sourceCreated = time.Date(2026, 1, 31, 23, 59, 58, 0, time.UTC)

// registryCases are the Registry suite's cases.
var registryCases = []suiteCase{
	{"register assigns the file id, the staged state and increasing arrival numbers", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 3, 100)
		for i, r := range recs {
			f := file("db.t", i+1, 100)
			if r.ID != coord.FileID(f.Bucket, f.Name, f.Generation) || r.State != coord.StateStaged {
				t.Fatalf("record %d = %+v, want id of (bucket, name, generation) and state staged", i, r)
			}
			if r.StagedPath != f.StagedPath || r.Events != f.Events || !r.MaxSourceTime.Equal(f.MaxSourceTime) || !r.StagedAt.Equal(e.clock.Now()) {
				t.Fatalf("record %d = %+v, want the registered fields kept and StagedAt now", i, r)
			}
			if i > 0 && r.ArrivalSeq <= recs[i-1].ArrivalSeq {
				t.Fatalf("arrival %d after %d: not increasing", r.ArrivalSeq, recs[i-1].ArrivalSeq)
			}
			got, err := e.c.File(e.ctx, r.ID)
			if err != nil || got.ArrivalSeq != r.ArrivalSeq || got.State != coord.StateStaged {
				t.Fatalf("File(%s) = %+v, %v; want the registered record", r.ID, got, err)
			}
		}
	}},
	{"a re-delivered file returns the existing record and created false", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		first := e.register(file("db.t", 1, 100))
		e.clock.Advance(time.Minute)
		again := file("db.t", 1, 999) // a second staging reports other details
		rec, created, err := e.c.RegisterFile(e.ctx, again)
		if err != nil || created {
			t.Fatalf("RegisterFile again: created = %v, err = %v; want false, nil", created, err)
		}
		if rec.ArrivalSeq != first.ArrivalSeq || rec.Size != 100 || !rec.StagedAt.Equal(first.StagedAt) {
			t.Fatalf("re-delivery returned %+v, want the first record %+v", rec, first)
		}
		if s := e.status("db.t"); s.Pending != 1 {
			t.Fatalf("pending = %d after a duplicate delivery, want 1", s.Pending)
		}
	}},
	{"another generation of the same name is another file", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		f := file("db.t", 1, 100)
		a := e.register(f)
		f.Generation++
		b := e.register(f)
		if a.ID == b.ID {
			t.Fatalf("two generations share id %s", a.ID)
		}
	}},
	{"concurrent duplicate deliveries create one record and report created once", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		const workers = 8
		var created atomic.Int32
		var wg sync.WaitGroup
		recs := make([]coord.FileRecord, workers)
		errs := make([]error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ok bool
				recs[w], ok, errs[w] = e.c.RegisterFile(e.ctx, file("db.dup", 7, 100))
				if ok {
					created.Add(1)
				}
			}()
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("RegisterFile by worker %d: %v", w, err)
			}
			if recs[w].ArrivalSeq != recs[0].ArrivalSeq || recs[w].ID != recs[0].ID {
				t.Fatalf("workers saw different records: %+v and %+v", recs[0], recs[w])
			}
		}
		if created.Load() != 1 {
			t.Fatalf("created reported %d times, want once", created.Load())
		}
		all, err := e.c.ListFiles(e.ctx, "db.dup", "")
		if err != nil || len(all) != 1 {
			t.Fatalf("ListFiles = %d records, %v; want 1", len(all), err)
		}
		if s := e.status("db.dup"); s.Pending != 1 {
			t.Fatalf("pending = %d, want 1", s.Pending)
		}
	}},
	{"pending lists staged files in arrival order and honours the limit", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		// Register in an order unlike the names' order.
		var want []string
		for _, n := range []int{5, 2, 9, 1} {
			want = append(want, e.register(file("db.t", n, 10)).ID)
		}
		e.register(file("db.other", 3, 10))
		got, err := e.c.Pending(e.ctx, "db.t", 0)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		if !equalIDs(ids(got), want) {
			t.Fatalf("pending = %v, want arrival order %v", ids(got), want)
		}
		got, err = e.c.Pending(e.ctx, "db.t", 2)
		if err != nil || !equalIDs(ids(got), want[:2]) {
			t.Fatalf("Pending(limit 2) = %v, %v; want %v", ids(got), err, want[:2])
		}
	}},
	{"quarantine records a new bad file with its reason and counts it", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		bad := file("db.t", 1, 10)
		bad.Record = "record 17"
		rec, err := e.c.Quarantine(e.ctx, bad, "invalid JSON")
		if err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		if rec.State != coord.StateQuarantined || rec.Reason != "invalid JSON" || rec.Record != "record 17" || rec.ID != coord.FileID(bad.Bucket, bad.Name, bad.Generation) {
			t.Fatalf("quarantined record = %+v", rec)
		}
		// Quarantining again (a re-delivery of the bad file) counts once.
		if _, err := e.c.Quarantine(e.ctx, bad, "invalid JSON"); err != nil {
			t.Fatalf("Quarantine again: %v", err)
		}
		if s := e.status("db.t"); s.Quarantined != 1 || s.Pending != 0 {
			t.Fatalf("status = %d quarantined, %d pending; want 1, 0", s.Quarantined, s.Pending)
		}
		got, err := e.c.ListFiles(e.ctx, "db.t", coord.StateQuarantined)
		if err != nil || len(got) != 1 || got[0].Reason != "invalid JSON" {
			t.Fatalf("ListFiles(quarantined) = %+v, %v", got, err)
		}
	}},
	{"quarantining a staged file takes it out of pending", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 2, 10)
		if _, err := e.c.Quarantine(e.ctx, recs[0], "type change"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		got, err := e.c.Pending(e.ctx, "db.t", 0)
		if err != nil || !equalIDs(ids(got), ids(recs[1:])) {
			t.Fatalf("Pending = %v, %v; want %v", ids(got), err, ids(recs[1:]))
		}
		if s := e.status("db.t"); s.Quarantined != 1 || s.Pending != 1 {
			t.Fatalf("status = %d quarantined, %d pending; want 1, 1", s.Quarantined, s.Pending)
		}
	}},
	{"registering a quarantined file stages it again with a new arrival number", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		first := e.register(file("db.t", 1, 10))
		q, err := e.c.Quarantine(e.ctx, first, "bad")
		if err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		rec, created, err := e.c.RegisterFile(e.ctx, file("db.t", 1, 10))
		if err != nil || !created {
			t.Fatalf("RegisterFile of a quarantined file: created = %v, err = %v; want true", created, err)
		}
		if rec.State != coord.StateStaged || rec.Reason != "" || rec.ArrivalSeq <= q.ArrivalSeq {
			t.Fatalf("replayed record = %+v, want staged, no reason, arrival > %d", rec, q.ArrivalSeq)
		}
		if s := e.status("db.t"); s.Quarantined != 0 || s.Pending != 1 {
			t.Fatalf("status = %d quarantined, %d pending; want 0, 1", s.Quarantined, s.Pending)
		}
	}},
	{"the source bytes of a file are kept by register, file and batches", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		f := file("db.t", 1, 100)
		f.SourceBytes = 26 << 20
		rec := e.register(f)
		if rec.SourceBytes != f.SourceBytes || rec.Size != f.Size {
			t.Fatalf("registered record has %d source bytes and size %d, want %d and %d", rec.SourceBytes, rec.Size, f.SourceBytes, f.Size)
		}
		got, err := e.c.File(e.ctx, rec.ID)
		if err != nil || got.SourceBytes != f.SourceBytes {
			t.Fatalf("File(%s) = %d source bytes, %v; want %d", rec.ID, got.SourceBytes, err, f.SourceBytes)
		}
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{})
		if len(b.Files) != 1 || b.Files[0].SourceBytes != f.SourceBytes {
			t.Fatalf("batch files = %+v, want the file with %d source bytes", b.Files, f.SourceBytes)
		}
		// A resumed batch reads its files back from the store.
		again := e.nextBatch(l, "db.t", coord.BatchLimits{})
		if len(again.Files) != 1 || again.Files[0].SourceBytes != f.SourceBytes {
			t.Fatalf("resumed batch files = %+v, want the file with %d source bytes", again.Files, f.SourceBytes)
		}
	}},
	{"file returns ErrNotFound for an unknown id", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		_, err := e.c.File(e.ctx, coord.FileID("b", "missing", 1))
		wantErr(t, "File", err, coord.ErrNotFound)
	}},
	{"list files filters by state and keeps arrival order", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 3, 10)
		if _, err := e.c.Quarantine(e.ctx, recs[1], "bad"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		for _, tc := range []struct {
			state coord.FileState
			want  []string
		}{
			{"", ids(recs)},
			{coord.StateStaged, []string{recs[0].ID, recs[2].ID}},
			{coord.StateQuarantined, []string{recs[1].ID}},
			{coord.StateMerged, nil},
		} {
			got, err := e.c.ListFiles(e.ctx, "db.t", tc.state)
			if err != nil || !equalIDs(ids(got), tc.want) {
				t.Fatalf("ListFiles(%q) = %v, %v; want %v", tc.state, ids(got), err, tc.want)
			}
		}
	}},
	{"register, quarantine and skip keep the source creation time they are given", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		for i, tc := range []struct {
			name string
			call func(coord.FileRecord) (coord.FileRecord, error)
		}{
			{"RegisterFile", func(f coord.FileRecord) (coord.FileRecord, error) {
				rec, _, err := e.c.RegisterFile(e.ctx, f)
				return rec, err
			}},
			{"Quarantine", func(f coord.FileRecord) (coord.FileRecord, error) { return e.c.Quarantine(e.ctx, f, "bad") }},
			{"Skip", func(f coord.FileRecord) (coord.FileRecord, error) { return e.c.Skip(e.ctx, f, "no events") }},
		} {
			f := file("db.t", i+1, 10)
			f.SourceCreated = sourceCreated.Add(time.Duration(i) * time.Second)
			rec, err := tc.call(f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if stored := e.file(rec.ID).SourceCreated; !rec.SourceCreated.Equal(f.SourceCreated) || !stored.Equal(f.SourceCreated) {
				t.Fatalf("%s: source created %s, stored %s; want %s", tc.name, rec.SourceCreated, stored, f.SourceCreated)
			}
		}
		rec := e.register(file("db.t", 9, 10))
		if !rec.SourceCreated.IsZero() || !e.file(rec.ID).SourceCreated.IsZero() {
			t.Fatalf("source created = %s for a file registered without it, want zero", rec.SourceCreated)
		}
	}},
}

func testRegistry(t *testing.T, newCoordinator NewFunc) {
	runCases(t, newCoordinator, registryCases)
}

// batchCases are the Batches suite's cases.
var batchCases = []suiteCase{
	{"next batch takes pending files in arrival order up to the file limit", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 5, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 3})
		if b.Table != "db.t" || b.Seq != 1 || !equalIDs(ids(b.Files), ids(recs[:3])) {
			t.Fatalf("batch = seq %d files %v, want seq 1 files %v", b.Seq, ids(b.Files), ids(recs[:3]))
		}
		for _, f := range b.Files {
			if f.State != coord.StateBatched || f.BatchSeq != 1 {
				t.Fatalf("batch file %+v, want state batched in batch 1", f)
			}
		}
		if got, err := e.c.Pending(e.ctx, "db.t", 0); err != nil || !equalIDs(ids(got), ids(recs[3:])) {
			t.Fatalf("Pending after the batch = %v, %v; want %v", ids(got), err, ids(recs[3:]))
		}
		s := e.status("db.t")
		if s.Pending != 2 || s.OpenBatchSeq != 1 || s.LastBatchSeq != 1 {
			t.Fatalf("status = %+v, want 2 pending, open batch 1", s)
		}
	}},
	{"next batch stops before the byte limit but always takes one file", func(t *testing.T, newCoordinator NewFunc) {
		for _, tc := range []struct {
			name     string
			sizes    []int64
			maxBytes int64
			want     int
		}{
			{"files up to the limit are taken", []int64{40, 40, 40}, 80, 2},
			{"a file that would pass the limit is left", []int64{40, 50, 10}, 80, 1},
			{"a first file larger than the limit is taken alone", []int64{500, 10}, 80, 1},
			{"no byte limit takes every file", []int64{500, 500, 500}, 0, 3},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, newCoordinator)
				for i, size := range tc.sizes {
					e.register(file("db.t", i+1, size))
				}
				b := e.nextBatch(e.acquire("db.t", "m"), "db.t", coord.BatchLimits{Files: 10, Bytes: tc.maxBytes})
				if len(b.Files) != tc.want {
					t.Fatalf("batch of %d files (%d bytes), want %d", len(b.Files), b.Bytes(), tc.want)
				}
			})
		}
	}},
	{"next batch stops before the event and source-byte limits but always takes one file", func(t *testing.T, newCoordinator NewFunc) {
		type sizes struct{ bytes, events, source int64 }
		for _, tc := range []struct {
			name  string
			files []sizes
			lim   coord.BatchLimits
			want  int
		}{
			{"files up to the event limit are taken", []sizes{{1, 40, 1}, {1, 40, 1}, {1, 40, 1}}, coord.BatchLimits{Events: 80}, 2},
			{"a file that would pass the event limit is left", []sizes{{1, 40, 1}, {1, 50, 1}, {1, 10, 1}}, coord.BatchLimits{Events: 80}, 1},
			{"a first file with more events than the limit is taken alone", []sizes{{1, 500, 1}, {1, 10, 1}}, coord.BatchLimits{Events: 80}, 1},
			{"files up to the source-byte limit are taken", []sizes{{1, 1, 40}, {1, 1, 40}, {1, 1, 40}}, coord.BatchLimits{SourceBytes: 80}, 2},
			{"a file that would pass the source-byte limit is left", []sizes{{1, 1, 40}, {1, 1, 50}, {1, 1, 10}}, coord.BatchLimits{SourceBytes: 80}, 1},
			{"a first file larger than the source-byte limit is taken alone", []sizes{{1, 1, 500}, {1, 1, 10}}, coord.BatchLimits{SourceBytes: 80}, 1},
			{"the tightest of several limits decides", []sizes{{10, 10, 10}, {10, 10, 10}, {10, 10, 10}, {10, 10, 10}}, coord.BatchLimits{Files: 4, Bytes: 40, Events: 30, SourceBytes: 20}, 2},
			{"no limits take every file", []sizes{{500, 500, 500}, {500, 500, 500}, {500, 500, 500}}, coord.BatchLimits{}, 3},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, newCoordinator)
				for i, sz := range tc.files {
					f := file("db.t", i+1, sz.bytes)
					f.Events, f.SourceBytes = sz.events, sz.source
					e.register(f)
				}
				b := e.nextBatch(e.acquire("db.t", "m"), "db.t", tc.lim)
				if len(b.Files) != tc.want {
					t.Fatalf("batch of %d files, want %d", len(b.Files), tc.want)
				}
				for i, f := range b.Files {
					if f.Events != tc.files[i].events || f.SourceBytes != tc.files[i].source {
						t.Fatalf("batch file %d has %d events and %d source bytes, want %d and %d",
							i, f.Events, f.SourceBytes, tc.files[i].events, tc.files[i].source)
					}
				}
			})
		}
	}},
	{"next batch without pending files returns ErrNoWork", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		l := e.acquire("db.t", "m")
		_, err := e.c.NextBatch(e.ctx, l, "db.t", coord.BatchLimits{Files: 10})
		wantErr(t, "NextBatch of an unknown table", err, coord.ErrNoWork)
		rec := e.register(file("db.t", 1, 10))
		if _, err := e.c.Quarantine(e.ctx, rec, "bad"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		_, err = e.c.NextBatch(e.ctx, l, "db.t", coord.BatchLimits{Files: 10})
		wantErr(t, "NextBatch with only a quarantined file", err, coord.ErrNoWork)
	}},
	{"next batch before completion returns the same open batch", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 3, 10)
		l := e.acquire("db.t", "m")
		first := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 2})
		e.register(file("db.t", 50, 10)) // arrives while the merge runs
		e.clock.Advance(ttl + time.Second)
		// The merge crashed; a new holder resumes with the same seq and files.
		l2 := e.acquire("db.t", "m2")
		again := e.nextBatch(l2, "db.t", coord.BatchLimits{Files: 10})
		if again.Seq != first.Seq || !equalIDs(ids(again.Files), ids(first.Files)) || !again.Created.Equal(first.Created) {
			t.Fatalf("resumed batch = seq %d files %v, want seq %d files %v", again.Seq, ids(again.Files), first.Seq, ids(first.Files))
		}
	}},
	{"complete batch marks files merged, closes the batch and updates the status", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 3, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 2})
		e.clock.Advance(time.Second)
		stats := coord.BatchStats{StateVersion: 4, HistoryVersion: 5, Events: 30, Inserted: 20, Updated: 5, Deleted: 3, Stale: 2}
		if err := e.c.CompleteBatch(e.ctx, l, b, stats); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		for _, id := range ids(b.Files) {
			f, err := e.c.File(e.ctx, id)
			if err != nil || f.State != coord.StateMerged || !f.DoneAt.Equal(e.clock.Now()) || !f.ExpireAt.After(f.DoneAt) {
				t.Fatalf("File(%s) = %+v, %v; want merged now with a later ExpireAt", id, f, err)
			}
		}
		s := e.status("db.t")
		want := coord.TableStatus{
			Table: "db.t", LastSourceTime: recs[1].MaxSourceTime, LastCommitTime: e.clock.Now(),
			Pending: 1, StateVersion: 4, HistoryVersion: 5, LastBatchSeq: 1, LastArrivalSeq: s.LastArrivalSeq,
			Batches: 1, Files: 2, Events: recs[0].Events + recs[1].Events, Inserted: 20, Updated: 5, Deleted: 3, Stale: 2,
			LeaseHolder: "m", LeaseExpires: l.Expires,
		}
		if !equalStatus(s, want) {
			t.Fatalf("status = %+v\nwant     %+v", s, want)
		}
		merged, err := e.c.ListFiles(e.ctx, "db.t", coord.StateMerged)
		if err != nil || !equalIDs(ids(merged), ids(recs[:2])) {
			t.Fatalf("ListFiles(merged) = %v, %v; want %v", ids(merged), err, ids(recs[:2]))
		}
		next := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 10})
		if next.Seq != 2 || !equalIDs(ids(next.Files), ids(recs[2:])) {
			t.Fatalf("next batch = seq %d files %v, want seq 2 files %v", next.Seq, ids(next.Files), ids(recs[2:]))
		}
	}},
	{"a batch handed out again is marked resumed, a new one is not", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 2, 10)
		l := e.acquire("db.t", "m")
		first := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 1})
		again := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 1})
		if first.Resumed || !again.Resumed || again.Seq != first.Seq {
			t.Fatalf("resumed: first %v (seq %d), again %v (seq %d); want false, then true for the same batch", first.Resumed, first.Seq, again.Resumed, again.Seq)
		}
		if err := e.c.CompleteBatch(e.ctx, l, again, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		if next := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 1}); next.Resumed || next.Seq != first.Seq+1 {
			t.Fatalf("next batch: seq %d resumed %v; want seq %d, not resumed", next.Seq, next.Resumed, first.Seq+1)
		}
	}},
	{"a file's way through a batch is counted as Firestore bills it, not as storage operations", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		var c *opcount.Counter
		e.ctx, c = opcount.Start(e.ctx)
		e.registerN("db.t", 1, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 1})
		if err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		// Registering, leasing, forming and completing each read and
		// write a document at least: four of each.
		got := c.Counts()
		if got.GCSClassA != 0 || got.GCSClassB != 0 || got.FirestoreReads < 4 || got.FirestoreWrites < 4 {
			t.Fatalf("counts = %+v, want no storage operations and at least 4 document reads and writes", got)
		}
	}},
	{"completing a batch twice is a no-op", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 1, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 10})
		stats := coord.BatchStats{StateVersion: 1, HistoryVersion: 1, Inserted: 7}
		for i := range 2 {
			if err := e.c.CompleteBatch(e.ctx, l, b, stats); err != nil {
				t.Fatalf("CompleteBatch #%d: %v", i+1, err)
			}
		}
		if s := e.status("db.t"); s.Batches != 1 || s.Inserted != 7 || s.Files != 1 {
			t.Fatalf("status after a repeated completion = %+v, want 1 batch, 7 inserted, 1 file", s)
		}
	}},
	{"completing a batch that was never handed out returns ErrNotFound", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 1, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 10})
		b.Seq = 9
		err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{})
		wantErr(t, "CompleteBatch of seq 9", err, coord.ErrNotFound)
	}},
	{"sequence numbers increase by one per batch", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 5, 10)
		l := e.acquire("db.t", "m")
		var seqs []int64
		for {
			b, err := e.c.NextBatch(e.ctx, l, "db.t", coord.BatchLimits{Files: 2})
			if errors.Is(err, coord.ErrNoWork) {
				break
			}
			if err != nil {
				t.Fatalf("NextBatch: %v", err)
			}
			seqs = append(seqs, b.Seq)
			if err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{}); err != nil {
				t.Fatalf("CompleteBatch: %v", err)
			}
		}
		if fmt.Sprint(seqs) != "[1 2 3]" {
			t.Fatalf("seqs = %v, want [1 2 3]", seqs)
		}
		if s := e.status("db.t"); s.Pending != 0 || s.Files != 5 || s.LastBatchSeq != 3 || s.OpenBatchSeq != 0 {
			t.Fatalf("status = %+v, want 0 pending, 5 files merged, last batch 3 and none open", s)
		}
	}},
	{"a file quarantined in an open batch stays in it, quarantined, and is not merged", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 2, 10)
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 10})
		if _, err := e.c.Quarantine(e.ctx, b.Files[0], "type change of column x"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		again := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 10})
		if again.Seq != b.Seq || !equalIDs(ids(again.Files), ids(recs)) || again.Files[0].State != coord.StateQuarantined {
			t.Fatalf("resumed batch = %+v, want the same files with the first quarantined", again)
		}
		if err := e.c.CompleteBatch(e.ctx, l, again, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		f0, err0 := e.c.File(e.ctx, recs[0].ID)
		f1, err1 := e.c.File(e.ctx, recs[1].ID)
		if err0 != nil || err1 != nil || f0.State != coord.StateQuarantined || f1.State != coord.StateMerged {
			t.Fatalf("states = %s (%v), %s (%v); want quarantined, merged", f0.State, err0, f1.State, err1)
		}
		if s := e.status("db.t"); s.Quarantined != 1 || s.Files != 1 || s.LastSourceTime != recs[1].MaxSourceTime {
			t.Fatalf("status = %+v, want 1 quarantined, 1 file merged, source time of the merged file", s)
		}
		_, err := e.c.Quarantine(e.ctx, f1, "too late")
		wantErr(t, "Quarantine of a merged file", err, coord.ErrInvalidState)
	}},
	{"a holder whose lease expired mid-work gets ErrLeaseLost and changes nothing", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 4, 10)
		l := e.acquire("db.t", "slow")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 2})
		e.clock.Advance(ttl)
		_, err := e.c.Renew(e.ctx, l, ttl)
		wantErr(t, "Renew", err, coord.ErrLeaseLost)
		_, err = e.c.NextBatch(e.ctx, l, "db.t", coord.BatchLimits{Files: 2})
		wantErr(t, "NextBatch", err, coord.ErrLeaseLost)
		err = e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{StateVersion: 9})
		wantErr(t, "CompleteBatch", err, coord.ErrLeaseLost)
		if s := e.status("db.t"); s.OpenBatchSeq != b.Seq || s.Batches != 0 || s.StateVersion != 0 {
			t.Fatalf("status after the stale holder = %+v, want batch %d still open", s, b.Seq)
		}
		// The new holder resumes the batch, and the stale one stays fenced out.
		l2 := e.acquire("db.t", "fresh")
		b2 := e.nextBatch(l2, "db.t", coord.BatchLimits{Files: 2})
		if b2.Seq != b.Seq || !equalIDs(ids(b2.Files), ids(b.Files)) {
			t.Fatalf("new holder got seq %d files %v, want the open batch %d %v", b2.Seq, ids(b2.Files), b.Seq, ids(b.Files))
		}
		err = e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{})
		wantErr(t, "CompleteBatch by the stale holder after takeover", err, coord.ErrLeaseLost)
		if err := e.c.CompleteBatch(e.ctx, l2, b2, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch by the new holder: %v", err)
		}
	}},
	{"a lease of another table does not allow batches", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 1, 10)
		other := e.acquire("db.other", "m")
		_, err := e.c.NextBatch(e.ctx, other, "db.t", coord.BatchLimits{Files: 2})
		wantErr(t, "NextBatch", err, coord.ErrLeaseLost)
	}},
	{"batches of different tables are numbered independently", func(t *testing.T, newCoordinator NewFunc) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.a", 1, 10)
		e.registerN("db.b", 1, 10)
		ba := e.nextBatch(e.acquire("db.a", "m"), "db.a", coord.BatchLimits{Files: 10})
		bb := e.nextBatch(e.acquire("db.b", "m"), "db.b", coord.BatchLimits{Files: 10})
		if ba.Seq != 1 || bb.Seq != 1 || ba.Files[0].Table != "db.a" || bb.Files[0].Table != "db.b" {
			t.Fatalf("batches = %+v and %+v, want seq 1 each with their own table's file", ba, bb)
		}
	}},
}

func testBatches(t *testing.T, newCoordinator NewFunc) {
	runCases(t, newCoordinator, batchCases)
}

// equalStatus compares statuses with time.Time.Equal, since backends may
// return times in another location, and ignores LeaseProcess, which only
// some backends record.
func equalStatus(a, b coord.TableStatus) bool {
	if !a.LastSourceTime.Equal(b.LastSourceTime) || !a.LastCommitTime.Equal(b.LastCommitTime) || !a.LeaseExpires.Equal(b.LeaseExpires) {
		return false
	}
	a.LastSourceTime, a.LastCommitTime, a.LeaseExpires, a.LeaseProcess = b.LastSourceTime, b.LastCommitTime, b.LeaseExpires, b.LeaseProcess
	return a == b
}

func testStatus(t *testing.T, newCoordinator NewFunc) {
	t.Run("status of an unknown table returns ErrNotFound", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		_, err := e.c.Status(e.ctx, "db.none")
		wantErr(t, "Status", err, coord.ErrNotFound)
	})
	t.Run("tables lists every table with files, with its counts", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.b", 2, 10)
		bad := file("db.a", 1, 10)
		if _, err := e.c.Quarantine(e.ctx, bad, "bad"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		e.acquire("db.lease-only", "m")
		got, err := e.c.Statuses(e.ctx)
		if err != nil {
			t.Fatalf("Statuses: %v", err)
		}
		if len(got) != 2 || got[0].Table != "db.a" || got[1].Table != "db.b" {
			t.Fatalf("Statuses = %+v, want db.a and db.b", got)
		}
		if got[0].Quarantined != 1 || got[0].Pending != 0 || got[1].Pending != 2 || got[1].Quarantined != 0 {
			t.Fatalf("counts = a:%d/%d b:%d/%d (pending/quarantined), want a:0/1 b:2/0",
				got[0].Pending, got[0].Quarantined, got[1].Pending, got[1].Quarantined)
		}
	})
	t.Run("status reports a live lease and forgets it once expired", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		e.registerN("db.t", 1, 10)
		l := e.acquire("db.t", "m")
		if s := e.status("db.t"); s.LeaseHolder != "m" || !s.LeaseExpires.Equal(l.Expires) {
			t.Fatalf("status lease = %q until %s, want m until %s", s.LeaseHolder, s.LeaseExpires, l.Expires)
		}
		e.clock.Advance(ttl)
		if s := e.status("db.t"); s.LeaseHolder != "" {
			t.Fatalf("status lease = %q after expiry, want none", s.LeaseHolder)
		}
	})
}

func testExpire(t *testing.T, newCoordinator NewFunc) {
	t.Run("expire deletes old merged files and done batches but keeps the latest batch and live records", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		recs := e.registerN("db.t", 4, 10)
		l := e.acquire("db.t", "m")
		for range 2 { // batches 1 and 2, one file each
			b := e.nextBatch(l, "db.t", coord.BatchLimits{Files: 1})
			if err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{}); err != nil {
				t.Fatalf("CompleteBatch: %v", err)
			}
		}
		if _, err := e.c.Quarantine(e.ctx, recs[2], "bad"); err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		e.clock.Advance(time.Hour)
		cutoff := e.clock.Now()
		if n, err := e.c.Expire(e.ctx, cutoff.Add(-2*time.Hour)); err != nil || n != 0 {
			t.Fatalf("Expire before everything = %d, %v; want 0", n, err)
		}
		n, err := e.c.Expire(e.ctx, cutoff)
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		if n != 3 { // two merged files and batch 1
			t.Fatalf("Expire deleted %d records, want 3 (two merged files, batch 1)", n)
		}
		for _, r := range recs[:2] {
			_, err := e.c.File(e.ctx, r.ID)
			wantErr(t, "File of an expired record", err, coord.ErrNotFound)
		}
		for i, want := range []coord.FileState{coord.StateQuarantined, coord.StateStaged} {
			f, err := e.c.File(e.ctx, recs[2+i].ID)
			if err != nil || f.State != want {
				t.Fatalf("File(%d) = %s, %v; want %s kept", 2+i, f.State, err, want)
			}
		}
		b := e.nextBatch(e.acquire("db.t", "m"), "db.t", coord.BatchLimits{Files: 10})
		if b.Seq != 3 {
			t.Fatalf("batch after expiry has seq %d, want 3", b.Seq)
		}
		if s := e.status("db.t"); s.Quarantined != 1 || s.Batches != 2 {
			t.Fatalf("status after expiry = %+v, want counters kept", s)
		}
	})
}

func testValidation(t *testing.T, newCoordinator NewFunc) {
	e := newEnv(t, newCoordinator)
	noTable := file("db.t", 1, 10)
	noTable.Table = ""
	noName := file("db.t", 1, 10)
	noName.Name = ""
	slash := file("db.t", 1, 10)
	slash.Table = "db/t"
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"acquire rejects an empty holder", func() error {
			_, err := e.c.Acquire(e.ctx, "db.t", "", ttl)
			return err
		}},
		{"acquire rejects a ttl that is not positive", func() error {
			_, err := e.c.Acquire(e.ctx, "db.t", "a", 0)
			return err
		}},
		{"acquire rejects a table id with a slash", func() error {
			_, err := e.c.Acquire(e.ctx, "db/t", "a", ttl)
			return err
		}},
		{"register rejects a file without a table", func() error {
			_, _, err := e.c.RegisterFile(e.ctx, noTable)
			return err
		}},
		{"register rejects a file without a name", func() error {
			_, _, err := e.c.RegisterFile(e.ctx, noName)
			return err
		}},
		{"quarantine rejects a table id with a slash", func() error {
			_, err := e.c.Quarantine(e.ctx, slash, "bad")
			return err
		}},
		{"file rejects an id with a slash", func() error {
			_, err := e.c.File(e.ctx, "a/b")
			return err
		}},
		{"skip rejects a file without a name", func() error {
			_, err := e.c.Skip(e.ctx, noName, "no events")
			return err
		}},
		{"skip rejects a table id with a slash", func() error {
			_, err := e.c.Skip(e.ctx, slash, "no events")
			return err
		}},
		{"files rejects an id with a slash among valid ones", func() error {
			_, err := e.c.Files(e.ctx, []string{coord.FileID("b", "n", 1), "a/b"})
			return err
		}},
		{"files rejects an empty id", func() error {
			_, err := e.c.Files(e.ctx, []string{""})
			return err
		}},
		{"put watermark rejects an empty key", func() error {
			_, err := e.c.PutWatermark(e.ctx, "", []byte("x"), 0)
			return err
		}},
		{"put watermark rejects a key longer than the limit", func() error {
			_, err := e.c.PutWatermark(e.ctx, strings.Repeat("k", coord.MaxWatermarkKeyBytes+1), []byte("x"), 0)
			return err
		}},
		{"put watermark rejects a negative revision", func() error {
			_, err := e.c.PutWatermark(e.ctx, "gs://b/p", []byte("x"), -1)
			return err
		}},
		{"watermark rejects a key that is not UTF-8", func() error {
			_, _, err := e.c.Watermark(e.ctx, "gs://b/\xff")
			return err
		}},
		{"next batch rejects a lease of a malformed table", func() error {
			_, err := e.c.NextBatch(e.ctx, coord.Lease{Table: "a/b", Holder: "h", Token: 1}, "a/b", coord.BatchLimits{Files: 1})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil {
				t.Fatal("error = nil, want a validation error")
			}
		})
	}
}
