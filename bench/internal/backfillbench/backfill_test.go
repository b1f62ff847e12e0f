package backfillbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type line struct {
	ReadMethod      string `json:"read_method"`
	SourceTimestamp string `json:"source_timestamp"`
	Metadata        struct {
		ChangeType string `json:"change_type"`
		LogFile    string `json:"log_file"`
	} `json:"source_metadata"`
	Payload struct {
		ID      string  `json:"id"`
		Balance float64 `json:"balance"`
	} `json:"payload"`
}

func TestGenerateWritesABackfillWithLaterRereads(t *testing.T) {
	d, err := Generate(t.TempDir(), Spec{Events: 5000, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Paths) != 3 || d.Events != 5000 || d.Keys >= d.Events {
		t.Fatalf("Generate = %d files, %d events, %d keys; want 3 files, 5000 events and fewer keys (re-reads)", len(d.Paths), d.Events, d.Keys)
	}
	first := map[string]time.Time{}
	var events int
	var size int64
	for _, p := range d.Paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		size += int64(len(b))
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			events++
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s line %d: %v", p, events, err)
			}
			if l.ReadMethod != ReadMethod || l.Metadata.ChangeType != "INSERT" || l.Metadata.LogFile != "" || len(l.Payload.ID) != 36 {
				t.Fatalf("%s line %d is not a MySQL backfill row with a UUID key: %s", p, events, sc.Bytes())
			}
			ts, err := time.Parse(time.RFC3339, l.SourceTimestamp)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := first[l.Payload.ID]; ok && !ts.After(prev) {
				t.Errorf("key %s read again at %v, not after its first read at %v", l.Payload.ID, ts, prev)
			} else if !ok {
				first[l.Payload.ID] = ts
			}
		}
	}
	if events != d.Events || len(first) != d.Keys || size != d.Bytes {
		t.Errorf("files hold %d events, %d keys, %d bytes; Generate said %d, %d, %d", events, len(first), size, d.Events, d.Keys, d.Bytes)
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(t.TempDir(), Spec{Events: 3000, Files: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(t.TempDir(), Spec{Events: 3000, Files: 1})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(a.Paths[0])
	y, _ := os.ReadFile(b.Paths[0])
	if !bytes.Equal(x, y) {
		t.Error("two generations of the same spec differ")
	}
}

func TestChildStagesAndMergesEveryEvent(t *testing.T) {
	d, err := Generate(t.TempDir(), Spec{Events: 5000, Files: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := run(context.Background(), ChildOptions{Source: d.Dir, Lake: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 2 || r.Events != int64(d.Events) || r.HistoryRows != int64(d.Events) || r.StateRows != int64(d.Keys) {
		t.Errorf("child: %d files, %d events staged, %d history rows, %d state rows; want 2, %d, %d, %d", r.Files, r.Events, r.HistoryRows, r.StateRows, d.Events, d.Events, d.Keys)
	}
	if r.Inserted != int64(d.Keys) || r.Collapsed != int64(d.Events-d.Keys) {
		t.Errorf("child inserted %d and collapsed %d; want %d and %d", r.Inserted, r.Collapsed, d.Keys, d.Events-d.Keys)
	}
	if r.StagedRowsRead < int64(d.Events) {
		t.Errorf("child: the merge decoded %d staged rows for %d events", r.StagedRowsRead, d.Events)
	}
	if r.SourceBytes != d.Bytes || r.StagedBytes == 0 || r.PeakKiB == 0 {
		t.Errorf("child: %d source bytes (want %d), %d staged bytes, peak %d KiB", r.SourceBytes, d.Bytes, r.StagedBytes, r.PeakKiB)
	}
}

func TestOneTimestampDatesFirstReadsAlikeAndRereadsLater(t *testing.T) {
	d, err := Generate(t.TempDir(), Spec{Events: 5000, Files: 2, OneTimestamp: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	times := map[bool]map[string]bool{false: {}, true: {}}
	for _, p := range d.Paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			reread := seen[l.Payload.ID]
			seen[l.Payload.ID] = true
			times[reread][l.SourceTimestamp] = true
		}
	}
	if len(times[false]) != 1 || len(times[true]) != 1 {
		t.Fatalf("first reads at %v, re-reads at %v: want one timestamp each", times[false], times[true])
	}
	for first := range times[false] {
		for again := range times[true] {
			if again <= first {
				t.Errorf("re-reads at %s, not after the first reads at %s", again, first)
			}
		}
	}
}

// TestFilesAreWrittenInReadOrder: the child's -in-order stages files
// oldest first, which must be the backfill's read order.
func TestFilesAreWrittenInReadOrder(t *testing.T) {
	d, err := Generate(t.TempDir(), Spec{Events: 300, Files: 12})
	if err != nil {
		t.Fatal(err)
	}
	var prev time.Time
	for i, p := range d.Paths {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !info.ModTime().After(prev) {
			t.Errorf("file %d (%s) was written at %v, not after file %d at %v", i, filepath.Base(p), info.ModTime(), i-1, prev)
		}
		prev = info.ModTime()
	}
}

// TestGeneratorInRoundsWritesGeneratesFiles: a load written a round at a
// time (backfill_100M) is the load Generate writes, byte for byte, and
// each round counts its own events and first reads.
func TestGeneratorInRoundsWritesGeneratesFiles(t *testing.T) {
	spec := Spec{Events: 9000, Files: 5, OneTimestamp: true}
	whole, err := Generate(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGenerator(t.TempDir(), spec)
	var files, events, keys int
	for round := 0; !g.Done(); round++ {
		d, err := g.Next(2)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(2, spec.Files-2*round); len(d.Paths) != want {
			t.Fatalf("round %d wrote %d files; want %d", round, len(d.Paths), want)
		}
		for _, p := range d.Paths {
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(whole.Paths[files])
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(p) != filepath.Base(whole.Paths[files]) || !bytes.Equal(got, want) {
				t.Fatalf("round %d: file %s differs from Generate's %s", round, p, whole.Paths[files])
			}
			files++
		}
		events += d.Events
		keys += d.Keys
	}
	if files != spec.Files || events != whole.Events || keys != whole.Keys {
		t.Errorf("rounds wrote %d files, %d events, %d keys; Generate %d, %d, %d", files, events, keys, spec.Files, whole.Events, whole.Keys)
	}
	// Skipping files leaves the generator where writing them would have.
	skipped := NewGenerator(t.TempDir(), spec)
	skipped.Skip(3)
	d, err := skipped.Next(2)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range d.Paths {
		got, _ := os.ReadFile(p)
		want, _ := os.ReadFile(whole.Paths[3+i])
		if !bytes.Equal(got, want) {
			t.Errorf("file %d after skipping 3 differs from Generate's", 3+i)
		}
	}
	if !skipped.Done() {
		t.Error("generator not done after all files were skipped or written")
	}
}

// TestChildLoadsRoundsIntoOneLake: the child run once a round, with
// maintenance, over a source holding only that round's files, leaves the
// lake with every event in the history and every key once in the state.
func TestChildLoadsRoundsIntoOneLake(t *testing.T) {
	spec := Spec{Events: 12000, Files: 6, OneTimestamp: true}
	source, lake := t.TempDir(), t.TempDir()
	g := NewGenerator(source, spec)
	var events, keys int64
	for round := 1; !g.Done(); round++ {
		d, err := g.Next(2)
		if err != nil {
			t.Fatal(err)
		}
		r, err := run(context.Background(), ChildOptions{Source: source, Lake: lake, DeletionVectors: true, InOrder: true, Maintain: true})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		events += int64(d.Events)
		keys += int64(d.Keys)
		if r.Events != int64(d.Events) || r.HistoryRows != events || r.StateRows != keys {
			t.Fatalf("round %d: %d events staged, %d history rows, %d state rows; want %d, %d, %d", round, r.Events, r.HistoryRows, r.StateRows, d.Events, events, keys)
		}
		if r.MaintainMillis <= 0 || r.StateFiles == 0 || r.HistoryFiles == 0 {
			t.Errorf("round %d: maintenance %.1f ms, %d state and %d history files", round, r.MaintainMillis, r.StateFiles, r.HistoryFiles)
		}
		if round > 1 && r.Compacted == 0 {
			t.Errorf("round %d: maintenance compacted nothing after %d rounds of small files", round, round)
		}
		for _, p := range d.Paths {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if keys >= events {
		t.Errorf("%d keys for %d events: the load re-read no key", keys, events)
	}
}
