package pipeline

import (
	"context"
	"fmt"
	"github.com/dsdelta/dsdelta/shared/cdc"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// jsonlFile renders MySQL CDC events of shop.t, one per payload, with log
// positions starting at pos so that later files order after earlier ones.
func jsonlFile(name string, pos int, payloads ...string) dssim.File {
	var b strings.Builder
	for i, p := range payloads {
		fmt.Fprintf(&b, `{"uuid":"u-%s-%d","read_timestamp":"2026-01-05T10:00:00.000Z","source_timestamp":"2026-01-05T10:00:%02d.000Z","object":"shop_t","read_method":"mysql-cdc-binlog",`+
			`"source_metadata":{"database":"shop","table":"t","primary_keys":["id"],"log_file":"mysql-bin.000001","log_position":%d,"change_type":"UPDATE","is_deleted":false},"payload":%s}`+"\n",
			name, i, i%60, pos+i, p)
	}
	return dssim.File{Name: "shop_t/2026/01/05/10/00/" + name + "_mysql-cdc-binlog_1_0_0.jsonl", Data: []byte(b.String())}
}

// stateRows reads the current-state table: its source schema and, by the
// canonical JSON of the key columns, that of each row's source columns.
func stateRows(t *testing.T, ctx context.Context, p *Pipeline, tableID string, key ...string) (value.StructType, map[string]string) {
	t.Helper()
	tabs, snap := stateSnapshot(t, ctx, p, tableID)
	var cols []string
	var src value.StructType
	for _, f := range snap.Schema().Fields {
		if !strings.HasPrefix(f.Name, "_ds_") {
			cols = append(cols, f.Name)
			src.Fields = append(src.Fields, f)
		}
	}
	rows := map[string]string{}
	isCurrent := snap.Schema().Index(cdc.ColIsCurrent) // scd2: the current versions only
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			if isCurrent >= 0 && row[isCurrent] == false {
				return nil
			}
			rows[sourceJSON(t, snap.Schema(), row, key)] = sourceJSON(t, snap.Schema(), row, cols)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return src, rows
}

// stateSnapshot returns a table's tables and its current-state snapshot.
func stateSnapshot(t *testing.T, ctx context.Context, p *Pipeline, tableID string) (cdc.TableSet, *delta.Snapshot) {
	t.Helper()
	tabs, err := p.TableSet(tableID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if err != nil {
		t.Fatalf("%s: %v", tableID, err)
	}
	return tabs, snap
}

// deletedKeys returns the keys a soft_delete table marks deleted.
func deletedKeys(t *testing.T, ctx context.Context, p *Pipeline, tableID string, key ...string) map[string]bool {
	t.Helper()
	tabs, snap := stateSnapshot(t, ctx, p, tableID)
	i := snap.Schema().Index(cdc.ColIsDeleted)
	if i < 0 {
		t.Fatalf("%s has no %s column", tableID, cdc.ColIsDeleted)
	}
	out := map[string]bool{}
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			if row[i] == true {
				out[sourceJSON(t, snap.Schema(), row, key)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// stageAll stages files in order and merges the table after each file.
func stageAll(t *testing.T, ctx context.Context, p *Pipeline, source objstore.Store, tableID string, files ...dssim.File) []StageResult {
	t.Helper()
	var out []StageResult
	for _, n := range write(t, ctx, source, files) {
		res, err := p.Stage(ctx, n)
		if err != nil {
			t.Fatalf("stage %s: %v", n.Name, err)
		}
		out = append(out, res)
		if _, err := p.MergeTable(ctx, tableID); err != nil {
			t.Fatalf("merge %s: %v", tableID, err)
		}
	}
	return out
}

func TestStageTypesJSONColumnsFromTheWholeFileAndTheTable(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		files  []dssim.File
		schema string
		rows   map[string]string
	}{
		{
			name: "a null in the first record of an integer column stages as long",
			files: []dssim.File{jsonlFile("a", 10,
				`{"id":1,"n":null,"note":null}`, `{"id":2,"n":5,"note":null}`, `{"id":3,"n":-9007199254740993,"note":null}`)},
			// note is null everywhere: its type is unknown, so the table
			// does not get the column until a value types it.
			schema: "struct<id:long,n:long>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"n":null}`,
				`{"id":2}`: `{"id":2,"n":5}`,
				`{"id":3}`: `{"id":3,"n":-9007199254740993}`,
			},
		},
		{
			name: "integers and fractions stage as one exact decimal",
			files: []dssim.File{jsonlFile("a", 10,
				`{"id":1,"amount":12}`, `{"id":2,"amount":0.125}`, `{"id":3,"amount":null}`)},
			schema: "struct<id:long,amount:decimal(38,3)>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"amount":"12.000"}`,
				`{"id":2}`: `{"id":2,"amount":"0.125"}`,
				`{"id":3}`: `{"id":3,"amount":null}`,
			},
		},
		{
			name: "mixed content falls back to string with the numbers' exact text",
			files: []dssim.File{jsonlFile("a", 10,
				`{"id":1,"v":1.50}`, `{"id":2,"v":"abc"}`, `{"id":3,"v":true}`, `{"id":4,"v":{"k":[1, 2]}}`)},
			schema: "struct<id:long,v:string>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"v":"1.50"}`,
				`{"id":2}`: `{"id":2,"v":"abc"}`,
				`{"id":3}`: `{"id":3,"v":"true"}`,
				`{"id":4}`: `{"id":4,"v":"{\"k\":[1,2]}"}`,
			},
		},
		{
			name: "the table's type wins over a later file's values",
			files: []dssim.File{
				jsonlFile("a", 10, `{"id":1,"n":1,"s":"free text","d":"2024-01-02"}`),
				// Alone, these would type n as string, s as timestamp and
				// d as timestamp; the table says long, string and date.
				jsonlFile("b", 20, `{"id":2,"n":null,"s":"2024-01-02T03:04:05Z","d":"2024-01-03T00:00:00Z"}`, `{"id":3,"n":"7","s":null,"d":null}`),
			},
			schema: "struct<id:long,n:long,s:string,d:date>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"n":1,"s":"free text","d":"2024-01-02"}`,
				`{"id":2}`: `{"id":2,"n":null,"s":"2024-01-02T03:04:05Z","d":"2024-01-03"}`,
				`{"id":3}`: `{"id":3,"n":7,"s":null,"d":null}`,
			},
		},
		{
			name: "a column that was null everywhere is typed by the first file with a value",
			files: []dssim.File{
				jsonlFile("a", 10, `{"id":1,"n":null}`),
				jsonlFile("b", 20, `{"id":2,"n":42}`),
			},
			schema: "struct<id:long,n:long>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"n":null}`,
				`{"id":2}`: `{"id":2,"n":42}`,
			},
		},
		{
			name: "files staged before the table exists agree on a column null in one of them",
			files: []dssim.File{
				jsonlFile("a", 10, `{"id":1,"n":null,"ts":null}`),
				jsonlFile("b", 20, `{"id":2,"n":42,"ts":"2024-01-02T03:04:05.123456Z"}`),
			},
			schema: "struct<id:long,n:long,ts:timestamp>",
			rows: map[string]string{
				`{"id":1}`: `{"id":1,"n":null,"ts":null}`,
				`{"id":2}`: `{"id":2,"n":42,"ts":"2024-01-02T03:04:05.123456Z"}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{})
			for _, res := range stageAll(t, ctx, p, source, "shop.t", tt.files...) {
				if res.Quarantined != "" || res.Skipped != "" {
					t.Fatalf("%s: %+v", res.File.Name, res)
				}
			}
			schema, rows := stateRows(t, ctx, p, "shop.t", "id")
			if got := schema.String(); got != tt.schema {
				t.Errorf("state schema = %s, want %s", got, tt.schema)
			}
			if len(rows) != len(tt.rows) {
				t.Errorf("state holds %d rows, want %d: %v", len(rows), len(tt.rows), rows)
			}
			for k, want := range tt.rows {
				if rows[k] != want {
					t.Errorf("row %s\n got %s\nwant %s", k, rows[k], want)
				}
			}
		})
	}
}

func TestStageQuarantinesAJSONValueThatConflictsWithTheTable(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	good := jsonlFile("a", 10, `{"id":1,"n":5}`)
	bad := jsonlFile("b", 20, `{"id":2,"n":6}`, `{"id":3,"n":"abc"}`)
	res := stageAll(t, ctx, p, source, "shop.t", good, bad)
	if res[0].Quarantined != "" {
		t.Fatalf("the good file was quarantined: %s", res[0].Quarantined)
	}
	reason := res[1].Quarantined
	for _, want := range []string{bad.Name, "line 2", "payload.n", `"abc"`} {
		if !strings.Contains(reason, want) {
			t.Errorf("quarantine reason %q does not name %s", reason, want)
		}
	}
	if res[1].Table != "shop.t" {
		t.Errorf("quarantined file's table = %q, want shop.t", res[1].Table)
	}
	if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 1 || rows[`{"id":1}`] != `{"id":1,"n":5}` {
		t.Errorf("state = %v, want only the good file's row", rows)
	}
}

func TestStageJSONTimestampsEqualTheAvroPath(t *testing.T) {
	ctx := context.Background()
	state := map[dssim.Format]map[string]string{}
	for _, f := range []dssim.Format{dssim.JSONL, dssim.Avro} {
		sim, err := dssim.Run(dssim.Options{Seed: 5, EventsPerFile: 7, Tables: []dssim.TableSpec{
			{Source: dssim.PostgreSQL, Database: "public", Table: "order_lines", Format: f, InitialRows: 6, Changes: 20},
		}})
		if err != nil {
			t.Fatal(err)
		}
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{})
		stageAll(t, ctx, p, source, "public.order_lines", sim.Files...)
		schema, rows := stateRows(t, ctx, p, "public.order_lines", "order_id", "line_no")
		if ft, ok := schema.Field("created_at"); !ok || ft.Type != value.Timestamp {
			t.Fatalf("%s: created_at is %v in %s, want timestamp", f, ft.Type, schema)
		}
		state[f] = rows
	}
	if len(state[dssim.JSONL]) == 0 || len(state[dssim.JSONL]) != len(state[dssim.Avro]) {
		t.Fatalf("JSON path holds %d rows, Avro path %d", len(state[dssim.JSONL]), len(state[dssim.Avro]))
	}
	for k, avroRow := range state[dssim.Avro] {
		// Both render created_at as the same microsecond instant; other
		// columns differ only in inferred widths, which print alike.
		if jsonRow := state[dssim.JSONL][k]; jsonRow != avroRow {
			t.Errorf("key %s:\n JSON %s\n Avro %s", k, jsonRow, avroRow)
		}
	}
}

// TestJSONFilesStagedBeforeTheFirstMergeAgree: `dsdelta run` stages every
// file before merging, so no table schema guides the typing; a column that
// is null in one file and typed in another must not be a conflict.
func TestJSONFilesStagedBeforeTheFirstMergeAgree(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	files := []dssim.File{
		jsonlFile("a", 10, `{"id":1,"n":null,"ts":null}`),
		jsonlFile("b", 20, `{"id":2,"n":42,"ts":"2024-01-02T03:04:05.123456Z"}`),
		jsonlFile("c", 30, `{"id":3,"n":null,"ts":null}`),
	}
	for _, n := range write(t, ctx, source, files) {
		res, err := p.Stage(ctx, n)
		if err != nil || res.Quarantined != "" {
			t.Fatalf("stage %s: %+v %v", n.Name, res, err)
		}
	}
	mr, err := p.MergeTable(ctx, "shop.t")
	if err != nil || mr.Quarantined != 0 {
		t.Fatalf("merge: %+v %v", mr, err)
	}
	schema, rows := stateRows(t, ctx, p, "shop.t", "id")
	if schema.String() != "struct<id:long,n:long,ts:timestamp>" || len(rows) != 3 {
		t.Fatalf("schema %s rows %v", schema, rows)
	}
}

// TestJSONNumbersWidenAcrossFiles: Datastream writes decimals as bare JSON
// numbers, so one file may hold only integers and another fractions with
// more places; the column widens (long → decimal, scale up) and every
// value lands exactly, whether the files are merged together or apart.
func TestJSONNumbersWidenAcrossFiles(t *testing.T) {
	files := []dssim.File{
		jsonlFile("a", 10, `{"id":1,"amount":100}`, `{"id":2,"amount":7}`),
		jsonlFile("b", 20, `{"id":3,"amount":12.5}`),
		jsonlFile("c", 30, `{"id":4,"amount":0.25}`, `{"id":1,"amount":99.99}`),
	}
	want := map[string]string{
		`{"id":1}`: `{"id":1,"amount":"99.99"}`,
		`{"id":2}`: `{"id":2,"amount":"7.00"}`,
		`{"id":3}`: `{"id":3,"amount":"12.50"}`,
		`{"id":4}`: `{"id":4,"amount":"0.25"}`,
	}
	for _, together := range []bool{true, false} {
		name := "merged file by file"
		if together {
			name = "merged in one batch"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{})
			for _, n := range write(t, ctx, source, files) {
				res, err := p.Stage(ctx, n)
				if err != nil || res.Quarantined != "" {
					t.Fatalf("stage %s: %+v %v", n.Name, res, err)
				}
				if !together {
					if mr, err := p.MergeTable(ctx, "shop.t"); err != nil || mr.Quarantined != 0 {
						t.Fatalf("merge: %+v %v", mr, err)
					}
				}
			}
			if mr, err := p.MergeTable(ctx, "shop.t"); err != nil || mr.Quarantined != 0 {
				t.Fatalf("merge: %+v %v", mr, err)
			}
			schema, rows := stateRows(t, ctx, p, "shop.t", "id")
			if f, _ := schema.Field("amount"); f.Type.String() != "decimal(38,2)" {
				t.Fatalf("amount typed %s", f.Type)
			}
			for k, w := range want {
				if rows[k] != w {
					t.Errorf("row %s: got %s want %s", k, rows[k], w)
				}
			}
			tabs, _ := p.TableSet("shop.t")
			if vr, err := cdc.Verify(ctx, tabs); err != nil || !vr.OK() {
				t.Fatalf("verify after widening: %v %+v", err, vr)
			}
		})
	}
}

// TestSchemaModeOverwrite: the table takes the newest file's schema; a
// dropped column goes, a retyped one is cast, and both tables stay
// consistent (verify passes).
func TestSchemaModeOverwrite(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	cfg, err := config.Parse([]byte("defaults:\n  schema_mode: overwrite\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPipeline(t, source, cfg)
	stageAll(t, ctx, p, source, "shop.t",
		jsonlFile("a", 10, `{"id":1,"a":5,"b":"x"}`),
		jsonlFile("b", 20, `{"id":2,"a":"text","c":7}`),
	)
	schema, rows := stateRows(t, ctx, p, "shop.t", "id")
	if schema.String() != "struct<id:long,a:string,c:long>" {
		t.Fatalf("schema %s", schema)
	}
	if rows[`{"id":1}`] != `{"id":1,"a":"5","c":null}` || rows[`{"id":2}`] != `{"id":2,"a":"text","c":7}` {
		t.Fatalf("rows %v", rows)
	}
	tabs, _ := p.TableSet("shop.t")
	if vr, err := cdc.Verify(ctx, tabs); err != nil || !vr.OK() {
		t.Fatalf("verify: %v %+v", err, vr)
	}
}

func TestARecordLargerThanMaxRecordBytesQuarantinesItsFile(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{RecordMaxBytes: 600})
	big := jsonlFile("big", 10, `{"id":1,"n":5}`, fmt.Sprintf(`{"id":2,"note":%q}`, strings.Repeat("y", 1000)), `{"id":3,"n":7}`)
	res := stageAll(t, ctx, p, source, "shop.t", big)
	for _, want := range []string{big.Name, "line 2", "max_record_bytes"} {
		if !strings.Contains(res[0].Quarantined, want) {
			t.Errorf("quarantine reason %q does not name %s", res[0].Quarantined, want)
		}
	}
}

// TestAFileOfTwoTablesIsQuarantined stages a file whose third record names
// another table than the first two: the file is quarantined with a reason
// naming it, the record and both tables, and nothing of it is merged.
func TestAFileOfTwoTablesIsQuarantined(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	good := jsonlFile("a", 10, `{"id":1,"n":5}`)
	mixed := jsonlFile("b", 20, `{"id":2,"n":6}`, `{"id":3,"n":7}`, `{"id":4,"n":8}`)
	lines := strings.SplitAfter(string(mixed.Data), "\n")
	lines[2] = strings.Replace(lines[2], `"table":"t"`, `"table":"u"`, 1)
	mixed.Data = []byte(strings.Join(lines, ""))
	res := stageAll(t, ctx, p, source, "shop.t", good, mixed)
	if res[0].Quarantined != "" {
		t.Fatalf("the good file was quarantined: %s", res[0].Quarantined)
	}
	reason := res[1].Quarantined
	for _, want := range []string{mixed.Name, "record 3", "shop.u", "shop.t"} {
		if !strings.Contains(reason, want) {
			t.Errorf("quarantine reason %q does not name %s", reason, want)
		}
	}
	if _, rows := stateRows(t, ctx, p, "shop.t", "id"); len(rows) != 1 {
		t.Errorf("state = %v, want only the good file's row", rows)
	}
}

// TestAPartsSchemaUnifiesItsEventsSchemas checks the first pass over a
// part's events: their schemas merged where they change, less the ignored
// columns; the span of their source dates; their greatest order; and a
// schema that cannot be merged naming its record.
func TestAPartsSchemaUnifiesItsEventsSchemas(t *testing.T) {
	narrow := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "secret", Type: value.String, Nullable: true}}}
	wide := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "secret", Type: value.String, Nullable: true}, {Name: "n", Type: value.Integer, Nullable: true}}}
	clash := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Boolean}}}
	day := value.Micros(86_400_000_000)
	event := func(record int64, schema value.StructType, ts value.Micros, order string) datastream.Event {
		ev := datastream.Event{Schema: schema, SourceTimestamp: ts, Order: datastream.OrderKey{Bytes: []byte(order)}}
		ev.Meta.Record = record
		return ev
	}
	s := &stager{f: datastream.SourceFile{Name: "f.jsonl"}, tc: config.TableConfig{IgnoreColumns: []string{"secret"}}}
	tests := []struct {
		name          string
		events        []datastream.Event
		rowSch        []int
		columns       []string // the source columns of the history schema
		firstDay, day value.Days
		maxOrder      string
		err           string
	}{
		{"events of one date and schema make a dated part of that schema",
			[]datastream.Event{event(1, narrow, 20*day, "b"), event(2, narrow, 20*day+5, "c"), event(3, narrow, 20*day+9, "a")},
			[]int{0, 0, 0}, []string{"id"}, 20, 20, "c", ""},
		{"a schema is listed each time it changes and the columns are merged",
			[]datastream.Event{event(1, narrow, 21*day, "a"), event(2, wide, 20*day, "b"), event(3, narrow, 22*day, "c")},
			[]int{0, 1, 2}, []string{"id", "n"}, 20, 22, "c", ""},
		{"a schema that cannot be merged names its record",
			[]datastream.Event{event(1, narrow, 20*day, "a"), event(7, clash, 20*day, "b")},
			nil, nil, 0, 0, "", "f.jsonl: record 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events datastream.Events
			for _, ev := range tt.events {
				events.Append(ev)
			}
			ps, err := s.partSchema(&events)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !isPermanent(err) {
					t.Fatalf("err = %v, want a permanent error naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ps.rowSch, tt.rowSch) {
				t.Errorf("schema per event = %v, want %v", ps.rowSch, tt.rowSch)
			}
			var columns []string
			for _, f := range ps.hs.Fields {
				if !strings.HasPrefix(f.Name, cdc.MetaPrefix) {
					columns = append(columns, f.Name)
				}
			}
			if !slices.Equal(columns, tt.columns) {
				t.Errorf("source columns = %v, want %v", columns, tt.columns)
			}
			if ps.firstDay != tt.firstDay || ps.lastDay != tt.day {
				t.Errorf("days %d to %d, want %d to %d", ps.firstDay, ps.lastDay, tt.firstDay, tt.day)
			}
			if string(ps.maxOrder) != tt.maxOrder {
				t.Errorf("max order = %q, want %q", ps.maxOrder, tt.maxOrder)
			}
		})
	}
}
