package dssim

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/dsdelta/dsdelta/shared/value"
)

const streamName = "projects/545418958905/locations/us-central1/streams/dsdelta-sim"

// render groups events into files the way Datastream does: one read method
// and one schema per file, rotated at EventsPerFile, in a folder per minute.
func (ts *tableSim) render(events []event, opts Options, rng *rand.Rand) ([]File, error) {
	schemaKey := ts.schemaKey()
	var groups [][]event
	var cur []event
	for _, e := range events {
		if len(cur) > 0 && (len(cur) >= opts.EventsPerFile || cur[0].readMethod != e.readMethod) {
			groups = append(groups, cur)
			cur = nil
		}
		cur = append(cur, e)
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	// Overlap duplicates: some events are written again in another file.
	if opts.DuplicateEvents > 0 && len(groups) > 0 {
		for _, e := range events {
			if rng.Float64() < opts.DuplicateEvents {
				g := rng.IntN(len(groups))
				groups[g] = append(groups[g], e)
			}
		}
	}
	var files []File
	for gi, g := range groups {
		folderTime := g[0].sourceTS
		if strings.Contains(g[0].readMethod, "backfill") {
			folderTime = ts.start // backfill files go under the task's start time
		}
		name := fmt.Sprintf("%s/%s/%s_%s_%d_%d_%d.%s",
			ts.spec.Object(), folderTime.UTC().Format("2006/01/02/15/04"),
			schemaKey, g[0].readMethod, int32(rng.Uint32()), gi%8, gi, ts.spec.Format)
		if opts.Prefix != "" {
			name = strings.TrimSuffix(opts.Prefix, "/") + "/" + name
		}
		var data []byte
		var err error
		if ts.spec.Format == Avro {
			data, err = ts.renderAvro(g, schemaKey)
		} else {
			data, err = ts.renderJSON(g, schemaKey)
		}
		if err != nil {
			return nil, err
		}
		f := File{Name: name, Data: data, Table: ts.spec.ID(), Events: len(g)}
		files = append(files, f)
		if rng.Float64() < opts.RedeliveredFiles {
			files = append(files, f)
		}
	}
	return files, nil
}

func (ts *tableSim) schemaKey() string {
	h := sha1.Sum([]byte(ts.spec.ID() + ts.schema().String()))
	return hex.EncodeToString(h[:])
}

func (e event) uuid(schemaKey string) string {
	return fmt.Sprintf("%s-%s-%s-%s-%08b", schemaKey[:8], schemaKey[8:12], schemaKey[12:16], schemaKey[16:20], e.seq&0xff)
}

func (e event) isBackfill() bool { return strings.Contains(e.readMethod, "backfill") }

// metadata returns source_metadata as ordered key/value pairs (Datastream's
// field order per source) and sort_keys.
func (e event) metadata() ([][2]any, []any) {
	ts := e.table
	var ct any
	if e.changeType != "" {
		ct = e.changeType
	}
	ms := e.sourceTS.UnixMilli()
	pks := ts.keyNames()
	switch ts.spec.Source {
	case MySQL:
		file, pos := e.pos.binlogFile, e.pos.binlogPos
		if e.isBackfill() {
			file, pos = "", 0
		}
		return [][2]any{{"table", ts.spec.Table}, {"database", ts.spec.Database}, {"primary_keys", pks},
				{"log_file", file}, {"log_position", pos}, {"change_type", ct}, {"is_deleted", e.isDeleted}},
			[]any{ms, file, pos}
	case Oracle:
		var scn, ssn any = e.pos.scn, e.pos.ssn
		var tx, logFile any = "CAACAAUKAA" + strconv.FormatInt(e.pos.txID%10, 10) + "=", "/u01/app/oracle/fast_recovery_area/XE/archivelog/o1_mf_1_212_j5jm8lkk_.arc"
		rs := e.pos.rsID
		if e.isBackfill() {
			scn, ssn, tx, logFile, rs = int64(0), int64(0), nil, nil, ""
		}
		return [][2]any{{"schema", ts.spec.Database}, {"table", ts.spec.Table}, {"database", "XE"},
				{"row_id", fmt.Sprintf("AAAE5XAAEAAAAD%04X", e.row[0].(int64)%0xffff)}, {"scn", scn}, {"is_deleted", e.isDeleted},
				{"change_type", ct}, {"ssn", ssn}, {"rs_id", rs}, {"tx_id", tx}, {"log_file", logFile}, {"primary_keys", pks}},
			[]any{ms, scn, rs, ssn}
	default:
		lsn := e.pos.lsn
		var tx any = e.pos.txID
		if e.isBackfill() {
			lsn, tx = "", nil
		}
		return [][2]any{{"schema", ts.spec.Database}, {"table", ts.spec.Table}, {"is_deleted", e.isDeleted},
				{"change_type", ct}, {"tx_id", tx}, {"lsn", lsn}, {"primary_keys", pks}},
			[]any{ms, lsn}
	}
}

// renderJSON writes Datastream's JSON event form, one event per line, with
// decimals as bare JSON numbers and timestamps as ISO strings.
func (ts *tableSim) renderJSON(events []event, schemaKey string) ([]byte, error) {
	var buf bytes.Buffer
	for _, e := range events {
		md, sortKeys := e.metadata()
		buf.WriteString(`{"uuid":`)
		writeJSON(&buf, e.uuid(schemaKey))
		buf.WriteString(`,"read_timestamp":`)
		writeJSON(&buf, e.readTS.UTC().Format("2006-01-02T15:04:05.000Z"))
		buf.WriteString(`,"source_timestamp":`)
		writeJSON(&buf, e.sourceTS.UTC().Format("2006-01-02T15:04:05.000Z"))
		buf.WriteString(`,"object":`)
		writeJSON(&buf, ts.spec.Object())
		buf.WriteString(`,"read_method":`)
		writeJSON(&buf, e.readMethod)
		buf.WriteString(`,"stream_name":`)
		writeJSON(&buf, streamName)
		buf.WriteString(`,"schema_key":`)
		writeJSON(&buf, schemaKey)
		buf.WriteString(`,"sort_keys":`)
		writeJSON(&buf, sortKeys)
		buf.WriteString(`,"source_metadata":{`)
		for i, kv := range md {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(&buf, kv[0])
			buf.WriteByte(':')
			writeJSON(&buf, kv[1])
		}
		buf.WriteString(`},"payload":{`)
		for i, c := range ts.cols {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSON(&buf, c.name)
			buf.WriteByte(':')
			switch v := e.row[i].(type) {
			case value.Decimal:
				buf.WriteString(v.String()) // a JSON number, exact
			case value.Micros:
				writeJSON(&buf, v.Time().Format("2006-01-02T15:04:05.000000Z"))
			default:
				writeJSON(&buf, v)
			}
		}
		buf.WriteString("}}\n")
	}
	if ts.spec.Format != JSONLGz {
		return buf.Bytes(), nil
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gz.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v any) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only strings, numbers, bools, nil and slices of them
	buf.Truncate(buf.Len() - 1)
}

// avroName makes an Avro-legal record name.
func avroName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func avroType(t value.Type) any {
	switch x := t.(type) {
	case value.DecimalType:
		return map[string]any{"type": "bytes", "logicalType": "decimal", "precision": x.Precision, "scale": x.Scale}
	case value.Primitive:
		switch x {
		case value.Timestamp:
			return map[string]any{"type": "long", "logicalType": "timestamp-micros"}
		case value.Integer:
			return "int"
		case value.Boolean:
			return "boolean"
		case value.String:
			return "string"
		}
	}
	return "long"
}

// avroSchema is the writer schema of a Datastream Avro file for this table.
func (ts *tableSim) avroSchema() string {
	nullable := func(t any) any { return []any{"null", t} }
	var payload []any
	for _, c := range ts.cols {
		payload = append(payload, map[string]any{"name": c.name, "type": nullable(avroType(c.typ)), "default": nil})
	}
	var md []any
	str := func(n string) any { return map[string]any{"name": n, "type": "string"} }
	nstr := func(n string) any { return map[string]any{"name": n, "type": nullable("string"), "default": nil} }
	nlong := func(n string) any { return map[string]any{"name": n, "type": nullable("long"), "default": nil} }
	nbool := map[string]any{"name": "is_deleted", "type": nullable("boolean"), "default": nil}
	pks := map[string]any{"name": "primary_keys", "type": nullable(map[string]any{"type": "array", "items": "string"}), "default": nil}
	switch ts.spec.Source {
	case MySQL:
		md = []any{str("table"), str("database"), map[string]any{"name": "primary_keys", "type": map[string]any{"type": "array", "items": "string"}},
			nstr("log_file"), nlong("log_position"), nstr("change_type"), nbool}
	case Oracle:
		md = []any{str("schema"), str("table"), str("database"), nstr("row_id"), nlong("scn"), nbool, nstr("change_type"),
			nlong("ssn"), nstr("rs_id"), nstr("tx_id"), nstr("log_file"), pks}
	default:
		md = []any{str("schema"), str("table"), nbool, nstr("change_type"), nlong("tx_id"), nstr("lsn"), pks}
	}
	ms := map[string]any{"type": "long", "logicalType": "timestamp-millis"}
	schema := map[string]any{
		"type": "record", "name": avroName(ts.spec.Object()),
		"fields": []any{
			str("uuid"),
			map[string]any{"name": "read_timestamp", "type": ms},
			map[string]any{"name": "source_timestamp", "type": ms},
			str("object"), str("read_method"), str("stream_name"), str("schema_key"),
			map[string]any{"name": "sort_keys", "type": map[string]any{"type": "array", "items": []any{"string", "long"}}},
			map[string]any{"name": "source_metadata", "type": map[string]any{"type": "record", "name": "source_metadata", "fields": md}},
			map[string]any{"name": "payload", "type": map[string]any{"type": "record", "name": "payload", "fields": payload}},
		},
	}
	b, _ := json.Marshal(schema)
	return string(b)
}

// renderAvro writes an Avro object container file (codec null, like every
// real sample).
func (ts *tableSim) renderAvro(events []event, schemaKey string) ([]byte, error) {
	schema, err := avro.Parse(ts.avroSchema())
	if err != nil {
		return nil, fmt.Errorf("avro schema: %w", err)
	}
	var buf bytes.Buffer
	// A sync marker derived from the schema key keeps output deterministic.
	var sync [16]byte
	copy(sync[:], schemaKey)
	enc, err := ocf.NewEncoderWithSchema(schema, &buf, ocf.WithSyncBlock(sync))
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		md, sortKeys := e.metadata()
		mdRec := map[string]any{}
		for _, kv := range md {
			name := kv[0].(string)
			switch {
			case name == "schema" || name == "table" || name == "database",
				name == "primary_keys" && ts.spec.Source == MySQL:
				mdRec[name] = kv[1] // not a union in Datastream's schema
			default:
				mdRec[name] = avroUnion(kv[1])
			}
		}
		sk := append([]any(nil), sortKeys...)
		payload := map[string]any{}
		for i, c := range ts.cols {
			payload[c.name] = avroValue(c.typ, e.row[i])
		}
		rec := map[string]any{
			"uuid": e.uuid(schemaKey), "read_timestamp": e.readTS.UTC().Truncate(time.Millisecond),
			"source_timestamp": e.sourceTS.UTC(), "object": ts.spec.Object(), "read_method": e.readMethod,
			"stream_name": streamName, "schema_key": schemaKey, "sort_keys": sk,
			"source_metadata": mdRec, "payload": payload,
		}
		if err := enc.Encode(rec); err != nil {
			return nil, fmt.Errorf("encode avro record %d: %w", e.seq, err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// avroUnion wraps a value for a ["null", T] union the way hamba's generic
// encoder expects: nil, or a map naming the branch.
func avroUnion(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return map[string]any{"string": x}
	case int64:
		return map[string]any{"long": x}
	case bool:
		return map[string]any{"boolean": x}
	case []string:
		return map[string]any{"array": x}
	}
	return v
}

func avroValue(t value.Type, v any) any {
	if v == nil {
		return nil
	}
	switch x := v.(type) {
	case value.Decimal:
		r := new(big.Rat).SetFrac(x.Unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Scale)), nil))
		return map[string]any{"bytes.decimal": r}
	case value.Micros:
		return map[string]any{"long.timestamp-micros": x.Time()}
	case int32:
		return map[string]any{"int": int(x)}
	case int64:
		return map[string]any{"long": x}
	case string:
		return map[string]any{"string": x}
	case bool:
		return map[string]any{"boolean": x}
	}
	return v
}
