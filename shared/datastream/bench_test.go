package datastream

import (
	"bytes"
	"context"
	"fmt"
	"github.com/dsdelta/dsdelta/shared/value"
	"math/big"
	"testing"

	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/hamba/avro/v2/ocf"
)

const benchSchema = `{"type":"record","name":"shop_orders","fields":[
 {"name":"uuid","type":"string"},
 {"name":"read_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"source_timestamp","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"object","type":"string"},{"name":"read_method","type":"string"},
 {"name":"stream_name","type":"string"},{"name":"schema_key","type":"string"},
 {"name":"sort_keys","type":{"type":"array","items":["string","long"]}},
 {"name":"source_metadata","type":{"type":"record","name":"source_metadata","fields":[
   {"name":"table","type":"string"},{"name":"database","type":"string"},
   {"name":"primary_keys","type":{"type":"array","items":"string"}},
   {"name":"log_file","type":["null","string"]},{"name":"log_position","type":["null","long"]},
   {"name":"change_type","type":["null","string"]},{"name":"is_deleted","type":["null","boolean"]}]}},
 {"name":"payload","type":{"type":"record","name":"payload","fields":[
   {"name":"id","type":["null","long"]},
   {"name":"customer","type":["null","string"]},
   {"name":"email","type":["null","string"]},
   {"name":"amount","type":["null",{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}]},
   {"name":"quantity","type":["null","int"]},
   {"name":"status","type":["null","string"]},
   {"name":"created_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
   {"name":"updated_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
   {"name":"note","type":["null","string"]},
   {"name":"flags","type":["null","long"]}]}}]}`

// benchEvents generates about targetBytes of JSON lines and the same events
// as an Avro file (deflate, as a realistic codec).
func benchEvents(b *testing.B, targetBytes int) (jsonl, avroFile []byte, events int) {
	b.Helper()
	jsonl, recs := shopEvents(b, targetBytes)
	return jsonl, writeOCF(b, benchSchema, ocf.Deflate, 2000, recs...), len(recs)
}

// shopEvents generates about targetBytes of JSON lines and the same events
// as Avro records of benchSchema.
func shopEvents(tb testing.TB, targetBytes int) (jsonl []byte, recs [][]byte) {
	tb.Helper()
	var jb bytes.Buffer
	for i := 0; jb.Len() < targetBytes; i++ {
		ts := int64(1_715_237_814_000 + i)
		pos := int64(4 + i*97)
		ct := []string{"INSERT", "UPDATE-INSERT", "DELETE"}[i%3]
		amount := int64(i*137%1_000_000) - 5000
		fmt.Fprintf(&jb, `{"uuid":"3c0ffaeb-b16e-4c8c-91d4-%012x","read_timestamp":"2024-05-09T06:57:49.833Z","source_timestamp":"2024-05-09T06:56:%02d.000Z","object":"shop_orders","read_method":"mysql-cdc-binlog","stream_name":"projects/1/locations/us-central1/streams/s","schema_key":"1d2ab1bcde3e861022798fbded72121b56007c52","sort_keys":[%d,"mysql-bin.000014",%d],"source_metadata":{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.000014","log_position":%d,"change_type":"%s","is_deleted":%v},"payload":{"id":%d,"customer":"Customer number %d","email":"customer%d@example.com","amount":%d.%02d,"quantity":%d,"status":"shipped","created_at":"2024-01-01T00:00:00.123456Z","updated_at":"2024-05-09T06:56:53.000000Z","note":"a note long enough to look like a real column value","flags":%d}}`+"\n",
			i, i%60, ts, pos, pos, ct, ct == "DELETE", i, i, i, amount/100, abs(amount%100), i%50, i*7)
		e := enc(nil).str(fmt.Sprintf("3c0ffaeb-b16e-4c8c-91d4-%012x", i)).long(1_715_237_869_833).long(ts).
			str("shop_orders").str("mysql-cdc-binlog").str("projects/1/locations/us-central1/streams/s").str("1d2ab1bcde3e861022798fbded72121b56007c52").
			long(3).long(1).long(ts).long(0).str("mysql-bin.000014").long(1).long(pos).long(0).
			str("orders").str("shop").strs("id").some().str("mysql-bin.000014").some().long(pos).some().str(ct).some().boolean(ct == "DELETE").
			some().long(int64(i)).some().str(fmt.Sprintf("Customer number %d", i)).some().str(fmt.Sprintf("customer%d@example.com", i)).
			some().raw(decimalBytes(big.NewInt(amount))).some().long(int64(i % 50)).some().str("shipped").
			some().long(1_704_067_200_123_456).some().long(1_715_237_813_000_000).some().str("a note long enough to look like a real column value").some().long(int64(i * 7))
		recs = append(recs, e)
	}
	return jb.Bytes(), recs
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// benchPayload is the payload schema of benchSchema's events, as
// Options.Schemas gives it: JSON payloads are then typed by
// convertJSONIn rather than inferred.
var benchPayload = map[string]value.StructType{"shop.orders": {Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "customer", Type: value.String, Nullable: true},
	{Name: "email", Type: value.String, Nullable: true},
	{Name: "amount", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "quantity", Type: value.Integer, Nullable: true},
	{Name: "status", Type: value.String, Nullable: true},
	{Name: "created_at", Type: value.Timestamp, Nullable: true},
	{Name: "updated_at", Type: value.Timestamp, Nullable: true},
	{Name: "note", Type: value.String, Nullable: true},
	{Name: "flags", Type: value.Long, Nullable: true},
}}}

