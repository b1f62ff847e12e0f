package cdc

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Sentinel errors.
var (
	// ErrSchemaConflict: an incoming column's type differs from the table's.
	ErrSchemaConflict = errors.New("schema conflict")
	// ErrNoKey: the table has no primary key, so only history is kept.
	ErrNoKey = errors.New("table has no primary key")
)

// HistoryRow renders an event as a row of HistorySchema(ev.Schema).
func HistoryRow(ev datastream.Event) []any {
	var h HistoryRows
	return h.Row(&ev)
}

// HistoryRows renders many events as HistoryRow does, with fewer
// allocations: an event's metadata would be a dozen small objects of its
// own (each value boxed into an interface, the ordering key copied, the
// file name joined), which staging makes for every event. It cuts rows,
// boxes and ordering keys from shared slabs, and boxes a value that
// repeats from one event to the next (date, op, change type, read method,
// file and generation) once. A slab stays alive while any row or value cut
// from it does. The rows hold the same values, of the same types, as
// HistoryRow's. The zero HistoryRows cuts nothing from slabs, as suits a
// few rows; NewHistoryRows returns one that does.
type HistoryRows struct {
	slabs  bool
	rows   []any
	orders value.Arena
	// Nil boxes (the zero HistoryRows) box as any(v) does.
	days   *value.Boxes[value.Days]
	micros *value.Boxes[value.Micros]
	strs   *value.Boxes[string]
	longs  *value.Boxes[int64]
	bytes  *value.Boxes[[]byte]

	day                  lastBox[value.Days]
	last                 [lastStrings]lastBox[string]
	file                 *datastream.SourceFile // whose name and generation are boxed below
	fileName, generation any
}

// NewHistoryRows returns a HistoryRows that cuts rows and values from
// slabs.
func NewHistoryRows() *HistoryRows {
	return &HistoryRows{slabs: true, days: new(value.Boxes[value.Days]), micros: new(value.Boxes[value.Micros]),
		strs: new(value.Boxes[string]), longs: new(value.Boxes[int64]), bytes: new(value.Boxes[[]byte])}
}

// The repeated strings of a row whose last box HistoryRows keeps.
const (
	lastOp = iota
	lastChangeType
	lastReadMethod
	lastStrings
)

// lastBox is the box of the last value it was asked for.
type lastBox[T comparable] struct {
	v   T
	box any
	set bool
}

// get returns v boxed, reusing the last box when v is the last value.
func (l *lastBox[T]) get(v T, b *value.Boxes[T]) any {
	if !l.set || l.v != v {
		l.v, l.box, l.set = v, b.Box(v), true
	}
	return l.box
}

// historyRowsSlab is the size of a slab of row values: rows longer than
// a tenth of it get their own.
const historyRowsSlab = 2048

// Row renders ev as a row of HistorySchema(ev.Schema).
func (h *HistoryRows) Row(ev *datastream.Event) []any {
	return h.RowInto(nil, ev)
}

// RowInto is Row, rendered into dst's array when it has room: for a
// caller done with each row before it asks for the next (a file writer
// converts a row's values as it takes it), which then allocates one row,
// not one per event. The values are boxed apart from the row, as Row's.
func (h *HistoryRows) RowInto(dst []any, ev *datastream.Event) []any {
	m := &ev.Meta
	var readTS, changeType, readMethod, uuid, file, generation any
	if m.ReadTimestamp != 0 {
		readTS = h.micros.Box(m.ReadTimestamp)
	}
	if ev.ChangeType != "" {
		changeType = h.last[lastChangeType].get(ev.ChangeType, h.strs)
	}
	if m.ReadMethod != "" {
		readMethod = h.last[lastReadMethod].get(m.ReadMethod, h.strs)
	}
	if m.UUID != "" {
		uuid = h.strs.Box(m.UUID)
	}
	file, generation = h.sourceFile(m.File)
	var row []any
	if n := len(historyMeta) + len(ev.Row); cap(dst) >= n {
		row = dst[:n]
	} else {
		row = h.row(n)
	}
	row[0] = h.day.get(value.DaysOf(ev.SourceTimestamp.Time()), h.days)
	row[1] = h.last[lastOp].get(ev.Op.String(), h.strs)
	row[2] = changeType
	row[3] = h.micros.Box(ev.SourceTimestamp)
	row[4] = readTS
	row[5] = readMethod
	row[6] = h.strs.Box(ev.Order.Text)
	row[7] = h.order(ev.Order.Bytes)
	row[8] = uuid
	row[9] = m.IsDeleted
	row[10] = file
	row[11] = generation
	row[12] = h.longs.Box(m.Record)
	copy(row[len(historyMeta):], ev.Row)
	return row
}

