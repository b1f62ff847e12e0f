package datastream

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2/ocf"
)

// mysqlJSON renders MySQL CDC events of table shop.t, one per payload (the
// text of a JSON object), on consecutive lines.
func mysqlJSON(payloads ...string) []byte {
	var b strings.Builder
	for i, p := range payloads {
		fmt.Fprintf(&b, `{"uuid":"u%d","read_timestamp":"2024-01-01T00:00:00.000Z","source_timestamp":"2024-01-01T00:00:%02dZ","object":"shop_t","read_method":"mysql-cdc-binlog",`+
			`"source_metadata":{"database":"shop","table":"t","primary_keys":["id"],"log_file":"mysql-bin.000001","log_position":%d,"change_type":"INSERT","is_deleted":false},"payload":%s}`+"\n",
			i, i%60, 100+i, p)
	}
	return []byte(b.String())
}

// columnFile is a file whose payloads are {"id":n,"v":<value>}.
func columnFile(values ...string) []byte {
	ps := make([]string, len(values))
	for i, v := range values {
		ps[i] = fmt.Sprintf(`{"id":%d,"v":%s}`, i+1, v)
	}
	return mysqlJSON(ps...)
}

// unified decodes a JSON file, unifies it with known and returns the
// schema and the canonical JSON of each event's row.
func unified(t *testing.T, data []byte, known value.StructType) (value.StructType, []string, error) {
	t.Helper()
	evs, err := decodeAll(t, data, "f.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := UnifyJSON(evs, known)
	if err != nil {
		return st, nil, err
	}
	rows := make([]string, len(evs))
	for i, ev := range evs {
		if !value.Equal(ev.Schema, st) {
			t.Fatalf("event %d has schema %s, UnifyJSON returned %s", i+1, ev.Schema, st)
		}
		b, err := value.AppendRowJSON(nil, ev.Schema, ev.Row)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = string(b)
	}
	return st, rows, nil
}

func TestUnifyJSONDecidesAColumnTypeFromAllItsValues(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		typ    string
		want   []string // the canonical JSON of v per event
	}{
		{"a null before integers makes a long", []string{`null`, `5`, `-7`}, "long", []string{`null`, `5`, `-7`}},
		{"a column that is null everywhere is a string", []string{`null`, `null`}, "string", []string{`null`, `null`}},
		{"an integer beyond int64 widens to decimal(20,0)", []string{`1`, `18446744073709551615`}, "decimal(20,0)", []string{`"1"`, `"18446744073709551615"`}},
		{"an integer beyond 20 digits widens to decimal(38,0)", []string{`-2`, `123456789012345678901234`}, "decimal(38,0)", []string{`"-2"`, `"123456789012345678901234"`}},
		{"integers and fractions make a decimal wide enough for every scale", []string{`5`, `1.25`, `-0.5`, `null`}, "decimal(38,2)", []string{`"5.00"`, `"1.25"`, `"-0.50"`, `null`}},
		{"an exponent is exact, never through float64", []string{`1.5e3`, `0.1`}, "decimal(38,1)", []string{`"1500.0"`, `"0.1"`}},
		{"20 integer digits and 18 fraction digits still fit 38", []string{`12345678901234567890.123456789012345678`, `1`}, "decimal(38,18)", []string{`"12345678901234567890.123456789012345678"`, `"1.000000000000000000"`}},
		{"numbers that together need more than 38 digits are strings of their exact text", []string{`12345678901234567890123.5`, `0.123456789012345678`}, "string", []string{`"12345678901234567890123.5"`, `"0.123456789012345678"`}},
		{"a number beyond 38 digits is a string of its text", []string{`123456789012345678901234567890123456789`, `1`}, "string", []string{`"123456789012345678901234567890123456789"`, `"1"`}},
		{"every strict timestamp form makes a timestamp in UTC", []string{`"2025-10-25T03:36:17.948151Z"`, `"2025-10-25 03:36:17"`, `"2025-10-25T05:36:17.1+02:00"`, `"2025-10-25T03:36:17.123456789-0000"`, `"2025-10-25T04:36:17+01"`}, "timestamp",
			[]string{`"2025-10-25T03:36:17.948151Z"`, `"2025-10-25T03:36:17.000000Z"`, `"2025-10-25T03:36:17.100000Z"`, `"2025-10-25T03:36:17.123456Z"`, `"2025-10-25T03:36:17.000000Z"`}},
		{"dates make a date", []string{`"2024-01-02"`, `null`, `"2024-02-29"`}, "date", []string{`"2024-01-02"`, `null`, `"2024-02-29"`}},
		{"an impossible date keeps the column a string", []string{`"2024-01-02"`, `"2023-02-29"`}, "string", []string{`"2024-01-02"`, `"2023-02-29"`}},
		{"dates mixed with timestamps stay strings", []string{`"2024-01-02"`, `"2024-01-02T00:00:00Z"`}, "string", []string{`"2024-01-02"`, `"2024-01-02T00:00:00Z"`}},
		{"timestamps mixed with free text stay strings", []string{`"2024-01-02T00:00:00Z"`, `"soon"`}, "string", []string{`"2024-01-02T00:00:00Z"`, `"soon"`}},
		{"a timestamp without seconds is not strict", []string{`"2024-01-02T10:11"`}, "string", []string{`"2024-01-02T10:11"`}},
		{"a timestamp with ten fraction digits is not strict", []string{`"2024-01-02T10:11:12.1234567890Z"`}, "string", []string{`"2024-01-02T10:11:12.1234567890Z"`}},
		{"numbers mixed with strings are strings holding the exact JSON text", []string{`1.50`, `"abc"`, `1e2`, `-0`}, "string", []string{`"1.50"`, `"abc"`, `"1e2"`, `"-0"`}},
		{"booleans make a boolean", []string{`true`, `null`, `false`}, "boolean", []string{`true`, `null`, `false`}},
		{"booleans mixed with numbers are strings", []string{`true`, `5`}, "string", []string{`"true"`, `"5"`}},
		{"objects and arrays are strings of their compact JSON", []string{`{"a": 1, "b": [true, null]}`, `[1, 2]`}, "string", []string{`"{\"a\":1,\"b\":[true,null]}"`, `"[1,2]"`}},
		{"objects mixed with strings are strings", []string{`{"a":1}`, `"x"`}, "string", []string{`"{\"a\":1}"`, `"x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, rows, err := unified(t, columnFile(tt.values...), value.StructType{})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.String(); got != "struct<id:long,v:"+tt.typ+">" {
				t.Errorf("schema = %s, want v:%s", got, tt.typ)
			}
			for i, r := range rows {
				if want := fmt.Sprintf(`{"id":%d,"v":%s}`, i+1, tt.want[i]); r != want {
					t.Errorf("row %d = %s, want %s", i+1, r, want)
				}
			}
			// The decision depends on the values, not their order.
			rev := slices.Clone(tt.values)
			slices.Reverse(rev)
			if st2, _, err := unified(t, columnFile(rev...), value.StructType{}); err != nil || !value.Equal(st, st2) {
				t.Errorf("reversed file: schema %s, err %v; want %s", st2, err, st)
			}
		})
	}
}

func TestUnifyJSONGivesEveryEventOneSchema(t *testing.T) {
	data := mysqlJSON(`{"id":1,"a":null}`, `{"id":2,"a":3,"b":"2024-01-02"}`, `{"b":null,"id":3}`)
	evs, err := decodeAll(t, data, "f.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := UnifyJSON(evs, value.StructType{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.String(), "struct<id:long,a:long,b:date>"; got != want {
		t.Fatalf("schema = %s, want %s", got, want)
	}
	t.Run("columns absent from an event are null in it", func(t *testing.T) {
		if got := eventLine(t, evs[2]); !strings.HasSuffix(got, `"row":{"id":3,"a":null,"b":null}}`) {
			t.Errorf("got %s", got)
		}
	})
	t.Run("key values follow the unified row", func(t *testing.T) {
		for i, ev := range evs {
			if len(ev.KeyValues) != 1 || ev.KeyValues[0] != int64(i+1) || ev.KeyNames[0] != "id" {
				t.Errorf("event %d key %v = %v", i+1, ev.KeyNames, ev.KeyValues)
			}
		}
	})
	t.Run("unifying again changes nothing", func(t *testing.T) {
		before := []string{eventLine(t, evs[0]), eventLine(t, evs[1]), eventLine(t, evs[2])}
		st2, err := UnifyJSON(evs, value.StructType{})
		if err != nil || !value.Equal(st, st2) {
			t.Fatalf("second UnifyJSON: %s, %v", st2, err)
		}
		for i, ev := range evs {
			if got := eventLine(t, ev); got != before[i] {
				t.Errorf("event %d changed:\n got %s\nwant %s", i+1, got, before[i])
			}
		}
	})
	t.Run("a key widened to a decimal carries the decimal", func(t *testing.T) {
		evs, err := decodeAll(t, mysqlJSON(`{"id":1}`, `{"id":18446744073709551615}`), "f.jsonl", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := UnifyJSON(evs, value.StructType{}); err != nil {
			t.Fatal(err)
		}
		if d, ok := evs[0].KeyValues[0].(value.Decimal); !ok || d.String() != "1" {
			t.Errorf("key = %#v, want decimal 1", evs[0].KeyValues[0])
		}
	})
}

func TestUnifyJSONKnownSchemaWins(t *testing.T) {
	known := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: true},
		{Name: "n", Type: value.Long, Nullable: true},
		{Name: "s", Type: value.String, Nullable: true},
		{Name: "ts", Type: value.Timestamp, Nullable: true},
		{Name: "d", Type: value.DecimalType{Precision: 10, Scale: 3}, Nullable: true},
		{Name: "Upper", Type: value.Integer, Nullable: true},
		{Name: "gone", Type: value.Date, Nullable: true},
	}}
	tests := []struct {
		name    string
		payload []string
		want    []string
	}{
		{"a null-only column keeps the table's type", []string{`{"id":1,"n":null}`}, []string{`{"id":1,"n":null,"s":null,"ts":null,"d":null,"Upper":null,"gone":null}`}},
		{"numbers become the text of a string column", []string{`{"id":1,"s":5}`, `{"id":2,"s":1.50}`}, []string{`{"id":1,"n":null,"s":"5","ts":null,"d":null,"Upper":null,"gone":null}`, `{"id":2,"n":null,"s":"1.50","ts":null,"d":null,"Upper":null,"gone":null}`}},
		{"a date fills a timestamp column at midnight", []string{`{"id":1,"ts":"2024-01-02"}`}, []string{`{"id":1,"n":null,"s":null,"ts":"2024-01-02T00:00:00.000000Z","d":null,"Upper":null,"gone":null}`}},
		{"decimals take the table's scale", []string{`{"id":1,"d":2}`, `{"id":2,"d":0.5}`}, []string{`{"id":1,"n":null,"s":null,"ts":null,"d":"2.000","Upper":null,"gone":null}`, `{"id":2,"n":null,"s":null,"ts":null,"d":"0.500","Upper":null,"gone":null}`}},
		{"a column matches the table case-insensitively", []string{`{"id":1,"upper":7}`}, []string{`{"id":1,"n":null,"s":null,"ts":null,"d":null,"Upper":7,"gone":null}`}},
		{"a column the table lacks is inferred after the table's", []string{`{"id":1,"extra":null}`, `{"id":2,"extra":2.5}`}, []string{`{"id":1,"n":null,"s":null,"ts":null,"d":null,"Upper":null,"gone":null,"extra":null}`, `{"id":2,"n":null,"s":null,"ts":null,"d":null,"Upper":null,"gone":null,"extra":"2.5"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rows, err := unified(t, mysqlJSON(tt.payload...), known)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rows {
				if r != tt.want[i] {
					t.Errorf("row %d\n got %s\nwant %s", i+1, r, tt.want[i])
				}
			}
		})
	}
	// Converted values are boxed from slabs of 256: a file of more values
	// than a slab holds keeps each its own, and a decimal already of the
	// column's scale, or a long, is kept as it came.
	t.Run("many values converted, each its own", func(t *testing.T) {
		const n = 700
		var payloads, want []string
		for i := range n {
			payloads = append(payloads, fmt.Sprintf(`{"id":%d,"n":%d,"ts":"2024-01-02T03:04:%02d.%06dZ","d":%d.%03d,"gone":"2024-%02d-%02d"}`, i, 1000*i, i%60, i, i, i%1000, 1+i%12, 1+i%28))
			want = append(want, fmt.Sprintf(`{"id":%d,"n":%d,"s":null,"ts":"2024-01-02T03:04:%02d.%06dZ","d":"%d.%03d","Upper":null,"gone":"2024-%02d-%02d"}`, i, 1000*i, i%60, i, i, i%1000, 1+i%12, 1+i%28))
		}
		_, rows, err := unified(t, mysqlJSON(payloads...), known)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			if r != want[i] {
				t.Fatalf("row %d\n got %s\nwant %s", i+1, r, want[i])
			}
		}
	})
	t.Run("numbers wider than the table's type widen the column instead of failing", func(t *testing.T) {
		for _, c := range []struct{ payload, col, want string }{
			{`{"id":2,"d":1.2345}`, "d", "decimal"},
			{`{"id":2,"Upper":3000000000}`, "Upper", "long"},
		} {
			schema, _, err := unified(t, mysqlJSON(`{"id":1,"n":5}`, c.payload), known)
			if err != nil {
				t.Fatalf("%s: %v", c.payload, err)
			}
			f, _ := schema.Field(c.col)
			if !strings.HasPrefix(f.Type.String(), c.want) {
				t.Fatalf("%s: column %s typed %s, want %s", c.payload, c.col, f.Type, c.want)
			}
		}
	})
	t.Run("a value that does not fit the table's type is a bad record naming file, line and column", func(t *testing.T) {
		for _, c := range []struct{ payload, field string }{
			{`{"id":2,"n":"abc"}`, "payload.n"},
			{`{"id":2,"ts":"yesterday"}`, "payload.ts"},
		} {
			_, _, err := unified(t, mysqlJSON(`{"id":1,"n":5}`, c.payload), known)
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrBadRecord) {
				t.Fatalf("%s: err = %v, want a bad record", c.payload, err)
			}
			if re.File != "f.jsonl" || re.Line != 2 || re.Record != 2 || re.Field != c.field {
				t.Errorf("%s: error %+v, want f.jsonl line 2 record 2 field %s", c.payload, re, c.field)
			}
			if !strings.Contains(err.Error(), "f.jsonl: line 2") {
				t.Errorf("message %q does not name the file and line", err)
			}
		}
	})
	t.Run("it agrees with typing by Options.Schemas", func(t *testing.T) {
		data := mysqlJSON(`{"id":1,"n":"12","s":true,"ts":"2024-01-02 03:04:05.5+01:00","d":"7","Upper":1,"extra":1}`)
		viaOpts, err := decodeAll(t, data, "f.jsonl", Options{Schemas: map[string]value.StructType{"shop.t": known}})
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := unified(t, data, known)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventLine(t, viaOpts[0]); !strings.HasSuffix(got, `"row":`+rows[0]+`}`) {
			t.Errorf("Options.Schemas gives %s\nUnifyJSON gives %s", got, rows[0])
		}
		// Columns the decoder typed keep their type when unified.
		st, err := UnifyJSON(viaOpts, known)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventLine(t, viaOpts[0]); !strings.HasSuffix(got, `"row":`+rows[0]+`}`) || st.Fields[1].Type != value.Long {
			t.Errorf("after UnifyJSON: %s (schema %s)", got, st)
		}
	})
	t.Run("a decoder schema that disagrees with the known schema is refused", func(t *testing.T) {
		data := mysqlJSON(`{"id":1,"n":1}`)
		evs, err := decodeAll(t, data, "f.jsonl", Options{Schemas: map[string]value.StructType{"shop.t": known}})
		if err != nil {
			t.Fatal(err)
		}
		other := value.StructType{Fields: []value.Field{{Name: "n", Type: value.String, Nullable: true}}}
		var re *RecordError
		if _, err := UnifyJSON(evs, other); !errors.As(err, &re) || re.Field != "payload.n" {
			t.Fatalf("err = %v, want a bad record in payload.n", err)
		}
	})
}

