package delta

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestStatsColumnListsParseAsSparkReadsThem(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     [][]string
	}{
		{"names are separated by commas", "a,b", [][]string{{"a"}, {"b"}}},
		{"blanks around names are dropped", " a ,\tb ", [][]string{{"a"}, {"b"}}},
		{"a nested field is a dotted path", "addr.zip,x", [][]string{{"addr", "zip"}, {"x"}}},
		{"backticks quote dots and commas", "`a.dot`,`a,comma`.x", [][]string{{"a.dot"}, {"a,comma", "x"}}},
		{"a doubled backtick is one", "`we``ird`", [][]string{{"we`ird"}}},
		{"a blank list names no column", "  ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatsColumns(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("parse %q = %q, want %q", tc.in, got, tc.want)
			}
			if back, err := parseStatsColumns(formatStatsColumns(got)); err != nil || fmt.Sprint(back) != fmt.Sprint(got) {
				t.Errorf("%q formats as %q, which parses as %q (%v)", tc.in, formatStatsColumns(got), back, err)
			}
		})
	}
	for _, bad := range []string{"a,,b", "a..b", "`open", "two words", "`x`y", "a`b`"} {
		if got, err := parseStatsColumns(bad); err == nil {
			t.Errorf("parse %q = %q, want an error", bad, got)
		}
	}
	for name, want := range map[string]string{"ok_1": "ok_1", "order-id": "`order-id`", "9lives": "`9lives`", "café": "`café`", "a`b": "`a``b`"} {
		if got := formatStatsColumns([][]string{{name}}); got != want {
			t.Errorf("format %q = %s, want %s", name, got, want)
		}
	}
}

// statsKeys are the top-level columns the stats name, by statistic.
func statsKeys(t *testing.T, stats string) (nulls, bounds []string) {
	t.Helper()
	st, err := ParseStats(stats)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(st.NullCount)), slices.Sorted(maps.Keys(st.MinValues))
}