// row returns n nil values.
func (h *HistoryRows) row(n int) []any {
	if !h.slabs || n > historyRowsSlab/10 {
		return make([]any, n)
	}
	return value.Cut(&h.rows, n, historyRowsSlab)
}

// order returns a boxed copy of an ordering key: the event's own bytes
// belong to the decoder.
func (h *HistoryRows) order(b []byte) any {
	if !h.slabs || len(b) == 0 {
		return append([]byte(nil), b...)
	}
	return h.bytes.Box(h.orders.Bytes(b))
}

// sourceFile returns the boxed file column (bucket/name) and generation
// of the events of f, which are the same for all of a file's events.
func (h *HistoryRows) sourceFile(f *datastream.SourceFile) (file, generation any) {
	if f == nil {
		return nil, int64(0)
	}
	if f != h.file {
		h.file, h.fileName, h.generation = f, nil, f.Generation
		if f.Name != "" {
			h.fileName = f.Bucket + "/" + f.Name
			if f.Bucket == "" {
				h.fileName = f.Name
			}
		}
	}
	return h.fileName, h.generation
}

// Change is one event as the engine sees it: key, kind, order and the row
// in the batch's source schema.
type Change struct {
	Key []any
	// KeyText is KeyText(Key), when the change was built with it; Text
	// renders it otherwise.
	KeyText    string
	Delete     bool
	Order      []byte
	Position   string
	SourceTS   value.Micros
	ChangeType string
	Row        []any // one value per field of the batch's source schema
	History    []any // the full history row (HistorySchema of the batch)
	// StateRow, when set, is the change's current-state row as read
	// (StateSchema of the batch's source: Row, then the state's metadata
	// columns), which the state write takes as it is (see StateChange).
	StateRow []any
	// InHistory says that the change's history row is in one of the
	// batch's HistoryFiles (of this step or another of the batch), and
	// new to the history, or in one of its Candidates (Candidate): it is
	// not written from the change.
	InHistory bool
	// Candidate is 1 + the index in Batch.Candidates of the file the
	// change is of (0: none).
	Candidate int32
}

// Text is the change's KeyText: the field, or, for a change built without
// it (StateChange), rendered now.
func (c *Change) Text() string {
	if c.KeyText != "" {
		return c.KeyText
	}
	return KeyText(c.Key)
}

// Batch is the events of one merge batch, in one source schema.
type Batch struct {
	// Source is the schema of every Row: in schema mode "merge" the union
	// of the staged files' source schemas; in mode "overwrite" the source
	// schema as of the batch's newest change (BatchOrder), which the
	// tables take unless they already hold a newer change's schema.
	Source  value.StructType
	Key     []string
	Changes []Change
	// HistoryFiles are data files the history commit adds as they are
	// (copies of them), for changes marked InHistory.
	HistoryFiles []HistoryFile
	// Candidates are staged files the batch's last step copies to the
	// history unless a step finds one of their events there already (see
	// CopyCandidate); their changes carry Candidate.
	Candidates []CopyCandidate
	// OnBroken, when the step has Candidates, is told the ids of those it
	// breaks (none: an empty list) before the history commit, so that the
	// steps after it, in this attempt or another, know them.
	OnBroken func(ctx context.Context, ids []string) error
}

// Conform maps a row of schema from into schema to by column name (case
// insensitive); columns absent from from are null, and values of a column
// whose type was widened are converted. A value that does not fit its new
// type is an error (only a decimal beyond 38 digits can do that).
func Conform(row []any, from, to value.StructType) ([]any, error) {
	if value.Equal(from, to) {
		return row, nil
	}
	idx := make(map[string]int, len(from.Fields))
	for i, f := range from.Fields {
		idx[strings.ToLower(f.Name)] = i
	}
	out := make([]any, len(to.Fields))
	for i, f := range to.Fields {
		j, ok := idx[strings.ToLower(f.Name)]
		if !ok || j >= len(row) {
			continue
		}
		v := row[j]
		if ft := from.Fields[j].Type; v != nil && !value.Equal(ft, f.Type) {
			c, err := value.Convert(v, ft, f.Type)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
			v = c
		}
		out[i] = v
	}
	return out, nil
}

