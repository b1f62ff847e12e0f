package datastream

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// buildBothWays normalises one event whose source_metadata is meta twice:
// from the members the JSON decoder keeps (the fast path) and from the
// generic map every decoder used to build (the reference).
func buildBothWays(t testing.TB, meta []byte, readMethod string) (fast, ref Event, fastErr, refErr error) {
	t.Helper()
	d := &Reader{name: "f.jsonl", log: slog.New(slog.DiscardHandler)}
	jd := &jsonDecoder{d: d}
	row := []any{int64(1), "x"}
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: true},
		{Name: "name", Type: value.String, Nullable: true},
	}}

	fastRaw := rawEvent{readMethod: readMethod, schema: schema, row: row}
	if fastErr = jd.readMeta(meta); fastErr == nil {
		fastRaw.jmeta, fastRaw.strs = jd.meta, &jd.strs
		if fastRaw.jmeta == nil {
			fastRaw.jmeta = []metaMember{}
		}
		fastErr = d.build(&fastRaw, 1, &fast)
	}

	refRaw := rawEvent{readMethod: readMethod, schema: schema, row: row}
	m, err := genericJSON(meta, 0)
	if refErr = err; err == nil {
		refRaw.meta = m.(map[string]any)
		refErr = (&Reader{name: "f.jsonl", log: slog.New(slog.DiscardHandler)}).build(&refRaw, 1, &ref)
	}
	return fast, ref, fastErr, refErr
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestJSONMetadataReadsLikeTheGenericMap(t *testing.T) {
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	for _, c := range []struct {
		name, method, meta string
	}{
		{"a MySQL event reads its binlog position", "mysql-cdc-binlog",
			`{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.000014","log_position":77,"change_type":"INSERT","is_deleted":false}`},
		{"a duplicated key takes its last value", "mysql-cdc-binlog",
			`{"table":"a","table":"b","database":"shop","log_file":"mysql-bin.000001","log_position":1,"log_position":2}`},
		{"an escaped key matches its unescaped name", "mysql-cdc-binlog",
			`{"tab\u006ce":"orders","database":"sh\u006fp","log_file":"mysql-bin.000001","log_position":"12"}`},
		{"a null field counts as absent", "mysql-cdc-binlog",
			`{"table":"t","database":"d","log_file":null,"binlog_file":"mysql-bin.000002","log_position":null,"binlog_position":9}`},
		{"a position too large for 64 bits fails the same way", "mysql-cdc-binlog",
			`{"table":"t","database":"d","log_file":"mysql-bin.000001","log_position":123456789012345678901234}`},
		{"a negative position fails the same way", "mysql-cdc-binlog",
			`{"table":"t","database":"d","log_file":"mysql-bin.000001","log_position":-9223372036854775807}`},
		{"a 19-digit position reads the same", "mysql-cdc-binlog",
			`{"table":"t","database":"d","log_file":"mysql-bin.000001","log_position":9223372036854775807}`},
		{"a fractional position fails the same way", "mysql-cdc-binlog",
			`{"table":"t","database":"d","log_file":"mysql-bin.000001","log_position":1.5}`},
		{"a wrongly typed field fails the same way", "mysql-cdc-binlog",
			`{"table":7,"database":"d"}`},
		{"a non-boolean is_deleted fails the same way", "mysql-cdc-binlog",
			`{"table":"t","database":"d","is_deleted":"yes"}`},
		{"primary keys that are not names fail the same way", "mysql-cdc-binlog",
			`{"table":"t","database":"d","primary_keys":["id",3]}`},
		{"an Oracle event reads scn, rs_id, ssn and row_id", "oracle-cdc-logminer",
			`{"schema":"HR","table":"EMPLOYEES","scn":382470,"ssn":0,"rs_id":" 0x000004.00000705.0010 ","row_id":"AAA","tx_id":"CAA=","primary_keys":["ID"]}`},
		{"a PostgreSQL event reads its lsn and numeric tx_id", "postgresql-cdc",
			`{"schema":"public","table":"accounts","lsn":"F/FFFFFFFF","tx_id":1186572,"is_deleted":true,"change_type":"DELETE","primary_keys":["id"]}`},
		{"an unknown source reads the database and no position", "other",
			`{"table":"t","database":"d","replication_index":["name"],"extra":{"a":[1,{"b":null}]}}`},
		{"a metadata value nested too deeply fails the event", "mysql-cdc-binlog",
			`{"table":"t","database":"d","unused":` + deep + `}`},
		{"an empty metadata object fails for want of a table", "mysql-cdc-binlog", `{}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fast, ref, fastErr, refErr := buildBothWays(t, []byte(c.meta), c.method)
			if errText(fastErr) != errText(refErr) {
				t.Fatalf("error = %v, the generic map gives %v", fastErr, refErr)
			}
			// The cases named as failing must fail, so that the comparison
			// covers the error paths and not only successes.
			if wantErr := strings.Contains(c.name, "fail"); (fastErr != nil) != wantErr {
				t.Fatalf("error = %v, want an error: %v", fastErr, wantErr)
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Fatalf("event = %+v\nthe generic map gives %+v", fast, ref)
			}
		})
	}
}

func FuzzJSONMetadataReadsLikeTheGenericMap(f *testing.F) {
	f.Add(`{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"b.1","log_position":4,"change_type":"INSERT","is_deleted":false}`, "mysql-cdc-binlog")
	f.Add(`{"schema":"HR","table":"E","scn":"382470","ssn":0,"rs_id":" 0x000004.00000705.0010 ","row_id":"AAA","tx_id":12}`, "oracle-cdc-logminer")
	f.Add(`{"schema":"public","table":"a","lsn":"F/F","tx_id":null,"primary_keys":[]}`, "postgresql-backfill")
	f.Add(`{"table":"a","table":null,"tab\u006ce":"c","database":"d"}`, "sqlserver-cdc")
	f.Fuzz(func(t *testing.T, meta, method string) {
		if !json.Valid([]byte(meta)) || !strings.HasPrefix(strings.TrimSpace(meta), "{") {
			return
		}
		fast, ref, fastErr, refErr := buildBothWays(t, []byte(strings.TrimSpace(meta)), method)
		if errText(fastErr) != errText(refErr) {
			t.Fatalf("error = %v, the generic map gives %v", fastErr, refErr)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("event = %+v\nthe generic map gives %+v", fast, ref)
		}
	})
}

func TestSkipValidFindsTheEndScanValueFinds(t *testing.T) {
	for _, v := range []string{
		`"plain"`, `"esc\"aped"`, `"back\\"`, `"\\\\\""`, `"é\u00e9"`, `""`,
		`0`, `-12.5e+3`, `true`, `false`, `null`,
		`{}`, `[]`, `{"a":[1,"]}",{"b":"\\"}],"c":{}}`, `[[[]],"[",{"}":"{"}]`,
	} {
		t.Run(v+" ends where the scanner says", func(t *testing.T) {
			b := []byte(v + `,"after"`)
			want, err := scanValue(b, 0)
			if err != nil {
				t.Fatalf("scanValue: %v", err)
			}
			if got := skipValid(b, 0); got != want {
				t.Fatalf("skipValid = %d, scanValue = %d", got, want)
			}
		})
	}
}

func FuzzSkipValidAgreesWithScanValue(f *testing.F) {
	for _, s := range []string{`{"a":"\\\"","b":[1,2.5e3,true,null]}`, `"x\\"`, `-0`, `[{"]":"["}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := append(append([]byte{}, data...), ' ')
		i := skipSpace(b, 0)
		want, err := scanValue(b, 0)
		if err != nil || skipSpace(b, want) != len(b) {
			return // skipValid needs one valid value, as a decoded line holds
		}
		if got := skipValid(b, i); got != want {
			t.Fatalf("skipValid(%q) = %d, scanValue = %d", b, got, want)
		}
	})
}

func TestStrCacheReturnsTheUnquotedText(t *testing.T) {
	var c strCache
	for _, tok := range []string{`"table"`, `"table"`, `"tab\u006ce"`, `"é"`, "\"\xff\"", `""`, `"a\nb"`} {
		t.Run(tok+" unquotes as unquote does", func(t *testing.T) {
			want, err := unquote([]byte(tok))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.unquote([]byte(tok))
			if err != nil || got != want {
				t.Fatalf("strCache.unquote = %q, %v; want %q", got, err, want)
			}
		})
	}
	t.Run("a full cache still returns the right strings", func(t *testing.T) {
		var c strCache
		for i := range maxCachedStrings + 10 {
			s := fmt.Sprintf("k%d", i)
			if got := c.intern([]byte(s)); got != s {
				t.Fatalf("intern(%q) = %q", s, got)
			}
		}
		if len(c.m) != maxCachedStrings {
			t.Fatalf("cache holds %d strings, want at most %d", len(c.m), maxCachedStrings)
		}
	})
	t.Run("the cache shares one copy of a repeated string", func(t *testing.T) {
		var c strCache
		buf := []byte("orders")
		a := c.intern(buf)
		copy(buf, "XXXXXX")
		if a != "orders" {
			t.Fatalf("interned string changed with its source buffer: %q", a)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = c.intern([]byte("orders")) }); allocs != 0 {
			t.Fatalf("interning a cached string allocates %v times", allocs)
		}
	})
}
