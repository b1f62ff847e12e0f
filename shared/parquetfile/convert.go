package parquetfile

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"

	"github.com/dsdelta/dsdelta/shared/value"
)

// ErrSchemaMismatch is returned when a file's Parquet schema cannot hold
// the type a column is read as.
var ErrSchemaMismatch = errors.New("data file does not match the table schema")

// Kept are the slabs the leaves of one read cut their strings, binary
// values and boxed values from, for rows that are kept (see value.Arena
// and value.Boxes) rather than used once. The zero Kept is ready; it
// belongs to one read, by one goroutine.
type Kept struct {
	arena  value.Arena
	strs   value.Boxes[string]
	bins   value.Boxes[[]byte]
	longs  value.Boxes[int64]
	ints   value.Boxes[int32]
	dbls   value.Boxes[float64]
	days   value.Boxes[value.Days]
	micros value.Boxes[value.Micros]
	local  value.Boxes[value.LocalMicros]
	decs   value.Boxes[value.Decimal]
	// bigs and words hold the unscaled values of decimals that fit 64
	// bits: a big.Int and its one word, instead of two allocations.
	bigs  []big.Int
	words []big.Word
}

// bigInt returns x as a big.Int cut from the slabs. Its word is capped,
// so arithmetic on it that needs more reallocates, as on any big.Int,
// instead of growing into a neighbour.
func (k *Kept) bigInt(x int64) *big.Int {
	if bits.UintSize < 64 {
		return big.NewInt(x)
	}
	if len(k.bigs) == 0 {
		k.bigs = make([]big.Int, boxesPerSlab)
	}
	z := &k.bigs[0]
	k.bigs = k.bigs[1:]
	if x == 0 {
		return z
	}
	u := uint64(x)
	if x < 0 {
		u = -u
	}
	w := value.Cut(&k.words, 1, boxesPerSlab)
	w[0] = big.Word(u)
	z.SetBits(w)
	if x < 0 {
		z.Neg(z)
	}
	return z
}

// boxesPerSlab is how many values a slab of Kept holds.
const boxesPerSlab = 256

// StringConverter returns the conversion of a byte array to a string
// value: with kept set, cut from its arena and boxed from its slab.
func StringConverter(kept *Kept) func([]byte) any {
	if kept != nil {
		return func(b []byte) any { return kept.strs.Box(kept.arena.String(b)) }
	}
	return func(b []byte) any { return string(b) }
}

