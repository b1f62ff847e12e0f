package datastream

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2/ocf"
	"os"
)

// typesSchema puts payload before source_metadata and sort_keys last, as
// some Datastream versions do: decoding must go by name.
const typesSchema = `{"type":"record","name":"db_types","fields":[
 {"name":"uuid","type":"string"},
 {"name":"read_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"source_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"object","type":"string"},
 {"name":"read_method","type":"string"},
 {"name":"stream_name","type":"string"},
 {"name":"schema_key","type":"string"},
 {"name":"payload","type":{"type":"record","name":"payload","fields":[
   {"name":"id","type":["null","long"]},
   {"name":"dec","type":["null",{"type":"bytes","logicalType":"decimal","precision":8,"scale":2}]},
   {"name":"ts_us","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
   {"name":"ts_ms","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
   {"name":"day","type":["null",{"type":"int","logicalType":"date"}]},
   {"name":"tod","type":["null",{"type":"long","logicalType":"time-micros"}]},
   {"name":"dt","type":["null",{"type":"record","name":"datetime","fields":[{"name":"date","type":{"type":"int","logicalType":"date"}},{"name":"time","type":{"type":"long","logicalType":"time-micros"}}]}]},
   {"name":"tz","type":["null",{"type":"record","name":"timestampTz","fields":[{"name":"timestamp","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"offset","type":{"type":"int","logicalType":"time-millis"}}]}]},
   {"name":"iv","type":["null",{"type":"record","name":"interval","fields":[{"name":"months","type":"int"},{"name":"hours","type":"int"},{"name":"micros","type":"long"}]}]},
   {"name":"geo","type":["null",{"type":"record","name":"geometry","fields":[{"name":"value","type":"bytes"},{"name":"srid","type":"int"},{"name":"type","type":"string"}]}]},
   {"name":"js","type":["null",{"type":"string","logicalType":"json"}]},
   {"name":"bigu","type":["null",{"type":"string","logicalType":"number"}]},
   {"name":"vc","type":["null",{"type":"string","logicalType":"varchar","length":10}]},
   {"name":"color","type":["null",{"type":"enum","name":"color","symbols":["RED","GREEN"]}]},
   {"name":"arr","type":["null",{"type":"record","name":"multidimensionalArray_arr","fields":[{"name":"nestedArray","type":["null",{"type":"array","items":"multidimensionalArray_arr"}],"default":null},{"name":"elementValue","type":["null","int"],"default":null}]}]},
   {"name":"fl","type":["null","float"]},
   {"name":"bin","type":["null","bytes"]},
   {"name":"tim","type":["null",{"type":"long","logicalType":"time-interval-micros"}]}
 ]}},
 {"name":"source_metadata","type":{"type":"record","name":"source_metadata","fields":[
   {"name":"table","type":"string"},{"name":"database","type":"string"},
   {"name":"primary_keys","type":{"type":"array","items":"string"}},
   {"name":"log_file","type":["null","string"]},{"name":"log_position","type":["null","long"]},
   {"name":"change_type","type":["null","string"]},{"name":"is_deleted","type":["null","boolean"]}]}},
 {"name":"sort_keys","type":{"type":"array","items":["string","long"]}}
]}`

