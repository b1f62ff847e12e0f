package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// benchBackfillFile writes file k of n JSON lines of a MySQL full-dump
// backfill into dir, shaped as bench/'s backfill scenario writes them
// (UUID-shaped string keys in random order; an email, a name, a decimal, a
// timestamp, a flag and a note), and returns the file's name.
func benchBackfillFile(b *testing.B, dir string, k, n int) string {
	b.Helper()
	rng := rand.New(rand.NewPCG(12, uint64(k)))
	names := []string{"Ada Perlman", "Grace Hopper", "Alan Turing", "Edsger Dijkstra", "Barbara Liskov"}
	notes := []string{"vip", "", "call back", "churn risk"}
	start := time.Date(2026, 1, 5, 10, 45, 50, 0, time.UTC)
	var buf bytes.Buffer
	for i := range n {
		src := start.Add(time.Duration(i/1000) * time.Second)
		fmt.Fprintf(&buf, `{"uuid":"c27a7397-0276-8f69-%04x-%08x","read_timestamp":%q,"source_timestamp":%q,"object":"shop_accounts","read_method":"mysql-backfill-fulldump","stream_name":"projects/1/locations/us-central1/streams/bench","schema_key":"c27a7397","sort_keys":[%d,"",0],"source_metadata":{"table":"accounts","database":"shop","primary_keys":["id"],"log_file":"","log_position":0,"change_type":"INSERT","is_deleted":false},"payload":{"id":"%08x-%04x-4%03x-8%03x-%012x","email":"user%d@example.com","name":%q,"balance":%d.%02d,"created_at":%q,"is_active":%d,"notes":%q}}`+"\n",
			k, i, src.Add(time.Duration(rng.IntN(900))*time.Millisecond).Format("2006-01-02T15:04:05.000Z"), src.Format("2006-01-02T15:04:05.000Z"), src.UnixMilli(),
			rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Int64N(1<<48),
			i, names[rng.IntN(len(names))], rng.IntN(5_000_000), rng.IntN(100),
			src.AddDate(-1, 0, -rng.IntN(400)).Format("2006-01-02T15:04:05.000000Z"), rng.IntN(2), notes[rng.IntN(len(notes))])
	}
	name := fmt.Sprintf("shop_accounts/2026/01/05/10/00/c27a7397_mysql-backfill-fulldump_1_%d.jsonl", k)
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return name
}

// BenchmarkStage stages one Datastream file of 50k backfill events (about
// 33 MB of JSON lines, one staged part) into a new local lake per run: the
// decode, the part written in key order, its key hashes, manifest and
// registration, fsyncs included. With -cpu 1 it measures what staging
// costs a core, apart from the other work a run of the whole pipeline
// shares the machine with (bench/ measures that). One Pipeline stages
// every run's file, as a function instance stages the files it is given
// one after the other: what it keeps from file to file (the arrays a
// part's rows are converted into) is kept.
func BenchmarkStage(b *testing.B) {
	ctx := context.Background()
	srcDir := b.TempDir()
	name := benchBackfillFile(b, srcDir, 0, 50_000)
	src, err := objstore.NewLocal(srcDir)
	if err != nil {
		b.Fatal(err)
	}
	info, err := src.Stat(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.SetBytes(info.Size)
	p := &Pipeline{Sources: oneSource{src}, Holder: "bench", Logger: quiet}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		lake, err := objstore.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		c, err := coord.NewLocal(lake, coord.LocalOptions{})
		if err != nil {
			b.Fatal(err)
		}
		p.Lake, p.Coordination = lake, Coordinate(c)
		b.StartTimer()
		res, err := p.Stage(ctx, datastream.SourceFile{Name: name, Generation: info.Generation, Size: info.Size})
		if err != nil {
			b.Fatal(err)
		}
		if res.Quarantined != "" || res.Events != 50_000 {
			b.Fatalf("staged %d events, quarantined %q", res.Events, res.Quarantined)
		}
	}
}

// BenchmarkMergeBackfill merges a staged backfill of 4 files of 50k events
// (200k events, UUID keys) into an empty table: the batch's key-range
// steps read the key-sorted parts, keep the latest change per key, write
// the state and commit the parts to the history, as a bulk load does. The
// files are staged once; each run merges a copy of that lake.
func BenchmarkMergeBackfill(b *testing.B) {
	ctx := context.Background()
	srcDir, staged := b.TempDir(), b.TempDir()
	src, err := objstore.NewLocal(srcDir)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	open := func(dir string) *Pipeline {
		lake, err := objstore.NewLocal(dir)
		if err != nil {
			b.Fatal(err)
		}
		c, err := coord.NewLocal(lake, coord.LocalOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return &Pipeline{Lake: lake, Sources: oneSource{src}, Coordination: Coordinate(c), Holder: "bench", Logger: quiet}
	}
	p := open(staged)
	for k := range 4 {
		name := benchBackfillFile(b, srcDir, k, 50_000)
		info, err := src.Stat(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Stage(ctx, datastream.SourceFile{Name: name, Generation: info.Generation, Size: info.Size}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		lake := b.TempDir()
		if err := os.CopyFS(lake, os.DirFS(staged)); err != nil {
			b.Fatal(err)
		}
		p := open(lake)
		b.StartTimer()
		res, err := p.MergeTable(ctx, "shop.accounts")
		if err != nil {
			b.Fatal(err)
		}
		if res.Result.Inserted != 200_000 {
			b.Fatalf("inserted %d rows, want 200000", res.Result.Inserted)
		}
	}
	b.ReportMetric(200_000*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
