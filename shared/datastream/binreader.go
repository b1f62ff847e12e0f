package datastream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/hamba/avro/v2"
)

var errShort = errors.New("record ends early")

// binReader reads Avro binary encoding from one decompressed block, checking
// every length against the bytes that are left.
type binReader struct {
	b   []byte
	off int
	// items counts array and map items read from the block: items of
	// zero-byte types (null, empty records) would otherwise let a few
	// bytes of counts spin for ever.
	items int64
	// steps counts values read from the block, for the same reason:
	// records of records of nulls take no bytes at all.
	steps int64
}

// step charges one value against the block's budget, which is generous for
// any schema whose values take bytes.
func (r *binReader) step() error {
	r.steps++
	if r.steps > 64*int64(len(r.b))+1<<20 {
		return errors.New("block decodes to more values than its bytes can hold")
	}
	return nil
}

func (r *binReader) long() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if r.off >= len(r.b) {
			return 0, errShort
		}
		if shift >= 64 {
			return 0, errors.New("varint overflows 64 bits")
		}
		c := r.b[r.off]
		r.off++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (r *binReader) int() (int32, error) {
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, fmt.Errorf("int %d overflows 32 bits", n)
	}
	return int32(n), nil
}

func (r *binReader) bool() (bool, error) {
	if r.off >= len(r.b) {
		return false, errShort
	}
	c := r.b[r.off]
	r.off++
	switch c {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("boolean byte %d", c)
}

func (r *binReader) fixed(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, errShort
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b, nil
}

func (r *binReader) float() (float32, error) {
	b, err := r.fixed(4)
	if err != nil {
		return 0, err
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
}

func (r *binReader) double() (float64, error) {
	b, err := r.fixed(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}

// bytes returns a slice of the block; callers keeping it must copy.
func (r *binReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.off) {
		return nil, fmt.Errorf("length %d exceeds the %d bytes left", n, len(r.b)-r.off)
	}
	return r.fixed(int(n))
}

func (r *binReader) str() (string, error) {
	b, err := r.bytes()
	return string(b), err
}

// unionIndex reads a union branch index; it returns -1 for the null branch.
// A schema that is not a union reads nothing and returns 0.
func (r *binReader) unionIndex(s avro.Schema) (int, error) {
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return 0, nil
	}
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	ts := u.Types()
	if n < 0 || n >= int64(len(ts)) {
		return 0, fmt.Errorf("union branch %d out of range", n)
	}
	if ts[n].Type() == avro.Null {
		return -1, nil
	}
	return int(n), nil
}

// blocks reads the blocks of an array or map, calling fn per item.
func (r *binReader) blocks(fn func() error) error {
	for {
		n, err := r.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			n = -n
			if _, err := r.long(); err != nil {
				return err
			}
		}
		// Every item takes at least one byte in Datastream's schemas; a
		// larger count is corruption, and must not spin.
		if n < 0 || n > int64(len(r.b)-r.off) {
			return fmt.Errorf("%d items exceed the %d bytes left", n, len(r.b)-r.off)
		}
		r.items += n
		if r.items > int64(len(r.b))+1<<16 {
			return fmt.Errorf("more array items than the block can hold")
		}
		for range n {
			if err := fn(); err != nil {
				return err
			}
		}
	}
}

// readVarint reads a zig-zag varint from a stream (container framing).
func readVarint(r io.ByteReader) (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, errors.New("varint overflows 64 bits")
		}
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

// appendRead appends to buf what r yields, until n bytes are appended
// (err nil, as io.CopyN) or r ends (io.EOF) or fails first. The buffer
// grows geometrically as bytes arrive and never more than an eighth past
// len(buf)+n: a lying length allocates no more than twice what the input
// holds, a block of n bytes does not take the next power of two, and a
// buffer reused for the next block has room for one a little larger.
func appendRead(buf []byte, r io.Reader, n int) ([]byte, error) {
	end := len(buf) + n
	for len(buf) < end {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(len(buf)+max(len(buf), bytes.MinRead), end+n/8))
			copy(nb, buf)
			buf = nb
		}
		k, err := r.Read(buf[len(buf):min(cap(buf), end)])
		buf = buf[:len(buf)+k]
		if err != nil && len(buf) < end {
			return buf, err
		}
	}
	return buf, nil
}

// readStreamBytes reads a length-prefixed byte string of at most max bytes.
func readStreamBytes(r interface {
	io.Reader
	io.ByteReader
}, max int64) ([]byte, error) {
	n, err := readVarint(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > max {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	// Grow as the bytes arrive: a lying length must not allocate.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, n); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}