// typesRecord encodes one event of typesSchema with every column set, or
// every column null.
func typesRecord(id int64, logPos int64, changeType string, allNull bool) []byte {
	e := enc(nil).str("uuid-1").long(1_715_237_814_123).long(1_715_237_814_000).
		str("db_types").str("mysql-cdc-binlog").str("projects/1/locations/x/streams/s").str("k1")
	e = e.some().long(id)
	if allNull {
		for range 17 {
			e = e.null()
		}
	} else {
		unscaled, _ := new(big.Int).SetString("-12345678", 10) // -123456.78
		e = e.some().raw(decimalBytes(unscaled))
		e = e.some().long(1_700_000_000_123_456) // 2023-11-14T22:13:20.123456Z
		e = e.some().long(1_700_000_000_123)
		e = e.some().long(19_000) // 2022-01-08
		e = e.some().long(3_723_000_001)
		e = e.some().long(19_000).long(3_723_000_001)                                                             // datetime
		e = e.some().long(1_700_000_000_000_000).long(7_200_000)                                                  // timestampTz
		e = e.some().long(14).long(-3).long(1_500_000)                                                            // interval
		e = e.some().raw([]byte{1, 2, 3}).long(4326).str("POINT")                                                 // geometry
		e = e.some().str(`{"a": [1, 2]}`)                                                                         // json
		e = e.some().str("18446744073709551615")                                                                  // BIGINT UNSIGNED max
		e = e.some().str("héllo")                                                                                 // varchar
		e = e.some().long(1)                                                                                      // enum GREEN
		e = e.some().some().long(3).long(0).some().long(10).long(0).null().long(0).some().long(-7).long(0).null() // [10,null,-7]
		e = e.some().f32(45.67)
		e = e.some().raw([]byte{0xde, 0xad})
		e = e.some().long(-90_000_000_000) // -25 h
	}
	e = e.str("types").str("db").strs("id").some().str("mysql-bin.000014").some().long(logPos).some().str(changeType).some().boolean(false)
	e = e.long(3).long(0).str("x").long(1).long(9).long(1).long(logPos).long(0) // sort_keys ["x",9,pos]
	return e
}

func TestDecodeAvroMapsEveryUnifiedType(t *testing.T) {
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy} {
		t.Run("with codec "+string(codec), func(t *testing.T) {
			data := writeOCF(t, typesSchema, codec, 1, typesRecord(1, 100, "INSERT", false), typesRecord(2, 200, "DELETE", true))
			evs, err := decodeAll(t, data, "t.avro", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 {
				t.Fatalf("decoded %d events, want 2", len(evs))
			}
			wantSchema := "struct<id:long,dec:decimal(8,2),ts_us:timestamp,ts_ms:timestamp,day:date,tod:long,dt:timestamp_ntz,tz:timestamp," +
				"iv:struct<months:integer,hours:integer,micros:long>,geo:struct<value:binary,srid:integer,type:string>,js:string," +
				"bigu:decimal(20,0),vc:string,color:string,arr:array<integer>,fl:float,bin:binary,tim:long>"
			if got := evs[0].Schema.String(); got != wantSchema {
				t.Errorf("schema\n got %s\nwant %s", got, wantSchema)
			}
			want := []string{
				`{"table":"db.types","op":"upsert","key":{"id":1},"order":"mysql-bin.000014:100","source_timestamp":"2024-05-09T06:56:54.000000Z","read_method":"cdc","change_type":"INSERT","row":{"id":1,"dec":"-123456.78","ts_us":"2023-11-14T22:13:20.123456Z","ts_ms":"2023-11-14T22:13:20.123000Z","day":"2022-01-08","tod":3723000001,"dt":"2022-01-08T01:02:03.000001","tz":"2023-11-14T22:13:20.000000Z","iv":{"months":14,"hours":-3,"micros":1500000},"geo":{"value":"AQID","srid":4326,"type":"POINT"},"js":"{\"a\": [1, 2]}","bigu":"18446744073709551615","vc":"héllo","color":"GREEN","arr":[10,null,-7],"fl":45.67,"bin":"3q0=","tim":-90000000000}}`,
				`{"table":"db.types","op":"delete","key":{"id":2},"order":"mysql-bin.000014:200","source_timestamp":"2024-05-09T06:56:54.000000Z","read_method":"cdc","change_type":"DELETE","row":{"id":2,"dec":null,"ts_us":null,"ts_ms":null,"day":null,"tod":null,"dt":null,"tz":null,"iv":null,"geo":null,"js":null,"bigu":null,"vc":null,"color":null,"arr":null,"fl":null,"bin":null,"tim":null}}`,
			}
			for i, ev := range evs {
				if got := eventLine(t, ev); got != want[i] {
					t.Errorf("event %d\n got %s\nwant %s", i+1, got, want[i])
				}
			}
			if m := evs[0].Meta; m.ReadTimestamp.String() != "2024-05-09T06:56:54.123000Z" || m.UUID != "uuid-1" || m.Position.LogPosition != 100 || m.Record != 1 {
				t.Errorf("meta = %+v", m)
			}
		})
	}
}

