package coordtest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// unknownTable is the table of a file whose table staging could not tell.
const unknownTable = "_unknown._unknown"

func (e *env) skip(f coord.FileRecord, reason string) coord.FileRecord {
	e.t.Helper()
	rec, err := e.c.Skip(e.ctx, f, reason)
	if err != nil {
		e.t.Fatalf("Skip(%s): %v", f.Name, err)
	}
	return rec
}

// sameRecord reports whether two records are the same stored record,
// comparing times with Equal since backends may return another location.
func sameRecord(a, b coord.FileRecord) bool {
	times := [][2]time.Time{
		{a.MinSourceTime, b.MinSourceTime}, {a.MaxSourceTime, b.MaxSourceTime}, {a.SourceCreated, b.SourceCreated},
		{a.StagedAt, b.StagedAt}, {a.DoneAt, b.DoneAt}, {a.ExpireAt, b.ExpireAt},
	}
	for _, p := range times {
		if !p[0].Equal(p[1]) {
			return false
		}
	}
	a.MinSourceTime, a.MaxSourceTime, a.SourceCreated = b.MinSourceTime, b.MaxSourceTime, b.SourceCreated
	a.StagedAt, a.DoneAt, a.ExpireAt = b.StagedAt, b.DoneAt, b.ExpireAt
	return a == b
}

func testSkip(t *testing.T, newCoordinator NewFunc) {
	t.Run("skip records a skipped file that is neither pending nor quarantined nor counted", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		staged := e.register(file("db.t", 1, 10))
		f := file("db.t", 2, 0)
		f.StagedPath, f.Events, f.SourceBytes, f.SourceCreated = "", 0, 4096, sourceCreated
		rec := e.skip(f, "file holds no events")
		if rec.ID != coord.FileID(f.Bucket, f.Name, f.Generation) || rec.State != coord.StateSkipped || rec.Reason != "file holds no events" ||
			rec.Table != "db.t" || rec.SourceBytes != 4096 || !rec.SourceCreated.Equal(sourceCreated) {
			t.Fatalf("skipped record = %+v, want the file's id and fields, state skipped and the reason", rec)
		}
		if !rec.DoneAt.Equal(e.clock.Now()) || !rec.ExpireAt.After(rec.DoneAt) || rec.BatchSeq != 0 {
			t.Fatalf("skipped record done at %s expiring at %s in batch %d, want done now, expiring later, no batch", rec.DoneAt, rec.ExpireAt, rec.BatchSeq)
		}
		if got := e.file(rec.ID); !sameRecord(got, rec) {
			t.Fatalf("File(%s) = %+v\nwant the skipped record %+v", rec.ID, got, rec)
		}
		if got, err := e.c.Pending(e.ctx, "db.t", 0); err != nil || !equalIDs(ids(got), []string{staged.ID}) {
			t.Fatalf("Pending = %v, %v; want only the staged file %s", ids(got), err, staged.ID)
		}
		if s := e.status("db.t"); s.Pending != 1 || s.Quarantined != 0 {
			t.Fatalf("status = %d pending, %d quarantined; want 1, 0", s.Pending, s.Quarantined)
		}
		for _, tc := range []struct {
			state coord.FileState
			want  []string
		}{
			{coord.StateSkipped, []string{rec.ID}},
			{coord.StateQuarantined, nil},
			{coord.StateStaged, []string{staged.ID}},
		} {
			got, err := e.c.ListFiles(e.ctx, "db.t", tc.state)
			if err != nil || !equalIDs(ids(got), tc.want) {
				t.Fatalf("ListFiles(%s) = %v, %v; want %v", tc.state, ids(got), err, tc.want)
			}
		}
		if all, err := e.c.ListFiles(e.ctx, "db.t", ""); err != nil || len(all) != 2 {
			t.Fatalf("ListFiles of every state = %v, %v; want the staged and the skipped file", ids(all), err)
		}
	})
	t.Run("a skipped file is never in a batch", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		skipped := e.skip(file("db.t", 1, 10), "table db.t is excluded by configuration")
		staged := e.register(file("db.t", 2, 10))
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{})
		if !equalIDs(ids(b.Files), []string{staged.ID}) {
			t.Fatalf("batch files = %v, want only the staged file %s", ids(b.Files), staged.ID)
		}
		if err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		_, err := e.c.NextBatch(e.ctx, l, "db.t", coord.BatchLimits{})
		wantErr(t, "NextBatch with only a skipped file left", err, coord.ErrNoWork)
		if got := e.file(skipped.ID); got.State != coord.StateSkipped || got.BatchSeq != 0 {
			t.Fatalf("skipped file after the batch = %s in batch %d, want skipped in none", got.State, got.BatchSeq)
		}
		if s := e.status("db.t"); s.Files != 1 || s.Pending != 0 {
			t.Fatalf("status = %d files merged, %d pending; want 1, 0", s.Files, s.Pending)
		}
	})
	t.Run("a table with only skipped files, such as the unknown table, has no status", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		rec := e.skip(file(unknownTable, 1, 10), "table unknown")
		e.skip(file("db.excluded", 1, 10), "table db.excluded is excluded by configuration")
		for _, table := range []string{unknownTable, "db.excluded"} {
			_, err := e.c.Status(e.ctx, table)
			wantErr(t, "Status of "+table, err, coord.ErrNotFound)
		}
		if got, err := e.c.Statuses(e.ctx); err != nil || len(got) != 0 {
			t.Fatalf("Statuses = %+v, %v; want none", got, err)
		}
		if got := e.file(rec.ID); got.Table != unknownTable || got.State != coord.StateSkipped {
			t.Fatalf("File(%s) = %+v, want skipped in %s", rec.ID, got, unknownTable)
		}
		if got, err := e.c.ListFiles(e.ctx, unknownTable, coord.StateSkipped); err != nil || !equalIDs(ids(got), []string{rec.ID}) {
			t.Fatalf("ListFiles(%s, skipped) = %v, %v; want %s", unknownTable, ids(got), err, rec.ID)
		}
	})
	t.Run("skip is idempotent and returns a record in any state unchanged", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		l := e.acquire("db.t", "m")
		merged := e.register(file("db.t", 4, 10))
		if err := e.c.CompleteBatch(e.ctx, l, e.nextBatch(l, "db.t", coord.BatchLimits{}), coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		e.register(file("db.t", 5, 10))
		batched := e.nextBatch(l, "db.t", coord.BatchLimits{}).Files[0]
		staged := e.register(file("db.t", 2, 10))
		quarantined, err := e.c.Quarantine(e.ctx, file("db.t", 3, 10), "bad")
		if err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		skipped := e.skip(file("db.t", 1, 10), "no events")
		e.clock.Advance(time.Hour)
		for _, tc := range []struct {
			name string
			n    int
			want coord.FileRecord
		}{
			{"skipped", 1, skipped},
			{"staged", 2, staged},
			{"quarantined", 3, quarantined},
			{"merged", 4, e.file(merged.ID)},
			{"batched", 5, batched},
		} {
			before := e.file(tc.want.ID)
			got := e.skip(file("db.t", tc.n, 999), "other reason")
			if !sameRecord(got, before) || !sameRecord(e.file(tc.want.ID), before) || got.State != coord.FileState(tc.name) {
				t.Fatalf("Skip of a %s file returned %+v, stored %+v\nwant it unchanged: %+v", tc.name, got, e.file(tc.want.ID), before)
			}
		}
		if s := e.status("db.t"); s.Pending != 1 || s.Quarantined != 1 || s.OpenBatchSeq != 2 {
			t.Fatalf("status = %+v, want 1 pending, 1 quarantined, batch 2 open", s)
		}
	})
	t.Run("concurrent skips of one file record it once", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		const workers = 8
		var wg sync.WaitGroup
		recs := make([]coord.FileRecord, workers)
		errs := make([]error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs[w], errs[w] = e.c.Skip(e.ctx, file("db.t", 1, 10), fmt.Sprintf("no events, says worker %d", w))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Skip: %v", err)
		}
		for w := range workers {
			if !sameRecord(recs[w], recs[0]) {
				t.Fatalf("workers saw different records: %+v and %+v", recs[0], recs[w])
			}
		}
		if got := e.file(recs[0].ID); !sameRecord(got, recs[0]) {
			t.Fatalf("stored record = %+v, want the one every worker saw: %+v", got, recs[0])
		}
		if all, err := e.c.ListFiles(e.ctx, "db.t", ""); err != nil || len(all) != 1 {
			t.Fatalf("ListFiles = %v, %v; want one record", ids(all), err)
		}
	})
	testSkipLifecycle(t, newCoordinator)
}

