package datastream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/dsdelta/dsdelta/shared/value"
)

// jsonDecoder decodes JSON files; the typing rules are in the package
// documentation (doc.go).
type jsonDecoder struct {
	d      *Reader
	fr     *jsonFramer
	array  bool
	state  int // array mode: 0 before the first element, 1 after one
	record int64
	done   bool
	avro   *value.StructType // payload schema from Options.AvroSchema

	// Per-file state reused from line to line, so that decoding allocates
	// little beyond the events themselves.
	strs     strCache       // keys and repeated envelope/metadata strings
	meta     []metaMember   // source_metadata members of the current line
	nested   map[string]any // nested source_metadata values by their text
	readTS   tsCache
	sourceTS tsCache
	nFields  int // payload columns of the previous line, to size the next
	// inferred is the payload schema typePayload built for an earlier
	// line: a line of the same columns and types shares it (no schema per
	// event, and UnifyJSON looks each schema up once). inferScratch is
	// where a line's is built.
	inferred, inferScratch []value.Field
	built                  buildCache
	al                     slabs
	arena                  strArena
	// schemas caches Options.Schemas lookups by table; lastSchema is the
	// last one, which every line of a one-table file asks for.
	schemas    map[tableKey]*value.StructType
	lastSchema struct {
		key tableKey
		st  *value.StructType
		ok  bool
	}
}

// tsCache remembers the last envelope timestamp read, as consecutive lines
// often carry the same read_timestamp and source_timestamp text.
type tsCache struct {
	raw []byte
	ts  value.Micros
	ok  bool
}

// time is jsonEnvelopeTime, answered from the cache when b repeats.
func (c *tsCache) time(b []byte) (value.Micros, error) {
	if c.ok && bytes.Equal(c.raw, b) {
		return c.ts, nil
	}
	ts, err := jsonEnvelopeTime(b)
	if err != nil {
		return 0, err
	}
	c.raw, c.ts, c.ok = append(c.raw[:0], b...), ts, true
	return ts, nil
}

func (d *Reader) startJSON(r io.Reader) error {
	jd := &jsonDecoder{d: d, fr: &jsonFramer{r: r, limit: d.recordLimit()}}
	if len(d.opts.AvroSchema) > 0 {
		st, err := payloadSchemaFromAvro(d.opts.AvroSchema)
		if err != nil {
			return d.fileErr("parse the Avro schema given for JSON typing", err)
		}
		jd.avro = &st
	}
	c, ok, err := jd.fr.peek()
	if err != nil {
		return d.fileErr("read", err)
	}
	if ok && c == '[' {
		jd.array = true
		jd.fr.advance(1)
	}
	d.next = jd.next
	d.json = jd
	if workers := d.workers(); ok && !jd.array && workers > 1 {
		p := newParallelJSON(d, jd, r, workers)
		d.par, d.next = p, p.next
	}
	return nil
}

func (jd *jsonDecoder) syntaxErr(line int64, reason string, err error) error {
	kind := ErrBadRecord
	var rs *recordSizeError
	switch {
	case errors.As(err, &rs) || errors.Is(err, errTooManyMembers):
		reason, err = err.Error(), nil // a record too large says all
	case errors.Is(err, errJSONIncomplete) || errors.Is(err, io.ErrUnexpectedEOF):
		kind, reason = ErrBadFile, "file ends inside a JSON value"
	case err != nil && !isSyntax(err):
		kind = ErrBadFile // the stream itself failed (gzip, I/O)
	}
	return &RecordError{File: jd.d.name, Line: line, Record: jd.record + 1, Reason: reason, Kind: kind, Err: err}
}

func isSyntax(err error) bool {
	var se *jsonSyntaxError
	return errors.As(err, &se)
}

