package datastream

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// avroDecoder reads an Avro object container file. The container framing
// (header, blocks, sync markers, codecs) is read here rather than by
// ocf.Decoder for two reasons: errors must name the block, and a hostile
// block size must not allocate before the bytes exist. Schemas are parsed by
// hamba/avro (with a fresh name cache per file, so named types of one file
// never leak into another) and snappy blocks are decoded by its ocf codec.
// The type mapping is in the package documentation (doc.go).
type avroDecoder struct {
	d       *Reader
	br      *bufio.Reader
	sync    [16]byte
	codec   string
	fields  []topField
	payload []payloadCol
	schema  value.StructType
	mysql   bool
	built   buildCache

	// typeNodes counts deltaType calls: a schema whose mapped type tree
	// grows beyond maxTypeNodes (shared named types expanding
	// exponentially) is refused.
	typeNodes int

	block     int64
	remaining int64      // records left in the current block
	buf       *binReader // current block
	record    int64
	blockBuf  []byte
	bin       binReader     // what buf points to
	inflater  io.ReadCloser // reused from block to block (a flate.Resetter)
	inflated  []byte

	vals avroValues
}

// avroValues is the per-decoder state that lets records decode with few
// allocations: payload rows, boxes and strings cut from shared slabs (as
// the JSON decoder does), repeated strings interned, and source_metadata
// read into one reused map whose values are reused while they repeat. A
// parallel worker holds its own.
type avroValues struct {
	al    slabs
	arena strArena
	strs  strCache

	// meta is source_metadata of the current record. The fields of the
	// metadata record are the same for every record, so each record
	// overwrites every key and nothing else: it holds no value of an
	// earlier record. build only reads it.
	meta  map[string]any
	slots []metaSlot // per field of the metadata record, when metaRec
	spans [][]byte   // scratch: the strings of a string array
}

// metaSlot remembers the last value read for one source_metadata field, so
// that a value equal to the previous record's is reused rather than boxed
// (or interned, or put into a new slice) again. Values in the map are only
// read, so sharing them between events is safe.
type metaSlot struct {
	name string
	kind metaKind
	// nullable: the field is a union of null and kind, read as
	// readGeneric reads it.
	nullable bool
	schema   avro.Schema // for mkGeneric
	str      string      // last mkString value (interned)
	n        int64       // last mkLong/mkInt value
	val      any         // last value (nil: none yet)
	inMap    any         // what meta holds for the field, when mapped
	mapped   bool
}

// eface is the layout of an empty interface.
type eface struct {
	typ, data unsafe.Pointer
}

// sameInterface reports whether a and b are the same interface words: the
// same type and the same pointer to the same (never changed) value.
func sameInterface(a, b any) bool {
	return *(*eface)(unsafe.Pointer(&a)) == *(*eface)(unsafe.Pointer(&b))
}

type metaKind uint8

const (
	mkGeneric metaKind = iota // read by readGeneric
	mkString
	mkLong
	mkInt
	mkBool
	mkStrArray // array of strings
)

// topField is one field of the event record, decoded by name.
type topField struct {
	name   string
	schema avro.Schema
	// str: a string, or a union of null and strings (read without
	// readGeneric's boxing).
	str bool
	// metaRec: source_metadata is a record, or a union of null and a
	// record, whose fields the decoder's meta slots describe.
	metaRec bool
}

type payloadCol struct {
	name   string
	schema avro.Schema
	typ    value.Type
}

func (d *Reader) startAvro(br *bufio.Reader) error {
	ad := &avroDecoder{d: d, br: br}
	if err := ad.readHeader(); err != nil {
		return err
	}
	d.next = ad.next
	if workers := d.workers(); workers > 1 {
		p := newParallelAvro(ad, workers)
		d.par, d.next = p, p.next
	}
	return nil
}

// AvroSchemaCache keeps parsed Avro schemas across files, keyed by the
// schema text: Datastream repeats one schema in every file of a table, and
// parsing it is a large part of decoding a small file. It is safe for
// concurrent use; the zero value is ready. A nil *AvroSchemaCache parses
// every time.
type AvroSchemaCache struct {
	mu      sync.Mutex
	schemas map[string]avro.Schema
}

// maxCachedSchemas bounds the cache; beyond it the cache starts over.
const maxCachedSchemas = 1024

func (c *AvroSchemaCache) parse(text []byte) (s avro.Schema, err error) {
	defer func() {
		// hamba's parser is not ours to audit; a malformed header must be
		// a bad file, not a crash.
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("schema parser failed: %v", p)
		}
	}()
	if c == nil {
		// A fresh hamba cache per file: named types of one file must not
		// resolve references in another.
		return avro.ParseBytesWithCache(text, "", &avro.SchemaCache{})
	}
	c.mu.Lock()
	s, ok := c.schemas[string(text)]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err = avro.ParseBytesWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.schemas == nil || len(c.schemas) >= maxCachedSchemas {
		c.schemas = map[string]avro.Schema{}
	}
	c.schemas[string(text)] = s
	c.mu.Unlock()
	return s, nil
}

func (ad *avroDecoder) headerErr(reason string, err error) error {
	return ad.d.fileErr("Avro header: "+reason, err)
}