// testSkipLifecycle checks what becomes of a skipped record: it expires, or
// its file is staged or quarantined again.
func testSkipLifecycle(t *testing.T, newCoordinator NewFunc) {
	t.Run("a skipped file expires after the retention with the same cutoff as a merged file", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		staged := e.register(file("db.t", 1, 10))
		l := e.acquire("db.t", "m")
		b := e.nextBatch(l, "db.t", coord.BatchLimits{})
		if err := e.c.CompleteBatch(e.ctx, l, b, coord.BatchStats{}); err != nil {
			t.Fatalf("CompleteBatch: %v", err)
		}
		skipped := e.skip(file("db.t", 2, 10), "no events")
		unknown := e.skip(file(unknownTable, 3, 10), "table unknown")
		merged := e.file(staged.ID)
		done := e.clock.Now()
		if !skipped.DoneAt.Equal(done) || !merged.DoneAt.Equal(done) {
			t.Fatalf("done at %s (skipped) and %s (merged), want both %s", skipped.DoneAt, merged.DoneAt, done)
		}
		if ret, want := skipped.ExpireAt.Sub(skipped.DoneAt), merged.ExpireAt.Sub(merged.DoneAt); ret != want || ret <= 0 {
			t.Fatalf("skipped record expires %s after it was done, want the retention of merged records, %s", ret, want)
		}
		e.clock.Advance(skipped.ExpireAt.Sub(done) - time.Hour)
		later := e.skip(file("db.t", 4, 10), "no events") // within the retention
		if n, err := e.c.Expire(e.ctx, done); err != nil || n != 0 {
			t.Fatalf("Expire at the instant they were done = %d, %v; want 0 (the cutoff is exclusive)", n, err)
		}
		n, err := e.c.Expire(e.ctx, done.Add(time.Second))
		if err != nil || n != 3 {
			t.Fatalf("Expire just after they were done = %d, %v; want 3 (the merged and both skipped files)", n, err)
		}
		for _, id := range []string{staged.ID, skipped.ID, unknown.ID} {
			_, err := e.c.File(e.ctx, id)
			wantErr(t, "File of an expired record", err, coord.ErrNotFound)
		}
		if got := e.file(later.ID); got.State != coord.StateSkipped {
			t.Fatalf("the later skipped file is %s, want it kept", got.State)
		}
	})
	t.Run("registering a skipped file stages it again with a new arrival number", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		first := e.register(file("db.t", 1, 10))
		f := file("db.t", 2, 10)
		f.SourceCreated = sourceCreated
		e.skip(f, "table db.t is excluded by configuration")
		e.clock.Advance(time.Minute)
		rec, created, err := e.c.RegisterFile(e.ctx, f)
		if err != nil || !created {
			t.Fatalf("RegisterFile of a skipped file: created = %v, err = %v; want true", created, err)
		}
		if rec.State != coord.StateStaged || rec.Reason != "" || rec.ArrivalSeq <= first.ArrivalSeq ||
			!rec.DoneAt.IsZero() || !rec.ExpireAt.IsZero() || !rec.StagedAt.Equal(e.clock.Now()) || rec.StagedPath != f.StagedPath {
			t.Fatalf("re-staged record = %+v, want staged now with the new fields, no reason, no expiry, arrival > %d", rec, first.ArrivalSeq)
		}
		if got := e.file(rec.ID); !sameRecord(got, rec) {
			t.Fatalf("File(%s) = %+v\nwant the re-staged record %+v", rec.ID, got, rec)
		}
		if got, err := e.c.Files(e.ctx, []string{rec.ID}); err != nil || !sameRecord(got[rec.ID], rec) {
			t.Fatalf("Files(%s) = %+v, %v; want the re-staged record", rec.ID, got, err)
		}
		if s := e.status("db.t"); s.Pending != 2 || s.Quarantined != 0 {
			t.Fatalf("status = %d pending, %d quarantined; want 2, 0", s.Pending, s.Quarantined)
		}
		if got, err := e.c.ListFiles(e.ctx, "db.t", ""); err != nil || !equalIDs(ids(got), []string{first.ID, rec.ID}) {
			t.Fatalf("ListFiles = %v, %v; want %v", ids(got), err, []string{first.ID, rec.ID})
		}
		// Its record must not expire any more: expire far past the retention.
		if _, err := e.c.Expire(e.ctx, e.clock.Now().Add(365*24*time.Hour)); err != nil {
			t.Fatalf("Expire: %v", err)
		}
		got, err := e.c.Pending(e.ctx, "db.t", 0)
		if err != nil || !equalIDs(ids(got), []string{first.ID, rec.ID}) {
			t.Fatalf("Pending after expiry = %v, %v; want both staged files", ids(got), err)
		}
		again, created, err := e.c.RegisterFile(e.ctx, f)
		if err != nil || created || again.ArrivalSeq != rec.ArrivalSeq {
			t.Fatalf("RegisterFile again = arrival %d, created %v, %v; want the re-staged record, created false", again.ArrivalSeq, created, err)
		}
		if skippedAgain := e.skip(f, "no events"); skippedAgain.State != coord.StateStaged {
			t.Fatalf("Skip of the re-staged file returned state %s, want the staged record", skippedAgain.State)
		}
	})
	t.Run("quarantining a skipped file records it anew, counted and never expiring", func(t *testing.T) {
		e := newEnv(t, newCoordinator)
		first := e.register(file("db.t", 1, 10))
		f := file("db.t", 2, 10)
		e.skip(f, "no events")
		f.Record = "record 3"
		rec, err := e.c.Quarantine(e.ctx, f, "invalid JSON")
		if err != nil {
			t.Fatalf("Quarantine: %v", err)
		}
		if rec.State != coord.StateQuarantined || rec.Reason != "invalid JSON" || rec.Record != "record 3" ||
			rec.ArrivalSeq <= first.ArrivalSeq || !rec.DoneAt.IsZero() || !rec.ExpireAt.IsZero() {
			t.Fatalf("quarantined record = %+v, want quarantined with the reason, a new arrival and no expiry", rec)
		}
		if s := e.status("db.t"); s.Pending != 1 || s.Quarantined != 1 {
			t.Fatalf("status = %d pending, %d quarantined; want 1, 1", s.Pending, s.Quarantined)
		}
		if _, err := e.c.Expire(e.ctx, e.clock.Now().Add(365*24*time.Hour)); err != nil {
			t.Fatalf("Expire: %v", err)
		}
		if got := e.file(rec.ID); got.State != coord.StateQuarantined {
			t.Fatalf("File after expiry = %s, want quarantined kept", got.State)
		}
	})
}