func (jd *jsonDecoder) next() (Event, error) {
	var ev Event
	if err := jd.nextInto(&ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// nextInto is next decoding into *ev, which must be the zero Event (the
// slot the event will live in, so that it is not copied); *ev is
// incomplete when it returns an error.
func (jd *jsonDecoder) nextInto(ev *Event) error {
	if jd.done {
		return io.EOF
	}
	fr := jd.fr
	c, ok, err := fr.peek()
	if err != nil {
		return jd.syntaxErr(fr.line+1, "read", err)
	}
	if jd.array {
		if ok && jd.state == 1 {
			switch c {
			case ',':
				fr.advance(1)
				if c, ok, err = fr.peek(); err != nil {
					return jd.syntaxErr(fr.line+1, "read", err)
				}
			case ']':
			default:
				return jd.syntaxErr(fr.line+1, "malformed JSON array", &jsonSyntaxError{"missing , or ]", 0})
			}
		}
		if !ok {
			return jd.syntaxErr(fr.line+1, "malformed JSON array", errJSONIncomplete)
		}
		if c == ']' {
			fr.advance(1)
			jd.done = true
			if _, more, err := fr.peek(); err != nil || more {
				return jd.syntaxErr(fr.line+1, "data after the JSON array", err)
			}
			return io.EOF
		}
		jd.state = 1
	} else if !ok {
		jd.done = true
		return io.EOF
	}
	line := fr.line + 1
	raw, err := fr.value()
	if err != nil {
		return jd.syntaxErr(line, "read JSON value", err)
	}
	jd.record++
	if err := jd.event(raw, &fr.members, line, ev); err != nil {
		re := &RecordError{File: jd.d.name, Line: line, Record: jd.record, Kind: ErrBadRecord}
		var fe *fieldError
		if errors.As(err, &fe) {
			re.Field, re.Reason, re.Err = fe.field, fe.reason, fe.err
		} else {
			re.Reason, re.Err = "decode event", err
		}
		return re
	}
	return nil
}

// event decodes the JSON value raw, an object whose members (and theirs)
// the framer located (spans).
func (jd *jsonDecoder) event(raw []byte, spans *objectSpans, line int64, ev *Event) error {
	if len(raw) == 0 || raw[0] != '{' {
		return fieldErr("", "event is not a JSON object", nil)
	}
	var re rawEvent
	var readTS, sourceTS, meta, payload []byte
	var metaSpans, payloadSpans []memberSpan
	var err error
	for _, m := range spans.top {
		key, v := raw[m.keyStart+1:m.keyEnd-1], raw[m.valStart:m.valEnd]
		if !m.keyPlain {
			if key, err = keyText(raw[m.keyStart:m.keyEnd]); err != nil {
				return err
			}
		}
		var dst *string
		intern := true
		switch string(key) {
		case "uuid":
			dst, intern = &re.uuid, false
		case "object":
			dst = &re.object
		case "read_method":
			dst = &re.readMethod
		case "stream_name":
			dst = &re.streamName
		case "schema_key":
			dst = &re.schemaKey
		case "read_timestamp":
			readTS = v
		case "source_timestamp":
			sourceTS = v
		case "source_metadata":
			meta, metaSpans = v, spans.kids[m.kids[0]:m.kids[1]]
		case "payload":
			payload, payloadSpans = v, spans.kids[m.kids[0]:m.kids[1]]
		}
		if dst != nil && !isNull(v) {
			if v[0] != '"' {
				return fieldErr(string(key), "want a string", nil)
			}
			var s string
			if intern {
				s, err = jd.strs.unquoteSpan(v, m.valPlain)
			} else {
				s, err = jd.arena.unquoteSpan(v, m.valPlain)
			}
			if err != nil {
				return fieldErr(string(key), "malformed string", err)
			}
			*dst = s
		}
	}
	if re.readTS, err = jd.readTS.time(readTS); err != nil {
		return fieldErr("read_timestamp", "invalid timestamp", err)
	}
	if isNull(sourceTS) {
		return fieldErr("source_timestamp", "missing", nil)
	}
	if re.sourceTS, err = jd.sourceTS.time(sourceTS); err != nil {
		return fieldErr("source_timestamp", "invalid timestamp", err)
	}
	if isNull(meta) || meta[0] != '{' {
		return fieldErr("source_metadata", "missing or not an object", nil)
	}
	if err := jd.readMetaSpans(raw, metaSpans); err != nil {
		return fieldErr("source_metadata", "malformed", err)
	}
	re.jmeta, re.strs = jd.meta, &jd.strs
	known, err := jd.knownSchema(&re)
	if err != nil {
		return err
	}
	if isNull(payload) || payload[0] != '{' {
		return fieldErr("payload", "missing or not an object", nil)
	}
	src := jd.al.source()
	src.file, src.line = jd.d.name, line
	if re.schema, re.row, err = typePayload(raw, payloadSpans, known, src, &jd.strs, jd.nFields, &jd.al, &jd.arena, &jd.inferred, &jd.inferScratch); err != nil {
		return prefixField("payload", err)
	}
	jd.nFields = len(re.schema.Fields)
	re.al, re.arena, re.cache = &jd.al, &jd.arena, &jd.built
	err = jd.d.build(&re, jd.record, ev)
	ev.jsonSrc = src
	return err
}

// readMeta reads the members of the source_metadata object meta into
// jd.meta. It converts nested values now, so that a malformed one fails the
// event whether or not build reads it.
func (jd *jsonDecoder) readMeta(meta []byte) error {
	jd.meta = jd.meta[:0]
	return eachMemberKey(meta, func(k, v []byte) error { return jd.addMeta(k, v, false) })
}

// readMetaSpans is readMeta for a source_metadata object whose members
// spans locates in line.
func (jd *jsonDecoder) readMetaSpans(line []byte, spans []memberSpan) error {
	jd.meta = jd.meta[:0]
	return eachSpan(line, spans, jd.addMeta)
}

// addMeta appends a member of source_metadata to jd.meta; plain is set
// when the value is a string that reads as itself.
func (jd *jsonDecoder) addMeta(k, v []byte, plain bool) error {
	m := metaMember{key: k, val: v, plain: plain}
	if v[0] == '{' || v[0] == '[' {
		// Values such as primary_keys repeat on every line; build only
		// reads them, so one converted value can serve every event.
		x, ok := jd.nested[string(v)]
		if !ok {
			var err error
			if x, err = genericJSON(v, 1); err != nil {
				return err
			}
			if len(v) <= maxCachedStringLen && len(jd.nested) < maxCachedStrings {
				if jd.nested == nil {
					jd.nested = map[string]any{}
				}
				jd.nested[string(v)] = x
			}
		}
		m.nested = x
	}
	jd.meta = append(jd.meta, m)
	return nil
}

// knownSchema picks the schema that types the payload: the configured table
// schema, else the Avro schema file's payload, else none (inference).
func (jd *jsonDecoder) knownSchema(re *rawEvent) (*value.StructType, error) {
	if len(jd.d.opts.Schemas) > 0 {
		tbl, _, err := metaStringOf(re, "table")
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"schema", "database"} {
			db, ok, err := metaStringOf(re, k)
			if err != nil {
				return nil, err
			}
			if ok {
				if s := jd.tableSchema(db, tbl); s != nil {
					return s, nil
				}
			}
		}
	}
	return jd.avro, nil
}

// tableSchema returns Options.Schemas["db.tbl"], or nil. The events of a
// file share one copy of it (so that a caller changing an event's Schema
// cannot change Options.Schemas).
func (jd *jsonDecoder) tableSchema(db, tbl string) *value.StructType {
	k := tableKey{db, tbl}
	if jd.lastSchema.key == k && jd.lastSchema.ok {
		return jd.lastSchema.st
	}
	st, ok := jd.schemas[k]
	if !ok {
		if s, found := jd.d.opts.Schemas[db+"."+tbl]; found {
			st = &value.StructType{Fields: slices.Clone(s.Fields)}
		}
		if len(jd.schemas) < maxCachedStrings {
			if jd.schemas == nil {
				jd.schemas = map[tableKey]*value.StructType{}
			}
			jd.schemas[k] = st
		}
	}
	jd.lastSchema.key, jd.lastSchema.st, jd.lastSchema.ok = k, st, true
	return st
}

// tableKey is a table's database (or schema) and name, as written.
type tableKey struct{ db, tbl string }

// typePayload walks the payload object (its members located in line by
// spans) in key order and types each value, recording in src how each
// inferred value was written (for UnifyJSON). Inferred column names are
// interned in strs; sizeHint is the expected number of columns; rows come
// from al and the text of string columns from arena. When every column is
// known, the result shares known.Fields.
//
// An inferred schema is built in *scratch and shares *prev, the schema of
// an earlier line, when it has the same columns and types; otherwise it
// becomes *prev.
func typePayload(line []byte, spans []memberSpan, known *value.StructType, src *jsonSource, strs *strCache, sizeHint int, al *slabs, arena *strArena, prev, scratch *[]value.Field) (value.StructType, []any, error) {
	var st value.StructType
	var row []any
	shared := false // st.Fields is known.Fields: copy before appending
	if known != nil {
		st.Fields, shared = known.Fields, true
		row = al.row(len(known.Fields))
	} else {
		st.Fields = (*scratch)[:0]
		if sizeHint > 0 {
			row = al.row(sizeHint)[:0]
		}
	}
	next := 0 // the column expected next: payloads list columns in order
	// Whether the inferred columns so far are the first columns of *prev,
	// which holds no column twice: a line's next column is then checked
	// against prev's, not against every column before it.
	prefix := known == nil
	err := eachSpan(line, spans, func(key, v []byte, plain bool) error {
		if known != nil {
			i := -1
			if next < len(known.Fields) && known.Fields[next].Name == string(key) {
				i = next
			} else {
				for j, f := range known.Fields {
					if f.Name == string(key) {
						i = j
						break
					}
				}
			}
			if i >= 0 {
				next = i + 1
				x, err := convertJSONIn(known.Fields[i].Type, v, plain, arena, al)
				if err != nil {
					return prefixField(known.Fields[i].Name, err)
				}
				row[i] = x
				return nil
			}
		}
		name := strs.intern(key)
		if m := len(st.Fields); !prefix || m >= len(*prev) || (*prev)[m].Name != name {
			prefix = false
			if st.Index(name) >= 0 {
				return fieldErr(name, "duplicate column", nil)
			}
		}
		typ, x, err := inferJSON(v, plain, arena, al)
		if err != nil {
			return prefixField(name, err)
		}
		k, text := writtenAs(v, x)
		if src.kinds == nil {
			src.kinds = al.kinds(len(row), max(sizeHint, len(st.Fields)+8))
		}
		if text != "" {
			if src.text == nil {
				src.text = map[int]string{}
			}
			src.text[len(row)] = text
		}
		src.kinds = append(src.kinds, k)
		if shared {
			st.Fields = append((*scratch)[:0], st.Fields...)
			shared = false
		}
		st.Fields = append(st.Fields, value.Field{Name: name, Type: typ, Nullable: true})
		row = append(row, x)
		return nil
	})
	if shared || err != nil {
		return st, row, err
	}
	*scratch = st.Fields[:0] // keep what it grew to
	if sameFields(st.Fields, *prev) {
		st.Fields = *prev
	} else {
		st.Fields = slices.Clone(st.Fields)
		*prev = st.Fields
	}
	return st, row, nil
}

// sameFields reports whether two schemas' fields are the same columns of
// the same types.
func sameFields(a, b []value.Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Nullable != b[i].Nullable || a[i].Metadata != nil || b[i].Metadata != nil || !value.Equal(a[i].Type, b[i].Type) {
			return false
		}
	}
	return true
}

