package datastream

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func decodeAll(t *testing.T, data []byte, name string, opts Options) ([]Event, error) {
	t.Helper()
	var evs []Event
	err := All(context.Background(), bytes.NewReader(data), name, opts, func(ev Event) error {
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

func eventLine(t *testing.T, ev Event) string {
	t.Helper()
	b, err := ev.AppendJSON(nil)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	return string(b)
}

// Datastream-shaped JSON events for the sources without real fixtures.
const (
	oracleInsert = `{"uuid":"u1","read_timestamp":"2021-11-04T01:44:31.000Z","source_timestamp":"2021-11-04T01:44:31.000Z","object":"HR_EMPLOYEES","read_method":"oracle-cdc-logminer","stream_name":"s","schema_key":"k","sort_keys":[1635990271000,382470," 0x000004.00000705.0010 ",0],"source_metadata":{"schema":"HR","table":"EMPLOYEES","database":"XE","row_id":"AAAE5XAAEAAAADMAAB","scn":382470,"is_deleted":false,"change_type":"INSERT","ssn":0,"rs_id":" 0x000004.00000705.0010 ","tx_id":"CAACAAUKAAA=","log_file":"/u01/x.arc","primary_keys":["EMPLOYEE_ID"]},"payload":{"EMPLOYEE_ID":207,"FIRST_NAME":"Ann","SALARY":8888.00,"HIRE_DATE":"2021-11-04T00:00:00"}}`
	// A PK change: Oracle writes UPDATE-DELETE with is_deleted=false.
	oraclePKDelete = `{"uuid":"u2","read_timestamp":"2021-11-04T01:44:32.000Z","source_timestamp":"2021-11-04T01:44:32.000Z","object":"HR_EMPLOYEES","read_method":"oracle-cdc-logminer","stream_name":"s","schema_key":"k","source_metadata":{"schema":"HR","table":"EMPLOYEES","database":"XE","scn":382480,"is_deleted":false,"change_type":"UPDATE-DELETE","ssn":0,"rs_id":" 0x000004.00000706.0010 ","primary_keys":["EMPLOYEE_ID"]},"payload":{"EMPLOYEE_ID":207,"FIRST_NAME":"Ann","SALARY":8888.00,"HIRE_DATE":"2021-11-04T00:00:00"}}`
	oraclePKInsert = `{"uuid":"u3","read_timestamp":"2021-11-04T01:44:32.000Z","source_timestamp":"2021-11-04T01:44:32.000Z","object":"HR_EMPLOYEES","read_method":"oracle-cdc-logminer","stream_name":"s","schema_key":"k","source_metadata":{"schema":"HR","table":"EMPLOYEES","database":"XE","scn":382480,"is_deleted":false,"change_type":"UPDATE-INSERT","ssn":0,"rs_id":" 0x000004.00000706.0010 ","primary_keys":["EMPLOYEE_ID"]},"payload":{"EMPLOYEE_ID":208,"FIRST_NAME":"Ann","SALARY":8888.00,"HIRE_DATE":"2021-11-04T00:00:00"}}`
	pgBackfill     = `{"uuid":"u4","read_timestamp":"2025-11-05T18:23:46.698000Z","source_timestamp":"2025-11-05T18:23:46.698000Z","object":"public_accounts","read_method":"postgresql-backfill","stream_name":"s","schema_key":"k","sort_keys":[1762367026698,""],"source_metadata":{"schema":"public","table":"accounts","is_deleted":false,"change_type":"INSERT","tx_id":null,"lsn":"","primary_keys":["id"]},"payload":{"id":12345678901234567890,"balance":12345678901234567890.123456789,"ratio":0.1,"props":{"b":[1,2],"a":"x"},"created":"2023-04-07T08:17:39.044331Z","note":null}}`
	pgCDC          = `{"uuid":"u5","read_timestamp":"2025-11-05 18:23:47.1","source_timestamp":"2025-11-05T18:23:47Z","object":"public_accounts","read_method":"postgresql-cdc","stream_name":"s","schema_key":"k","sort_keys":[1762367027000,"F/FFFFFFFF"],"source_metadata":{"schema":"public","table":"accounts","is_deleted":true,"change_type":"DELETE","tx_id":1186572,"lsn":"F/FFFFFFFF","primary_keys":["id"]},"payload":{"id":7,"balance":1.5,"ratio":2,"props":null,"created":null,"note":"x"}}`
)

func TestDecodeJSONLinesOfEverySource(t *testing.T) {
	in := strings.Join([]string{oracleInsert, oraclePKDelete, oraclePKInsert, pgBackfill, pgCDC}, "\n") + "\n"
	evs, err := decodeAll(t, []byte(in), "x.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"table":"HR.EMPLOYEES","op":"upsert","key":{"EMPLOYEE_ID":207},"order":"382470:0x000004.00000705.0010:0","source_timestamp":"2021-11-04T01:44:31.000000Z","read_method":"cdc","change_type":"INSERT","row":{"EMPLOYEE_ID":207,"FIRST_NAME":"Ann","SALARY":"8888.00","HIRE_DATE":"2021-11-04T00:00:00"}}`,
		`{"table":"HR.EMPLOYEES","op":"delete","key":{"EMPLOYEE_ID":207},"order":"382480:0x000004.00000706.0010:0","source_timestamp":"2021-11-04T01:44:32.000000Z","read_method":"cdc","change_type":"UPDATE-DELETE","row":{"EMPLOYEE_ID":207,"FIRST_NAME":"Ann","SALARY":"8888.00","HIRE_DATE":"2021-11-04T00:00:00"}}`,
		`{"table":"HR.EMPLOYEES","op":"upsert","key":{"EMPLOYEE_ID":208},"order":"382480:0x000004.00000706.0010:0","source_timestamp":"2021-11-04T01:44:32.000000Z","read_method":"cdc","change_type":"UPDATE-INSERT","row":{"EMPLOYEE_ID":208,"FIRST_NAME":"Ann","SALARY":"8888.00","HIRE_DATE":"2021-11-04T00:00:00"}}`,
		`{"table":"public.accounts","op":"upsert","key":{"id":"12345678901234567890"},"order":"backfill","source_timestamp":"2025-11-05T18:23:46.698000Z","read_method":"backfill","change_type":"INSERT","row":{"id":"12345678901234567890","balance":"12345678901234567890.123456789","ratio":"0.1","props":"{\"b\":[1,2],\"a\":\"x\"}","created":"2023-04-07T08:17:39.044331Z","note":null}}`,
		`{"table":"public.accounts","op":"delete","key":{"id":7},"order":"F/FFFFFFFF","source_timestamp":"2025-11-05T18:23:47.000000Z","read_method":"cdc","change_type":"DELETE","row":{"id":7,"balance":"1.5","ratio":2,"props":null,"created":null,"note":"x"}}`,
	}
	if len(evs) != len(want) {
		t.Fatalf("decoded %d events, want %d", len(evs), len(want))
	}
	for i, ev := range evs {
		if got := eventLine(t, ev); got != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i+1, got, want[i])
		}
	}
	t.Run("Oracle metadata is kept for history", func(t *testing.T) {
		m := evs[0].Meta
		if m.Position.RowID != "AAAE5XAAEAAAADMAAB" || m.Position.TxID != "CAACAAUKAAA=" || m.Position.RSID != " 0x000004.00000705.0010 " || m.Source != Oracle || m.Record != 1 {
			t.Errorf("meta = %+v", m)
		}
	})
	t.Run("the PK change applies delete before insert", func(t *testing.T) {
		if evs[1].Order.Compare(evs[2].Order) >= 0 {
			t.Error("UPDATE-DELETE does not sort before UPDATE-INSERT")
		}
	})
	t.Run("PostgreSQL backfill sorts before CDC", func(t *testing.T) {
		if evs[3].Order.Compare(evs[4].Order) >= 0 {
			t.Error("backfill does not sort before CDC")
		}
		if evs[4].Meta.Position.TxID != "1186572" || evs[4].Meta.ReadTimestamp.String() != "2025-11-05T18:23:47.100000Z" {
			t.Errorf("meta = %+v", evs[4].Meta)
		}
	})
	t.Run("inferred types are exact", func(t *testing.T) {
		st := evs[3].Schema
		for name, want := range map[string]value.Type{
			"id":      value.DecimalType{Precision: 38, Scale: 0},
			"balance": value.DecimalType{Precision: 38, Scale: 9},
			"props":   value.String,
			"created": value.String,
		} {
			if f, ok := st.Field(name); !ok || !value.Equal(f.Type, want) {
				t.Errorf("column %s has type %v, want %v", name, f.Type, want)
			}
		}
	})
}

func TestDecodeJSONForms(t *testing.T) {
	lines := oracleInsert + "\n" + pgCDC + "\n"
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	tests := []struct {
		name string
		data []byte
		file string
		opts Options
	}{
		{"JSON lines", []byte(lines), "a.jsonl", Options{}},
		{"JSON lines with CRLF and blank lines", []byte(strings.ReplaceAll(lines, "\n", "\r\n\r\n")), "a.jsonl", Options{}},
		{"gzip JSON lines named .jsonl.gz", gz(lines), "a.jsonl.gz", Options{}},
		{"gzip JSON lines detected by magic without the extension", gz(lines), "a.jsonl", Options{}},
		{"gzip JSON with the format forced", gz(lines), "a", Options{Format: FormatJSONL}},
		{"a pretty-printed JSON array", []byte("[\n  " + oracleInsert + ",\n  " + pgCDC + "\n]\n"), "a.json", Options{}},
		{"a compact JSON object without newline", []byte(oracleInsert + pgCDC), "a.json", Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := decodeAll(t, tt.data, tt.file, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 || evs[0].Table.String() != "HR.EMPLOYEES" || evs[1].Table.String() != "public.accounts" {
				t.Fatalf("decoded %d events: %+v", len(evs), evs)
			}
		})
	}
	t.Run("an empty file has no events", func(t *testing.T) {
		evs, err := decodeAll(t, nil, "empty.jsonl", Options{})
		if err != nil || len(evs) != 0 {
			t.Fatalf("got %d events, err %v", len(evs), err)
		}
	})
	t.Run("an empty array has no events", func(t *testing.T) {
		evs, err := decodeAll(t, []byte(" [ ] "), "empty.json", Options{})
		if err != nil || len(evs) != 0 {
			t.Fatalf("got %d events, err %v", len(evs), err)
		}
	})
}

func TestDecodeJSONErrorsNameLineRecordAndField(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		line   int64
		record int64
		field  string
		kind   error
	}{
		{"a syntax error on line 3", oracleInsert + "\n" + oracleInsert + "\n{\"uuid\": ]\n" + oracleInsert, 3, 3, "", ErrBadRecord},
		{"a malformed LSN", strings.Replace(pgCDC, `"lsn":"F/FFFFFFFF"`, `"lsn":"FFFF"`, 1), 1, 1, "source_metadata.lsn", ErrBadRecord},
		{"a non-string change type", strings.Replace(pgCDC, `"change_type":"DELETE"`, `"change_type":3`, 1), 1, 1, "source_metadata.change_type", ErrBadRecord},
		{"a missing source timestamp", strings.Replace(pgCDC, `"source_timestamp":"2025-11-05T18:23:47Z",`, ``, 1), 1, 1, "source_timestamp", ErrBadRecord},
		{"an unparseable source timestamp", strings.Replace(pgCDC, `"source_timestamp":"2025-11-05T18:23:47Z"`, `"source_timestamp":"yesterday"`, 1), 1, 1, "source_timestamp", ErrBadRecord},
		{"a key column missing from the payload", strings.Replace(pgCDC, `"primary_keys":["id"]`, `"primary_keys":["nope"]`, 1), 1, 1, "source_metadata.primary_keys", ErrBadRecord},
		{"an invalid schema name", strings.Replace(pgCDC, `"schema":"public"`, `"schema":"pub lic"`, 1), 1, 1, "source_metadata.schema", ErrBadRecord},
		{"an event that is not an object", "[1]", 1, 1, "", ErrBadRecord},
		// A line of the same columns as the one before is checked against
		// that line's: a column twice must still be seen, wherever it is.
		{"a payload column twice, at the end", oracleInsert + "\n" + strings.Replace(oracleInsert, `"HIRE_DATE":"2021-11-04T00:00:00"}`, `"HIRE_DATE":"2021-11-04T00:00:00","FIRST_NAME":"Bo"}`, 1), 2, 2, "payload.FIRST_NAME", ErrBadRecord},
		{"a payload column twice, in the middle", oracleInsert + "\n" + strings.Replace(oracleInsert, `"FIRST_NAME":"Ann",`, `"FIRST_NAME":"Ann","FIRST_NAME":"Bo",`, 1), 2, 2, "payload.FIRST_NAME", ErrBadRecord},
		{"a payload column twice, first", oracleInsert + "\n" + strings.Replace(oracleInsert, `"EMPLOYEE_ID":207,`, `"EMPLOYEE_ID":207,"EMPLOYEE_ID":208,`, 1), 2, 2, "payload.EMPLOYEE_ID", ErrBadRecord},
		{"an array element on line 4", "[\n" + pgCDC + ",\n\n" + strings.Replace(pgCDC, `"lsn":"F/FFFFFFFF"`, `"lsn":"x"`, 1) + "]", 4, 2, "source_metadata.lsn", ErrBadRecord},
		{"a truncated gzip stream", "", 0, 0, "", ErrBadFile},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			if tt.kind == ErrBadFile {
				var b bytes.Buffer
				w := gzip.NewWriter(&b)
				w.Write([]byte(strings.Repeat(pgCDC+"\n", 50)))
				w.Close()
				data = b.Bytes()[:b.Len()/2]
			}
			_, err := decodeAll(t, data, "f.jsonl", Options{})
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RecordError", err)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("err = %v, want it to match %v", err, tt.kind)
			}
			if re.File != "f.jsonl" {
				t.Errorf("File = %q", re.File)
			}
			if tt.kind == ErrBadFile {
				return
			}
			if re.Line != tt.line || re.Record != tt.record || re.Field != tt.field {
				t.Errorf("line %d record %d field %q, want line %d record %d field %q (%v)", re.Line, re.Record, re.Field, tt.line, tt.record, tt.field, err)
			}
		})
	}
}