// ConformCast is Conform for schema mode "overwrite": a value that cannot
// be converted exactly is cast — to its text for a string column, else to
// null (the key's next change carries the value in the new type).
func ConformCast(row []any, from, to value.StructType) []any {
	idx := make(map[string]int, len(from.Fields))
	for i, f := range from.Fields {
		idx[strings.ToLower(f.Name)] = i
	}
	out := make([]any, len(to.Fields))
	for i, f := range to.Fields {
		j, ok := idx[strings.ToLower(f.Name)]
		if !ok || j >= len(row) || row[j] == nil {
			continue
		}
		ft := from.Fields[j].Type
		if value.Equal(ft, f.Type) {
			out[i] = row[j]
			continue
		}
		if c, err := value.Convert(row[j], ft, f.Type); err == nil {
			out[i] = c
			continue
		}
		if f.Type == value.String {
			if b, err := value.AppendJSON(nil, ft, row[j]); err == nil {
				if s, ok := unquoteJSON(b); ok {
					out[i] = s
				} else {
					out[i] = string(b)
				}
			}
		}
	}
	return out
}

func unquoteJSON(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return "", false
	}
	return s, true
}

// ChangeFromHistory builds a Change from a history row already conformed to
// HistorySchema(source).
func ChangeFromHistory(hist []any, source value.StructType, keyIdx []int) (Change, error) {
	var h HistoryChanges
	return h.Change(hist, source, keyIdx)
}

// HistoryChanges builds many Changes as ChangeFromHistory does, with fewer
// allocations: a merge builds one per staged event, and each would
// allocate its key and the key's text. It cuts keys from slabs and copies
// key texts into shared blocks (value.Arena); a slab stays alive while any
// key or text cut from it does. The zero HistoryChanges cuts nothing from
// slabs; NewHistoryChanges returns one that does.
type HistoryChanges struct {
	slabs bool
	keys  []any
	texts value.Arena
	buf   []byte // a key's text, before it is copied
}

// NewHistoryChanges returns a HistoryChanges that cuts keys and their
// texts from slabs.
func NewHistoryChanges() *HistoryChanges { return &HistoryChanges{slabs: true} }

// Change builds a Change from a history row already conformed to
// HistorySchema(source).
func (h *HistoryChanges) Change(hist []any, source value.StructType, keyIdx []int) (Change, error) {
	n := len(historyMeta)
	if len(hist) != n+len(source.Fields) {
		return Change{}, fmt.Errorf("history row has %d columns, want %d", len(hist), n+len(source.Fields))
	}
	return h.build(hist[1], hist[2], hist[3], hist[6], hist[7], hist[n:], hist, source, keyIdx, true)
}

// StateChangeColumns are the columns of the history rows StateChange
// builds a Change from: the source columns, the state's metadata columns
// (stateMeta), so that the row begins with the change's state row, and
// the operation.
func StateChangeColumns(source value.StructType) []string {
	var cols []string
	for _, f := range source.Fields {
		cols = append(cols, f.Name)
	}
	for _, f := range stateMeta {
		cols = append(cols, f.Name)
	}
	return append(cols, ColOp)
}

// StateChangeOffset is where the source columns start in a row of
// StateChangeColumns.
const StateChangeOffset = 0

// StateChange builds a Change without its history row (History nil), from
// a row of StateChangeColumns(source): for an event whose history row the
// merge does not write (InHistory), whose other history columns need not
// be read.
//
// The change's StateRow is the row's beginning: its state row as read.
// Its KeyText is left empty (see Text).
func (h *HistoryChanges) StateChange(row []any, source value.StructType, keyIdx []int) (Change, error) {
	n := len(source.Fields)
	if len(row) != n+len(stateMeta)+1 {
		return Change{}, fmt.Errorf("row has %d columns, want %d", len(row), n+len(stateMeta)+1)
	}
	meta := row[n:]
	c, err := h.build(meta[4], meta[1], meta[0], meta[2], meta[3], row[:n:n], nil, source, keyIdx, false)
	if err == nil {
		c.StateRow = row[: n+len(stateMeta) : n+len(stateMeta)]
	}
	return c, err
}