func TestTheWriterGivesStatisticsToTheColumnsTheTablePropertiesChoose(t *testing.T) {
	st := value.StructType{Fields: []value.Field{{Name: "a", Type: value.Integer, Nullable: true}, {Name: "b.c", Type: value.Integer, Nullable: true}}}
	fields := []value.Field{
		{Name: "Id", Type: value.Long}, {Name: "st", Type: st, Nullable: true},
		{Name: "order-id", Type: value.String, Nullable: true}, {Name: "part", Type: value.String},
	}
	row := []any{int64(7), []any{int32(1), int32(2)}, "o-1", "p"}
	for i := range 40 {
		fields = append(fields, value.Field{Name: fmt.Sprintf("c%02d", i), Type: value.Integer, Nullable: true})
		row = append(row, int32(i))
	}
	fields = append(fields, value.Field{Name: "ok", Type: value.Boolean, Nullable: true})
	row = append(row, true)
	schema := value.StructType{Fields: fields}
	for _, tc := range []struct {
		name          string
		conf          map[string]string
		limit         int
		nulls, bounds string
	}{
		{"no property indexes the first 32 leaves", nil, 0,
			"[Id c00 c01 c02 c03 c04 c05 c06 c07 c08 c09 c10 c11 c12 c13 c14 c15 c16 c17 c18 c19 c20 c21 c22 c23 c24 c25 c26 c27 order-id st]",
			"[Id c00 c01 c02 c03 c04 c05 c06 c07 c08 c09 c10 c11 c12 c13 c14 c15 c16 c17 c18 c19 c20 c21 c22 c23 c24 c25 c26 c27 order-id st]"},
		{"the column count counts a struct's leaves", map[string]string{PropDataSkippingNumIndexedCols: "2"}, 0, "[Id st]", "[Id st]"},
		{"a count of -1 indexes every column", map[string]string{PropDataSkippingNumIndexedCols: "-1"}, 0, "", ""},
		{"a list names columns in any case and order, never a partition column", map[string]string{
			PropDataSkippingStatsColumns: "c39,ID,`order-id`,part,ok",
		}, 0, "[Id c39 ok order-id]", "[Id c39 order-id]"},
		{"a list names nested fields by dotted paths", map[string]string{PropDataSkippingStatsColumns: "ST.`b.c`"}, 0, "[st]", "[st]"},
		{"the list takes precedence over the count", map[string]string{PropDataSkippingStatsColumns: "c39", PropDataSkippingNumIndexedCols: "5"}, 0, "[c39]", "[c39]"},
		{"an explicit count in the options overrides the properties", map[string]string{PropDataSkippingStatsColumns: "c39"}, 1, "[Id]", "[Id]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add := pqWrite(t, newPQMemStore(), WriteOptions{
				Schema: schema, PartitionColumns: []string{"part"}, PartitionValues: map[string]any{"part": "p"},
				Configuration: tc.conf, StatsColumns: tc.limit,
			}, [][]any{row})
			nulls, bounds := statsKeys(t, add.Stats)
			if tc.nulls == "" { // every data column
				if len(nulls) != len(fields)-1 || len(bounds) != len(fields)-2 {
					t.Fatalf("stats cover %d/%d columns, want every one: %s", len(nulls), len(bounds), add.Stats)
				}
				return
			}
			if fmt.Sprint(nulls) != tc.nulls || fmt.Sprint(bounds) != tc.bounds {
				t.Errorf("null counts of %v and bounds of %v, want %s and %s", nulls, bounds, tc.nulls, tc.bounds)
			}
		})
	}
	t.Run("only b.c of the struct when the list names it", func(t *testing.T) {
		add := pqWrite(t, newPQMemStore(), WriteOptions{Schema: schema, PartitionColumns: []string{"part"}, PartitionValues: map[string]any{"part": "p"},
			Configuration: map[string]string{PropDataSkippingStatsColumns: "st.`b.c`"}}, [][]any{row})
		if !strings.Contains(add.Stats, `"minValues":{"st":{"b.c":2}}`) || strings.Contains(add.Stats, `"a"`) {
			t.Errorf("stats %s, want st.b.c alone", add.Stats)
		}
	})
	t.Run("a property the writer cannot read fails the file", func(t *testing.T) {
		for _, conf := range []map[string]string{{PropDataSkippingStatsColumns: "`open"}, {PropDataSkippingNumIndexedCols: "-2"}, {PropDataSkippingNumIndexedCols: "many"}} {
			if _, err := NewFileWriter(context.Background(), newPQMemStore(), WriteOptions{Schema: schema, Configuration: conf}); err == nil {
				t.Errorf("%v: no error", conf)
			}
		}
	})
}

// TestARewriteKeepsTheStatisticsOfListedColumns: copied row groups bring
// a summary of every leaf; the columns a list chooses take theirs, not the
// first ones'.
func TestARewriteKeepsTheStatisticsOfListedColumns(t *testing.T) {
	conf := map[string]string{PropDataSkippingStatsColumns: "ts,amount"}
	store := newPQMemStore()
	var rows [][]any
	for i := range rwRows {
		rows = append(rows, rwRow(i, "eu"))
	}
	add := pqWrite(t, store, WriteOptions{Schema: rwSchema(), RowGroupBytes: 1, DataChange: true, Configuration: conf}, rows)
	md := pqMetadata(rwSchema(), nil, conf)
	res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
		Write: WriteOptions{Schema: rwSchema(), Configuration: conf},
		Keys:  []string{"id"},
		Drop:  func(k []any) bool { return k[0].(int64) == 300 },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowGroupsCopied == 0 || res.RowGroupsDecoded == 0 || len(res.Adds) != 1 {
		t.Fatalf("copied %d and decoded %d row groups into %d files, want both paths into one", res.RowGroupsCopied, res.RowGroupsDecoded, len(res.Adds))
	}
	kept := slices.DeleteFunc(slices.Clone(rows), func(r []any) bool { return r[0].(int64) == 300 })
	rwCheckStats(t, rwSchema(), nil, res.Adds[0], kept)
	want := pqWrite(t, newPQMemStore(), WriteOptions{Schema: rwSchema(), Configuration: conf}, kept)
	if res.Adds[0].Stats != want.Stats {
		t.Errorf("stats of the rewrite = %s, want those of the kept rows written anew, %s", res.Adds[0].Stats, want.Stats)
	}
}

