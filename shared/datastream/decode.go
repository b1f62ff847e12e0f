package datastream

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Format is the encoding of a Datastream file.
type Format string

// The formats Decode reads.
const (
	// FormatAuto detects the format: the Avro magic "Obj\x01" means Avro,
	// the gzip magic means gzip-compressed JSON, anything else is JSON.
	FormatAuto Format = ""
	// FormatJSONL is JSON lines (plain or gzip), or a JSON array of events.
	FormatJSONL Format = "jsonl"
	// FormatAvro is an Avro object container file.
	FormatAvro Format = "avro"
)

// DefaultMaxRecordBytes bounds one record (a JSON value, an Avro record)
// when Options.MaxRecordBytes is 0. Datastream caps an event at 100 MB, and
// its JSON text can be somewhat longer, so every record Datastream writes
// fits; a staging step holds at most about this much of one record.
const DefaultMaxRecordBytes = 128 << 20

// DefaultMaxBlockBytes bounds one Avro block, compressed or inflated, when
// Options.MaxBlockBytes is 0 and MaxRecordBytes is no larger; a larger
// MaxRecordBytes raises the default to it, so that a record in a block of
// its own always fits. Datastream writes many small blocks, each well below
// this.
const DefaultMaxBlockBytes = 64 << 20

// Options configure Decode. The zero value detects everything.
type Options struct {
	// Format forces a format; FormatAuto detects it from the content.
	Format Format
	// File identifies the source object in each event's metadata. When
	// File.Name is empty, the name passed to Decode is used.
	File SourceFile
	// Source forces the source kind instead of detecting it from
	// read_method and the source_metadata fields.
	Source Source
	// Namespace is the lake namespace of the file's stream: its events'
	// table ids are <namespace>.<db>.<table> ("" for none).
	Namespace string
	// SQLServerDatabase names a SQL Server table by its database as well
	// as its schema: <database>_<schema>.<table>, as a stream reads one
	// database and every database has a dbo schema.
	SQLServerDatabase bool
	// PrimaryKeys overrides primary_keys per table id ("db.table", or
	// "namespace.db.table"); an entry with no columns makes the table
	// history-only.
	PrimaryKeys map[string][]string
	// Schemas gives the known schema of a table id, used to type JSON
	// payload values (see the package documentation of JSON typing).
	Schemas map[string]value.StructType
	// AvroSchema is the Avro schema of the events (the schema file
	// Datastream can write beside JSON data); its payload record types JSON
	// values when Schemas has no entry for the table.
	AvroSchema []byte
	// Logger receives warnings (unknown source kinds); nil means
	// slog.Default().
	Logger *slog.Logger
	// AvroSchemas, when set, caches parsed Avro schemas across the files
	// decoded with it.
	AvroSchemas *AvroSchemaCache
	// MaxRecordBytes bounds one record: a JSON value (from its first byte,
	// whatever lines it spans) or an Avro record. A larger record fails
	// decoding with a *RecordError matching ErrBadRecord, and no more than
	// about this much of it is ever held, so a line without end (a binary
	// file named .jsonl, a corrupt gzip stream inflating to garbage) fails
	// in bounded memory. 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int64
	// MaxBlockBytes bounds one Avro block, compressed or inflated; 0 means
	// the larger of DefaultMaxBlockBytes and MaxRecordBytes.
	MaxBlockBytes int64
	// Workers is how many goroutines decode JSON lines or Avro blocks at
	// once; 0 means runtime.GOMAXPROCS(0) and 1 decodes on the goroutine
	// calling Next.
	// Events arrive in file order either way (see the package
	// documentation of parallel decoding).
	Workers int

	// chunkBytes is the size of the input chunks of parallel JSON decoding;
	// 0 means defaultChunkBytes. Tests make it small to cross chunk
	// boundaries often.
	chunkBytes int
}