func TestDecodeAvroErrorsNameBlockRecordAndField(t *testing.T) {
	good := typesRecord(1, 100, "INSERT", true)
	tests := []struct {
		name   string
		data   func(t *testing.T) []byte
		kind   error
		block  int64
		record int64
		field  string
	}{
		{"a malformed binlog file name in the third record", func(t *testing.T) []byte {
			bad := []byte(strings.Replace(string(good), "mysql-bin.000014", "mysql-bin.00001x", 1))
			return writeOCF(t, typesSchema, ocf.Null, 2, good, good, bad)
		}, ErrBadRecord, 2, 3, "source_metadata.log_file"},
		{"a record cut short inside the payload", func(t *testing.T) []byte {
			prefix := enc(nil).str("uuid-1").long(1_715_237_814_123).long(1_715_237_814_000).
				str("db_types").str("mysql-cdc-binlog").str("projects/1/locations/x/streams/s").str("k1")
			return writeOCF(t, typesSchema, ocf.Null, 1, good[:len(prefix)+1])
		}, ErrBadRecord, 1, 1, "payload.id"},
		{"a union branch out of range", func(t *testing.T) []byte {
			rec := append([]byte(nil), good...)
			// The payload id union index is the byte after the seven
			// envelope fields; find it by re-encoding the prefix.
			prefix := enc(nil).str("uuid-1").long(1_715_237_814_123).long(1_715_237_814_000).
				str("db_types").str("mysql-cdc-binlog").str("projects/1/locations/x/streams/s").str("k1")
			rec[len(prefix)] = 0x08 // branch 4
			return writeOCF(t, typesSchema, ocf.Null, 1, rec)
		}, ErrBadRecord, 1, 1, "payload.id"},
		{"trailing bytes after a block's records", func(t *testing.T) []byte {
			return writeOCF(t, typesSchema, ocf.Null, 1, append(append([]byte(nil), good...), 0, 0))
		}, ErrBadFile, 1, 0, ""},
		{"a file cut inside a block", func(t *testing.T) []byte {
			d := writeOCF(t, typesSchema, ocf.Null, 1, good, good)
			return d[:len(d)-30]
		}, ErrBadFile, 2, 0, ""},
		{"a corrupt sync marker", func(t *testing.T) []byte {
			d := writeOCF(t, typesSchema, ocf.Null, 1, good)
			d[len(d)-1] ^= 0xff
			return d
		}, ErrBadFile, 1, 0, ""},
		{"a block claiming a huge size", func(t *testing.T) []byte {
			d := writeOCF(t, typesSchema, ocf.Null, 1)
			return append(enc(d).long(1).long(1<<40), 1, 2, 3)
		}, ErrBadFile, 1, 0, ""},
		{"an unsupported codec", func(t *testing.T) []byte {
			d := writeOCF(t, typesSchema, ocf.Null, 1, good)
			return []byte(strings.Replace(string(d), "avro.codec\x08null", "avro.codec\x08bzip", 1))
		}, ErrBadFile, 0, 0, ""},
		{"a header that is not a container", func(t *testing.T) []byte { return []byte("Obj\x01\xff") }, ErrBadFile, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeAll(t, tt.data(t), "t.avro", Options{})
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RecordError", err)
			}
			if !errors.Is(err, tt.kind) || re.File != "t.avro" || re.Block != tt.block || re.Record != tt.record || re.Field != tt.field {
				t.Errorf("got %v (kind %v block %d record %d field %q), want kind %v block %d record %d field %q",
					err, re.Kind, re.Block, re.Record, re.Field, tt.kind, tt.block, tt.record, tt.field)
			}
		})
	}
}

