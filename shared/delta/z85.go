package delta

import (
	"errors"
	"fmt"
)

// Delta encodes deletion-vector UUIDs and inline bitmaps with Z85
// (ZeroMQ's Base85 alphabet), padding the input to a multiple of four
// bytes; the decoder is told the real length and drops the padding.

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

var errZ85 = errors.New("invalid Z85 text")

// z85Encode encodes b, zero-padded to a multiple of four bytes.
func z85Encode(b []byte) string {
	padded := b
	if r := len(b) % 4; r != 0 {
		padded = make([]byte, len(b)+4-r)
		copy(padded, b)
	}
	out := make([]byte, 0, len(padded)/4*5)
	for i := 0; i < len(padded); i += 4 {
		v := uint32(padded[i])<<24 | uint32(padded[i+1])<<16 | uint32(padded[i+2])<<8 | uint32(padded[i+3])
		var chunk [5]byte
		for j := 4; j >= 0; j-- {
			chunk[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, chunk[:]...)
	}
	return string(out)
}

// z85Decode decodes s (a multiple of five characters) into bytes.
func z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, fmt.Errorf("%w: length %d is not a multiple of 5", errZ85, len(s))
	}
	var digits [256]int16
	for i := range digits {
		digits[i] = -1
	}
	for i := range len(z85Alphabet) {
		digits[z85Alphabet[i]] = int16(i)
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			d := digits[s[i+j]]
			if d < 0 {
				return nil, fmt.Errorf("%w: character %q at %d", errZ85, s[i+j], i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, fmt.Errorf("%w: group at %d overflows 32 bits", errZ85, i)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}