// Converter returns the conversion of the values of a Parquet leaf, el,
// into the Go representation of type t (package value), whatever physical
// encoding the writer chose. With kept set, strings, binary values and the
// values boxed are cut from its slabs.
func Converter(t value.Type, el *format.SchemaElement, kept *Kept) (func(parquet.Value) (any, error), error) {
	phys, _ := el.Type.Get()
	lt := el.LogicalType.Value
	bad := func() (func(parquet.Value) (any, error), error) {
		return nil, fmt.Errorf("%w: Parquet %v column %q cannot hold %v", ErrSchemaMismatch, phys, el.Name, t)
	}
	isInt := phys == format.Int32 || phys == format.Int64
	if dt, ok := t.(value.DecimalType); ok {
		scale := 0
		if d, ok := lt.(*format.DecimalType); ok {
			scale = int(d.Scale)
		} else if s, ok := el.Scale.Get(); ok {
			scale = int(s)
		}
		// Unscaled values that fit 64 bits (every INT32 and INT64 one,
		// and most byte arrays) skip big.Int's byte decoding and two's
		// complement arithmetic.
		var small func(parquet.Value) (int64, bool)
		switch phys {
		case format.Int32:
			small = func(v parquet.Value) (int64, bool) { return int64(v.Int32()), true }
		case format.Int64:
			small = func(v parquet.Value) (int64, bool) { return v.Int64(), true }
		case format.ByteArray, format.FixedLenByteArray:
			small = func(v parquet.Value) (int64, bool) { return twosComplementInt64(v.ByteArray()) }
		default:
			return bad()
		}
		newInt := big.NewInt
		var boxes *value.Boxes[value.Decimal] // nil boxes as any(v) does
		if kept != nil {
			newInt, boxes = kept.bigInt, &kept.decs
		}
		return func(v parquet.Value) (any, error) {
			var d value.Decimal
			if x, ok := small(v); ok {
				d = value.Decimal{Unscaled: newInt(x), Scale: scale}
			} else {
				d = value.Decimal{Unscaled: fromTwosComplement(v.ByteArray()), Scale: scale}
			}
			if scale != dt.Scale {
				r, err := d.Rescale(dt.Scale)
				if err != nil {
					return nil, err
				}
				d = r
			}
			return boxes.Box(d), nil
		}, nil
	}
	switch t {
	case value.Byte, value.Short, value.Integer, value.Long:
		if !isInt {
			return bad()
		}
		get := func(v parquet.Value) int64 {
			if v.Kind() == parquet.Int32 {
				return int64(v.Int32())
			}
			return v.Int64()
		}
		switch t {
		case value.Byte:
			return func(v parquet.Value) (any, error) { return int8(get(v)), nil }, nil
		case value.Short:
			return func(v parquet.Value) (any, error) { return int16(get(v)), nil }, nil
		case value.Integer:
			if kept != nil {
				return func(v parquet.Value) (any, error) { return kept.ints.Box(int32(get(v))), nil }, nil
			}
			return func(v parquet.Value) (any, error) { return int32(get(v)), nil }, nil
		}
		if phys == format.Int64 {
			f := Int64Converter(t, el, kept)
			return func(v parquet.Value) (any, error) { return f(v.Int64()), nil }, nil
		}
		if kept != nil {
			return func(v parquet.Value) (any, error) { return kept.longs.Box(get(v)), nil }, nil
		}
		return func(v parquet.Value) (any, error) { return get(v), nil }, nil
	case value.Float:
		if phys != format.Float {
			return bad()
		}
		return func(v parquet.Value) (any, error) { return v.Float(), nil }, nil
	case value.Double:
		var dbls *value.Boxes[float64] // nil boxes as any(v) does
		if kept != nil {
			dbls = &kept.dbls
		}
		switch phys {
		case format.Double:
			return func(v parquet.Value) (any, error) { return dbls.Box(v.Double()), nil }, nil
		case format.Float:
			return func(v parquet.Value) (any, error) { return dbls.Box(float64(v.Float())), nil }, nil
		case format.Int32:
			return func(v parquet.Value) (any, error) { return dbls.Box(float64(v.Int32())), nil }, nil
		case format.Int64:
			return func(v parquet.Value) (any, error) { return dbls.Box(float64(v.Int64())), nil }, nil
		}
		return bad()
	case value.Boolean:
		if phys != format.Boolean {
			return bad()
		}
		return func(v parquet.Value) (any, error) { return v.Boolean(), nil }, nil
	case value.String:
		if phys != format.ByteArray && phys != format.FixedLenByteArray {
			return bad()
		}
		str := StringConverter(kept)
		return func(v parquet.Value) (any, error) { return str(v.ByteArray()), nil }, nil
	case value.Binary:
		if phys != format.ByteArray && phys != format.FixedLenByteArray {
			return bad()
		}
		if kept != nil {
			return func(v parquet.Value) (any, error) {
				if b := v.ByteArray(); len(b) > 0 {
					return kept.bins.Box(kept.arena.Bytes(b)), nil
				}
				return []byte{}, nil
			}, nil
		}
		return func(v parquet.Value) (any, error) { return append([]byte{}, v.ByteArray()...), nil }, nil
	case value.Date:
		if phys != format.Int32 {
			return bad()
		}
		if kept != nil {
			return func(v parquet.Value) (any, error) { return kept.days.Box(value.Days(v.Int32())), nil }, nil
		}
		return func(v parquet.Value) (any, error) { return value.Days(v.Int32()), nil }, nil
	case value.Timestamp, value.TimestampNTZ:
		switch phys {
		case format.Int96:
			box := microsOf(t, kept)
			return func(v parquet.Value) (any, error) { return box(int96Micros(v.Int96())), nil }, nil
		case format.Int64:
			f := Int64Converter(t, el, kept)
			return func(v parquet.Value) (any, error) { return f(v.Int64()), nil }, nil
		}
		return bad()
	}
	return nil, fmt.Errorf("%w: unsupported column type %v", ErrSchemaMismatch, t)
}