// build makes a change of the values of a row. With text, its KeyText is
// rendered; without, it is left to Text (a bulk load's changes, read for
// the state, are mostly keys no stored row holds: none is looked up).
func (h *HistoryChanges) build(opV, ctV, tsV, posV, orderV any, row, hist []any, source value.StructType, keyIdx []int, text bool) (Change, error) {
	op, _ := opV.(string)
	order, ok := orderV.([]byte)
	if !ok || len(order) == 0 {
		return Change{}, fmt.Errorf("history row without %s", ColOrder)
	}
	ts, _ := tsV.(value.Micros)
	pos, _ := posV.(string)
	ct, _ := ctV.(string)
	var key []any
	if h.slabs && len(keyIdx) <= historyRowsSlab/10 {
		key = value.Cut(&h.keys, len(keyIdx), historyRowsSlab)
	} else {
		key = make([]any, len(keyIdx))
	}
	for i, k := range keyIdx {
		key[i] = row[k]
		if key[i] == nil {
			return Change{}, fmt.Errorf("primary key column %q is null", source.Fields[k].Name)
		}
	}
	var kt string
	switch {
	case !text:
	case h.slabs:
		h.buf = AppendKeyText(h.buf[:0], key)
		kt = h.texts.String(h.buf)
	default:
		kt = KeyText(key)
	}
	return Change{
		Key: key, KeyText: kt, Delete: op == datastream.OpDelete.String(),
		Order: order, Position: pos, SourceTS: ts, ChangeType: ct, Row: row, History: hist,
	}, nil
}

// KeyIndexes resolves key column names in a schema.
func KeyIndexes(st value.StructType, key []string) ([]int, error) {
	if len(key) == 0 {
		return nil, ErrNoKey
	}
	out := make([]int, len(key))
	for i, k := range key {
		j := -1
		for fi, f := range st.Fields {
			if strings.EqualFold(f.Name, k) {
				j = fi
				break
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("primary key column %q is not in the schema %s", k, st)
		}
		out[i] = j
	}
	return out, nil
}

// KeyText is a canonical text of key values, usable as a map key.
func KeyText(key []any) string {
	return string(AppendKeyText(nil, key))
}

// AppendKeyText appends the KeyText of key to dst. Probing a map with
// m[string(AppendKeyText(buf[:0], key))] allocates nothing, which matters
// where every stored row's key is checked.
//
// A value is its JSON text, except a string that is not valid UTF-8: JSON
// would replace its bad bytes with U+FFFD, so two different keys could
// share a text and be merged as one. Such a string is written as 'x' and
// its bytes in hex, which no JSON text starts with.
func AppendKeyText(dst []byte, key []any) []byte {
	for i, k := range key {
		if i > 0 {
			dst = append(dst, 0x1f)
		}
		if s, ok := k.(string); ok && !utf8.ValidString(s) {
			dst = hex.AppendEncode(append(dst, 'x'), []byte(s))
			continue
		}
		n := len(dst)
		enc, err := value.AppendJSON(dst, nil, k)
		if err != nil {
			enc = fmt.Appendf(dst[:n], "%v", k)
		}
		dst = enc
	}
	return dst
}

// Latest dedupes changes to the one with the greatest order per key.
// Exact duplicates (same order) collapse to one.
func Latest(changes []Change) map[string]Change {
	out := make(map[string]Change, len(changes))
	for _, c := range changes {
		text := c.Text()
		if cur, ok := out[text]; !ok || bytes.Compare(c.Order, cur.Order) > 0 {
			out[text] = c
		}
	}
	return out
}

// Verdict is what the engine does with the latest change of a key.
type Verdict int

// Verdicts.
const (
	Stale   Verdict = iota // older than what is stored: ignored
	Insert                 // no stored row: insert it
	Replace                // replaces the stored row
	Delete                 // deletes the stored row (and records a tombstone)
	Bury                   // delete of a key without a row: only a tombstone
)

func (v Verdict) String() string {
	return [...]string{"stale", "insert", "replace", "delete", "bury"}[v]
}

// Decide applies the rule of the package doc. rowOrder and tombOrder are
// nil when absent.
func Decide(c Change, rowOrder, tombOrder []byte) Verdict {
	if rowOrder != nil && bytes.Compare(c.Order, rowOrder) <= 0 {
		return Stale
	}
	if tombOrder != nil && (bytes.Compare(c.Order, tombOrder) < 0 || !c.Delete && bytes.Equal(c.Order, tombOrder)) {
		return Stale
	}
	switch {
	case c.Delete && rowOrder != nil:
		return Delete
	case c.Delete && tombOrder != nil && bytes.Equal(c.Order, tombOrder):
		return Stale // this very delete is already recorded
	case c.Delete:
		return Bury
	case rowOrder != nil:
		return Replace
	}
	return Insert
}