// BenchmarkDecode measures decode throughput for ~50 MB of JSON lines
// and the same events as a deflate Avro file, each decoded on GOMAXPROCS
// goroutines and on one: MB/s (of the file as stored) and events/s. The
// jsonl-schema case types the payloads by a known schema.
func BenchmarkDecode(b *testing.B) {
	jsonl, avroFile, events := benchEvents(b, benchBytes)
	for _, c := range []struct {
		name string
		data []byte
		opts Options
	}{{"jsonl", jsonl, Options{}}, {"jsonl-sequential", jsonl, Options{Workers: 1}},
		{"jsonl-schema-sequential", jsonl, Options{Workers: 1, Schemas: benchPayload}},
		{"avro-deflate", avroFile, Options{}}, {"avro-deflate-sequential", avroFile, Options{Workers: 1}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				err := All(context.Background(), bytes.NewReader(c.data), c.name, c.opts, func(Event) error {
					n++
					return nil
				})
				if err != nil || n != events {
					b.Fatalf("decoded %d of %d events: %v", n, events, err)
				}
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// benchBytes is the size of the generated JSON lines file.
var benchBytes = 50 << 20

// dssimAvro generates one Datastream Avro file of MySQL changes with dssim
// (codec null, many blocks, as Datastream writes them).
func dssimAvro(tb testing.TB, changes int) (data []byte, events int) {
	tb.Helper()
	res, err := dssim.Run(dssim.Options{Seed: 7, EventsPerFile: 1 << 30, Tables: []dssim.TableSpec{{
		Source: dssim.MySQL, Database: "shop", Table: "customers", Format: dssim.Avro, InitialRows: changes / 4, Changes: changes}}})
	if err != nil {
		tb.Fatalf("simulate: %v", err)
	}
	var biggest dssim.File
	for _, f := range res.Files {
		if len(f.Data) > len(biggest.Data) {
			biggest = f
		}
	}
	return biggest.Data, biggest.Events
}

// BenchmarkDecodeAvro measures decoding a dssim Avro file (~20k events) on
// one goroutine and on GOMAXPROCS: allocations and time per event.
func BenchmarkDecodeAvro(b *testing.B) {
	data, events := dssimAvro(b, 20000)
	for _, c := range []struct {
		name string
		opts Options
	}{{"parallel", Options{}}, {"sequential", Options{Workers: 1}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				err := All(context.Background(), bytes.NewReader(data), "bench.avro", c.opts, func(Event) error {
					n++
					return nil
				})
				if err != nil || n != events {
					b.Fatalf("decoded %d of %d events: %v", n, events, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
		})
	}
}

// BenchmarkUnifyJSON measures typing decoded JSON events into one schema
// (what staging does to every JSON part): the events are decoded again
// for each round, outside the timer.
func BenchmarkUnifyJSON(b *testing.B) {
	jsonl, _, events := benchEvents(b, 8<<20)
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		var evs []Event
		err := All(context.Background(), bytes.NewReader(jsonl), "bench.jsonl", Options{}, func(ev Event) error {
			evs = append(evs, ev)
			return nil
		})
		if err != nil || len(evs) != events {
			b.Fatalf("decoded %d of %d events: %v", len(evs), events, err)
		}
		b.StartTimer()
		if _, err := UnifyJSON(evs, value.StructType{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