func (ad *avroDecoder) readHeader() error {
	var magic [4]byte
	if _, err := io.ReadFull(ad.br, magic[:]); err != nil {
		return ad.headerErr("read magic", err)
	}
	meta := map[string][]byte{}
	for {
		count, err := readVarint(ad.br)
		if err != nil {
			return ad.headerErr("read metadata", err)
		}
		if count == 0 {
			break
		}
		if count < 0 {
			count = -count
			if _, err := readVarint(ad.br); err != nil {
				return ad.headerErr("read metadata", err)
			}
		}
		if count > 1<<16 {
			return ad.headerErr(fmt.Sprintf("%d metadata entries", count), nil)
		}
		for range count {
			k, err := readStreamBytes(ad.br, 1<<10)
			if err != nil {
				return ad.headerErr("read metadata key", err)
			}
			v, err := readStreamBytes(ad.br, 64<<20)
			if err != nil {
				return ad.headerErr("read metadata "+strconv.Quote(string(k)), err)
			}
			meta[string(k)] = v
		}
	}
	if _, err := io.ReadFull(ad.br, ad.sync[:]); err != nil {
		return ad.headerErr("read sync marker", err)
	}
	ad.codec = string(meta["avro.codec"])
	switch ad.codec {
	case "", "null", "deflate", "snappy":
	default:
		return ad.headerErr(fmt.Sprintf("unsupported codec %q", ad.codec), nil)
	}
	sch, err := ad.d.opts.AvroSchemas.parse(meta["avro.schema"])
	if err != nil {
		return ad.headerErr("parse schema", err)
	}
	rec, ok := sch.(*avro.RecordSchema)
	if !ok {
		return ad.headerErr("schema is not a record", nil)
	}
	hasPayload := false
	for _, f := range rec.Fields() {
		tf := topField{name: f.Name(), schema: f.Type(), str: isStringSchema(f.Type())}
		if f.Name() == "source_metadata" {
			if sm := metaRecord(f.Type()); sm != nil {
				tf.metaRec = true
				ad.vals.slots = metaSlots(sm)
			}
		}
		ad.fields = append(ad.fields, tf)
		switch f.Name() {
		case "payload":
			hasPayload = true
		case "source_metadata":
			if sm, ok := unwrapNull(f.Type()).(*avro.RecordSchema); ok {
				for _, mf := range sm.Fields() {
					switch mf.Name() {
					case "log_file", "log_position", "binlog_file", "binlog_position":
						ad.mysql = true
					}
				}
			}
		}
	}
	if ad.d.opts.Source != Unknown {
		ad.mysql = ad.d.opts.Source == MySQL
	}
	if !hasPayload {
		return ad.headerErr("event record has no payload field", nil)
	}
	for _, f := range ad.fields {
		if f.name != "payload" {
			continue
		}
		pr, ok := unwrapNull(f.schema).(*avro.RecordSchema)
		if !ok {
			return ad.headerErr("payload is not a record", nil)
		}
		for _, pf := range pr.Fields() {
			t, err := ad.deltaType(pf.Type(), 0)
			if err != nil {
				return ad.headerErr("payload field "+pf.Name(), err)
			}
			ad.payload = append(ad.payload, payloadCol{name: pf.Name(), schema: pf.Type(), typ: t})
			ad.schema.Fields = append(ad.schema.Fields, value.Field{Name: pf.Name(), Type: t, Nullable: true})
		}
	}
	return nil
}

// payloadSchemaFromAvro maps the payload record of an Avro event schema (the
// schema file written beside JSON data) to a Delta schema.
func payloadSchemaFromAvro(schemaJSON []byte) (value.StructType, error) {
	sch, err := avro.ParseBytesWithCache(schemaJSON, "", &avro.SchemaCache{})
	if err != nil {
		return value.StructType{}, err
	}
	rec, ok := sch.(*avro.RecordSchema)
	if !ok {
		return value.StructType{}, errors.New("schema is not a record")
	}
	ad := &avroDecoder{}
	for _, f := range rec.Fields() {
		if f.Name() == "source_metadata" {
			if sm, ok := unwrapNull(f.Type()).(*avro.RecordSchema); ok {
				for _, mf := range sm.Fields() {
					if mf.Name() == "log_file" || mf.Name() == "binlog_file" {
						ad.mysql = true
					}
				}
			}
		}
	}
	target := rec
	for _, f := range rec.Fields() {
		if f.Name() == "payload" {
			pr, ok := unwrapNull(f.Type()).(*avro.RecordSchema)
			if !ok {
				return value.StructType{}, errors.New("payload is not a record")
			}
			target = pr
		}
	}
	var st value.StructType
	for _, pf := range target.Fields() {
		t, err := ad.deltaType(pf.Type(), 0)
		if err != nil {
			return value.StructType{}, fmt.Errorf("field %s: %w", pf.Name(), err)
		}
		st.Fields = append(st.Fields, value.Field{Name: pf.Name(), Type: t, Nullable: true})
	}
	return st, nil
}

func (ad *avroDecoder) blockErr(reason string, err error) error {
	return &RecordError{File: ad.d.name, Block: ad.block, Reason: reason, Kind: ErrBadFile, Err: err}
}

// readBlock loads the next block; it returns io.EOF after the last one.
func (ad *avroDecoder) readBlock() error {
	if _, err := ad.br.Peek(1); isEnd(err) {
		return io.EOF
	}
	ad.block++
	count, err := readVarint(ad.br)
	if err != nil {
		return ad.blockErr("read block count", err)
	}
	size, err := readVarint(ad.br)
	if err != nil {
		return ad.blockErr("read block size", err)
	}
	if err := ad.checkBlockHeader(count, size); err != nil {
		return err
	}
	// appendRead grows the buffer as bytes arrive, so a lying size cannot
	// allocate more than the file holds.
	ad.blockBuf, err = appendRead(reusable(ad.blockBuf), ad.br, int(size))
	if err != nil {
		return ad.blockErr("read block data", err)
	}
	var sync [16]byte
	if _, err := io.ReadFull(ad.br, sync[:]); err != nil {
		return ad.blockErr("read sync marker", err)
	}
	if sync != ad.sync {
		return ad.blockErr("sync marker does not match the header", nil)
	}
	return ad.loadBlock(count, ad.blockBuf)
}