func TestUnifyJSONTimestampsEqualTheAvroPath(t *testing.T) {
	avroEvs, err := decodeAll(t, writeOCF(t, typesSchema, ocf.Null, 1, typesRecord(1, 100, "INSERT", false)), "t.avro", Options{})
	if err != nil {
		t.Fatal(err)
	}
	avroSchema := avroEvs[0].Schema
	avroRow := slices.Clone(avroEvs[0].Row)
	col := func(st value.StructType, row []any, name string) any { return row[st.Index(name)] }

	// The same instants as Datastream's JSON writes them: ts_us with a zone,
	// the DATETIME dt as wall clock without one, tz with an offset.
	data := mysqlJSON(
		`{"id":1,"ts_us":"2023-11-14T22:13:20.123456Z","dt":"2022-01-08 01:02:03.000001","tz":"2023-11-15T00:13:20+02:00"}`,
		`{"id":2,"ts_us":null,"dt":"2022-01-08T01:02:03.000001","tz":"2023-11-14T22:13:20.000Z"}`)
	evs, err := decodeAll(t, data, "f.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mixed := append(slices.Clone(avroEvs), evs...)
	st, err := UnifyJSON(mixed, value.StructType{})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "struct<id:long,ts_us:timestamp,dt:timestamp,tz:timestamp>" {
		t.Fatalf("schema = %s", got)
	}
	jsonEv := mixed[1]
	if got, want := col(st, jsonEv.Row, "ts_us"), col(avroSchema, avroRow, "ts_us"); got != want {
		t.Errorf("ts_us: JSON gives %#v, Avro %#v", got, want)
	}
	if got, want := col(st, jsonEv.Row, "tz"), col(avroSchema, avroRow, "tz"); got != want {
		t.Errorf("tz: JSON gives %#v, Avro %#v", got, want)
	}
	// Avro keeps DATETIME as timestamp_ntz; the wall clock is the same.
	if got, want := int64(col(st, jsonEv.Row, "dt").(value.Micros)), int64(col(avroSchema, avroRow, "dt").(value.LocalMicros)); got != want {
		t.Errorf("dt: JSON gives %d µs, Avro %d µs", got, want)
	}
	if got := eventLine(t, mixed[1]); !strings.Contains(got, `"ts_us":"2023-11-14T22:13:20.123456Z"`) {
		t.Errorf("JSON event renders %s", got)
	}
	t.Run("Avro events are never touched", func(t *testing.T) {
		if !value.Equal(mixed[0].Schema, avroSchema) || !slices.EqualFunc(mixed[0].Row, avroRow, value.EqualValues) {
			t.Errorf("the Avro event changed: %s", eventLine(t, mixed[0]))
		}
		st, err := UnifyJSON(avroEvs, value.StructType{})
		if err != nil || len(st.Fields) != 0 {
			t.Errorf("UnifyJSON of Avro events only = %s, %v; want an empty schema", st, err)
		}
	})
}

// FuzzUnifyJSON checks the lattice on arbitrary values of one column: it
// never fails without a known schema, does not depend on the order of the
// values, and gives every value exactly what typing by Options.Schemas with
// the unified schema gives.
func FuzzUnifyJSON(f *testing.F) {
	for _, s := range []string{
		"null\n5\n-7", "1\n18446744073709551615", "5\n1.25\n-0.5", "1.5e3\n0.1\n-0", `"2025-10-25T03:36:17.948151Z"` + "\n" + `"2025-10-25 03:36:17"`,
		`"2024-01-02"` + "\n" + `"2024-02-29"`, `1.50` + "\n" + `"abc"`, "true\nfalse\nnull", `{"a": [1, 2]}` + "\n[3]",
		"123456789012345678901234567890123456789\n1", `"2024-01-02T10:11:12+0530"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var values []string
		for _, v := range strings.Split(in, "\n") {
			if v = strings.TrimSpace(v); v != "" && json.Valid([]byte(v)) {
				values = append(values, v)
			}
		}
		if len(values) == 0 || len(values) > 16 {
			return
		}
		data := columnFile(values...)
		evs, err := decodeAll(t, data, "f.jsonl", Options{})
		if err != nil {
			return // a value the Reader refuses (a malformed number)
		}
		st, err := UnifyJSON(evs, value.StructType{})
		if err != nil {
			t.Fatalf("unify %q: %v", values, err)
		}
		rev := slices.Clone(values)
		slices.Reverse(rev)
		revEvs, err := decodeAll(t, columnFile(rev...), "f.jsonl", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st2, err := UnifyJSON(revEvs, value.StructType{}); err != nil || !value.Equal(st, st2) {
			t.Fatalf("%q: reversed gives %s (%v), want %s", values, st2, err, st)
		}
		typed, err := decodeAll(t, data, "f.jsonl", Options{Schemas: map[string]value.StructType{"shop.t": st}})
		if err != nil {
			t.Fatalf("%q typed by the unified schema %s: %v", values, st, err)
		}
		for i := range evs {
			if got, want := eventLine(t, evs[i]), eventLine(t, typed[i]); got != want {
				t.Fatalf("%q: UnifyJSON gives\n%s\nOptions.Schemas gives\n%s", values, got, want)
			}
		}
	})
}

// TestUnifyJSONConvertsOnlyColumnsNotYetOfTheirType covers the events typed
// where they are: of a column whose inferred values are already of its
// unified type (strings, integers, booleans) nothing is converted, and
// the others (a string column holding numbers, a decimal column holding
// integers, timestamps) are, both in events of the unified columns in
// order and in an event of other columns.
func TestUnifyJSONConvertsOnlyColumnsNotYetOfTheirType(t *testing.T) {
	data := mysqlJSON(
		`{"id":1,"s":"a","n":5,"b":true,"m":7,"x":1,"ts":"2024-01-02T03:04:05Z"}`,
		`{"id":2,"s":"b","n":-6,"b":false,"m":"seven","x":2.5,"ts":"2024-01-02T03:04:06Z"}`,
		`{"id":3,"s":null,"n":null,"b":null,"m":null,"x":null,"ts":null}`,
		`{"ts":"2024-01-02T03:04:07Z","x":3,"m":8,"b":true,"n":9,"s":"c","id":4}`,
	)
	st, rows, err := unified(t, data, value.StructType{})
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := map[string]string{"id": "long", "s": "string", "n": "long", "b": "boolean", "m": "string", "x": "decimal(38,1)", "ts": "timestamp"}
	for _, f := range st.Fields {
		if got := f.Type.String(); got != wantTypes[f.Name] {
			t.Errorf("column %s is %s, want %s", f.Name, got, wantTypes[f.Name])
		}
	}
	want := []string{
		`{"id":1,"s":"a","n":5,"b":true,"m":"7","x":"1.0","ts":"2024-01-02T03:04:05.000000Z"}`,
		`{"id":2,"s":"b","n":-6,"b":false,"m":"seven","x":"2.5","ts":"2024-01-02T03:04:06.000000Z"}`,
		`{"id":3,"s":null,"n":null,"b":null,"m":null,"x":null,"ts":null}`,
		`{"id":4,"s":"c","n":9,"b":true,"m":"8","x":"3.0","ts":"2024-01-02T03:04:07.000000Z"}`,
	}
	if !slices.Equal(rows, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
