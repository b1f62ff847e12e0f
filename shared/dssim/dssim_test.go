package dssim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
)

func specs(f Format) []TableSpec {
	return []TableSpec{
		{Source: MySQL, Database: "shop", Table: "customers", Format: f, InitialRows: 20, Changes: 120},
		{Source: Oracle, Database: "HR", Table: "EMPLOYEES", Format: f, InitialRows: 15, Changes: 90},
		{Source: PostgreSQL, Database: "public", Table: "order_lines", Format: f, InitialRows: 10, Changes: 100},
	}
}

// decodeAll returns every event of every file as generic maps.
func decodeAll(t *testing.T, f File) []map[string]any {
	t.Helper()
	var out []map[string]any
	switch {
	case strings.HasSuffix(f.Name, ".avro"):
		dec, err := ocf.NewDecoder(bytes.NewReader(f.Data))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for dec.HasNext() {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			out = append(out, m)
		}
		if dec.Error() != nil {
			t.Fatalf("%s: %v", f.Name, dec.Error())
		}
	default:
		var r io.Reader = bytes.NewReader(f.Data)
		if strings.HasSuffix(f.Name, ".gz") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			d.UseNumber()
			var m map[string]any
			if err := d.Decode(&m); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestRunIsDeterministicAndWellFormed(t *testing.T) {
	for _, f := range []Format{JSONL, JSONLGz, Avro} {
		t.Run(string(f)+" files decode and carry every event", func(t *testing.T) {
			opts := Options{Seed: 42, Tables: specs(f), EventsPerFile: 17, DuplicateEvents: 0.1, RedeliveredFiles: 0.2, Shuffle: true}
			a, err := Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Run(opts)
			if len(a.Files) != len(b.Files) {
				t.Fatal("not deterministic")
			}
			for i := range a.Files {
				if a.Files[i].Name != b.Files[i].Name {
					t.Fatalf("file %d is named differently between runs", i)
				}
				// The Avro header's metadata map has no fixed order, so
				// compare Avro files by content.
				ea, _ := json.Marshal(decodeAll(t, a.Files[i]))
				eb, _ := json.Marshal(decodeAll(t, b.Files[i]))
				if !bytes.Equal(ea, eb) {
					t.Fatalf("file %d differs between runs", i)
				}
			}
			perTable := map[string]int{}
			seen := map[string]bool{}
			for _, file := range a.Files {
				evs := decodeAll(t, file)
				if len(evs) != file.Events {
					t.Fatalf("%s: %d events decoded, %d written", file.Name, len(evs), file.Events)
				}
				if seen[file.Name] {
					continue // a redelivered file
				}
				seen[file.Name] = true
				perTable[file.Table] += len(evs)
				for _, ev := range evs {
					for _, k := range []string{"uuid", "read_timestamp", "source_timestamp", "object", "read_method", "schema_key", "sort_keys", "source_metadata", "payload"} {
						if _, ok := ev[k]; !ok {
							t.Fatalf("%s: event without %s", file.Name, k)
						}
					}
				}
				if !strings.HasSuffix(file.Name, "."+string(f)) || strings.Count(file.Name, "/") != 6 {
					t.Fatalf("unexpected object name %s", file.Name)
				}
			}
			for id, tab := range a.Tables {
				if perTable[id] < tab.Events {
					t.Fatalf("%s: %d events in files, %d emitted", id, perTable[id], tab.Events)
				}
				if len(tab.Rows) == 0 {
					t.Fatalf("%s: empty reference state", id)
				}
			}
		})
	}
}

func TestPositionsCrossTheirTextOrderTraps(t *testing.T) {
	res, err := Run(Options{Seed: 7, Tables: []TableSpec{
		{Source: PostgreSQL, Database: "public", Table: "t", InitialRows: 1, Changes: 400},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var sawF, saw10 bool
	for _, f := range res.Files {
		s := string(f.Data)
		sawF = sawF || strings.Contains(s, `"lsn":"F/FFFF`)
		saw10 = saw10 || strings.Contains(s, `"lsn":"10/`)
	}
	if !sawF || !saw10 {
		t.Fatalf("LSNs do not cross F/FFFFFFFF -> 10/0 (F: %v, 10: %v)", sawF, saw10)
	}
}

// eventTime parses one of a JSON event's timestamps.
func eventTime(t *testing.T, ev map[string]any, field string) time.Time {
	t.Helper()
	s, _ := ev[field].(string)
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s %q: %v", field, s, err)
	}
	return ts
}

func TestEndDatesTheNewestEventAtEnd(t *testing.T) {
	opts := Options{Seed: 42, Tables: specs(JSONL), EventsPerFile: 17, DuplicateEvents: 0.1, Shuffle: true}
	fixed, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		end  time.Time
	}{
		{"an end now", time.Now()},
		{"an end years before the fixed dates", time.Date(2019, 3, 4, 5, 6, 7, 890_000_000, time.UTC)},
		{"an end on a whole second", time.Date(2031, 12, 31, 23, 59, 59, 0, time.UTC)},
	} {
		t.Run(tt.name+" moves every event by one whole number of seconds, the newest to it", func(t *testing.T) {
			o := opts
			o.End = tt.end
			res, err := Run(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Files) != len(fixed.Files) {
				t.Fatalf("%d files, %d with fixed dates", len(res.Files), len(fixed.Files))
			}
			var newest time.Time
			var shift time.Duration
			for i, f := range res.Files {
				if path.Base(f.Name) != path.Base(fixed.Files[i].Name) {
					t.Fatalf("file %d is %s, with fixed dates %s", i, f.Name, fixed.Files[i].Name)
				}
				got, want := decodeAll(t, f), decodeAll(t, fixed.Files[i])
				for j, ev := range got {
					if ev["uuid"] != want[j]["uuid"] || fmt.Sprint(ev["payload"]) != fmt.Sprint(want[j]["payload"]) {
						t.Fatalf("%s: event %d differs from the one with fixed dates beyond its dates", f.Name, j)
					}
					for _, field := range []string{"read_timestamp", "source_timestamp"} {
						d := eventTime(t, ev, field).Sub(eventTime(t, want[j], field))
						if shift == 0 {
							shift = d
						}
						if d != shift || d%time.Second != 0 {
							t.Fatalf("%s: event %d's %s moved by %v, others by %v: want one whole number of seconds", f.Name, j, field, d, shift)
						}
					}
					if read := eventTime(t, ev, "read_timestamp"); read.After(newest) {
						newest = read
					}
				}
				folder, err := time.Parse("2006/01/02/15/04", strings.Join(strings.Split(f.Name, "/")[1:6], "/"))
				if err != nil || folder.After(tt.end) {
					t.Fatalf("%s: folder time after the end %v (%v)", f.Name, tt.end, err)
				}
			}
			if newest.After(tt.end) || tt.end.Sub(newest) >= time.Second {
				t.Fatalf("newest event read at %v, want at most a second before %v", newest, tt.end)
			}
		})
	}
}