// parallelDecoder is a decoder that runs ahead on several goroutines
// (parallelJSON, parallelAvro) and hands events over in file order.
type parallelDecoder interface {
	// nextBlock returns, in file order, the events decoded together not
	// yet returned, which the caller owns from then on; nil, nil once the
	// sequential decoder has taken over (Next returns the rest).
	nextBlock() ([]Event, error)
	// sequential reports that the sequential decoder has taken over.
	sequential() bool
	// stop makes the goroutines give up and waits for them.
	stop()
}

// Reader streams the events of one file. It is not safe for concurrent use.
type Reader struct {
	ctx    context.Context
	name   string
	opts   Options
	format Format
	file   *SourceFile // every event's Meta.File
	log    *slog.Logger
	closer io.Closer
	next   func() (Event, error)
	err    error           // sticky
	json   *jsonDecoder    // set when decoding JSON, for tests
	par    parallelDecoder // set when decoding JSON lines or Avro blocks in parallel
	// rest is the tail of a block decoded in parallel that AppendUpTo did
	// not hand over, first in line for the next call.
	rest []Event

	// warnedUnknown is set once the unknown-source warning is logged;
	// parallel workers build events concurrently.
	warnedUnknown atomic.Bool
}

// Decode starts decoding the Datastream file read from r; name is used in
// errors and, unless opts.File says otherwise, in event metadata. Call Next
// until it returns io.EOF, and Close the Reader. Errors match ErrBadFile or
// ErrBadRecord and are *RecordError values that name the file, the record
// and the field; a decode error is final (Next keeps returning it).
func Decode(ctx context.Context, r io.Reader, name string, opts Options) (*Reader, error) {
	file := opts.File
	if file.Name == "" {
		file.Name = name
	}
	if opts.Namespace != "" {
		if err := ValidateNamespace(opts.Namespace); err != nil {
			return nil, fmt.Errorf("decode %s: namespace: %w", name, err)
		}
	}
	d := &Reader{ctx: ctx, name: name, opts: opts, file: &file, log: opts.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.opts.MaxRecordBytes <= 0 {
		d.opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if d.opts.MaxBlockBytes <= 0 {
		d.opts.MaxBlockBytes = max(DefaultMaxBlockBytes, d.opts.MaxRecordBytes)
	}
	// Buffers are sized from the limits: one more byte must not overflow.
	d.opts.MaxRecordBytes = min(d.opts.MaxRecordBytes, maxLimit)
	d.opts.MaxBlockBytes = min(d.opts.MaxBlockBytes, maxLimit)
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(4)
	if err != nil && !isEnd(err) {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	isAvro := bytes.Equal(magic, []byte("Obj\x01"))
	isGzip := len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b
	switch {
	case opts.Format == FormatAvro || (opts.Format == FormatAuto && isAvro):
		if !isAvro {
			return nil, d.fileErr("not an Avro object container file (no Obj\\x01 magic)", nil)
		}
		d.format = FormatAvro
		if err := d.startAvro(br); err != nil {
			return nil, err
		}
	case opts.Format == FormatJSONL || opts.Format == FormatAuto:
		d.format = FormatJSONL
		var src io.Reader = br
		if isGzip {
			gz, err := gzip.NewReader(br)
			if err != nil {
				return nil, d.fileErr("open gzip stream", err)
			}
			d.closer = gz
			src = gz
		}
		if err := d.startJSON(src); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("decode %s: unknown format %q", name, opts.Format)
	}
	return d, nil
}

// Format is the detected format of the file.
func (d *Reader) Format() Format { return d.format }

// Next returns the next event, or io.EOF after the last one.
func (d *Reader) Next() (Event, error) {
	if d.err != nil {
		return Event{}, d.err
	}
	if err := d.ctx.Err(); err != nil {
		return Event{}, err
	}
	ev, err := d.next()
	if err != nil {
		d.err = err
	}
	return ev, err
}

// Close stops and waits for the goroutines decoding ahead, if any, and
// releases the decompressor, if any. It does not close the io.Reader given
// to Decode.
func (d *Reader) Close() error {
	if d.par != nil {
		d.par.stop()
	}
	if d.closer != nil {
		return d.closer.Close()
	}
	return nil
}

// All decodes every event of r and calls fn for each, in file order; it
// stops at the first error from decoding or from fn.
func All(ctx context.Context, r io.Reader, name string, opts Options, fn func(Event) error) error {
	d, err := Decode(ctx, r, name, opts)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		ev, err := d.Next()
		if isEnd(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// maxLimit bounds MaxRecordBytes and MaxBlockBytes, far beyond any memory.
const maxLimit = 1 << 48

// recordLimit is Options.MaxRecordBytes as an int.
func (d *Reader) recordLimit() int { return int(d.opts.MaxRecordBytes) }

func (d *Reader) fileErr(reason string, err error) *RecordError {
	return &RecordError{File: d.name, Reason: reason, Kind: ErrBadFile, Err: err}
}

// rawEvent is a record with its envelope fields read but not yet
// normalised; both decoders produce it.
type rawEvent struct {
	uuid, object, readMethod, streamName, schemaKey string
	readTS, sourceTS                                value.Micros
	// meta is source_metadata: values are string, int64, int32, bool, nil,
	// json.Number (JSON) or []any.
	meta map[string]any
	// jmeta is source_metadata as the JSON decoder read it: its members
	// raw, converted only when build asks for them. When set, meta is nil.
	jmeta []metaMember
	// strs interns the source_metadata strings of JSON events.
	strs *strCache
	// al hands out the event's small slices and arena holds its strings
	// (nil: plain allocations).
	al     *slabs
	arena  *strArena
	schema value.StructType
	row    []any
	// cache, when set, carries what build derived from the previous
	// event of the same decoder.
	cache *buildCache
}

// buildCache remembers what build derived from strings the events of a
// file repeat, so that it is derived once per file rather than per event.
type buildCache struct {
	readMethod string // the read_method the next two fields are for
	rmKind     ReadMethod
	src        Source // named by readMethod; Unknown: decided per event
	ok         bool
	db, tbl    string // the last table identity found valid
	// The last SQL Server database and schema qualify joined, and their
	// join: one string built per event was an allocation per event.
	sqlDatabase, sqlSchema, sqlDB string
}

// qualify returns a SQL Server schema prefixed by the event's database
// (Options.SQLServerDatabase).
func (c *buildCache) qualify(raw *rawEvent, schema string) (string, error) {
	database, err := metaString(raw, "database")
	if err != nil {
		return "", err
	}
	if c.sqlDB == "" || database != c.sqlDatabase || schema != c.sqlSchema {
		if err := ValidatePart(database); err != nil {
			return "", fieldErr("source_metadata.database", "invalid table identity (sqlserver_table_id: database names tables by it)", err)
		}
		c.sqlDatabase, c.sqlSchema, c.sqlDB = database, schema, database+"_"+schema
	}
	return c.sqlDB, nil
}

// metaMember is one member of a JSON source_metadata object. Nested values
// (objects, arrays) are converted when the member is read, as converting the
// whole object did; scalars are converted on demand.
type metaMember struct {
	key    []byte // valid while the line is decoded
	val    []byte
	plain  bool // val is a string that reads as itself (scanString)
	nested any
}

// jsonMember returns the raw value of the last member named k (the one a
// map of the object would hold).
func (raw *rawEvent) jsonMember(k string) (*metaMember, bool) {
	for i := len(raw.jmeta) - 1; i >= 0; i-- {
		if string(raw.jmeta[i].key) == k {
			return &raw.jmeta[i], true
		}
	}
	return nil, false
}

// metaValue returns source_metadata field k as the generic value of the
// metadata map (nil when absent).
func (raw *rawEvent) metaValue(k string) (any, error) {
	if raw.jmeta == nil {
		return raw.meta[k], nil
	}
	m, ok := raw.jsonMember(k)
	if !ok {
		return nil, nil
	}
	if m.nested != nil {
		return m.nested, nil
	}
	v, err := genericJSON(m.val, 1)
	if err != nil {
		return nil, fieldErr("source_metadata", "malformed", err)
	}
	return v, nil
}

// has reports whether source_metadata holds a non-null field k.
func (raw *rawEvent) has(k string) bool {
	if raw.jmeta == nil {
		v, ok := raw.meta[k]
		return ok && v != nil
	}
	m, ok := raw.jsonMember(k)
	return ok && !isNull(m.val)
}

// build normalises a raw record into *ev, which must be the zero Event
// (the slot it will live in, so that it is not copied). Errors are
// *fieldError; *ev is then incomplete.
func (d *Reader) build(raw *rawEvent, record int64, ev *Event) error {
	c := raw.cache
	if c == nil {
		c = &buildCache{} // every decoder sets one; this is for safety
	}
	if !c.ok || c.readMethod != raw.readMethod {
		*c = buildCache{readMethod: raw.readMethod, rmKind: readMethodOf(raw.readMethod), src: sourceOfReadMethod(raw.readMethod), ok: true, db: c.db, tbl: c.tbl}
	}
	src := d.source(raw, c)
	// Fields are set one by one: building the Event elsewhere and copying
	// it in would copy every pointer of it through the write barrier.
	ev.SourceTimestamp, ev.ReadMethod = raw.sourceTS, c.rmKind
	ev.Schema, ev.Row = raw.schema, raw.row
	m := &ev.Meta
	m.UUID, m.Object, m.ReadMethod, m.StreamName, m.SchemaKey = raw.uuid, raw.object, raw.readMethod, raw.streamName, raw.schemaKey
	m.ReadTimestamp, m.SourceTimestamp = raw.readTS, raw.sourceTS
	m.Source, m.File, m.Record = src, d.file, record

	if err := buildChange(raw, ev); err != nil {
		return err
	}
	if err := d.buildTable(raw, c, src, ev); err != nil {
		return err
	}
	if err := buildPosition(raw, src, &m.Position); err != nil {
		return err
	}
	var err error
	ev.Order, err = buildOrder(src, ev.ReadMethod, m.Position, m.ChangeType, raw.sourceTS, raw.arena)
	if err != nil {
		var pe *positionError
		if errors.As(err, &pe) {
			return fieldErr("source_metadata."+pe.field, pe.reason, nil)
		}
		return err
	}
	return d.buildKey(raw, ev)
}

// source is the event's source database kind: Options.Source, else the
// one its read method names, else the one its metadata fields suggest.
// The first event of a file whose source stays unknown logs a warning.
func (d *Reader) source(raw *rawEvent, c *buildCache) Source {
	src := d.opts.Source
	if src == Unknown {
		if src = c.src; src == Unknown {
			src = detectSource(raw.readMethod, raw.has)
		}
	}
	if src == Unknown && !d.warnedUnknown.Load() && d.warnedUnknown.CompareAndSwap(false, true) {
		d.log.Warn("unknown Datastream source; events order by source timestamp only",
			"file", d.name, "read_method", raw.readMethod)
	}
	return src
}

// buildChange sets the event's change type and whether it is a delete.
func buildChange(raw *rawEvent, ev *Event) error {
	m := &ev.Meta
	var err error
	if m.ChangeType, err = metaString(raw, "change_type"); err != nil {
		return err
	}
	m.ChangeType = strings.ToUpper(strings.TrimSpace(m.ChangeType))
	if !KnownChangeType(m.ChangeType) {
		// A change type the merge does not know (a new Datastream
		// operation, a corrupted field) must not be merged as an upsert
		// without a word: the file is quarantined, naming the value.
		return fieldErr("source_metadata.change_type", fmt.Sprintf("unknown change type %q (want INSERT, UPDATE, UPDATE-INSERT, UPDATE-DELETE, DELETE, or null for a backfill row)", m.ChangeType), nil)
	}
	ev.ChangeType = m.ChangeType
	if m.IsDeleted, err = metaBool(raw, "is_deleted"); err != nil {
		return err
	}
	ev.Op = OpUpsert
	if IsDelete(m.IsDeleted, m.ChangeType) {
		ev.Op = OpDelete
	}
	return nil
}

// buildTable sets the event's table identity, validated once for each
// identity the cache has not seen last.
func (d *Reader) buildTable(raw *rawEvent, c *buildCache, src Source, ev *Event) error {
	dbField := "schema"
	if src == MySQL || (src == Unknown && !raw.has("schema")) {
		dbField = "database"
	}
	db, err := metaString(raw, dbField)
	if err != nil {
		return err
	}
	if src == SQLServer && d.opts.SQLServerDatabase {
		if db, err = c.qualify(raw, db); err != nil {
			return err
		}
	}
	tbl, err := metaString(raw, "table")
	if err != nil {
		return err
	}
	if c.db == "" || db != c.db || tbl != c.tbl { // c.db is empty until an identity is valid
		if err := ValidatePart(db); err != nil {
			return fieldErr("source_metadata."+dbField, "invalid table identity", err)
		}
		if err := ValidatePart(tbl); err != nil {
			return fieldErr("source_metadata.table", "invalid table identity", err)
		}
		c.db, c.tbl = db, tbl
	}
	ev.Table = TableID{Namespace: d.opts.Namespace, Database: db, Table: tbl}
	return nil
}

// buildPosition reads the source's log position fields into *p.
func buildPosition(raw *rawEvent, src Source, p *Position) error {
	var err error
	switch src {
	case MySQL:
		fileKey, posKey := "log_file", "log_position"
		if !raw.has(fileKey) && raw.has("binlog_file") {
			fileKey = "binlog_file"
		}
		if !raw.has(posKey) && raw.has("binlog_position") {
			posKey = "binlog_position"
		}
		if p.LogFile, err = metaString(raw, fileKey); err != nil {
			return err
		}
		if p.LogPosition, err = metaInt(raw, posKey); err != nil {
			return err
		}
	case Oracle:
		if p.SCN, err = metaInt(raw, "scn"); err != nil {
			return err
		}
		if p.RSID, err = metaString(raw, "rs_id"); err != nil {
			return err
		}
		if p.SSN, err = metaInt(raw, "ssn"); err != nil {
			return err
		}
		if p.RowID, err = metaString(raw, "row_id"); err != nil {
			return err
		}
		if p.LogFile, err = metaString(raw, "log_file"); err != nil {
			return err
		}
	case PostgreSQL, SQLServer:
		if p.LSN, err = metaString(raw, "lsn"); err != nil {
			return err
		}
	}
	p.TxID, err = metaText(raw, "tx_id")
	return err
}

// buildKey sets the event's key names and values: the configured primary
// keys of its table, else those source_metadata names. An event without
// a key is history only.
func (d *Reader) buildKey(raw *rawEvent, ev *Event) error {
	var keyBuf [4]string // the key names are only read here: no allocation
	var keys []string
	var err error
	override := false
	if len(d.opts.PrimaryKeys) > 0 {
		keys, override = d.opts.PrimaryKeys[ev.Table.String()]
	}
	if !override {
		if keys, err = metaStrings(raw, "primary_keys", keyBuf[:0]); err != nil {
			return err
		}
		if len(keys) == 0 {
			// SQL Server tables keyed by a unique index.
			if keys, err = metaStrings(raw, "replication_index", keyBuf[:0]); err != nil {
				return err
			}
		}
	}
	if len(keys) == 0 {
		ev.HistoryOnly = true
		return nil
	}
	ev.KeyNames = raw.al.names(len(keys))
	ev.KeyValues = raw.al.keys(len(keys))
	for i, k := range keys {
		j := columnIndex(raw.schema, k)
		if j < 0 {
			return fieldErr("source_metadata.primary_keys", fmt.Sprintf("key column %q is not in the payload", k), nil)
		}
		ev.KeyNames[i] = raw.schema.Fields[j].Name
		if j < len(raw.row) {
			ev.KeyValues[i] = raw.row[j]
		}
	}
	return nil
}

// columnIndex finds a column by exact name, then case-insensitively
// (Oracle key names may differ in case from configuration).
func columnIndex(s value.StructType, name string) int {
	if i := s.Index(name); i >= 0 {
		return i
	}
	for i, f := range s.Fields {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

func metaString(raw *rawEvent, k string) (string, error) {
	s, ok, err := metaStringOf(raw, k)
	if err != nil || ok {
		return s, err
	}
	x, err := raw.metaValue(k)
	if err != nil {
		return "", err
	}
	switch v := x.(type) {
	case nil:
		return "", nil
	default:
		return "", fieldErr("source_metadata."+k, fmt.Sprintf("is %s, want a string", kindOf(v)), nil)
	}
}

// metaStringOf returns source_metadata field k when it is a string; ok is
// false when it is absent or not a string. JSON strings are interned.
func metaStringOf(raw *rawEvent, k string) (s string, ok bool, err error) {
	if m, found := raw.jsonMember(k); found && len(m.val) > 0 && m.val[0] == '"' {
		if s, err := raw.strs.unquoteSpan(m.val, m.plain); err == nil {
			return s, true, nil
		}
	}
	x, err := raw.metaValue(k)
	if err != nil {
		return "", false, err
	}
	s, ok = x.(string)
	return s, ok, nil
}

// metaText renders a string or integer field as text (tx_id is a long for
// PostgreSQL and a string elsewhere).
func metaText(raw *rawEvent, k string) (string, error) {
	x, err := raw.metaValue(k)
	if err != nil {
		return "", err
	}
	switch v := x.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int32:
		return strconv.FormatInt(int64(v), 10), nil
	case json.Number:
		return v.String(), nil
	default:
		return "", fieldErr("source_metadata."+k, fmt.Sprintf("is %s, want a string or number", kindOf(v)), nil)
	}
}

func metaInt(raw *rawEvent, k string) (int64, error) {
	if m, ok := raw.jsonMember(k); ok {
		if n, ok := smallInt(m.val); ok {
			return n, nil
		}
	}
	x, err := raw.metaValue(k)
	if err != nil {
		return 0, err
	}
	switch v := x.(type) {
	case nil:
		return 0, nil
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case json.Number:
		n, err := strconv.ParseInt(v.String(), 10, 64)
		if err != nil {
			return 0, fieldErr("source_metadata."+k, fmt.Sprintf("%s is not a 64-bit integer", v), nil)
		}
		return n, nil
	case string:
		// Some writers quote 64-bit integers; an empty string is absent.
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fieldErr("source_metadata."+k, fmt.Sprintf("%q is not a 64-bit integer", v), nil)
		}
		return n, nil
	default:
		return 0, fieldErr("source_metadata."+k, fmt.Sprintf("is %s, want an integer", kindOf(v)), nil)
	}
}

func metaBool(raw *rawEvent, k string) (bool, error) {
	x, err := raw.metaValue(k)
	if err != nil {
		return false, err
	}
	switch v := x.(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	default:
		return false, fieldErr("source_metadata."+k, fmt.Sprintf("is %s, want a boolean", kindOf(v)), nil)
	}
}

// metaStrings appends the names of the string array field k to out.
func metaStrings(raw *rawEvent, k string, out []string) ([]string, error) {
	x, err := raw.metaValue(k)
	if err != nil {
		return nil, err
	}
	switch v := x.(type) {
	case nil:
		return nil, nil
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, fieldErr(fmt.Sprintf("source_metadata.%s[%d]", k, i), "is not a column name", nil)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fieldErr("source_metadata."+k, fmt.Sprintf("is %s, want an array of strings", kindOf(v)), nil)
	}
}

// smallInt parses JSON integer text of at most 18 digits, which cannot
// overflow an int64, without allocating; ok is false for anything else.
func smallInt(b []byte) (n int64, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, int32, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}
