package cdc

import (
	"bytes"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// A merge batch larger than a step's bound is split into steps by key
// range (the pipeline's planSteps): every event of a key lands in the same
// step, so each step is complete for its keys, and the state files one step
// writes hold keys no other step of the batch looks up, so the steps of a
// backfill neither read nor rewrite each other's files. The ranges are cut
// at range codes, which staging records for the key-sorted staged files.

// RangeCodeVersion names the encoding of range codes. Codes are kept in
// staged manifests and step plans, so a change to appendCode that changes
// the code of a key value needs a new version, and the pipeline does not
// follow a plan or a manifest sample of another version.
const RangeCodeVersion = 1

// AppendRangeCode appends the range code of a key: its columns' value
// codes (codeKey), each integer coded as an int64 and each float32 as a
// float64, so that the code of a key does not depend on how wide its
// column is in one staged file or another (a column widened in a later
// file). Codes sort bytewise as value.CompareKeys orders the keys.
func AppendRangeCode(dst []byte, key []any) ([]byte, error) {
	for _, v := range key {
		var err error
		if dst, err = appendCode(dst, value.Widest(v), codeKey); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// KeySpan is the keys whose range codes lie in [Lo, Hi); a nil bound is
// unbounded.
type KeySpan struct{ r keyRange }

// NewKeySpan is the span [lo, hi) of range codes.
func NewKeySpan(lo, hi []byte) *KeySpan {
	s := &KeySpan{}
	if lo != nil {
		s.r.setLo(lo)
	}
	if hi != nil {
		s.r.setHi(hi)
	}
	return s
}

// Contains reports whether a range code lies in the span.
func (s *KeySpan) Contains(code []byte) bool { return s.r.contains(code) }

// Past reports whether a range code lies at or after the span's end: a
// later step's, of steps taken in key order.
func (s *KeySpan) Past(code []byte) bool {
	return s.r.hi != nil && bytes.Compare(code, s.r.hi) >= 0
}

// Overlaps reports whether the codes [first, last] can hold one of the
// span.
func (s *KeySpan) Overlaps(first, last []byte) bool {
	return (s.r.lo == nil || bytes.Compare(last, s.r.lo) >= 0) && (s.r.hi == nil || bytes.Compare(first, s.r.hi) < 0)
}

// RowGroupFilter skips the row groups of a file whose bounds of the key's
// first column (col) cannot hold a key of the span. The file must hold no
// null key: row-group bounds say nothing of nulls (staging refuses null
// keys).
func (s *KeySpan) RowGroupFilter(col string) *delta.RowGroupFilter {
	if s.r.lo == nil && s.r.hi == nil {
		return nil
	}
	return &delta.RowGroupFilter{Column: col, Keep: s.r.overlaps}
}
