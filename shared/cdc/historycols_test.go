package cdc

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestHistoryColumnsWriteTheFileHistoryRowsDo decodes every real Datastream
// fixture file and the files of simulated MySQL, Oracle and PostgreSQL
// streams (JSON lines, gzip and Avro), and writes each run of events of
// one schema as a history file twice: their HistoryRows rows through
// WriteInOrder, and through WriteColumns from HistoryColumns. The data
// files are the same bytes, with the same statistics, in a random order
// and partitioned by date as staging writes them, with the metadata
// Datastream may leave out left out of some events; a file of a nested
// schema (PostgreSQL arrays) is written from the rows either way.
func TestHistoryColumnsWriteTheFileHistoryRowsDo(t *testing.T) {
	ctx := context.Background()
	var sources []source
	root := fixture.Path(t, "datastream")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".avro", ".jsonl", ".json", ".gz":
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			sources = append(sources, source{rel, data})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := dssim.Run(dssim.Options{Seed: 31, EventsPerFile: 900, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 700, Changes: 1200},
		{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", InitialRows: 500, Changes: 900, Format: dssim.Avro},
		{Source: dssim.PostgreSQL, Database: "public", Table: "orders", InitialRows: 500, Changes: 900, Format: dssim.JSONLGz},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sim.Files {
		sources = append(sources, source{f.Name, f.Data})
	}
	runs, columns := 0, 0
	for k, src := range sources {
		d, err := datastream.Decode(ctx, bytes.NewReader(src.data), src.name, datastream.Options{File: datastream.SourceFile{Bucket: "bkt", Name: src.name, Generation: 7}})
		if err != nil {
			continue // a file staging quarantines
		}
		var events datastream.Events
		err = d.AppendTo(&events)
		d.Close()
		if err != nil {
			continue
		}
		if k%2 == 1 {
			blankSomeMetadata(&events)
		}
		for lo := 0; lo < events.Len(); {
			hi := lo + 1
			for hi < events.Len() && value.Equal(events.At(hi).Schema, events.At(lo).Schema) {
				hi++
			}
			runs++
			if historyColumnsMatchRows(t, src.name, events, lo, hi) {
				columns++
			}
			lo = hi
		}
	}
	if runs < 20 || columns < runs/2 {
		t.Fatalf("%d runs of one schema compared, %d of them written as columns; the sources give too few", runs, columns)
	}
	t.Logf("%d files, %d runs of one schema, %d written as columns", len(sources), runs, columns)
}

// blankSomeMetadata leaves out, in some events, the metadata Datastream
// may not give (a read timestamp, UUID, change type, read method, source
// file or its bucket), which the history holds as nulls.
func blankSomeMetadata(events *datastream.Events) {
	noBucket := &datastream.SourceFile{Name: "no-bucket.jsonl", Generation: 3}
	for i, ev := range events.All() {
		m := &ev.Meta
		if i%4 == 1 {
			m.ReadTimestamp = 0
		}
		if i%5 == 1 {
			m.UUID = ""
		}
		if i%6 == 1 {
			ev.ChangeType = ""
		}
		if i%7 == 1 {
			m.ReadMethod = ""
		}
		switch i % 9 {
		case 1:
			m.File = nil
		case 2:
			m.File = noBucket
		}
	}
}

type source struct {
	name string
	data []byte
}

// historyColumnsMatchRows writes events lo..hi-1 both ways and fails the
// test if the files differ; it reports whether the columns were written
// as columns (a flat schema).
func historyColumnsMatchRows(t *testing.T, name string, events datastream.Events, lo, hi int) bool {
	t.Helper()
	ctx := context.Background()
	n := hi - lo
	hs := HistorySchema(events.At(lo).Schema)
	opts := delta.WriteOptions{Schema: hs, FileName: "h.parquet", RowGroupRows: 300, Configuration: HistoryStatsConfiguration(events.At(lo).Schema, nil)}
	day := value.DaysOf(events.At(lo).SourceTimestamp.Time())
	dated := true
	for i := lo; i < hi; i++ {
		dated = dated && value.DaysOf(events.At(i).SourceTimestamp.Time()) == day
	}
	if dated {
		opts.PartitionColumns, opts.PartitionValues = []string{ColSourceDate}, map[string]any{ColSourceDate: day}
	}
	order := make([]int32, n)
	for j := range order {
		order[j] = int32((j*7919 + 13) % n)
	}
	if n%7919 == 0 {
		order = nil // not a permutation: as they come
	}
	at := func(i int) *datastream.Event { return events.At(lo + i) }
	var asColumns bool
	write := func(columns bool) (delta.Add, []byte) {
		store := objstore.NewMemory()
		w, err := delta.NewFileWriter(ctx, store, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows := NewHistoryRows()
		row := func(i int) ([]any, error) { return rows.Row(at(i)), nil }
		if columns {
			hc := &HistoryColumns{At: at}
			filled := false
			err = w.WriteColumns(n, order, delta.Columns{
				Fill: func(f, i0 int, c delta.Column) error {
					filled = true
					return hc.Fill(f, i0, c)
				},
				Value: func(f, i int) any { return hc.Value(f, at(i)) },
			}, row)
			asColumns = filled
		} else {
			err = w.WriteInOrder(n, order, row)
		}
		if err != nil {
			t.Fatalf("%s: write events %d..%d: %v", name, lo, hi, err)
		}
		add, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := add.ObjectName()
		if err != nil {
			t.Fatal(err)
		}
		data, err := objstore.ReadAll(ctx, store, obj)
		if err != nil {
			t.Fatal(err)
		}
		return add, data
	}
	wantAdd, want := write(false)
	gotAdd, got := write(true)
	if !bytes.Equal(got, want) || gotAdd.Stats != wantAdd.Stats || gotAdd.Path != wantAdd.Path {
		t.Fatalf("%s: events %d..%d as columns: %d bytes, %s %s; as rows: %d bytes, %s %s", name, lo, hi, len(got), gotAdd.Path, gotAdd.Stats, len(want), wantAdd.Path, wantAdd.Stats)
	}
	return asColumns
}
