package cdc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/dsdelta/dsdelta/shared/value"
)

// A value code is a self-describing binary encoding of values in package
// value's Go representation. Verify and rebuild hold keys and rows as codes
// instead of []any: a pass over the history keeps one entry per key, so
// what an entry costs decides how many keys a pass can hold.
//
// The code of a scalar sorts bytewise as value.Compare orders values of one
// type (null first, numbers numerically, strings and binary bytewise,
// decimals of one scale by value, dates and times in time), and no code is
// a prefix of another, so the concatenated codes of a key's columns sort as
// value.CompareKeys orders the keys. Float -0 sorts just before +0, which
// Compare holds equal. Structs, arrays and maps encode their elements in
// turn; their order means nothing, as Compare gives them none.
//
// Three modes differ only in floats:
//   - codeExact keeps every bit, for a row decoded again later;
//   - codeKey makes every NaN one code, as KeyText renders them all "NaN";
//   - codeEqual also makes -0 the code of +0: two values have the same
//     code exactly when value.EqualValues holds them equal, so a hash of
//     the code compares rows.
type codeMode int

const (
	codeExact codeMode = iota
	codeKey
	codeEqual
)

// Tags. Null is the smallest so that it sorts first; the others only need
// to differ, since a column holds one Go type.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt8
	tagInt16
	tagInt32
	tagInt64
	tagDays
	tagMicros
	tagLocalMicros
	tagFloat32
	tagFloat64
	tagString
	tagBinary
	tagDecimal
	tagList
	tagMap
)

// Decimal signs, ordered.
const (
	decNegative byte = 0x01
	decZero     byte = 0x02
	decPositive byte = 0x03
)

// errCode reports a value code that cannot be decoded: a bug, as codes are
// only ever read back by the process that wrote them.
var errCode = errors.New("corrupt value code")

// appendCode appends the code of v.
func appendCode(dst []byte, v any, mode codeMode) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, tagNull), nil
	case bool:
		if x {
			return append(dst, tagTrue), nil
		}
		return append(dst, tagFalse), nil
	case int8:
		return append(dst, tagInt8, uint8(x)^0x80), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(dst, tagInt16), uint16(x)^0x8000), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(dst, tagInt32), uint32(x)^(1<<31)), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(dst, tagInt64), uint64(x)^(1<<63)), nil
	case value.Days:
		return binary.BigEndian.AppendUint32(append(dst, tagDays), uint32(x)^(1<<31)), nil
	case value.Micros:
		return binary.BigEndian.AppendUint64(append(dst, tagMicros), uint64(x)^(1<<63)), nil
	case value.LocalMicros:
		return binary.BigEndian.AppendUint64(append(dst, tagLocalMicros), uint64(x)^(1<<63)), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, tagFloat32), orderedFloat32(x, mode)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, tagFloat64), orderedFloat64(x, mode)), nil
	case string:
		return appendEscaped(append(dst, tagString), x), nil
	case []byte:
		return appendEscaped(append(dst, tagBinary), x), nil
	case value.Decimal:
		return appendDecimal(append(dst, tagDecimal), x)
	case []any:
		dst = binary.AppendUvarint(append(dst, tagList), uint64(len(x)))
		for _, e := range x {
			var err error
			if dst, err = appendCode(dst, e, mode); err != nil {
				return dst, err
			}
		}
		return dst, nil
	case []value.MapEntry:
		dst = binary.AppendUvarint(append(dst, tagMap), uint64(len(x)))
		for _, e := range x {
			var err error
			if dst, err = appendCode(dst, e.Key, mode); err != nil {
				return dst, err
			}
			if dst, err = appendCode(dst, e.Value, mode); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("encode a value of Go type %T: not a value of package value", v)
}

// appendCodes appends the codes of values one after the other.
func appendCodes(dst []byte, values []any, mode codeMode) ([]byte, error) {
	for _, v := range values {
		var err error
		if dst, err = appendCode(dst, v, mode); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// orderedFloat64 maps a float's bits so that they sort as the floats do:
// negative numbers have every bit flipped, positive ones the sign bit. The
// canonical NaN maps to zero, below -Inf, where cmp.Compare puts NaN.
func orderedFloat64(f float64, mode codeMode) uint64 {
	if mode != codeExact && f != f {
		return 0
	}
	if mode == codeEqual && f == 0 {
		f = 0 // -0 equals +0
	}
	b := math.Float64bits(f)
	if b&(1<<63) != 0 {
		return ^b
	}
	return b | 1<<63
}

func orderedFloat32(f float32, mode codeMode) uint32 {
	if mode != codeExact && f != f {
		return 0
	}
	if mode == codeEqual && f == 0 {
		f = 0
	}
	b := math.Float32bits(f)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// appendEscaped appends s with each 0x00 written as 0x00 0xFF and ends it
// with 0x00 0x01: the code sorts as s does and ends where s ends.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(append(dst, s[start:i]...), 0x00, 0xFF)
			start = i + 1
		}
	}
	return append(append(dst, s[start:]...), 0x00, 0x01)
}