// writtenAs classifies a payload value as written, and returns a number's
// text when its inferred value x does not render back to it.
func writtenAs(raw json.RawMessage, x any) (rawKind, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return kindNull, ""
	}
	c := raw[0]
	switch {
	case c == 'n':
		return kindNull, ""
	case c == 't' || c == 'f':
		return kindBool, ""
	case c == '"':
		return kindString, ""
	case c == '{' || c == '[':
		return kindNested, ""
	}
	// JSON has no leading zeros or plus signs, so only an exponent or a
	// negative zero ("-0", "-0.0") can differ from the value's rendering.
	if bytes.ContainsAny(raw, "eE") || (c == '-' && numberText(x) != string(raw)) {
		return kindNumber, string(raw)
	}
	return kindNumber, ""
}

func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || string(b) == "null"
}

// jsonEnvelopeTime reads read_timestamp/source_timestamp: a lenient
// timestamp string, or a bare number of milliseconds (the Avro form).
func jsonEnvelopeTime(b json.RawMessage) (value.Micros, error) {
	if isNull(b) {
		return 0, nil
	}
	b = bytes.TrimSpace(b)
	if b[0] == '"' {
		if us, ok := fastMicros(b[1 : len(b)-1]); ok {
			return us, nil
		}
		s, err := unquote(b)
		if err != nil {
			return 0, err
		}
		t, _, err := parseTimestamp(s)
		if err != nil {
			return 0, err
		}
		return value.MicrosOf(t), nil
	}
	n := json.Number(b)
	ms, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s is not integer milliseconds", n)
	}
	if ms > maxMillis || ms < -maxMillis {
		return 0, fmt.Errorf("%d milliseconds is out of range", ms)
	}
	return value.Micros(ms * 1000), nil
}

