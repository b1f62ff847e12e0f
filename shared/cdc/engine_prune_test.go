package cdc

import (
	"fmt"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

func TestPruneBySourceTimeKeepsTheFilesWhoseBoundsCanHoldAChange(t *testing.T) {
	at := func(sec int) value.Micros {
		return value.MicrosOf(time.Date(2026, 1, 5, 10, 0, sec, 0, time.UTC))
	}
	bounds := func(path string, lo, hi value.Micros) delta.Add {
		return delta.Add{Path: path, Stats: fmt.Sprintf(`{"numRecords":3,"minValues":{%q:%q},"maxValues":{%q:%q}}`,
			ColSourceTimestamp, lo.Time().Format("2006-01-02T15:04:05.000Z"), ColSourceTimestamp, hi.Time().Format("2006-01-02T15:04:05.000Z"))}
	}
	files := []delta.Add{
		bounds("before", at(0), at(9)),
		bounds("holds 20", at(15), at(25)),
		// Stats keep milliseconds: a change at 40.000700 lies within a
		// file whose maximum reads 40.000.
		bounds("ends at the change's millisecond", at(30), at(40)),
		bounds("between", at(21), at(39)),
		bounds("after", at(50), at(59)),
		{Path: "no stats"},
	}
	changes := []Change{{SourceTS: at(20)}, {SourceTS: at(40) + 700}, {SourceTS: at(45)}}
	var got []string
	for _, f := range pruneBySourceTime(files, changes) {
		got = append(got, f.Path)
	}
	want := []string{"holds 20", "ends at the change's millisecond", "no stats"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
}
