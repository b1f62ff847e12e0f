package datastream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// OrderKey places an event in the total order of changes to its table.
//
// Bytes compare with bytes.Compare (so the CDC engine and Parquet min/max
// statistics can use them directly); Text is a readable form of the position
// ("mysql-bin.000123:4567", "16/CB002DB0", "382470:0x000004.00000705.0010:0",
// "00000025:00000728:0003", "backfill").
//
// Layout of Bytes, every integer big-endian and fixed-width so that byte order
// is numeric order:
//
//	backfill:        0x00 | timestamp | rank
//	CDC, MySQL:      0x01 | binlog file number | binlog position | rank | timestamp
//	CDC, PostgreSQL: 0x01 | LSN (hi<<32|lo) | rank | timestamp
//	CDC, Oracle:     0x01 | scn | rs_id (3 numbers) | ssn | rank | timestamp
//	CDC, SQL Server: 0x01 | LSN (3 numbers) | rank | timestamp
//	CDC, unknown:    0x01 | timestamp | rank
//
// where timestamp is the source timestamp in microseconds with the sign bit
// flipped (so negative instants sort first) and rank is 0 for UPDATE-DELETE
// and 1 otherwise, so that the two halves of a primary-key change, which
// share one position, apply delete first. Backfill sorts before every CDC
// event of the same key, which converges because every change made after the
// stream started is delivered as CDC.
//
// Keys of events from different kinds of source are not meant to be
// compared: a table has one source.
type OrderKey struct {
	Bytes []byte
	Text  string
}

// Compare returns -1, 0 or +1 as k sorts before, with or after o.
func (k OrderKey) Compare(o OrderKey) int { return bytes.Compare(k.Bytes, o.Bytes) }

// String returns the readable form.
func (k OrderKey) String() string { return k.Text }

const (
	classBackfill = 0x00
	classCDC      = 0x01
)

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendTimestamp(b []byte, ts value.Micros) []byte {
	return appendU64(b, uint64(ts)^(1<<63))
}

func rankOf(changeType string) byte {
	if strings.EqualFold(strings.TrimSpace(changeType), ChangeUpdateDelete) {
		return 0
	}
	return 1
}

// positionError names the source_metadata field whose value cannot be
// ordered.
type positionError struct {
	field  string
	reason string
}

func (e *positionError) Error() string { return e.field + ": " + e.reason }

// BuildOrder computes the ordering key of an event. It fails when a position
// field is present but malformed (for example an LSN that is not hex); a
// missing position on a CDC event orders as position zero.
func BuildOrder(src Source, rm ReadMethod, pos Position, changeType string, ts value.Micros) (OrderKey, error) {
	return buildOrder(src, rm, pos, changeType, ts, nil)
}

// buildOrder is BuildOrder copying the key's bytes and text into a.
func buildOrder(src Source, rm ReadMethod, pos Position, changeType string, ts value.Micros, a *strArena) (OrderKey, error) {
	rank := rankOf(changeType)
	var kb [64]byte // longer than every layout
	if rm == Backfill {
		b := append(kb[:0], classBackfill)
		b = appendTimestamp(b, ts)
		b = append(b, rank)
		return OrderKey{Bytes: a.bytes(b), Text: "backfill"}, nil
	}
	b := append(kb[:0], classCDC)
	var text string
	switch src {
	case MySQL:
		n, err := parseBinlogFile(pos.LogFile)
		if err != nil {
			return OrderKey{}, &positionError{"log_file", err.Error()}
		}
		if pos.LogPosition < 0 {
			return OrderKey{}, &positionError{"log_position", fmt.Sprintf("negative position %d", pos.LogPosition)}
		}
		b = appendU64(b, n)
		b = appendU64(b, uint64(pos.LogPosition))
		var tb [64]byte
		text = a.string(strconv.AppendInt(append(append(tb[:0], pos.LogFile...), ':'), pos.LogPosition, 10))
	case PostgreSQL:
		lsn, err := parsePostgresLSN(pos.LSN)
		if err != nil {
			return OrderKey{}, &positionError{"lsn", err.Error()}
		}
		b = appendU64(b, lsn)
		text = fmt.Sprintf("%X/%X", lsn>>32, lsn&0xFFFFFFFF)
	case Oracle:
		if pos.SCN < 0 {
			return OrderKey{}, &positionError{"scn", fmt.Sprintf("negative scn %d", pos.SCN)}
		}
		rs, err := parseRSID(pos.RSID)
		if err != nil {
			return OrderKey{}, &positionError{"rs_id", err.Error()}
		}
		if pos.SSN < 0 {
			return OrderKey{}, &positionError{"ssn", fmt.Sprintf("negative ssn %d", pos.SSN)}
		}
		b = appendU64(b, uint64(pos.SCN))
		for _, p := range rs {
			b = appendU64(b, p)
		}
		b = appendU64(b, uint64(pos.SSN))
		text = strconv.FormatInt(pos.SCN, 10) + ":" + strings.TrimSpace(pos.RSID) + ":" + strconv.FormatInt(pos.SSN, 10)
	case SQLServer:
		parts, err := parseSQLServerLSN(pos.LSN)
		if err != nil {
			return OrderKey{}, &positionError{"lsn", err.Error()}
		}
		for _, p := range parts {
			b = appendU64(b, p)
		}
		text = strings.TrimSpace(pos.LSN)
	default:
		b = appendTimestamp(b, ts)
		b = append(b, rank)
		return OrderKey{Bytes: a.bytes(b), Text: ts.String()}, nil
	}
	b = append(b, rank)
	b = appendTimestamp(b, ts)
	return OrderKey{Bytes: a.bytes(b), Text: text}, nil
}