const maxMillis = (1<<63 - 1) / 1000

// jsonFramer cuts a stream into top-level JSON values, counting lines. It
// holds the unconsumed input, which is at most one value plus one read; a
// value returned by value is valid until the next call.
type jsonFramer struct {
	r    io.Reader
	buf  []byte
	pos  int
	eof  bool
	err  error
	line int64 // newlines consumed
	// limit is the most bytes a value may take (Options.MaxRecordBytes):
	// the buffer never grows past limit+1 bytes (or framerRead, when that
	// is more), so a value without end is refused in bounded memory.
	limit int
	// members locates the members of the last value returned, when it is
	// an object, relative to its start.
	members objectSpans
	// pastStart is set once the first non-space byte has been seen (or the
	// input starts after the beginning of the file): a UTF-8 byte order
	// mark is skipped only at the very beginning.
	pastStart bool
}

// framerRead is the least the framer asks of its reader at a time.
const framerRead = 64 << 10

// fill reads more input, keeping buf[pos:]; it reports whether it read
// any. It grows the buffer geometrically, so that filling to twice the
// bytes held (fillTo) takes one read or a few, but never past what a value
// of limit bytes and one byte more need: a value is refused once that much
// of it is held.
func (f *jsonFramer) fill() bool {
	if f.eof || f.err != nil {
		return false
	}
	if f.pos > 0 {
		n := copy(f.buf, f.buf[f.pos:])
		f.buf = f.buf[:n]
		f.pos = 0
	}
	want := max(framerRead, len(f.buf))
	if cap(f.buf)-len(f.buf) < want {
		if c := min(len(f.buf)+want, max(f.limit+1, framerRead)); c > cap(f.buf) {
			nb := make([]byte, len(f.buf), c)
			copy(nb, f.buf)
			f.buf = nb
		}
	}
	n, err := io.ReadAtLeast(f.r, f.buf[len(f.buf):cap(f.buf)], 1)
	f.buf = f.buf[:len(f.buf)+n]
	if isEnd(err) {
		f.eof = true
	} else if err != nil {
		f.err = err
	}
	return n > 0
}

