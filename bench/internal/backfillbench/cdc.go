package backfillbench

import (
	"strconv"
	"time"
)

// CDCReadMethod is the read method of the table's change events: MySQL's
// binary log.
const CDCReadMethod = "mysql-cdc-binlog"

// Op is what a change event does to its key.
type Op uint8

// The change events a CDC file holds.
const (
	Update Op = iota // UPDATE-INSERT: the row's new values
	Insert           // INSERT of a key never seen
	Delete           // DELETE, with the row's last values
)

// ChangeWriter renders the table's change events after its backfill, as
// Datastream reads them from MySQL's binary log: read_method
// mysql-cdc-binlog, one log file, positions that increase from event to
// event, so that every event orders after the one written before it and
// after every backfill row.
type ChangeWriter struct {
	schemaKey string
	payloads
	logPosition int64
}

// NewChangeWriter returns a writer whose first event is at log position
// 4, the first of a binary log file.
func NewChangeWriter() *ChangeWriter {
	return &ChangeWriter{schemaKey: SchemaKey(), payloads: newPayloads(), logPosition: 4}
}

// ChangeLogFile is the binary log file every change event names.
const ChangeLogFile = "mysql-bin.000001"

// AppendChange appends one change event (a line) of key j, the seq-th of
// its file, read at src: op, with the values of the key's version-th
// version (a delete carries the values it removes).
func (w *ChangeWriter) AppendChange(b []byte, op Op, j int, version uint64, src time.Time, seq int) []byte {
	w.logPosition += 100 + int64(mix(uint64(w.logPosition))%400)
	h := mix(uint64(j)*1_000_003 + version)
	changeType, deleted := "UPDATE-INSERT", "false"
	switch op {
	case Insert:
		changeType = "INSERT"
	case Delete:
		changeType, deleted = "DELETE", "true"
	}
	src = src.Truncate(time.Second) // MySQL's source timestamps are whole seconds
	b = appendHead(b, w.schemaKey, CDCReadMethod, seq, src.Add(time.Duration(h%1000)*time.Millisecond), src)
	b = append(b, `,"`+ChangeLogFile+`",`...)
	b = strconv.AppendInt(b, w.logPosition, 10)
	b = append(b, `],"source_metadata":{"table":"`+Table+`","database":"`+Database+`","primary_keys":["id"],"log_file":"`+ChangeLogFile+`","log_position":`...)
	b = strconv.AppendInt(b, w.logPosition, 10)
	b = append(b, `,"change_type":"`...)
	b = append(b, changeType...)
	b = append(b, `","is_deleted":`...)
	b = append(b, deleted...)
	b = append(b, `},`...)
	return w.appendPayload(b, j, h)
}
