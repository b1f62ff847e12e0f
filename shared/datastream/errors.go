package datastream

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sentinel errors for quarantine decisions, matched with errors.Is.
var (
	// ErrBadFile marks a file that cannot be read at all: not JSON, not an
	// Avro container, a corrupt block, an unsupported codec or schema.
	ErrBadFile = errors.New("bad datastream file")
	// ErrBadRecord marks a file with a record that cannot be turned into a
	// change event: a missing or malformed field, an invalid table name, a
	// value that does not fit its type.
	ErrBadRecord = errors.New("bad datastream record")
)

// RecordError describes bad input precisely enough to find it: the file, the
// place in it (line for JSON; block and record for Avro), the field and the
// reason. It matches ErrBadRecord or ErrBadFile with errors.Is.
type RecordError struct {
	File string
	// Line is the 1-based line where the JSON value starts (0 when unknown).
	Line int64
	// Block is the 1-based Avro block number (0 for JSON or the header).
	Block int64
	// Record is the 1-based record number in the file (0 for file-level
	// errors).
	Record int64
	// Field is the dotted path of the offending field
	// ("source_metadata.lsn", "payload.salary"), or "" when not one field.
	Field string
	// Reason says what is wrong.
	Reason string
	// Kind is ErrBadRecord or ErrBadFile.
	Kind error
	// Err is the underlying cause, if any.
	Err error
}

func (e *RecordError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Block > 0 {
		fmt.Fprintf(&b, ": block %d", e.Block)
	}
	if e.Record > 0 {
		fmt.Fprintf(&b, ": record %d", e.Record)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if c := e.cause(); c != nil {
		b.WriteString(": ")
		b.WriteString(c.Error())
	}
	return b.String()
}

// cause is Err, except that io.EOF becomes io.ErrUnexpectedEOF: an end of
// input inside a file is never the clean end of decoding, and callers loop
// until isEnd(err).
func (e *RecordError) cause() error {
	if e.Err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return e.Err
}

// Unwrap exposes the kind sentinel and the cause.
func (e *RecordError) Unwrap() []error {
	out := []error{e.Kind}
	if c := e.cause(); c != nil {
		out = append(out, c)
	}
	return out
}

// recordSizeError is a record larger than Options.MaxRecordBytes (limit),
// found before more than about limit bytes of it were held; decoders place
// it in a RecordError matching ErrBadRecord.
type recordSizeError struct{ limit int64 }

func (e *recordSizeError) Error() string {
	return fmt.Sprintf("record of more than %d bytes exceeds max_record_bytes (%d)", e.limit, e.limit)
}

// fieldError is an error tied to one field, raised below the record level
// and placed in a RecordError by the decoder.
type fieldError struct {
	field  string
	reason string
	err    error
}

func (e *fieldError) Error() string {
	s := e.field + ": " + e.reason
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func fieldErr(field, reason string, err error) *fieldError {
	return &fieldError{field: field, reason: reason, err: err}
}

// prefixField qualifies a fieldError's field with a parent path.
func prefixField(parent string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		f := parent
		if fe.field != "" {
			f += "." + fe.field
		}
		return &fieldError{field: f, reason: fe.reason, err: fe.err}
	}
	return &fieldError{field: parent, reason: err.Error()}
}

// isEnd reports the clean end of input or of decoding: io.EOF itself, as
// the io.Reader contract returns it and Next returns it after the last
// event. An error that merely wraps io.EOF (a reader failing mid-stream, a
// RecordError naming such a failure) is an error: taking it for the end
// would cut a file short without a word.
func isEnd(err error) bool { return err == io.EOF }
