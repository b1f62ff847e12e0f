package firestorecoord_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/internal/firestoretest"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/coord/coordtest"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/opcount"
)

func TestMain(m *testing.M) { firestoretest.Main(m) }

func TestConformance(t *testing.T) {
	client := firestoretest.NewClient(t)
	var n atomic.Int64
	// Every test gets its own collections, so tests never see each other.
	prefix := fmt.Sprintf("t%d_", time.Now().UnixNano())
	coordtest.Run(t, func(t *testing.T, now func() time.Time) coordtest.Coordinator {
		c, err := firestorecoord.New(context.Background(), client, firestorecoord.Options{
			Prefix: fmt.Sprintf("%s%d_", prefix, n.Add(1)),
			Now:    now,
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return c
	})
}

// TestContendedTransactionsCountWhatFirestoreBills registers files of one
// table from many goroutines at once, whose transactions on the table's
// document abort and run again: the counts must hold the committed
// attempts' writes only, as Firestore bills them, the retries' reads, and
// the retries themselves.
func TestContendedTransactionsCountWhatFirestoreBills(t *testing.T) {
	client := firestoretest.NewClient(t)
	c, err := firestorecoord.New(context.Background(), client, firestorecoord.Options{Prefix: fmt.Sprintf("c%d_", time.Now().UnixNano())})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := func(table string, n int) coord.FileRecord {
		return coord.FileRecord{Table: table, Bucket: "source", Name: fmt.Sprintf("p/%s/f-%04d.jsonl", table, n), Generation: int64(n), Size: 10, Events: 10}
	}
	// The same registrations one at a time, in a table of their own: what
	// a registration without contention costs.
	const files = 12
	alone := make([]opcount.Counts, files)
	for i := range files {
		ctx, cnt := opcount.Start(context.Background())
		if _, _, err := c.RegisterFile(ctx, rec("db.alone", i+1)); err != nil {
			t.Fatal(err)
		}
		alone[i] = cnt.Counts()
	}
	var wg sync.WaitGroup
	got := make([]opcount.Counts, files)
	for i := range files {
		wg.Go(func() {
			ctx, cnt := opcount.Start(context.Background())
			if _, _, err := c.RegisterFile(ctx, rec("db.contended", i+1)); err != nil {
				t.Error(err)
			}
			got[i] = cnt.Counts()
		})
	}
	wg.Wait()
	var sumAlone, sumGot opcount.Counts
	for i := range files {
		sumAlone, sumGot = sumAlone.Add(alone[i]), sumGot.Add(got[i])
		if g := got[i]; g.FirestoreWrites > alone[i].FirestoreWrites || g.FirestoreReads < alone[i].FirestoreReads {
			t.Errorf("registration %d counted %+v, alone %+v: a retried attempt's writes counted, or reads lost", i+1, g, alone[i])
		}
	}
	t.Logf("%d concurrent registrations: %+v; one at a time: %+v", files, sumGot, sumAlone)
	if sumGot.FirestoreRetries == 0 {
		t.Skip("no transaction retried: the emulator serialised the registrations")
	}
	if sumGot.FirestoreReads <= sumAlone.FirestoreReads {
		t.Errorf("%d retries but no more reads (%d) than without contention (%d): an aborted attempt's reads are billed", sumGot.FirestoreRetries, sumGot.FirestoreReads, sumAlone.FirestoreReads)
	}
}