func TestDecodeJSONWithAKnownSchema(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: true},
		{Name: "balance", Type: value.DecimalType{Precision: 38, Scale: 4}, Nullable: true},
		{Name: "ratio", Type: value.Double, Nullable: true},
		{Name: "props", Type: value.String, Nullable: true},
		{Name: "created", Type: value.Timestamp, Nullable: true},
		{Name: "note", Type: value.String, Nullable: true},
		{Name: "gone", Type: value.Date, Nullable: true},
	}}
	in := strings.Replace(pgCDC, `"note":"x"`, `"note":"x","added":true`, 1)
	in = strings.Replace(in, `"created":null`, `"created":"2023-04-07 08:17:39.745+02:00"`, 1)
	evs, err := decodeAll(t, []byte(in), "a.jsonl", Options{Schemas: map[string]value.StructType{"public.accounts": schema}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"table":"public.accounts","op":"delete","key":{"id":7},"order":"F/FFFFFFFF","source_timestamp":"2025-11-05T18:23:47.000000Z","read_method":"cdc","change_type":"DELETE","row":{"id":7,"balance":"1.5000","ratio":2,"props":null,"created":"2023-04-07T06:17:39.745000Z","note":"x","gone":null,"added":true}}`
	if got := eventLine(t, evs[0]); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	t.Run("a value that does not fit the known type is a bad record naming the column", func(t *testing.T) {
		bad := strings.Replace(pgCDC, `"balance":1.5`, `"balance":1.23456`, 1)
		_, err := decodeAll(t, []byte(bad), "a.jsonl", Options{Schemas: map[string]value.StructType{"public.accounts": schema}})
		var re *RecordError
		if !errors.As(err, &re) || re.Field != "payload.balance" || !errors.Is(err, ErrBadRecord) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestDecodeJSONTypedByAnAvroSchemaFile(t *testing.T) {
	avroSchema := `{"type":"record","name":"public_accounts","fields":[
	  {"name":"source_metadata","type":{"type":"record","name":"source_metadata","fields":[{"name":"schema","type":"string"},{"name":"lsn","type":["null","string"]}]}},
	  {"name":"payload","type":{"type":"record","name":"payload","fields":[
	    {"name":"id","type":["null","long"]},
	    {"name":"balance","type":["null",{"type":"bytes","logicalType":"decimal","precision":30,"scale":3}]},
	    {"name":"ratio","type":["null","double"]},
	    {"name":"props","type":["null",{"type":"string","logicalType":"json"}]},
	    {"name":"created","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
	    {"name":"note","type":["null","string"]}]}}]}`
	evs, err := decodeAll(t, []byte(pgCDC), "a.jsonl", Options{AvroSchema: []byte(avroSchema)})
	if err != nil {
		t.Fatal(err)
	}
	want := `"row":{"id":7,"balance":"1.500","ratio":2,"props":null,"created":null,"note":"x"}}`
	if got := eventLine(t, evs[0]); !strings.HasSuffix(got, want) {
		t.Errorf("\n got %s\nwant suffix %s", got, want)
	}
}

func TestParseTimestampIsLenient(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"2021-05-16T01:13:01.000Z", "2021-05-16T01:13:01.000000Z"},
		{"2025-11-05T18:23:46.698000Z", "2025-11-05T18:23:46.698000Z"},
		{"2021-12-25 05:42:04.408", "2021-12-25T05:42:04.408000Z"},
		{"2021-12-25 05:42:04", "2021-12-25T05:42:04.000000Z"},
		{"2021-12-25T05:42", "2021-12-25T05:42:00.000000Z"},
		{"2021-12-25T05:42:04.123456789Z", "2021-12-25T05:42:04.123456Z"},
		{"2021-12-25T05:42:04.1+02:00", "2021-12-25T03:42:04.100000Z"},
		{"2021-12-25T05:42:04-0130", "2021-12-25T07:12:04.000000Z"},
		{"2021-12-25T05:42:04 UTC", "2021-12-25T05:42:04.000000Z"},
		{"2023-07-26", "2023-07-26T00:00:00.000000Z"},
	}
	for _, tt := range tests {
		t.Run(tt.in+" parses", func(t *testing.T) {
			tm, _, err := parseTimestamp(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := value.MicrosOf(tm).String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "2021-13-01", "2021-02-30T00:00:00", "2021-01-01T25:00:00", "2021-01-01T00:00:00.Z", "2021-01-01T00:00:00.1234567890Z", "2021-01-01T00:00:00+5", "yesterday"} {
		t.Run(quote(bad)+" is refused", func(t *testing.T) {
			if _, _, err := parseTimestamp(bad); err == nil {
				t.Errorf("parseTimestamp(%q) succeeded", bad)
			}
		})
	}
}

func quote(s string) string { return "\"" + s + "\"" }

func TestDecodeJSONGTIDAndSQLServerPositions(t *testing.T) {
	gtid := `{"uuid":"g","read_timestamp":"2024-05-09T06:56:54Z","source_timestamp":"2024-05-09T06:56:54Z","object":"shop_orders","read_method":"mysql-cdc-binlog","source_metadata":{"table":"orders","database":"shop","primary_keys":["id"],"binlog_file":"mysql-bin.1000000","binlog_position":4,"change_type":"UPDATE-INSERT","is_deleted":false},"payload":{"id":1}}`
	older := strings.NewReplacer(`"mysql-bin.1000000"`, `"mysql-bin.999999"`, `"binlog_position":4`, `"binlog_position":99999`).Replace(gtid)
	sqlserver := `{"uuid":"s","read_timestamp":"2024-05-09T06:56:54Z","source_timestamp":"2024-05-09T06:56:54Z","object":"dbo_t","read_method":"sqlserver-cdc","source_metadata":{"schema":"dbo","table":"t","database":"db","lsn":"00000025:00000728:0003","tx_id":"0x1","primary_keys":["id"],"change_type":"INSERT","is_deleted":false},"payload":{"id":1}}`
	evs, err := decodeAll(t, []byte(gtid+"\n"+older+"\n"+sqlserver+"\n"), "g.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Order.Text != "mysql-bin.1000000:4" || evs[1].Order.Text != "mysql-bin.999999:99999" {
		t.Errorf("GTID positions read as %q and %q", evs[0].Order.Text, evs[1].Order.Text)
	}
	if evs[1].Order.Compare(evs[0].Order) >= 0 {
		t.Error("mysql-bin.999999 does not sort before mysql-bin.1000000")
	}
	if evs[2].Table.String() != "dbo.t" || evs[2].Order.Text != "00000025:00000728:0003" || evs[2].Meta.Source != SQLServer || evs[2].Meta.Position.TxID != "0x1" {
		t.Errorf("SQL Server event: table %s order %s source %s", evs[2].Table, evs[2].Order.Text, evs[2].Meta.Source)
	}
}

// repeatReader yields line n times without holding the whole stream.
type repeatReader struct {
	line []byte
	n    int
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.line[r.off:])
	r.off += k
	if r.off == len(r.line) {
		r.off = 0
		r.n--
	}
	return k, nil
}

func TestDecodeJSONHoldsOneRecordAtATime(t *testing.T) {
	const n = 20000 // about 14 MB
	d, err := Decode(context.Background(), &repeatReader{line: []byte(pgBackfill + "\n"), n: n}, "big.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	count, maxBuf := drainMeasuring(t, d, func() int { return cap(jsonBuffer(t, d)) })
	if count != n {
		t.Fatalf("decoded %d events, want %d", count, n)
	}
	if maxBuf > 1<<20 {
		t.Errorf("the decoder buffered %d bytes for %d-byte records", maxBuf, len(pgBackfill))
	}
}

// jsonBuffer returns the JSON framer's buffer of a Reader decoding JSON.
func jsonBuffer(t *testing.T, d *Reader) []byte {
	t.Helper()
	if d.json == nil {
		t.Fatal("not decoding JSON")
	}
	return d.json.fr.buf
}

// drainMeasuring reads every event of d and returns how many there were
// and the largest value measure took after each.
func drainMeasuring(t *testing.T, d *Reader, measure func() int) (count, most int) {
	t.Helper()
	for {
		_, err := d.Next()
		if errors.Is(err, io.EOF) {
			return count, most
		}
		if err != nil {
			t.Fatal(err)
		}
		count++
		most = max(most, measure())
	}
}

func TestAnUnknownChangeTypeIsABadRecordNamingTheValue(t *testing.T) {
	unknown := strings.Replace(pgCDC, `"change_type":"DELETE"`, `"change_type":"MERGE-ALL"`, 1)
	lower := strings.Replace(pgCDC, `"change_type":"DELETE"`, `"change_type":" update "`, 1)
	null := strings.Replace(pgCDC, `"change_type":"DELETE"`, `"change_type":null`, 1)
	res := decodeWith(t, strings.NewReader(jsonLines(pgCDC, lower, null, unknown, pgCDC)), Options{})
	if len(res.events) != 3 {
		t.Fatalf("decoded %d events before the error, want 3", len(res.events))
	}
	if got := res.events[1].ChangeType; got != ChangeUpdate {
		t.Errorf("change type %q, want %q", got, ChangeUpdate)
	}
	var re *RecordError
	if !errors.Is(res.err, ErrBadRecord) || !errors.As(res.err, &re) || re.Line != 4 {
		t.Fatalf("err = %v, want a bad record at line 4", res.err)
	}
	for _, want := range []string{"source_metadata.change_type", `"MERGE-ALL"`} {
		if !strings.Contains(res.err.Error(), want) {
			t.Errorf("error %q does not name %s", res.err, want)
		}
	}
}