// fillTo reads until n bytes are held past pos, the value being framed is
// known to be over the limit, or the input ends; it reports whether it read
// any.
func (f *jsonFramer) fillTo(n int) bool {
	read := false
	for held := len(f.buf) - f.pos; held < n && held <= f.limit; held = len(f.buf) - f.pos {
		if !f.fill() {
			break
		}
		read = true
	}
	return read
}

func (f *jsonFramer) advance(n int) {
	f.line += int64(bytes.Count(f.buf[f.pos:f.pos+n], []byte{'\n'}))
	f.pos += n
}

// peek skips whitespace and returns the next byte; ok is false at the end
// of the input.
func (f *jsonFramer) peek() (c byte, ok bool, err error) {
	for {
		for f.pos < len(f.buf) {
			c := f.buf[f.pos]
			if !isSpace(c) {
				if !f.pastStart && f.pos == 0 && c == 0xEF && len(f.buf) >= 3 && f.buf[1] == 0xBB && f.buf[2] == 0xBF && f.line == 0 {
					f.pos += 3 // a UTF-8 byte order mark
					f.pastStart = true
					continue
				}
				f.pastStart = true
				return c, true, nil
			}
			if c == '\n' {
				f.line++
			}
			f.pos++
		}
		if !f.fill() {
			return 0, false, f.err
		}
	}
}

// value returns the next complete JSON value, which starts at buf[pos]. A
// value of more than limit bytes fails with a *recordSizeError, as soon as
// that much of it is held.
func (f *jsonFramer) value() ([]byte, error) {
	for {
		// Only the first limit+1 bytes are scanned, however many are
		// held, so that the outcome (a value, a syntax error, a value too
		// large) depends on the input alone, not on how it was read.
		held := len(f.buf) - f.pos
		end, err := scanValueMembers(f.buf[f.pos:f.pos+min(held, f.limit+1)], 0, &f.members)
		if err == nil {
			return f.take(end)
		}
		if !errors.Is(err, errJSONIncomplete) {
			return nil, err
		}
		if held > f.limit {
			return nil, &recordSizeError{int64(f.limit)}
		}
		// Scan again only once the bytes held have doubled: scanning
		// after every read would take time quadratic in the length of a
		// long value, read 32 kB at a time from a gzip stream.
		if !f.fillTo(2*held + 1) {
			if f.err != nil {
				return nil, f.err
			}
			if f.eof {
				// A number at the very end is complete at end of input.
				if end, err2 := scanValueMembers(append(f.buf[f.pos:len(f.buf):len(f.buf)], ' '), 0, &f.members); err2 == nil {
					return f.take(end)
				}
			}
			return nil, err
		}
	}
}

// take returns the value of end bytes at pos and consumes it.
func (f *jsonFramer) take(end int) ([]byte, error) {
	if end > f.limit {
		return nil, &recordSizeError{int64(f.limit)}
	}
	v := f.buf[f.pos : f.pos+end]
	f.advance(end)
	return v, nil
}