// checkBlockHeader checks a block's record count and byte size, before any
// of its bytes are read.
func (ad *avroDecoder) checkBlockHeader(count, size int64) error {
	if count < 0 || size < 0 {
		return ad.blockErr(fmt.Sprintf("invalid block header (%d records, %d bytes)", count, size), nil)
	}
	if size > ad.d.opts.MaxBlockBytes {
		return ad.blockErr(fmt.Sprintf("block of %d bytes exceeds max_block_bytes (%d)", size, ad.d.opts.MaxBlockBytes), nil)
	}
	return nil
}

// loadBlock decompresses the data of block ad.block, which claims count
// records, and makes it the current block. The data is not kept: values
// decoded from it are copies.
func (ad *avroDecoder) loadBlock(count int64, data []byte) error {
	switch ad.codec {
	case "deflate":
		if ad.inflater == nil {
			ad.inflater = flate.NewReader(bytes.NewReader(data))
		} else if err := ad.inflater.(flate.Resetter).Reset(bytes.NewReader(data), nil); err != nil {
			return ad.blockErr("inflate block", err)
		}
		// Inflate one byte more than a block may hold, to tell a block
		// at the limit from one past it.
		out, err := appendRead(reusable(ad.inflated), ad.inflater, int(ad.d.opts.MaxBlockBytes)+1)
		ad.inflated = out
		switch {
		case err == nil:
			return ad.blockErr(fmt.Sprintf("block inflates to more than max_block_bytes (%d)", ad.d.opts.MaxBlockBytes), nil)
		case !isEnd(err):
			return ad.blockErr("inflate block", err)
		}
		data = out
	case "snappy":
		if len(data) < 5 {
			return ad.blockErr("snappy block too short", nil)
		}
		n, k := binary.Uvarint(data[:len(data)-4])
		if k <= 0 {
			return ad.blockErr("snappy block length invalid", nil)
		}
		if n > uint64(ad.d.opts.MaxBlockBytes) {
			return ad.blockErr(fmt.Sprintf("block inflates to more than max_block_bytes (%d)", ad.d.opts.MaxBlockBytes), nil)
		}
		out, err := (&ocf.SnappyCodec{}).Decode(data)
		if err != nil {
			return ad.blockErr("decode snappy block", err)
		}
		data = out
	}
	if count > int64(len(data))+1 && count > 0 {
		// Every Datastream record takes at least one byte.
		return ad.blockErr(fmt.Sprintf("block claims %d records in %d bytes", count, len(data)), nil)
	}
	ad.bin = binReader{b: data}
	ad.buf = &ad.bin
	ad.remaining = count
	return nil
}

func (ad *avroDecoder) next() (Event, error) {
	for ad.remaining == 0 {
		if ad.buf != nil && ad.buf.off != len(ad.buf.b) {
			return Event{}, ad.blockErr(fmt.Sprintf("%d bytes left after the block's records", len(ad.buf.b)-ad.buf.off), nil)
		}
		if err := ad.readBlock(); err != nil {
			return Event{}, err
		}
	}
	ad.remaining--
	ad.record++
	var ev Event
	if err := ad.decodeInto(&ev); err != nil {
		re := &RecordError{File: ad.d.name, Block: ad.block, Record: ad.record, Kind: ErrBadRecord}
		var fe *fieldError
		if errors.As(err, &fe) {
			re.Field, re.Reason, re.Err = fe.field, fe.reason, fe.err
		} else {
			re.Reason, re.Err = "decode record", err
		}
		return Event{}, re
	}
	return ev, nil
}

// decodeInto decodes the next record of the block into *ev, which must be
// the zero Event; errors are as next reports them before it wraps them.
func (ad *avroDecoder) decodeInto(ev *Event) (err error) {
	defer func() {
		// Last resort: validation should have caught everything.
		if p := recover(); p != nil {
			err = fieldErr("", "internal error decoding record", fmt.Errorf("%v", p))
		}
	}()
	r := ad.buf
	start := r.off
	var re rawEvent
	re.schema = ad.schema
	hasSourceTS := false
	for _, f := range ad.fields {
		switch f.name {
		case "payload":
			row, err := ad.readPayload(r, f.schema)
			if err != nil {
				return prefixField("payload", err)
			}
			re.row = row
		case "read_timestamp", "source_timestamp":
			ts, present, err := readEnvelopeTime(r, f.schema)
			if err != nil {
				return prefixField(f.name, err)
			}
			if f.name == "read_timestamp" {
				re.readTS = ts
			} else {
				re.sourceTS, hasSourceTS = ts, present
			}
		case "uuid", "object", "read_method", "stream_name", "schema_key":
			var s string
			if f.str {
				// uuid is new in every record; the others repeat.
				s, err = ad.vals.readString(r, f.schema, f.name != "uuid")
				if err != nil {
					return prefixField(f.name, err)
				}
			} else {
				v, err := readGeneric(r, f.schema, 0)
				if err != nil {
					return prefixField(f.name, err)
				}
				var ok bool
				s, ok = v.(string)
				if v != nil && !ok {
					return fieldErr(f.name, "is not a string", nil)
				}
			}
			switch f.name {
			case "uuid":
				re.uuid = s
			case "object":
				re.object = s
			case "read_method":
				re.readMethod = s
			case "stream_name":
				re.streamName = s
			case "schema_key":
				re.schemaKey = s
			}
		case "source_metadata":
			if f.metaRec {
				m, err := ad.vals.readMeta(r, f.schema)
				if err != nil {
					return prefixField(f.name, err)
				}
				if m == nil {
					return fieldErr(f.name, "is not a record", nil)
				}
				re.meta = m
				continue
			}
			v, err := readGeneric(r, f.schema, 0)
			if err != nil {
				return prefixField(f.name, err)
			}
			m, ok := v.(map[string]any)
			if !ok {
				return fieldErr(f.name, "is not a record", nil)
			}
			re.meta = m
		default:
			// sort_keys and fields of newer Datastream versions: read past.
			if err := skipAvro(r, f.schema, 0); err != nil {
				return prefixField(f.name, err)
			}
		}
	}
	// The block bounds what a record can hold; this bounds what one event
	// may take of it, as a JSON value is bounded.
	if int64(r.off-start) > ad.d.opts.MaxRecordBytes {
		return fieldErr("", (&recordSizeError{ad.d.opts.MaxRecordBytes}).Error(), nil)
	}
	if re.meta == nil {
		return fieldErr("source_metadata", "missing", nil)
	}
	if !hasSourceTS {
		return fieldErr("source_timestamp", "missing", nil)
	}
	re.cache = &ad.built
	re.al, re.arena, re.strs = &ad.vals.al, &ad.vals.arena, &ad.vals.strs
	return ad.d.build(&re, ad.record, ev)
}