// parseBinlogFile returns the numeric suffix of a MySQL binlog file name
// ("mysql-bin.000123" → 123), so that mysql-bin.999999 sorts before
// mysql-bin.1000000. An empty name is position zero.
func parseBinlogFile(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	i := strings.LastIndexByte(s, '.')
	suffix := s[i+1:]
	n, err := strconv.ParseUint(suffix, 10, 64)
	if err != nil || suffix == "" {
		return 0, fmt.Errorf("binlog file %q has no numeric suffix", s)
	}
	return n, nil
}

// parsePostgresLSN parses "X/Y" (both hex, each at most 32 bits) as
// X<<32 | Y. An empty LSN (backfill) is zero.
func parsePostgresLSN(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q is not X/Y", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("LSN %q is not two 32-bit hex numbers", s)
	}
	return h<<32 | l, nil
}

// parseRSID parses an Oracle redo record-set id such as
// " 0x000004.00000705.0010 " into its three hex numbers; the spaces Datastream
// writes around it are trimmed. An empty rs_id is zero.
func parseRSID(s string) ([3]uint64, error) {
	var out [3]uint64
	t := strings.TrimSpace(s)
	if t == "" {
		return out, nil
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("rs_id %q is not three dot-separated hex numbers", s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 16, 64)
		if err != nil {
			return out, fmt.Errorf("rs_id %q: part %d is not hex", s, i+1)
		}
		out[i] = n
	}
	return out, nil
}

// parseSQLServerLSN parses "VLF:block:slot" as three hex numbers. An empty
// LSN is zero.
func parseSQLServerLSN(s string) ([3]uint64, error) {
	var out [3]uint64
	t := strings.TrimSpace(s)
	if t == "" {
		return out, nil
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	parts := strings.Split(t, ":")
	if len(parts) != 3 {
		return out, fmt.Errorf("LSN %q is not three colon-separated hex numbers", s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return out, fmt.Errorf("LSN %q: part %d is not hex", s, i+1)
		}
		out[i] = n
	}
	return out, nil
}

// sourceOfReadMethod is the source read_method names, or Unknown.
func sourceOfReadMethod(readMethod string) Source {
	l := strings.ToLower(readMethod)
	switch {
	case strings.HasPrefix(l, "mysql"):
		return MySQL
	case strings.HasPrefix(l, "oracle"):
		return Oracle
	case strings.HasPrefix(l, "postgres"):
		return PostgreSQL
	case strings.HasPrefix(l, "sqlserver"):
		return SQLServer
	}
	return Unknown
}

// detectSource derives the source kind from read_method ("mysql-cdc-binlog",
// "postgresql-backfill", "oracle_dump"...) and, failing that, from which
// position fields source_metadata carries.
func detectSource(readMethod string, has func(string) bool) Source {
	if s := sourceOfReadMethod(readMethod); s != Unknown {
		return s
	}
	switch {
	case has("log_position") || has("binlog_position") || has("binlog_file"):
		return MySQL
	case has("scn") || has("rs_id"):
		return Oracle
	}
	return Unknown
}