func TestStatsColumnsForAddsWhatIsNeededAndNothingElse(t *testing.T) {
	wide := func(n int) value.StructType {
		var s value.StructType
		for i := 1; i <= n; i++ {
			typ := value.Type(value.Long)
			if i == 3 {
				typ = value.Boolean // no min/max: never listed
			}
			s.Fields = append(s.Fields, value.Field{Name: fmt.Sprintf("c%02d", i), Type: typ, Nullable: true})
		}
		return s
	}
	first := func(n int, extra ...string) string {
		var names []string
		for i := 1; i <= n; i++ {
			if i != 3 {
				names = append(names, fmt.Sprintf("c%02d", i))
			}
		}
		return strings.Join(append(names, extra...), ",")
	}
	withBinary := wide(60)
	withBinary.Fields = append(withBinary.Fields, value.Field{Name: "bin", Type: value.Binary, Nullable: true})
	for _, tc := range []struct {
		name    string
		schema  value.StructType
		part    []string
		conf    map[string]string
		need    []string
		want    string
		changed bool
	}{
		{"columns within the first 32 need no property", wide(40), nil, nil, []string{"c32", "c01"}, "", false},
		{"a column beyond them lists the first 32 and it", wide(60), nil, nil, []string{"C45"}, first(32, "c45"), true},
		{"partition columns do not count", wide(60), []string{"c01"}, nil, []string{"c33"}, "", false},
		{"a user's count is the count kept", wide(60), nil, map[string]string{PropDataSkippingNumIndexedCols: "2"}, []string{"c45"}, "c01,c02,c45", true},
		{"a count of -1 covers every column", wide(60), nil, map[string]string{PropDataSkippingNumIndexedCols: "-1"}, []string{"c45"}, "", false},
		{"a user's list gets the needed columns it lacks", wide(60), nil, map[string]string{PropDataSkippingStatsColumns: "c50, `c02`"}, []string{"c45", "c50"}, "c50,c02,c45", true},
		{"a user's list that has them is kept", wide(60), nil, map[string]string{PropDataSkippingStatsColumns: "C45"}, []string{"c45"}, "", false},
		{"columns the schema lost leave the list", wide(40), nil, map[string]string{PropDataSkippingStatsColumns: "c45,c02"}, []string{"c02"}, "c02", true},
		{"absent, partition and binary columns are not needed", withBinary, []string{"c60"}, nil, []string{"nope", "c60", "bin", "c03"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := StatsColumnsFor(tc.schema, tc.part, tc.conf, tc.need)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.changed || got != tc.want {
				t.Fatalf("StatsColumnsFor = %q, %v; want %q, %v", got, changed, tc.want, tc.changed)
			}
			if !changed {
				return
			}
			// The value gives the needed columns statistics.
			conf := maps.Clone(tc.conf)
			if conf == nil {
				conf = map[string]string{}
			}
			conf[PropDataSkippingStatsColumns] = got
			if again, changed, err := StatsColumnsFor(tc.schema, tc.part, conf, tc.need); err != nil || changed {
				t.Errorf("with %q set, StatsColumnsFor = %q, %v, %v; want no change", got, again, changed, err)
			}
		})
	}
	if _, _, err := StatsColumnsFor(wide(3), nil, map[string]string{PropDataSkippingStatsColumns: "a,,b"}, []string{"c01"}); err == nil {
		t.Error("a list that does not parse: no error")
	}
}
