package datastream

import (
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Op is what an event does to the current state of its key.
type Op uint8

// The operations of a change event.
const (
	// OpUpsert inserts or replaces the row of the key.
	OpUpsert Op = iota + 1
	// OpDelete removes the row of the key.
	OpDelete
)

// String returns "upsert" or "delete".
func (o Op) String() string {
	switch o {
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	}
	return "unknown"
}

// ReadMethod says whether an event came from the initial table copy or from
// the change log.
type ReadMethod uint8

// The read methods.
const (
	// Backfill events come from a table scan (read_method containing
	// "backfill" or "dump"); they sort before every CDC event.
	Backfill ReadMethod = iota + 1
	// CDC events come from the source's change log.
	CDC
)

// String returns "backfill" or "cdc".
func (m ReadMethod) String() string {
	switch m {
	case Backfill:
		return "backfill"
	case CDC:
		return "cdc"
	}
	return "unknown"
}

// readMethodOf classifies Datastream's read_method text.
func readMethodOf(s string) ReadMethod {
	l := strings.ToLower(s)
	if strings.Contains(l, "backfill") || strings.Contains(l, "dump") {
		return Backfill
	}
	return CDC
}

// Source is the kind of source database, which decides how positions order.
type Source string

// The sources with a known ordering.
const (
	MySQL      Source = "mysql"
	Oracle     Source = "oracle"
	PostgreSQL Source = "postgresql"
	SQLServer  Source = "sqlserver"
	// Unknown sources order by source timestamp only.
	Unknown Source = ""
)

// Change types written by Datastream in source_metadata.change_type.
const (
	ChangeInsert       = "INSERT"
	ChangeUpdate       = "UPDATE" // Oracle and PostgreSQL updates
	ChangeUpdateInsert = "UPDATE-INSERT"
	ChangeUpdateDelete = "UPDATE-DELETE"
	ChangeDelete       = "DELETE"
)

// KnownChangeType reports whether ct (upper-cased, trimmed) is one of the
// change types Datastream documents (DATASTREAM_FORMAT.md): INSERT, UPDATE,
// UPDATE-INSERT, UPDATE-DELETE, DELETE, or none (a backfill row).
func KnownChangeType(ct string) bool {
	switch ct {
	case "", ChangeInsert, ChangeUpdate, ChangeUpdateInsert, ChangeUpdateDelete, ChangeDelete:
		return true
	}
	return false
}

// IsDelete is the delete rule of the merge: an event deletes its key when
// is_deleted is true or its change type is DELETE or UPDATE-DELETE. Both
// halves matter: Oracle PK changes carry UPDATE-DELETE with is_deleted=false.
func IsDelete(isDeleted bool, changeType string) bool {
	ct := strings.ToUpper(strings.TrimSpace(changeType))
	return isDeleted || ct == ChangeDelete || ct == ChangeUpdateDelete
}

// Position holds the source log position fields of an event, as written in
// source_metadata. Fields a source does not have stay zero.
type Position struct {
	// MySQL: log_file / log_position (binlog_file / binlog_position in GTID
	// streams).
	LogFile     string
	LogPosition int64
	// Oracle: scn, rs_id (as written, with its spaces), ssn, row_id, and the
	// redo log_file in LogFile.
	SCN   int64
	RSID  string
	SSN   int64
	RowID string
	// PostgreSQL and SQL Server: lsn as written ("16/CB002DB0",
	// "00000025:00000728:0003").
	LSN string
	// TxID is the transaction id as text (a long for PostgreSQL, a string
	// elsewhere).
	TxID string
}

// Metadata is the Datastream metadata of an event that the history table
// keeps.
type Metadata struct {
	UUID            string
	ReadTimestamp   value.Micros
	SourceTimestamp value.Micros
	Object          string
	ReadMethod      string // as written, e.g. "mysql-cdc-binlog"
	StreamName      string
	SchemaKey       string
	ChangeType      string
	IsDeleted       bool
	Source          Source
	Position        Position
	// File is the source object, shared by the events of a file (one
	// pointer rather than a copy in every event); Record is the 1-based
	// number of the event in it. File is nil in events not decoded from a
	// file.
	File   *SourceFile
	Record int64
}

// Event is one normalised change event.
type Event struct {
	// Table identifies the source table.
	Table TableID
	// KeyNames are the primary-key column names, KeyValues their values in
	// the same order, taken from Row. Both are empty for a table without a
	// primary key (HistoryOnly).
	KeyNames  []string
	KeyValues []any
	// HistoryOnly is set when the table has no primary key: the event can
	// only be appended to the history table.
	HistoryOnly bool
	// Op is OpDelete per IsDelete, else OpUpsert.
	Op Op
	// Order is the event's position in the total order of changes.
	Order OrderKey
	// SourceTimestamp is when the row changed in the source (UTC).
	SourceTimestamp value.Micros
	// ReadMethod is Backfill or CDC.
	ReadMethod ReadMethod
	// ChangeType is source_metadata.change_type, upper-cased ("INSERT",
	// "UPDATE-INSERT", "UPDATE-DELETE", "DELETE"), or "" when absent.
	ChangeType string
	// Schema is the payload schema; Row holds one value per field of it in
	// the Go representation of package value. Events decoded from the same
	// Avro file share one Schema value, as do JSON events unified by
	// UnifyJSON; before that, each JSON event has the schema inferred from
	// its own values.
	Schema value.StructType
	Row    []any
	// Meta is the Datastream metadata kept for the history table.
	Meta Metadata

	// jsonSrc is set on events decoded from JSON: how each payload value
	// was written, for UnifyJSON. Avro events leave it nil.
	jsonSrc *jsonSource
}