// Int64Converter returns the conversion of an INT64 leaf el's stored integers into
// the Go representation of t where the value is a function of the integer
// alone: long, timestamp and timestamp_ntz (in any unit); nil for other
// types and physical types. With kept set, values are boxed from its
// slabs. Converter converts these leaves' values with it.
func Int64Converter(t value.Type, el *format.SchemaElement, kept *Kept) func(int64) any {
	if phys, _ := el.Type.Get(); phys != format.Int64 {
		return nil
	}
	switch t {
	case value.Long:
		if kept != nil {
			return kept.longs.Box
		}
		return func(x int64) any { return x }
	case value.Timestamp, value.TimestampNTZ:
	default:
		return nil
	}
	unit := int64(1) // micros per stored unit, negative = divide
	if ts, ok := el.LogicalType.Value.(*format.TimestampType); ok {
		switch ts.Unit.Value.(type) {
		case *format.MilliSeconds:
			unit = 1000
		case *format.NanoSeconds:
			unit = -1000
		}
	} else if ct, ok := el.ConvertedType.Get(); ok && ct == deprecated.TimestampMillis {
		unit = 1000
	}
	box := microsOf(t, kept)
	switch {
	case unit > 1:
		return func(x int64) any { return box(x * unit) }
	case unit < 0:
		return func(x int64) any { return box(floorDiv(x, -unit)) }
	}
	return box
}

// microsOf returns the conversion of microseconds since the epoch into
// timestamp type t's Go representation, boxed from kept's slabs when set.
func microsOf(t value.Type, kept *Kept) func(int64) any {
	switch {
	case t == value.TimestampNTZ && kept != nil:
		return func(x int64) any { return kept.local.Box(value.LocalMicros(x)) }
	case t == value.TimestampNTZ:
		return func(x int64) any { return value.LocalMicros(x) }
	case kept != nil:
		return func(x int64) any { return kept.micros.Box(value.Micros(x)) }
	}
	return func(x int64) any { return value.Micros(x) }
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// int96Micros converts an INT96 timestamp (nanoseconds of the day, then the
// Julian day number) to microseconds since the epoch.
func int96Micros(v deprecated.Int96) int64 {
	const julianEpoch = 2440588
	nanos := int64(v[1])<<32 | int64(v[0])
	day := int64(v[2])
	return (day-julianEpoch)*86_400_000_000 + nanos/1000
}

// twosComplementInt64 decodes a big-endian two's complement integer that
// fits 64 bits; ok is false for one that does not (or is empty).
func twosComplementInt64(b []byte) (x int64, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	// Bytes before the last 8 must only extend the sign.
	var ext byte
	if len(b) > 8 {
		if b[len(b)-8]&0x80 != 0 {
			ext = 0xFF
		}
		for _, c := range b[:len(b)-8] {
			if c != ext {
				return 0, false
			}
		}
		b = b[len(b)-8:]
	}
	if b[0]&0x80 != 0 {
		x = -1 // sign-extend
	}
	for _, c := range b {
		x = x<<8 | int64(c)
	}
	return x, true
}

// fromTwosComplement decodes a big-endian two's complement integer.
func fromTwosComplement(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return u
}
