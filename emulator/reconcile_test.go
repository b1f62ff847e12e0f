package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord/firestorecoord"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore/gcsstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// TestLostNotificationsAreMadeUpOnTheReconcileTopic runs the stack with a
// share of the object notifications lost on their way to onfile, checks
// that exactly the files whose notification was lost stay unknown and that
// status counts them, then runs a tick of the reconcile schedule, whose
// reconcile hands them to onfile on the reconcile topic, and checks that
// every table converges to the source with every event once.
func TestLostNotificationsAreMadeUpOnTheReconcileTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const share = 0.3
	// The reconcile hands over a file unknown for a second: no
	// notification that would still come is that slow here.
	s := startStack(t, ctx, Options{LeaseTTL: e2eLeaseTTL, DropNotifications: share, DropSeed: 5, Config: fmt.Sprintf("reconcile_grace: %s\n", reconcileGrace)})
	bucket := s.Options().SourceBucket
	_, co, lake := stackClients(t, ctx, s)
	src := newSourceLog()
	var lastWrite time.Time
	// write writes files to the source bucket, in order.
	write := func(files []dssim.File) {
		t.Helper()
		for _, f := range files {
			if err := writeObject(ctx, s.Storage(), bucket, f.Name, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		lastWrite = time.Now()
	}

	t.Run("about the configured share of notifications is lost, and only those files stay unknown", func(t *testing.T) {
		res, err := dssim.Run(dssim.Options{Seed: 1, Tables: DefaultTables(10, 40), EventsPerFile: 4, Shuffle: true})
		if err != nil {
			t.Fatal(err)
		}
		write(res.Files)
		src.add(res.Files, res.Tables)
		lost := waitDelivered(t, ctx, s, co, res.Files, 90*time.Second)
		n := float64(len(res.Files))
		sd := math.Sqrt(n * share * (1 - share))
		if d := float64(len(lost)); d < n*share-4*sd || d > n*share+4*sd {
			t.Errorf("lost %d of %d notifications, want about %.0f (share %v)", len(lost), len(res.Files), n*share, share)
		}
		if len(s.Dropped()) != len(lost) {
			t.Errorf("the stack lost %d notifications, %d of them for the files written", len(s.Dropped()), len(lost))
		}
		t.Logf("lost %d of %d notifications", len(lost), len(res.Files))
	})
	if t.Failed() {
		return
	}

	t.Run("a backlog written at drop rate 1 is all lost, and what follows SetDropRate(0) all arrives", func(t *testing.T) {
		// One table's backfill is the backlog: objects written before the
		// notifications were wired; its CDC files come after.
		res, err := dssim.Run(dssim.Options{Seed: 2, EventsPerFile: 5, Tables: []dssim.TableSpec{
			{Source: dssim.MySQL, Database: "shop", Table: "payments", Format: dssim.JSONL, InitialRows: 30, Changes: 30},
		}})
		if err != nil {
			t.Fatal(err)
		}
		backlog, after := res.Files[:len(res.Files)/2], res.Files[len(res.Files)/2:]
		s.SetDropRate(1)
		write(backlog)
		if lost := waitDelivered(t, ctx, s, co, backlog, 60*time.Second); len(lost) != len(backlog) {
			t.Errorf("lost %d of the %d backlog notifications at drop rate 1", len(lost), len(backlog))
		}
		s.SetDropRate(0)
		write(after)
		if lost := waitDelivered(t, ctx, s, co, after, 60*time.Second); len(lost) != 0 {
			t.Errorf("lost %d notifications at drop rate 0: %v", len(lost), lost)
		}
		src.add(res.Files, res.Tables)
	})
	if t.Failed() {
		return
	}

	t.Run("status shows the lost files as unregistered, a reconcile tick stages them, and every table converges", func(t *testing.T) {
		lost := s.Dropped()
		// By now a lost notification that leaked through to onfile would
		// have registered its file.
		if leaked := registered(t, ctx, co, src.written, lost); len(leaked) > 0 {
			t.Fatalf("files whose notification was lost are registered: %v", leaked)
		}
		// Status counts a file unknown to the registry once it is older
		// than the grace period: the backlog's files may be younger (the
		// files after them were registered within a second of them).
		time.Sleep(time.Until(lastWrite.Add(reconcileGrace + 100*time.Millisecond)))
		if n, by := unregisteredFiles(t, ctx, s, co); n != len(lost) {
			t.Fatalf("status counts %d unregistered files (%v), want the %d whose notification was lost: %v", n, by, len(lost), lost)
		}
		s.SetDropRate(1)
		// A tick of the reconcile schedule, as Cloud Scheduler publishes it.
		pub := s.PubSub().Publisher(TopicCompact)
		defer pub.Stop()
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(`{"tasks":["reconcile"]}`)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
		waitQuiet(t, ctx, co, src.written, 120*time.Second)
		if n := len(s.Dropped()); n != len(lost) {
			t.Errorf("the drop filter saw the reconcile topic: %d lost notifications, %d before", n, len(lost))
		}
		if n, by := unregisteredFiles(t, ctx, s, co); n != 0 {
			t.Errorf("status counts %d unregistered files after the tick, want 0: %v", n, by)
		}
		checkAll(t, ctx, lake, src.refs)
	})
}

// reconcileGrace is the stack's reconcile_grace in the reconcile test.
const reconcileGrace = time.Second

// unregisteredFiles is the number of source files that status reports
// unregistered: past the grace period and unknown to the registry; and
// the count of each table that has any.
func unregisteredFiles(t *testing.T, ctx context.Context, s *Stack, co *firestorecoord.Coordinator) (int, map[string]int) {
	t.Helper()
	cfg, err := config.Parse([]byte(s.Options().Config))
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline.Pipeline{Coordination: pipeline.Coordinate(co), Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	bucket := gcsstore.New(s.Storage(), s.Options().SourceBucket, "")
	lags, err := p.SourceLags(ctx, p.Streams(pipeline.Source{Store: bucket, Bucket: s.Options().SourceBucket, Prefix: s.Options().SourcePrefix}), false)
	if err != nil {
		t.Fatal(err)
	}
	n, by := 0, map[string]int{}
	for table, l := range lags {
		n += l.Unregistered
		if l.Unregistered > 0 {
			by[table] = l.Unregistered
		}
	}
	return n, by
}

// waitDelivered waits until each of files is either registered or among
// the objects whose notification the stack lost, and returns the names of
// the lost ones. It fails the test at once if a file is both.
func waitDelivered(t *testing.T, ctx context.Context, s *Stack, co *firestorecoord.Coordinator, files []dssim.File, timeout time.Duration) []string {
	t.Helper()
	tables := map[string]int{}
	var names []string
	for _, f := range files {
		tables[f.Table]++
		names = append(names, f.Name)
	}
	deadline := time.Now().Add(timeout)
	for {
		dropped := map[string]bool{}
		for _, n := range s.Dropped() {
			dropped[n] = true
		}
		known := map[string]bool{}
		for _, n := range registered(t, ctx, co, tables, names) {
			known[n] = true
		}
		var lost []string
		left := 0
		for _, f := range files {
			switch {
			case dropped[f.Name] && known[f.Name]:
				t.Fatalf("%s: its notification was lost, yet it is registered", f.Name)
			case dropped[f.Name]:
				lost = append(lost, f.Name)
			case !known[f.Name]:
				left++
			}
		}
		if left == 0 {
			return lost
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("after %s, %d of %d files are neither registered nor lost", timeout, left, len(files))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// registered returns those of names that the registry holds a record of,
// in any state, for any of tables.
func registered(t *testing.T, ctx context.Context, co *firestorecoord.Coordinator, tables map[string]int, names []string) []string {
	t.Helper()
	known := map[string]bool{}
	for table := range tables {
		recs, err := co.ListFiles(ctx, table, "")
		if err != nil {
			t.Fatalf("files of %s: %v", table, err)
		}
		for _, r := range recs {
			known[r.Name] = true
		}
	}
	var out []string
	for _, n := range names {
		if known[n] {
			out = append(out, n)
		}
	}
	return out
}
