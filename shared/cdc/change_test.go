package cdc

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
)

func TestHistoryRowsRenderWhatHistoryRowDoes(t *testing.T) {
	files := []*datastream.SourceFile{
		{Bucket: "b", Name: "dir/one.jsonl", Generation: 7},
		{Name: "two.jsonl", Generation: 1 << 40},
		{Bucket: "b"}, // no name: no file column, but a generation
		nil,           // not decoded from a file
	}
	var events []datastream.Event
	// More events than a slab of rows holds, switching files, ops, change
	// types, read methods and days, so cached boxes are replaced.
	for i := range 700 {
		ev := genEvent(uint64(i), int64(i%37), "eu", i%5 == 0, int64(i))
		ev.Meta.File = files[(i/50)%len(files)]
		ev.Meta.Record = int64(i * 300)
		ev.Meta.ReadTimestamp = ev.SourceTimestamp + 5
		if i%3 == 0 {
			ev.Meta.ReadTimestamp = 0
			ev.ChangeType = ""
			ev.Meta.UUID = ""
		}
		if i%7 == 0 {
			ev.Meta.ReadMethod = "mysql-backfill-fulldump"
		}
		events = append(events, ev)
	}
	h := NewHistoryRows()
	got := make([][]any, len(events))
	for i := range events {
		got[i] = h.Row(&events[i])
	}
	// Ordering keys are copies: the decoder may reuse its bytes.
	for i := range events {
		events[i].Order.Bytes[1] ^= 0xff
	}
	runtime.GC() // slabs must stay alive through the rows alone
	for i := range events {
		events[i].Order.Bytes[1] ^= 0xff
		want := HistoryRow(events[i])
		if len(got[i]) != len(want) || cap(got[i]) != len(got[i]) {
			t.Fatalf("row %d has length %d and capacity %d, want both %d", i, len(got[i]), cap(got[i]), len(want))
		}
		for j := range want {
			if reflect.TypeOf(got[i][j]) != reflect.TypeOf(want[j]) || !reflect.DeepEqual(got[i][j], want[j]) {
				t.Fatalf("row %d column %s = %#v, want %#v", i, historyMeta[min(j, len(historyMeta)-1)].Name, got[i][j], want[j])
			}
		}
		if b := got[i][7].([]byte); cap(b) != len(b) {
			t.Fatalf("row %d: ordering key has room to grow into a neighbour (cap %d, len %d)", i, cap(b), len(b))
		}
	}
	// RowInto renders the same rows into the array it is given, when it
	// has room.
	h = NewHistoryRows()
	var last []any
	for i := range events {
		r := h.RowInto(last, &events[i])
		if cap(last) >= len(r) && &r[0] != &last[0] {
			t.Fatalf("row %d: RowInto did not reuse the array of %d values for a row of %d", i, cap(last), len(r))
		}
		if want := HistoryRow(events[i]); !reflect.DeepEqual(r, want) {
			t.Fatalf("RowInto row %d = %#v, want %#v", i, r, want)
		}
		last = r
	}
}

func TestHistoryChangesBuildWhatChangeFromHistoryDoes(t *testing.T) {
	h := NewHistoryChanges()
	var got, want []Change
	// More keys than a slab holds, with string keys of every kind (one
	// not valid UTF-8, whose text is hex).
	for i := range 1500 {
		region := []string{"eu", "us-\"east\"", "\xff\xfe", ""}[i%4]
		row := HistoryRow(genEvent(uint64(i), int64(i), region, i%9 == 0, int64(i)))
		g, err := h.Change(row, testSource, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		w, err := ChangeFromHistory(row, testSource, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		got, want = append(got, g), append(want, w)
	}
	runtime.GC() // the slabs must stay alive through the changes alone
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("change %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
		if cap(got[i].Key) != len(got[i].Key) {
			t.Fatalf("change %d: key has room to grow into a neighbour", i)
		}
	}
	row := HistoryRow(genEvent(1, 1, "eu", false, 1))
	row[len(historyMeta)+1] = nil
	if _, err := h.Change(row, testSource, []int{0, 1}); err == nil {
		t.Fatal("a null key column is not an error")
	}
	// A change built from the state's columns alone is the same change
	// without its history row; its key text, left out, is rendered by
	// Text as the full change holds it.
	hs := HistorySchema(testSource)
	cols := StateChangeColumns(testSource)
	for i := range want {
		hist := HistoryRow(genEvent(uint64(i), int64(i), []string{"eu", "us-\"east\"", "\xff\xfe", ""}[i%4], i%9 == 0, int64(i)))
		sr := make([]any, len(cols))
		for k, c := range cols {
			sr[k] = hist[hs.Index(c)]
		}
		c, err := h.StateChange(sr, testSource, []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		if c.KeyText != "" || c.Text() != want[i].KeyText {
			t.Fatalf("state change %d: key text %q, Text() %q; want none and %q", i, c.KeyText, c.Text(), want[i].KeyText)
		}
		w := want[i]
		w.KeyText, w.History, w.StateRow = "", nil, sr[:len(testSource.Fields)+len(stateMeta)]
		if !reflect.DeepEqual(c, w) {
			t.Fatalf("state change %d:\n got %#v\nwant %#v", i, c, w)
		}
	}
}
