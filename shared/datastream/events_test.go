package datastream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2/ocf"
)

func TestEventsKeepOrderAcrossBlocks(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 1023, 1024, 1025, 5000} {
		var e Events
		for i := range n {
			e.Append(Event{Meta: Metadata{Record: int64(i + 1)}})
		}
		if e.Len() != n {
			t.Fatalf("n=%d: Len() = %d", n, e.Len())
		}
		seen := 0
		for i, ev := range e.All() {
			if i != seen || ev.Meta.Record != int64(i+1) || e.At(i) != ev {
				t.Fatalf("n=%d: All yields index %d record %d at position %d", n, i, ev.Meta.Record, seen)
			}
			seen++
		}
		if seen != n {
			t.Fatalf("n=%d: All yielded %d events", n, seen)
		}
	}
}

func TestEventsAdoptedBlocksInterleaveWithAppendedEvents(t *testing.T) {
	var e Events
	rec := int64(0)
	next := func() Event { rec++; return Event{Meta: Metadata{Record: rec}} }
	for round := range 50 {
		for range round % 7 {
			e.Append(next())
		}
		blk := make([]Event, round%5, round%5+3) // spare capacity is never written into
		for j := range blk {
			blk[j] = next()
		}
		e.adopt(blk)
		if round%5 > 0 {
			e.Append(next())
			if blk[:cap(blk)][len(blk)].Meta.Record != 0 {
				t.Fatal("Append wrote into an adopted block's spare capacity")
			}
		}
	}
	if e.Len() != int(rec) {
		t.Fatalf("Len() = %d, appended %d", e.Len(), rec)
	}
	for i, ev := range e.All() {
		if ev.Meta.Record != int64(i+1) || e.At(i).Meta.Record != int64(i+1) {
			t.Fatalf("event %d has record %d (At: %d)", i, ev.Meta.Record, e.At(i).Meta.Record)
		}
	}
}

func TestEventsAtOutOfRangePanics(t *testing.T) {
	var e Events
	e.Append(Event{})
	for _, i := range []int{-1, 1, 100} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("At(%d) of 1 event did not panic", i)
				}
			}()
			e.At(i)
		}()
	}
}

func TestAppendToOfAvroAndFixturesMatchesNext(t *testing.T) {
	_, files := fixtureFiles(t)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			sameDecode(t, appendWith(t, bytes.NewReader(data), Options{}), decodeWith(t, bytes.NewReader(data), Options{}))
		})
	}
}

func TestEventsUnifyJSONMatchesUnifyJSONOfASlice(t *testing.T) {
	data := jsonLines(oracleInsert, pgCDC, pgBackfill, oraclePKDelete, oraclePKInsert)
	want := decodeWith(t, strings.NewReader(data), Options{})
	stWant, errWant := UnifyJSON(want.events, value.StructType{})
	var e Events
	for _, ev := range decodeWith(t, strings.NewReader(data), Options{}).events {
		e.Append(ev)
	}
	stGot, errGot := e.UnifyJSON(value.StructType{})
	if (errGot == nil) != (errWant == nil) || stGot.SchemaString() != stWant.SchemaString() {
		t.Fatalf("Events.UnifyJSON = %v, %v; UnifyJSON of the slice = %v, %v", stGot, errGot, stWant, errWant)
	}
	got := make([]Event, 0, e.Len())
	for _, ev := range e.All() {
		got = append(got, *ev)
	}
	sameDecode(t, decodeResult{events: got}, decodeResult{events: want.events})
}

func TestAReaderFailingWithAWrappedEOFIsAnErrorNotTheEndOfTheFile(t *testing.T) {
	cut := fmt.Errorf("connection closed: %w", io.EOF)
	jsonData := []byte(jsonLines(pgCDC, oracleInsert, pgCDC, oracleInsert))
	avroData := shopFile(t, ocf.Null, 6, 10, -1)
	for _, tt := range []struct {
		name string
		data []byte
		opts Options
	}{
		{"JSON lines, sequential", jsonData, sequentialOpts(Options{})},
		{"JSON lines, parallel", jsonData, parallelOpts(Options{}, 2, 64)},
		{"Avro, sequential", avroData, Options{Workers: 1}},
		{"Avro, parallel", avroData, Options{Workers: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The reader fails a little before the end of the file.
			data := tt.data[:len(tt.data)-len(tt.data)/5]
			for _, res := range []decodeResult{
				decodeWith(t, &failingReader{data: data, err: cut}, tt.opts),
				appendWith(t, &failingReader{data: data, err: cut}, tt.opts),
			} {
				if res.err == nil {
					t.Fatalf("decoded %d events and no error from a reader that failed mid-file", len(res.events))
				}
				if !errors.Is(res.err, cut) && !errors.Is(res.err, io.ErrUnexpectedEOF) {
					t.Errorf("err = %v, want it to carry the read failure", res.err)
				}
			}
		})
	}
}

// partsWith decodes with Reader.AppendUpTo in parts of at most about n
// events each, as staging bounds its memory, and joins the parts.
func partsWith(t testing.TB, r io.Reader, opts Options, n int) (decodeResult, int) {
	t.Helper()
	var res decodeResult
	d, err := Decode(context.Background(), r, "f.jsonl", opts)
	if err != nil {
		res.err = err
		return res, 0
	}
	defer d.Close()
	parts := 0
	for {
		var evs Events
		more, err := d.AppendUpTo(&evs, n)
		if evs.Len() > 0 {
			parts++
		}
		if evs.Len() > n {
			t.Fatalf("AppendUpTo(%d) handed over %d events", n, evs.Len())
		}
		for _, ev := range evs.All() {
			res.events = append(res.events, *ev)
		}
		if err != nil || !more {
			res.err = err
			return res, parts
		}
	}
}

func TestAppendUpToInPartsDecodesWhatAppendToDoes(t *testing.T) {
	jsonData := []byte(jsonLines(pgCDC, oracleInsert, pgCDC, oracleInsert, pgCDC, oracleInsert, pgCDC))
	avroData := shopFile(t, ocf.Null, 6, 10, -1)
	bad := []byte(jsonLines(pgCDC, oracleInsert, pgCDC) + "{not json\n" + jsonLines(pgCDC))
	for _, tt := range []struct {
		name string
		data []byte
		opts Options
	}{
		{"JSON lines, sequential", jsonData, sequentialOpts(Options{})},
		{"JSON lines, parallel", jsonData, parallelOpts(Options{}, 2, 64)},
		{"a bad JSON line, parallel", bad, parallelOpts(Options{}, 2, 64)},
		{"Avro, sequential", avroData, Options{Workers: 1}},
		{"Avro, parallel", avroData, Options{Workers: 2}},
	} {
		for _, n := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%s in parts of %d", tt.name, n), func(t *testing.T) {
				want := appendWith(t, bytes.NewReader(tt.data), tt.opts)
				got, parts := partsWith(t, bytes.NewReader(tt.data), tt.opts, n)
				sameDecode(t, got, want)
				if want := (len(want.events) + n - 1) / n; parts != want {
					t.Fatalf("%d events came in %d part(s) of at most %d, want %d", len(got.events), parts, n, want)
				}
			})
		}
	}
}
