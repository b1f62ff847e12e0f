package parquetfile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math/big"
)

// A decimal stored as a FIXED_LEN_BYTE_ARRAY holds its unscaled value in
// two's complement, big-endian (parquet-format LogicalTypes.md, DECIMAL).

// DecimalLimit is 10^precision, the least magnitude a decimal of that
// precision cannot hold.
func DecimalLimit(precision int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(precision)), nil)
}

// DecimalBytes is the smallest FIXED_LEN_BYTE_ARRAY length that holds every
// unscaled value of the given precision in two's complement.
func DecimalBytes(precision int) int {
	limit := DecimalLimit(precision)
	for n := 1; ; n++ {
		max := new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)) // 2^(8n-1) > 10^p - 1
		if max.Cmp(limit) >= 0 {
			return n
		}
	}
}

// PutInt64TwosComplement writes x in two's complement into out (at least
// 8 bytes long), as TwosComplement would.
func PutInt64TwosComplement(out []byte, x int64) {
	size := len(out)
	binary.BigEndian.PutUint64(out[size-8:], uint64(x))
	fill := byte(0)
	if x < 0 {
		fill = 0xff
	}
	for i := range out[:size-8] {
		out[i] = fill
	}
}

// TwosComplement renders u big-endian in size bytes.
func TwosComplement(u *big.Int, size int) []byte {
	out := make([]byte, size)
	if u.Sign() >= 0 {
		u.FillBytes(out)
		return out
	}
	// -x = ^(x-1) in two's complement.
	m := new(big.Int).Sub(new(big.Int).Neg(u), big.NewInt(1))
	m.FillBytes(out)
	for i := range out {
		out[i] = ^out[i]
	}
	return out
}

// CompareDecimalBytes compares two decimals stored as FIXED_LEN_BYTE_ARRAY
// (or BYTE_ARRAY) by the values they represent, the sort order
// LogicalTypes.md gives DECIMAL: signed, where the bytes' own order puts
// every negative value above every positive one. The shorter is
// sign-extended; an empty one is zero.
func CompareDecimalBytes(a, b []byte) int {
	negA, negB := len(a) > 0 && a[0]&0x80 != 0, len(b) > 0 && b[0]&0x80 != 0
	switch {
	case negA && !negB:
		return -1
	case !negA && negB:
		return +1
	}
	fill := byte(0)
	if negA {
		fill = 0xff
	}
	// Of the same sign, two's complement orders as unsigned bytes once
	// both are of one length.
	for len(a) > len(b) {
		if a[0] != fill {
			return cmp.Compare(a[0], fill)
		}
		a = a[1:]
	}
	for len(b) > len(a) {
		if b[0] != fill {
			return cmp.Compare(fill, b[0])
		}
		b = b[1:]
	}
	return bytes.Compare(a, b)
}
