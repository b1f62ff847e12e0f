package datastream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2/ocf"
)

func TestDecodeWarnsOnceAboutAnUnknownSource(t *testing.T) {
	ev := strings.NewReplacer(`"read_method":"postgresql-cdc"`, `"read_method":"cdc"`, `"lsn":"F/FFFFFFFF",`, ``).Replace(pgCDC)
	var logs bytes.Buffer
	evs, err := decodeAll(t, []byte(ev+"\n"+ev+"\n"), "u.jsonl", Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "unknown Datastream source"); n != 1 {
		t.Errorf("logged %d warnings, want 1:\n%s", n, logs.String())
	}
	if evs[0].Meta.Source != Unknown || evs[0].Order.Text != "2025-11-05T18:23:47.000000Z" {
		t.Errorf("source %q order %q, want unknown ordered by timestamp", evs[0].Meta.Source, evs[0].Order.Text)
	}
	t.Run("forcing the source orders by position", func(t *testing.T) {
		evs, err := decodeAll(t, []byte(strings.Replace(pgCDC, `"read_method":"postgresql-cdc"`, `"read_method":"cdc"`, 1)), "u.jsonl", Options{Source: PostgreSQL})
		if err != nil || evs[0].Order.Text != "F/FFFFFFFF" {
			t.Fatalf("order %q, err %v", evs[0].Order.Text, err)
		}
	})
}

func TestDecodeRecordsFileIdentityAndKeyOverrides(t *testing.T) {
	data := writeOCF(t, typesSchema, ocf.Null, 10, typesRecord(1, 100, "INSERT", true), typesRecord(2, 101, "INSERT", true))
	file := SourceFile{Bucket: "b", Name: "p/db_types/2024/05/09/06/56/k_mysql-cdc-binlog_1_0_0.avro", Generation: 42, Size: int64(len(data))}
	t.Run("the source file and record number reach the metadata", func(t *testing.T) {
		evs, err := decodeAll(t, data, "gs://b/x.avro", Options{File: file})
		if err != nil {
			t.Fatal(err)
		}
		if evs[1].Meta.File == nil || *evs[1].Meta.File != file || evs[1].Meta.Record != 2 {
			t.Errorf("meta file %+v record %d", evs[1].Meta.File, evs[1].Meta.Record)
		}
	})
	t.Run("an override replaces primary_keys", func(t *testing.T) {
		evs, err := decodeAll(t, data, "x.avro", Options{PrimaryKeys: map[string][]string{"db.types": {"ID", "bigu"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(evs[0].KeyNames, ","); got != "id,bigu" || evs[0].KeyValues[0] != int64(1) || evs[0].KeyValues[1] != nil {
			t.Errorf("key %s = %v", got, evs[0].KeyValues)
		}
	})
	t.Run("an empty override makes the table history-only", func(t *testing.T) {
		evs, err := decodeAll(t, data, "x.avro", Options{PrimaryKeys: map[string][]string{"db.types": nil}})
		if err != nil {
			t.Fatal(err)
		}
		if !evs[0].HistoryOnly || len(evs[0].KeyNames) != 0 {
			t.Errorf("HistoryOnly %v keys %v", evs[0].HistoryOnly, evs[0].KeyNames)
		}
	})
}

func TestDecodeStopsWhenTheContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d, err := Decode(ctx, strings.NewReader(pgCDC+"\n"+pgCDC+"\n"), "c.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := d.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestConvertJSONToKnownTypes(t *testing.T) {
	tests := []struct {
		name string
		typ  value.Type
		in   string
		want string // canonical JSON of the result
	}{
		{"a quoted integer becomes a long", value.Long, `"42"`, `42`},
		{"an integer becomes a short", value.Short, `-7`, `-7`},
		{"a number becomes an exact decimal", value.DecimalType{Precision: 10, Scale: 3}, `12.5`, `"12.500"`},
		{"an exponent becomes an exact decimal", value.DecimalType{Precision: 10, Scale: 0}, `1.5e3`, `"1500"`},
		{"NaN becomes a double NaN", value.Double, `"NaN"`, `"NaN"`},
		{"a float keeps float32 precision", value.Float, `45.67`, `45.67`},
		{"base64 becomes binary", value.Binary, `"3q2+7w=="`, `"3q2+7w=="`},
		{"hex that cannot be base64 becomes binary", value.Binary, `"dead00"`, `"3q0A"`},
		{"text that is neither base64 nor hex is refused", value.Binary, `"dead beef"`, ``},
		{"a timestamp string becomes a date", value.Date, `"2023-07-26T00:00:00.000Z"`, `"2023-07-26"`},
		{"a wall-clock string becomes timestamp_ntz", value.TimestampNTZ, `"2024-02-02 10:00:00"`, `"2024-02-02T10:00:00.000000"`},
		{"a number becomes microseconds", value.Timestamp, `1000001`, `"1970-01-01T00:00:01.000001Z"`},
		{"an object becomes JSON text in a string column", value.String, `{"a": [1, 2]}`, `"{\"a\":[1,2]}"`},
		{"a boolean string becomes a boolean", value.Boolean, `"TRUE"`, `true`},
		{"an object becomes a struct", value.StructType{Fields: []value.Field{{Name: "x", Type: value.Long}, {Name: "y", Type: value.String}}}, `{"y":"b","x":1}`, `{"x":1,"y":"b"}`},
		{"an array becomes an array", value.ArrayType{Element: value.Integer}, `[1,null,3]`, `[1,null,3]`},
		{"an object becomes a map in order", value.MapType{Key: value.String, Value: value.Long}, `{"b":2,"a":1}`, `{"b":2,"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := convertJSON(tt.typ, json.RawMessage(tt.in))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("converted %s to %v, want an error", tt.in, v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := value.AppendJSON(nil, tt.typ, v)
			if err != nil || string(b) != tt.want {
				t.Errorf("got %s (%v), want %s", b, err, tt.want)
			}
		})
	}
	refused := []struct {
		name string
		typ  value.Type
		in   string
	}{
		{"a fraction for a long", value.Long, `1.5`},
		{"an integer beyond a byte", value.Byte, `300`},
		{"more digits than the decimal's scale", value.DecimalType{Precision: 10, Scale: 2}, `1.234`},
		{"more digits than the decimal's precision", value.DecimalType{Precision: 4, Scale: 2}, `123.4`},
		{"a string for a struct", value.StructType{}, `"x"`},
		{"an array for a boolean", value.Boolean, `[true]`},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			if v, err := convertJSON(tt.typ, json.RawMessage(tt.in)); err == nil {
				t.Errorf("converted to %v", v)
			}
		})
	}
	if v, _ := convertJSON(value.Double, json.RawMessage(`"-Infinity"`)); v != math.Inf(-1) {
		t.Errorf("-Infinity = %v", v)
	}
}