func (ad *avroDecoder) readPayload(r *binReader, s avro.Schema) ([]any, error) {
	idx, err := r.unionIndex(s)
	if err != nil {
		return nil, err
	}
	if idx < 0 {
		return nil, fieldErr("", "payload is null", nil)
	}
	row := ad.vals.al.row(len(ad.payload))
	for i, c := range ad.payload {
		v, err := ad.readTyped(r, c.schema, c.typ, 0)
		if err != nil {
			return nil, prefixField(c.name, err)
		}
		row[i] = v
	}
	return row, nil
}

// readEnvelopeTime reads read_timestamp/source_timestamp: a long of
// milliseconds (or microseconds when so annotated), possibly nullable.
func readEnvelopeTime(r *binReader, s avro.Schema) (value.Micros, bool, error) {
	inner := unwrapNull(s)
	if _, isUnion := s.(*avro.UnionSchema); isUnion {
		idx, err := r.unionIndex(s)
		if err != nil {
			return 0, false, err
		}
		if idx < 0 {
			return 0, false, nil
		}
	}
	if inner.Type() != avro.Long {
		return 0, false, fieldErr("", "is not a long", nil)
	}
	n, err := r.long()
	if err != nil {
		return 0, false, err
	}
	if logicalOf(inner) == string(avro.TimestampMicros) {
		return value.Micros(n), true, nil
	}
	if n > maxMillis || n < -maxMillis {
		return 0, false, fieldErr("", "milliseconds out of range", nil)
	}
	return value.Micros(n * 1000), true, nil
}

// unwrapNull returns T for a union of null and T, else s itself.
func unwrapNull(s avro.Schema) avro.Schema {
	if u, ok := s.(*avro.UnionSchema); ok {
		ts := u.Types()
		if len(ts) == 2 {
			if ts[0].Type() == avro.Null {
				return ts[1]
			}
			if ts[1].Type() == avro.Null {
				return ts[0]
			}
		}
	}
	if ref, ok := s.(*avro.RefSchema); ok {
		return ref.Schema()
	}
	return s
}

// logicalOf returns the logical type name, known to hamba or not ("number",
// "json", "varchar", "time-interval-micros").
func logicalOf(s avro.Schema) string {
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return string(l.Logical().Type())
	}
	if p, ok := s.(interface{ Prop(string) any }); ok {
		if v, ok := p.Prop("logicalType").(string); ok {
			return v
		}
	}
	return ""
}

const (
	maxDepth     = 32
	maxTypeNodes = 100_000
)

func isMultiArray(r *avro.RecordSchema) bool {
	fs := r.Fields()
	if len(fs) != 2 {
		return false
	}
	names := map[string]bool{fs[0].Name(): true, fs[1].Name(): true}
	return names["nestedArray"] && names["elementValue"]
}

func recordKind(r *avro.RecordSchema) string {
	fs := r.Fields()
	if isMultiArray(r) {
		return "multiarray"
	}
	if len(fs) == 2 {
		a, b := fs[0].Name(), fs[1].Name()
		if a == "date" && b == "time" {
			return "datetime"
		}
		if a == "timestamp" && b == "offset" {
			return "timestampTz"
		}
	}
	return "struct"
}