// appendDecimal appends the sign, the length of the unscaled magnitude and
// the magnitude (complemented for negative numbers, so that larger
// magnitudes sort lower), then the scale. Values of one scale sort by value.
func appendDecimal(dst []byte, d value.Decimal) ([]byte, error) {
	var mag []byte
	sign := 0
	if d.Unscaled != nil {
		sign = d.Unscaled.Sign()
		mag = d.Unscaled.Bytes()
	}
	if len(mag) > 255 {
		return dst, fmt.Errorf("encode decimal of %d bytes: too large", len(mag))
	}
	switch {
	case sign == 0:
		dst = append(dst, decZero)
	case sign > 0:
		dst = append(dst, decPositive, byte(len(mag)))
		dst = append(dst, mag...)
	default:
		dst = append(dst, decNegative, ^byte(len(mag)))
		for _, b := range mag {
			dst = append(dst, ^b)
		}
	}
	return binary.AppendVarint(dst, int64(d.Scale)), nil
}

// readCode decodes the value at the start of b and returns the rest.
func readCode(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errCode
	}
	tag, b := b[0], b[1:]
	fixed := func(n int) ([]byte, []byte, error) {
		if len(b) < n {
			return nil, nil, errCode
		}
		return b[:n], b[n:], nil
	}
	switch tag {
	case tagNull:
		return nil, b, nil
	case tagFalse:
		return false, b, nil
	case tagTrue:
		return true, b, nil
	case tagInt8:
		p, rest, err := fixed(1)
		if err != nil {
			return nil, nil, err
		}
		return int8(p[0] ^ 0x80), rest, nil
	case tagInt16:
		p, rest, err := fixed(2)
		if err != nil {
			return nil, nil, err
		}
		return int16(binary.BigEndian.Uint16(p) ^ 0x8000), rest, nil
	case tagInt32, tagDays:
		p, rest, err := fixed(4)
		if err != nil {
			return nil, nil, err
		}
		v := int32(binary.BigEndian.Uint32(p) ^ (1 << 31))
		if tag == tagDays {
			return value.Days(v), rest, nil
		}
		return v, rest, nil
	case tagInt64, tagMicros, tagLocalMicros:
		p, rest, err := fixed(8)
		if err != nil {
			return nil, nil, err
		}
		v := int64(binary.BigEndian.Uint64(p) ^ (1 << 63))
		switch tag {
		case tagMicros:
			return value.Micros(v), rest, nil
		case tagLocalMicros:
			return value.LocalMicros(v), rest, nil
		}
		return v, rest, nil
	case tagFloat32:
		p, rest, err := fixed(4)
		if err != nil {
			return nil, nil, err
		}
		u := binary.BigEndian.Uint32(p)
		if u == 0 {
			return float32(math.NaN()), rest, nil
		}
		if u&(1<<31) != 0 {
			u &^= 1 << 31
		} else {
			u = ^u
		}
		return math.Float32frombits(u), rest, nil
	case tagFloat64:
		p, rest, err := fixed(8)
		if err != nil {
			return nil, nil, err
		}
		u := binary.BigEndian.Uint64(p)
		if u == 0 {
			return math.NaN(), rest, nil
		}
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		return math.Float64frombits(u), rest, nil
	case tagString:
		s, rest, err := readEscaped(b)
		return string(s), rest, err
	case tagBinary:
		return readEscaped(b)
	case tagDecimal:
		return readDecimal(b)
	case tagList:
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return nil, nil, errCode
		}
		b = b[k:]
		out := make([]any, n)
		for i := range out {
			var err error
			if out[i], b, err = readCode(b); err != nil {
				return nil, nil, err
			}
		}
		return out, b, nil
	case tagMap:
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return nil, nil, errCode
		}
		b = b[k:]
		out := make([]value.MapEntry, n)
		for i := range out {
			var err error
			if out[i].Key, b, err = readCode(b); err != nil {
				return nil, nil, err
			}
			if out[i].Value, b, err = readCode(b); err != nil {
				return nil, nil, err
			}
		}
		return out, b, nil
	}
	return nil, nil, errCode
}

// readCodes decodes n values into dst (appended) and returns the rest.
func readCodes(dst []any, b []byte, n int) ([]any, []byte, error) {
	for range n {
		v, rest, err := readCode(b)
		if err != nil {
			return dst, nil, err
		}
		dst, b = append(dst, v), rest
	}
	return dst, b, nil
}

// readEscaped undoes appendEscaped.
func readEscaped(b []byte) ([]byte, []byte, error) {
	out := []byte{}
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 || i+1 >= len(b) {
			return nil, nil, errCode
		}
		out = append(out, b[:i]...)
		switch b[i+1] {
		case 0x01:
			return out, b[i+2:], nil
		case 0xFF:
			out = append(out, 0)
			b = b[i+2:]
		default:
			return nil, nil, errCode
		}
	}
}

// readDecimal undoes appendDecimal.
func readDecimal(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errCode
	}
	sign, b := b[0], b[1:]
	u := new(big.Int)
	switch sign {
	case decZero:
	case decPositive, decNegative:
		if len(b) == 0 {
			return nil, nil, errCode
		}
		n := int(b[0])
		if sign == decNegative {
			n = int(^b[0])
		}
		if len(b) < 1+n {
			return nil, nil, errCode
		}
		mag := b[1 : 1+n]
		if sign == decNegative {
			mag = bytes.Clone(mag)
			for i := range mag {
				mag[i] = ^mag[i]
			}
		}
		u.SetBytes(mag)
		if sign == decNegative {
			u.Neg(u)
		}
		b = b[1+n:]
	default:
		return nil, nil, errCode
	}
	scale, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, errCode
	}
	return value.Decimal{Unscaled: u, Scale: int(scale)}, b[k:], nil
}
