// Package datastream decodes Google Cloud Datastream output files (JSON
// lines, plain or gzip, a JSON array of events, and Avro object container
// files with codec null, deflate or snappy) into normalised,
// source-independent change events, and parses the Cloud Storage
// notifications that announce those files.
//
// # Decoding
//
// Decode returns a Reader whose Next yields one Event at a time and io.EOF
// at the end; All is the callback form, and Reader.AppendTo keeps every
// event of a file in Events (blocks the decoding goroutines fill, never
// copied). Memory is bounded by one JSON value or one Avro block, and when
// decoding in parallel by a few chunks or blocks of input and their
// events. Fields are read by name, never by position.
//
// # Parallel decoding
//
// JSON lines (plain or gzip, not a JSON array) are decoded by
// Options.Workers goroutines, GOMAXPROCS by default: the goroutine calling
// Next reads the input in chunks of whole lines (1 MiB), at most two per
// worker in flight, and each chunk is decoded on its own goroutine with its
// own caches. Next returns the events in file order with the record and
// line numbers of sequential decoding. A chunk that fails in any way (a bad
// record, a read error, a value spread over lines that a chunk boundary
// cuts) is not trusted: the rest of the file, from that chunk's start, is
// decoded sequentially, so the events and the first error in file order
// are exactly those of sequential decoding. Close (which All calls) stops
// the goroutines and waits for them.
//
// Avro container files of more than one block are decoded the same way, a
// block per goroutine: the goroutine calling Next reads only the blocks'
// framing (count, size, sync marker), and a block that fails in any way
// (framing, decompression, a bad record, bytes left over) hands the rest of
// the file, from that block, to the sequential decoder, with the same
// events, block and record numbers and first error.
//
// An Event carries the table identity from source_metadata
// (<database>.<table> for MySQL, <schema>.<table> for Oracle, PostgreSQL and
// SQL Server, or <database>_<schema>.<table> for SQL Server with
// Options.SQLServerDatabase; prefixed by Options.Namespace when the stream
// has one; each part matching [A-Za-z0-9_$-]+), the primary-key values
// taken from the payload by the names in primary_keys (overridable per table
// with Options.PrimaryKeys; a table without a key is HistoryOnly, not an
// error), the operation (OpDelete when is_deleted is true or change_type is
// DELETE or UPDATE-DELETE), the ordering key (OrderKey, which documents the
// order), the row typed as Delta values (package value) and the metadata the
// history table keeps.
//
// The source kind comes from read_method (mysql-*, oracle*, postgres*,
// sqlserver*), else from the position fields present, else Options.Source;
// an unknown source orders by source timestamp only and is logged once per
// file.
//
// # Errors
//
// Every decoding error is a *RecordError naming the file, the line (JSON) or
// block (Avro), the record number, the field and the reason. It matches
// ErrBadRecord (one record cannot become an event) or ErrBadFile (the file
// cannot be read: truncated, corrupt block, unsupported codec or schema)
// with errors.Is. Decoding never panics on bad input; an error ends the
// file.
//
// # Avro types
//
// Payload columns map to Delta types as follows:
//
//	[null, T] union                     T, nullable (every payload column)
//	other unions                        string (the member's value as text)
//	boolean                             boolean
//	int                                 integer
//	int date                            date
//	int time-millis                     long (microseconds)
//	long                                long
//	long timestamp-millis|micros        timestamp
//	long local-timestamp-millis|micros  timestamp_ntz
//	long time-micros                    long (microseconds since midnight)
//	long time-interval-micros           long (microseconds; MySQL TIME may be
//	                                    negative or beyond 24 hours)
//	float / double                      float / double
//	string, varchar, uuid, enum         string
//	string json                         string holding the JSON text
//	string number                       decimal(20,0) for MySQL, whose only
//	                                    NUMBER column is BIGINT UNSIGNED
//	                                    (18446744073709551615 is exact);
//	                                    string elsewhere (Oracle NUMBER has no
//	                                    fixed scale, so its text is kept)
//	bytes / fixed                       binary
//	bytes|fixed decimal(p,s)            decimal(p,s), exact; p > 38 → string
//	record datetime{date,time}          timestamp_ntz (wall clock)
//	record timestampTz{timestamp,offset} timestamp (the instant; the offset
//	                                    is not kept)
//	record multidimensionalArray_*      array<T> (PostgreSQL arrays; arrays
//	                                    of more than one dimension are a bad
//	                                    record)
//	other records: interval{months,hours,micros}, geometry{value,srid,type},
//	timeTz, legacy varchar{value,length}
//	                                    struct of the mapped fields
//	array / map                         array<T> / map<string,T>
//
// MySQL BINARY/BLOB columns that Datastream writes as hex strings stay
// strings: the schema says string, and guessing would corrupt real text.
//
// # JSON types
//
// JSON carries no schema. The Reader types each event on its own, as it
// streams; UnifyJSON then types a whole file (or the files of one table) at
// once, which is what the pipeline stores and `dsdelta decode` prints.
//
// The Reader types payload values, per table, from (first match wins):
//
//  1. Options.Schemas[table id], the table's known schema: each value is
//     converted to its column's type (decimals rescaled exactly or refused,
//     timestamps parsed leniently, dates from a date or timestamp, binary
//     from base64 or else hex, objects to structs and maps, any JSON to its
//     text for a string column);
//  2. the payload record of Options.AvroSchema (the Avro schema file
//     Datastream can write beside JSON data), mapped as for Avro files;
//  3. inference, value by value:
//     - true/false → boolean;
//     - an integer → long; beyond int64 (BIGINT UNSIGNED) → decimal(38,0);
//     beyond 38 digits → string holding the number's text;
//     - a number with a fraction or exponent → decimal(38,s), s being its
//     fraction digits, exact (never through float64); beyond 38 digits →
//     string holding the number's text;
//     - a string → string;
//     - an object or array (json/jsonb, geometry) → string holding the
//     compact JSON text;
//     - null → string (null).
//
// Columns the known schema lacks (added at the source) are inferred and
// appended after the known columns, so they are never dropped; known columns
// absent from the payload are null. Numbers are never converted through
// float64 unless the column is float or double.
//
// Inference value by value lets Event.Schema change from one event to the
// next (a null is a string, 5 a long, 1.5 a decimal(38,1)) and keeps
// timestamps as strings. Each JSON event therefore remembers how its values
// were written (one byte per column, and the text of the rare numbers that
// their value does not render back to, such as 1e3), and UnifyJSON
// decides each inferred column's type from all its non-null values with a
// deterministic lattice: booleans → boolean; integers → long, widened to
// decimal(20,0) or decimal(38,0) beyond int64; integers and fractions →
// decimal(38,s) for the largest scale s; strings that all are strict
// ISO-8601 timestamps → timestamp (a timestamp without a zone is UTC, as
// Datastream writes UTC, so the microseconds equal those of an Avro
// stream); strings that all are YYYY-MM-DD dates → date; objects and
// arrays → string of their compact JSON; a column that is null everywhere
// takes the known schema's type, else string; a mix of kinds → string, a
// number keeping its exact JSON text. A known schema given to UnifyJSON (the
// table's current schema) wins for its columns, as Options.Schemas does:
// a Delta column cannot change type, so a value that does not fit it is a
// bad record. The rules are listed in full on UnifyJSON.
//
// Because a column's type follows from its values, a file can still decide
// a type that a later file of a new table contradicts (a varchar column
// whose first file only held timestamps, a decimal whose first file had
// fewer fraction digits than a later one); the table's schema then keeps
// the first type, and the later file is a bad record. Datastream's Avro
// output, or its Avro schema file (Options.AvroSchema), types exactly.
//
// Timestamps are parsed leniently: T or a space between date and time, 0 to
// 9 fraction digits, a zone that is absent (UTC), Z, UTC or an offset, or a
// date alone (midnight). A bare number is milliseconds for read_timestamp
// and source_timestamp (the Avro form) and microseconds for a payload
// timestamp column.
package datastream