// deltaType maps an Avro schema to a Delta type (table in the comment on
// avroDecoder).
func (ad *avroDecoder) deltaType(s avro.Schema, depth int) (value.Type, error) {
	if depth > maxDepth {
		return nil, errors.New("schema nested too deeply")
	}
	ad.typeNodes++
	if ad.typeNodes > maxTypeNodes {
		return nil, errors.New("schema has too many nested fields")
	}
	switch x := s.(type) {
	case *avro.RefSchema:
		return ad.deltaType(x.Schema(), depth+1)
	case *avro.UnionSchema:
		inner := unwrapNull(x)
		if inner == s {
			return value.String, nil
		}
		return ad.deltaType(inner, depth+1)
	case *avro.RecordSchema:
		switch recordKind(x) {
		case "multiarray":
			for _, f := range x.Fields() {
				if f.Name() == "elementValue" {
					et, err := ad.deltaType(f.Type(), depth+1)
					if err != nil {
						return nil, err
					}
					return value.ArrayType{Element: et, ContainsNull: true}, nil
				}
			}
		case "datetime":
			return value.TimestampNTZ, nil
		case "timestampTz":
			return value.Timestamp, nil
		}
		var st value.StructType
		for _, f := range x.Fields() {
			t, err := ad.deltaType(f.Type(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			st.Fields = append(st.Fields, value.Field{Name: f.Name(), Type: t, Nullable: true})
		}
		return st, nil
	case *avro.ArraySchema:
		et, err := ad.deltaType(x.Items(), depth+1)
		if err != nil {
			return nil, err
		}
		return value.ArrayType{Element: et, ContainsNull: true}, nil
	case *avro.MapSchema:
		vt, err := ad.deltaType(x.Values(), depth+1)
		if err != nil {
			return nil, err
		}
		return value.MapType{Key: value.String, Value: vt, ValueContainsNull: true}, nil
	case *avro.EnumSchema:
		return value.String, nil
	case *avro.FixedSchema:
		if dt, ok := decimalOf(x); ok {
			return dt, nil
		}
		return value.Binary, nil
	case *avro.PrimitiveSchema:
		lt := logicalOf(x)
		switch x.Type() {
		case avro.Null:
			return value.String, nil
		case avro.Boolean:
			return value.Boolean, nil
		case avro.Int:
			switch lt {
			case string(avro.Date):
				return value.Date, nil
			case string(avro.TimeMillis):
				return value.Long, nil
			}
			return value.Integer, nil
		case avro.Long:
			switch lt {
			case string(avro.TimestampMillis), string(avro.TimestampMicros):
				return value.Timestamp, nil
			case string(avro.LocalTimestampMillis), string(avro.LocalTimestampMicros):
				return value.TimestampNTZ, nil
			}
			return value.Long, nil
		case avro.Float:
			return value.Float, nil
		case avro.Double:
			return value.Double, nil
		case avro.String:
			if lt == "number" && ad.mysql {
				return value.DecimalType{Precision: 20, Scale: 0}, nil
			}
			return value.String, nil
		case avro.Bytes:
			if dt, ok := decimalOf(x); ok {
				return dt, nil
			}
			if lt == string(avro.Decimal) {
				return value.String, nil
			}
			return value.Binary, nil
		}
	}
	return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
}

// decimalOf returns the Delta decimal of a decimal logical type that fits
// Delta's 38 digits.
func decimalOf(s avro.LogicalTypeSchema) (value.DecimalType, bool) {
	dl, ok := s.Logical().(*avro.DecimalLogicalSchema)
	if !ok || dl == nil {
		return value.DecimalType{}, false
	}
	p, sc := dl.Precision(), dl.Scale()
	if p < 1 || p > maxDecimalDigits || sc < 0 || sc > p {
		return value.DecimalType{}, false
	}
	return value.DecimalType{Precision: p, Scale: sc}, true
}

// readTyped reads one value of schema s as the Go value of Delta type t.
func (ad *avroDecoder) readTyped(r *binReader, s avro.Schema, t value.Type, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	if err := r.step(); err != nil {
		return nil, err
	}
	switch x := s.(type) {
	case *avro.RefSchema:
		return ad.readTyped(r, x.Schema(), t, depth+1)
	case *avro.UnionSchema:
		idx, err := r.unionIndex(x)
		if err != nil {
			return nil, err
		}
		if idx < 0 {
			return nil, nil
		}
		member := x.Types()[idx]
		if unwrapNull(x) == s {
			// A union of several types: render the member as text.
			v, err := readGeneric(r, member, depth+1)
			if err != nil {
				return nil, err
			}
			return genericText(v), nil
		}
		return ad.readTyped(r, member, t, depth+1)
	case *avro.RecordSchema:
		switch recordKind(x) {
		case "multiarray":
			return ad.readMultiArray(r, x, t, depth)
		case "datetime":
			return readDatetime(r, x)
		case "timestampTz":
			return readTimestampTz(r, x)
		}
		st, _ := t.(value.StructType)
		out := ad.vals.al.row(len(x.Fields()))
		for i, f := range x.Fields() {
			var ft value.Type
			if i < len(st.Fields) {
				ft = st.Fields[i].Type
			}
			v, err := ad.readTyped(r, f.Type(), ft, depth+1)
			if err != nil {
				return nil, prefixField(f.Name(), err)
			}
			out[i] = v
		}
		return out, nil
	case *avro.ArraySchema:
		at, _ := t.(value.ArrayType)
		out := []any{}
		err := r.blocks(func() error {
			v, err := ad.readTyped(r, x.Items(), at.Element, depth+1)
			out = append(out, v)
			return err
		})
		return out, err
	case *avro.MapSchema:
		mt, _ := t.(value.MapType)
		var out []value.MapEntry
		err := r.blocks(func() error {
			k, err := r.str()
			if err != nil {
				return err
			}
			v, err := ad.readTyped(r, x.Values(), mt.Value, depth+1)
			out = append(out, value.MapEntry{Key: k, Value: v})
			return err
		})
		return out, err
	case *avro.EnumSchema:
		i, err := r.int()
		if err != nil {
			return nil, err
		}
		syms := x.Symbols()
		if i < 0 || int(i) >= len(syms) {
			return nil, fieldErr("", fmt.Sprintf("enum index %d out of range", i), nil)
		}
		return syms[i], nil
	case *avro.FixedSchema:
		b, err := r.fixed(x.Size())
		if err != nil {
			return nil, err
		}
		if dt, ok := t.(value.DecimalType); ok {
			return ad.vals.decimal(b, dt.Scale), nil
		}
		return bytes.Clone(b), nil
	case *avro.PrimitiveSchema:
		return ad.readPrimitive(r, x, t)
	}
	return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
}

func (ad *avroDecoder) readPrimitive(r *binReader, x *avro.PrimitiveSchema, t value.Type) (any, error) {
	lt := logicalOf(x)
	switch x.Type() {
	case avro.Null:
		return nil, nil
	case avro.Boolean:
		return r.bool()
	case avro.Int:
		n, err := r.int()
		if err != nil {
			return nil, err
		}
		switch lt {
		case string(avro.Date):
			return ad.vals.al.days.Box(value.Days(n)), nil
		case string(avro.TimeMillis):
			return ad.vals.al.boxLong(int64(n) * 1000), nil
		}
		return ad.vals.al.int32s.Box(n), nil
	case avro.Long:
		n, err := r.long()
		if err != nil {
			return nil, err
		}
		switch lt {
		case string(avro.TimestampMillis), string(avro.LocalTimestampMillis):
			if n > maxMillis || n < -maxMillis {
				return nil, fieldErr("", "milliseconds out of range", nil)
			}
			n *= 1000
		}
		switch t {
		case value.Timestamp:
			return ad.vals.al.boxMicros(value.Micros(n)), nil
		case value.TimestampNTZ:
			return ad.vals.al.local.Box(value.LocalMicros(n)), nil
		}
		return ad.vals.al.boxLong(n), nil
	case avro.Float:
		return r.float()
	case avro.Double:
		f, err := r.double()
		if err != nil {
			return nil, err
		}
		return ad.vals.al.dbls.Box(f), nil
	case avro.String:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if dt, ok := t.(value.DecimalType); ok {
			d, err := toDecimal(string(b), dt)
			if err != nil {
				return nil, fieldErr("", "invalid number", err)
			}
			return ad.vals.al.boxDecimal(d), nil
		}
		return ad.vals.al.boxString(ad.vals.arena.string(b)), nil
	case avro.Bytes:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if dt, ok := t.(value.DecimalType); ok {
			return ad.vals.decimal(b, dt.Scale), nil
		}
		if t == value.String {
			// A decimal too wide for Delta: keep every digit as text.
			if dl, ok := x.Logical().(*avro.DecimalLogicalSchema); ok && dl != nil {
				return value.Decimal{Unscaled: bigTwoComplement(b), Scale: dl.Scale()}.String(), nil
			}
		}
		return bytes.Clone(b), nil
	}
	return nil, fmt.Errorf("unsupported Avro type %s", x.Type())
}

// readMultiArray reads a PostgreSQL array record: its nestedArray holds the
// elements, each a record whose elementValue is the element.
func (ad *avroDecoder) readMultiArray(r *binReader, x *avro.RecordSchema, t value.Type, depth int) (any, error) {
	at, _ := t.(value.ArrayType)
	var out []any
	var top any
	for _, f := range x.Fields() {
		switch f.Name() {
		case "nestedArray":
			idx, err := r.unionIndex(f.Type())
			if err != nil {
				return nil, prefixField("nestedArray", err)
			}
			if idx < 0 {
				continue
			}
			arr, ok := unwrapNull(f.Type()).(*avro.ArraySchema)
			if !ok {
				return nil, fieldErr("nestedArray", "is not an array", nil)
			}
			out = []any{}
			err = r.blocks(func() error {
				el, ok := unwrapNull(arr.Items()).(*avro.RecordSchema)
				if !ok {
					return fieldErr("nestedArray", "element is not a record", nil)
				}
				v, nested, err := ad.readArrayElement(r, el, at.Element, depth+1)
				if err != nil {
					return err
				}
				if nested {
					return fieldErr("nestedArray", "multi-dimensional PostgreSQL arrays are not supported", nil)
				}
				out = append(out, v)
				return nil
			})
			if err != nil {
				return nil, err
			}
		case "elementValue":
			v, err := ad.readTyped(r, f.Type(), at.Element, depth+1)
			if err != nil {
				return nil, prefixField("elementValue", err)
			}
			top = v
		}
	}
	if out == nil && top != nil {
		// A scalar where an array was declared: keep it as a one-element
		// array rather than lose it.
		return []any{top}, nil
	}
	if out == nil {
		return nil, nil
	}
	return out, nil
}

func (ad *avroDecoder) readArrayElement(r *binReader, x *avro.RecordSchema, et value.Type, depth int) (any, bool, error) {
	var v any
	nested := false
	for _, f := range x.Fields() {
		switch f.Name() {
		case "nestedArray":
			g, err := readGeneric(r, f.Type(), depth+1)
			if err != nil {
				return nil, false, err
			}
			nested = g != nil
		default:
			x, err := ad.readTyped(r, f.Type(), et, depth+1)
			if err != nil {
				return nil, false, err
			}
			v = x
		}
	}
	return v, nested, nil
}

func readDatetime(r *binReader, x *avro.RecordSchema) (any, error) {
	var days, micros int64
	for _, f := range x.Fields() {
		v, err := readGeneric(r, f.Type(), 0)
		if err != nil {
			return nil, prefixField(f.Name(), err)
		}
		n, ok := intOf(v)
		if !ok {
			return nil, fieldErr(f.Name(), "is not an integer", nil)
		}
		if f.Name() == "date" {
			days = n
		} else {
			micros = n
			if logicalOf(unwrapNull(f.Type())) == string(avro.TimeMillis) {
				micros *= 1000
			}
		}
	}
	if days > math.MaxInt32 || days < math.MinInt32 {
		return nil, fieldErr("date", "out of range", nil)
	}
	return value.LocalMicros(days*86_400_000_000 + micros), nil
}

func readTimestampTz(r *binReader, x *avro.RecordSchema) (any, error) {
	var ts int64
	for _, f := range x.Fields() {
		v, err := readGeneric(r, f.Type(), 0)
		if err != nil {
			return nil, prefixField(f.Name(), err)
		}
		if f.Name() == "timestamp" {
			n, ok := intOf(v)
			if !ok {
				return nil, fieldErr(f.Name(), "is not an integer", nil)
			}
			if logicalOf(unwrapNull(f.Type())) == string(avro.TimestampMillis) {
				n *= 1000
			}
			ts = n
		}
	}
	return value.Micros(ts), nil
}

func intOf(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	}
	return 0, false
}

// readGeneric reads any Avro value as plain Go: nil, bool, int32, int64,
// float32, float64, string, []byte, []any, map[string]any (records and maps).
// Logical types are not interpreted.
func readGeneric(r *binReader, s avro.Schema, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	if err := r.step(); err != nil {
		return nil, err
	}
	switch x := s.(type) {
	case *avro.RefSchema:
		return readGeneric(r, x.Schema(), depth+1)
	case *avro.UnionSchema:
		idx, err := r.unionIndex(x)
		if err != nil || idx < 0 {
			return nil, err
		}
		return readGeneric(r, x.Types()[idx], depth+1)
	case *avro.RecordSchema:
		out := make(map[string]any, len(x.Fields()))
		for _, f := range x.Fields() {
			v, err := readGeneric(r, f.Type(), depth+1)
			if err != nil {
				return nil, prefixField(f.Name(), err)
			}
			out[f.Name()] = v
		}
		return out, nil
	case *avro.ArraySchema:
		out := []any{}
		err := r.blocks(func() error {
			v, err := readGeneric(r, x.Items(), depth+1)
			out = append(out, v)
			return err
		})
		return out, err
	case *avro.MapSchema:
		out := map[string]any{}
		err := r.blocks(func() error {
			k, err := r.str()
			if err != nil {
				return err
			}
			v, err := readGeneric(r, x.Values(), depth+1)
			out[k] = v
			return err
		})
		return out, err
	case *avro.EnumSchema:
		i, err := r.int()
		if err != nil {
			return nil, err
		}
		if i < 0 || int(i) >= len(x.Symbols()) {
			return nil, fieldErr("", fmt.Sprintf("enum index %d out of range", i), nil)
		}
		return x.Symbols()[i], nil
	case *avro.FixedSchema:
		b, err := r.fixed(x.Size())
		return bytes.Clone(b), err
	case *avro.PrimitiveSchema:
		switch x.Type() {
		case avro.Null:
			return nil, nil
		case avro.Boolean:
			return r.bool()
		case avro.Int:
			return r.int()
		case avro.Long:
			return r.long()
		case avro.Float:
			return r.float()
		case avro.Double:
			return r.double()
		case avro.String:
			return r.str()
		case avro.Bytes:
			b, err := r.bytes()
			return bytes.Clone(b), err
		}
	}
	return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
}

func genericText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// skipAvro reads past one value without building it.
func skipAvro(r *binReader, s avro.Schema, depth int) error {
	if depth > maxDepth {
		return errors.New("value nested too deeply")
	}
	if err := r.step(); err != nil {
		return err
	}
	switch x := s.(type) {
	case *avro.RefSchema:
		return skipAvro(r, x.Schema(), depth+1)
	case *avro.UnionSchema:
		idx, err := r.unionIndex(x)
		if err != nil || idx < 0 {
			return err
		}
		return skipAvro(r, x.Types()[idx], depth+1)
	case *avro.RecordSchema:
		for _, f := range x.Fields() {
			if err := skipAvro(r, f.Type(), depth+1); err != nil {
				return prefixField(f.Name(), err)
			}
		}
		return nil
	case *avro.ArraySchema:
		return r.blocks(func() error { return skipAvro(r, x.Items(), depth+1) })
	case *avro.MapSchema:
		return r.blocks(func() error {
			if _, err := r.bytes(); err != nil {
				return err
			}
			return skipAvro(r, x.Values(), depth+1)
		})
	case *avro.EnumSchema, *avro.FixedSchema, *avro.PrimitiveSchema:
		return skipScalar(r, s, depth)
	}
	return fmt.Errorf("unsupported Avro type %s", s.Type())
}

// skipScalar reads past an enum, fixed or primitive value exactly as
// readGeneric reads it (the same checks, the same value budget) without
// building the value.
func skipScalar(r *binReader, s avro.Schema, depth int) error {
	if depth > maxDepth {
		return errors.New("value nested too deeply")
	}
	if err := r.step(); err != nil {
		return err
	}
	switch x := s.(type) {
	case *avro.EnumSchema:
		i, err := r.int()
		if err != nil {
			return err
		}
		if i < 0 || int(i) >= len(x.Symbols()) {
			return fieldErr("", fmt.Sprintf("enum index %d out of range", i), nil)
		}
		return nil
	case *avro.FixedSchema:
		_, err := r.fixed(x.Size())
		return err
	case *avro.PrimitiveSchema:
		var err error
		switch x.Type() {
		case avro.Null:
		case avro.Boolean:
			_, err = r.bool()
		case avro.Int:
			_, err = r.int()
		case avro.Long:
			_, err = r.long()
		case avro.Float:
			_, err = r.float()
		case avro.Double:
			_, err = r.double()
		case avro.String, avro.Bytes:
			_, err = r.bytes()
		default:
			return fmt.Errorf("unsupported Avro type %s", s.Type())
		}
		return err
	}
	return fmt.Errorf("unsupported Avro type %s", s.Type())
}

// decimal converts the two's complement bytes of a decimal; one that fits
// 63 bits gets its big.Int from the slabs instead of an allocation.
func (v *avroValues) decimal(b []byte, scale int) any {
	if len(b) == 0 || len(b) > 8 {
		return v.al.boxDecimal(value.Decimal{Unscaled: bigTwoComplement(b), Scale: scale})
	}
	n := int64(int8(b[0])) // sign-extended
	for _, c := range b[1:] {
		n = n<<8 | int64(c)
	}
	u := v.al.bigInt()
	u.i.SetBits(u.w[:0])
	u.i.SetInt64(n)
	return v.al.boxDecimal(value.Decimal{Unscaled: &u.i, Scale: scale})
}

// isStringSchema reports whether s is a string, or a union of nulls and
// strings: what readString reads.
func isStringSchema(s avro.Schema) bool {
	switch x := s.(type) {
	case *avro.PrimitiveSchema:
		return x.Type() == avro.String
	case *avro.UnionSchema:
		for _, t := range x.Types() {
			if t.Type() == avro.Null {
				continue
			}
			if p, ok := t.(*avro.PrimitiveSchema); !ok || p.Type() != avro.String {
				return false
			}
		}
		return true
	}
	return false
}

// readString reads a value of a schema isStringSchema accepts as
// readGeneric(r, s, 0) reads it ("" for null), interning the string or
// copying it into the arena.
func (v *avroValues) readString(r *binReader, s avro.Schema, intern bool) (string, error) {
	if err := r.step(); err != nil {
		return "", err
	}
	if u, ok := s.(*avro.UnionSchema); ok {
		idx, err := r.unionIndex(u)
		if err != nil || idx < 0 {
			return "", err
		}
		if err := r.step(); err != nil {
			return "", err
		}
	}
	b, err := r.bytes()
	if err != nil {
		return "", err
	}
	if intern {
		return v.strs.intern(b), nil
	}
	return v.arena.string(b), nil
}

// metaRecord returns the record of a source_metadata schema that is a
// record, or a union of null and a record; else nil.
func metaRecord(s avro.Schema) *avro.RecordSchema {
	switch x := s.(type) {
	case *avro.RecordSchema:
		return x
	case *avro.UnionSchema:
		ts := x.Types()
		if len(ts) != 2 {
			return nil
		}
		for i, t := range ts {
			if rec, ok := t.(*avro.RecordSchema); ok && ts[1-i].Type() == avro.Null {
				return rec
			}
		}
	}
	return nil
}

// metaSlots describes the fields of the metadata record rec.
func metaSlots(rec *avro.RecordSchema) []metaSlot {
	var out []metaSlot
	for _, f := range rec.Fields() {
		sl := metaSlot{name: f.Name(), schema: f.Type()}
		t := f.Type()
		if u, ok := t.(*avro.UnionSchema); ok {
			ts := u.Types()
			if len(ts) == 2 && ts[0].Type() == avro.Null && ts[1].Type() != avro.Null {
				sl.nullable, t = true, ts[1]
			} else if len(ts) == 2 && ts[1].Type() == avro.Null && ts[0].Type() != avro.Null {
				sl.nullable, t = true, ts[0]
			} else {
				t = nil
			}
		}
		switch x := t.(type) {
		case *avro.PrimitiveSchema:
			switch x.Type() {
			case avro.String:
				sl.kind = mkString
			case avro.Long:
				sl.kind = mkLong
			case avro.Int:
				sl.kind = mkInt
			case avro.Boolean:
				sl.kind = mkBool
			}
		case *avro.ArraySchema:
			if it, ok := x.Items().(*avro.PrimitiveSchema); ok && it.Type() == avro.String {
				sl.kind = mkStrArray
			}
		}
		out = append(out, sl)
	}
	return out
}

// readMeta reads source_metadata (a schema metaRecord accepts) into v.meta
// as readGeneric(r, s, 0) reads it into a map; it returns nil, nil when the
// value is null. Values equal to the previous record's are reused.
func (v *avroValues) readMeta(r *binReader, s avro.Schema) (map[string]any, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	if u, ok := s.(*avro.UnionSchema); ok {
		idx, err := r.unionIndex(u)
		if err != nil || idx < 0 {
			return nil, err
		}
		// readGeneric of the record member.
		if err := r.step(); err != nil {
			return nil, err
		}
	}
	if v.meta == nil {
		v.meta = make(map[string]any, len(v.slots))
	}
	for i := range v.slots {
		sl := &v.slots[i]
		x, err := v.readMetaField(r, sl)
		if err != nil {
			return nil, prefixField(sl.name, err)
		}
		// A value reused from the record before (or a null after a null)
		// is in the map already: hashing its key again is most of the
		// cost of the map.
		if !sl.mapped || !sameInterface(sl.inMap, x) {
			v.meta[sl.name] = x
			sl.inMap, sl.mapped = x, true
		}
	}
	return v.meta, nil
}

// readMetaField reads one metadata field as readGeneric at depth 2 does.
func (v *avroValues) readMetaField(r *binReader, sl *metaSlot) (any, error) {
	if sl.kind == mkGeneric {
		return readGeneric(r, sl.schema, 2)
	}
	if err := r.step(); err != nil {
		return nil, err
	}
	if sl.nullable {
		idx, err := r.unionIndex(sl.schema)
		if err != nil || idx < 0 {
			return nil, err
		}
		if err := r.step(); err != nil {
			return nil, err
		}
	}
	switch sl.kind {
	case mkString:
		b, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if sl.val == nil || sl.str != string(b) {
			sl.str = v.strs.intern(b)
			sl.val = v.al.boxString(sl.str)
		}
		return sl.val, nil
	case mkLong, mkInt:
		var n int64
		var err error
		if sl.kind == mkLong {
			n, err = r.long()
		} else {
			var n32 int32
			n32, err = r.int()
			n = int64(n32)
		}
		if err != nil {
			return nil, err
		}
		if sl.val == nil || sl.n != n {
			sl.n = n
			if sl.kind == mkLong {
				sl.val = v.al.boxLong(n)
			} else {
				sl.val = v.al.int32s.Box(int32(n))
			}
		}
		return sl.val, nil
	case mkBool:
		return r.bool()
	case mkStrArray:
		v.spans = v.spans[:0]
		err := r.blocks(func() error {
			// readGeneric of a string item.
			if err := r.step(); err != nil {
				return err
			}
			b, err := r.bytes()
			v.spans = append(v.spans, b)
			return err
		})
		if err != nil {
			return nil, err
		}
		// The spans point into the block: do not keep them past this.
		defer func() { clear(v.spans); v.spans = v.spans[:0] }()
		if prev, ok := sl.val.([]any); ok && len(prev) == len(v.spans) {
			same := true
			for i, b := range v.spans {
				if prev[i].(string) != string(b) {
					same = false
					break
				}
			}
			if same {
				return sl.val, nil
			}
		}
		out := make([]any, len(v.spans))
		for i, b := range v.spans {
			out[i] = v.al.boxString(v.strs.intern(b))
		}
		sl.val = out
		return out, nil
	}
	return nil, fmt.Errorf("unsupported Avro type %s", sl.schema.Type())
}