func TestDecodeAvroRefusesANonAvroFileNamedAvro(t *testing.T) {
	_, err := decodeAll(t, []byte(`{"uuid":"x"}`), "x.avro", Options{Format: FormatAvro})
	if !errors.Is(err, ErrBadFile) {
		t.Fatalf("err = %v, want ErrBadFile", err)
	}
}

func spanner(t *testing.T, elem ...string) []byte {
	t.Helper()
	p := fixture.Path(t, append([]string{"datastream", "GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-to-spanner", "src", "test", "resources"}, elem...)...)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixtureSameSecondInsertThenUpdateOrderByLogPosition(t *testing.T) {
	evs, err := decodeAll(t, spanner(t, "DataStreamToSpannerEventsIT", "mysql-cdc-Users.avro"), "mysql-cdc-Users.avro", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ins, upd *Event
	for i := range evs {
		ev := &evs[i]
		if ev.KeyValues[0] == int32(3) {
			switch ev.ChangeType {
			case ChangeInsert:
				ins = ev
			case ChangeUpdateInsert:
				upd = ev
			}
		}
	}
	if ins == nil || upd == nil {
		t.Fatal("the INSERT and UPDATE-INSERT of id 3 are not both in the file")
	}
	if ins.SourceTimestamp != upd.SourceTimestamp {
		t.Fatalf("the fixture no longer has both in the same second")
	}
	if ins.Order.Compare(upd.Order) >= 0 {
		t.Errorf("INSERT %s does not sort before UPDATE-INSERT %s", ins.Order, upd.Order)
	}
	if evs[0].Op != OpDelete || evs[0].Table.String() != "l1.Users" {
		t.Errorf("first event = %s %s, want a delete on l1.Users", evs[0].Op, evs[0].Table)
	}
}

func TestFixturePrimaryKeyUpdateHasBothHalves(t *testing.T) {
	for _, name := range []string{"alltypes-test-pk-update.avro", "my_table-simpleTest-pk-update.avro"} {
		t.Run(name+" deletes the old key before inserting the new", func(t *testing.T) {
			evs, err := decodeAll(t, spanner(t, "SeparateShadowTableDatabaseIT", name), name, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 2 {
				t.Fatalf("decoded %d events, want 2", len(evs))
			}
			del, ins := evs[0], evs[1]
			if del.Op != OpDelete || del.ChangeType != ChangeUpdateDelete || !del.Meta.IsDeleted {
				t.Errorf("first half = %s %s is_deleted=%v", del.Op, del.ChangeType, del.Meta.IsDeleted)
			}
			if ins.Op != OpUpsert || ins.ChangeType != ChangeUpdateInsert {
				t.Errorf("second half = %s %s", ins.Op, ins.ChangeType)
			}
			if del.Order.Text != ins.Order.Text {
				t.Errorf("halves have positions %s and %s, want the same", del.Order, ins.Order)
			}
			if del.Order.Compare(ins.Order) >= 0 {
				t.Error("UPDATE-DELETE does not sort before UPDATE-INSERT")
			}
			if eventKey(t, del) == eventKey(t, ins) {
				t.Errorf("both halves have key %s", eventKey(t, del))
			}
		})
	}
}

func eventKey(t *testing.T, ev Event) string {
	line := eventLine(t, ev)
	i := strings.Index(line, `"key":`)
	j := strings.Index(line, `,"order":`)
	return line[i:j]
}

func TestFixtureBackfillWithZeroPositionSortsFirst(t *testing.T) {
	// DateData.avro has sort_keys [ts,0,0]: a long where others write "".
	evs, err := decodeAll(t, spanner(t, "DataStreamToSpannerTimezoneIT", "DateData.avro"), "DateData.avro", Options{})
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := BuildOrder(MySQL, CDC, Position{LogFile: "mysql-bin.000001", LogPosition: 4}, ChangeInsert, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.ReadMethod != Backfill || ev.Order.Text != "backfill" {
			t.Errorf("event %d: read method %s order %s, want backfill", ev.Meta.Record, ev.ReadMethod, ev.Order)
		}
		if ev.Order.Compare(cdc) >= 0 {
			t.Errorf("event %d does not sort before the first CDC event", ev.Meta.Record)
		}
	}
}

func TestFixtureExactNumbers(t *testing.T) {
	p := fixture.Path(t, "datastream", "GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-common", "src", "test", "resources", "FormatDatastreamRecordToJsonTest", "mysql_numbers_test.avro")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := decodeAll(t, data, "mysql_numbers_test.avro", Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := evs[1].Schema
	row := evs[1].Row
	check := func(col string, wantType value.Type, want string) {
		t.Helper()
		i := st.Index(col)
		if i < 0 {
			t.Fatalf("no column %s", col)
		}
		if !value.Equal(st.Fields[i].Type, wantType) {
			t.Errorf("%s has type %s, want %s", col, st.Fields[i].Type, wantType)
		}
		b, err := value.AppendJSON(nil, st.Fields[i].Type, row[i])
		if err != nil || string(b) != want {
			t.Errorf("%s = %s (%v), want %s", col, b, err, want)
		}
	}
	check("decimaler", value.DecimalType{Precision: 10, Scale: 2}, `"11.22"`)
	check("bigu", value.DecimalType{Precision: 20, Scale: 0}, `"0"`)
	check("intyu", value.Long, `4294967295`)
	check("floater", value.Float, `1.2`)
	check("booly", value.Integer, `0`)
}

const arraySchema = `{"type":"record","name":"public_t","fields":[
 {"name":"uuid","type":"string"},
 {"name":"read_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"source_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"object","type":"string"},{"name":"read_method","type":"string"},
 {"name":"source_metadata","type":{"type":"record","name":"source_metadata","fields":[
   {"name":"schema","type":"string"},{"name":"table","type":"string"},
   {"name":"is_deleted","type":["null","boolean"]},{"name":"change_type","type":["null","string"]},
   {"name":"tx_id","type":["null","long"]},{"name":"lsn","type":["null","string"]},
   {"name":"primary_keys","type":["null",{"type":"array","items":"string"}]}]}},
 {"name":"payload","type":{"type":"record","name":"payload","fields":[
   {"name":"id","type":["null","int"]},
   {"name":"arr","type":["null",{"type":"record","name":"multidimensionalArray_arr","fields":[{"name":"nestedArray","type":["null",{"type":"array","items":"multidimensionalArray_arr"}],"default":null},{"name":"elementValue","type":["null","string"],"default":null}]}]}]}}]}`

func arrayRecord(lsn string, arr enc) []byte {
	e := enc(nil).str("u").long(1).long(2).str("public_t").str("postgresql-cdc").
		str("public").str("t").some().boolean(false).some().str("INSERT").some().long(7).some().str(lsn).some().strs("id").
		some().long(5)
	return append(e, arr...)
}

func TestDecodeAvroPostgreSQLArrays(t *testing.T) {
	tests := []struct {
		name string
		arr  enc
		want string
		bad  bool
	}{
		{"a one-dimensional array becomes an array", enc(nil).some().some().long(2).null().some().str("a").null().some().str("b").long(0).null(), `["a","b"]`, false},
		{"an empty array stays empty", enc(nil).some().some().long(0).null(), `[]`, false},
		{"a null array is null", enc(nil).null(), `null`, false},
		{"a two-dimensional array is refused", enc(nil).some().some().long(1).some().long(1).null().some().str("x").long(0).null().long(0).null(), ``, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeOCF(t, arraySchema, ocf.Null, 1, arrayRecord("16/CB002DB0", tt.arr))
			evs, err := decodeAll(t, data, "a.avro", Options{})
			if tt.bad {
				var re *RecordError
				if !errors.As(err, &re) || re.Field != "payload.arr.nestedArray" {
					t.Fatalf("err = %v, want a bad record in payload.arr.nestedArray", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			line := eventLine(t, evs[0])
			if !strings.HasSuffix(line, `"row":{"id":5,"arr":`+tt.want+`}}`) || !strings.Contains(line, `"order":"16/CB002DB0"`) {
				t.Errorf("got %s", line)
			}
		})
	}
}
