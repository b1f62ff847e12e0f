package parquetfile

import (
	"encoding/binary"
	"fmt"
)

// maxThriftDepth bounds how deeply the Thrift structures of a Parquet
// footer or page index may nest. The format's own nest a few levels deep
// (footer, row group, column chunk, column metadata, statistics); only
// unknown fields, which parquet-go skips recursively, could go deeper.
const maxThriftDepth = 64

// checkThrift walks the Thrift compact-protocol struct at the start of b
// (a footer, a column index, an offset index) without decoding it, and
// checks that each list, set and map it declares has no more elements
// than there are bytes after its header, and each binary no more bytes.
// parquet-go's decoder allocates a list at its declared length before it
// reads an element: a footer of a few bytes declaring 2^31 schema elements
// made the Go runtime die with "out of memory", which no recover catches.
// Every element takes at least a byte, so after this check a list costs at
// most its element size per byte of input.
func checkThrift(b []byte) error {
	s := thriftScan{b: b}
	return s.structure(0)
}

// thriftScan reads the compact protocol
// (https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md)
// as parquet-go's decoder does, keeping nothing.
type thriftScan struct {
	b   []byte
	pos int
}

// Compact-protocol type codes.
const (
	thriftTrue   = 1
	thriftFalse  = 2
	thriftByte   = 3
	thriftI16    = 4
	thriftI32    = 5
	thriftI64    = 6
	thriftDouble = 7
	thriftBinary = 8
	thriftList   = 9
	thriftSet    = 10
	thriftMap    = 11
	thriftStruct = 12
	thriftUUID   = 13
)

func (s *thriftScan) structure(depth int) error {
	if depth > maxThriftDepth {
		return fmt.Errorf("thrift structures nested deeper than %d at byte %d", maxThriftDepth, s.pos)
	}
	for {
		h, err := s.next(1)
		if err != nil {
			return err
		}
		if h[0] == 0 { // stop
			return nil
		}
		if h[0]>>4 == 0 { // a field id too far from the last one follows
			if _, err := s.varint(); err != nil {
				return err
			}
		}
		typ := h[0] & 0x0f
		if typ == thriftTrue || typ == thriftFalse {
			continue // a bool field's value is its type
		}
		if err := s.value(typ, depth+1); err != nil {
			return err
		}
	}
}

// value skips a value of type typ: a field's, or a container element's
// (where a bool takes a byte).
func (s *thriftScan) value(typ byte, depth int) error {
	var err error
	switch typ {
	case thriftTrue, thriftFalse, thriftByte:
		_, err = s.next(1)
	case thriftI16, thriftI32, thriftI64:
		_, err = s.varint()
	case thriftDouble:
		_, err = s.next(8)
	case thriftUUID:
		_, err = s.next(16)
	case thriftBinary:
		var n uint64
		if n, err = s.varint(); err == nil {
			if n > uint64(len(s.b)-s.pos) {
				return fmt.Errorf("thrift binary of %d bytes in %d at byte %d", n, len(s.b)-s.pos, s.pos)
			}
			s.pos += int(n)
		}
	case thriftList, thriftSet:
		var h []byte
		if h, err = s.next(1); err != nil {
			return err
		}
		n, elem := uint64(h[0]>>4), h[0]&0x0f
		if n == 0x0f {
			if n, err = s.varint(); err != nil {
				return err
			}
		}
		if err := s.elements(n, 1); err != nil {
			return err
		}
		for range n {
			if err := s.value(elem, depth+1); err != nil {
				return err
			}
		}
	case thriftMap:
		var n uint64
		if n, err = s.varint(); err != nil || n == 0 {
			return err
		}
		var kv []byte
		if kv, err = s.next(1); err != nil {
			return err
		}
		if err := s.elements(n, 2); err != nil {
			return err
		}
		for range n {
			if err := s.value(kv[0]>>4, depth+1); err != nil {
				return err
			}
			if err := s.value(kv[0]&0x0f, depth+1); err != nil {
				return err
			}
		}
	case thriftStruct:
		err = s.structure(depth)
	default:
		err = fmt.Errorf("unknown thrift type %d at byte %d", typ, s.pos)
	}
	return err
}

// elements checks that n elements of at least size bytes each fit in what
// is left.
func (s *thriftScan) elements(n uint64, size int) error {
	if left := uint64(len(s.b) - s.pos); n > left/uint64(size) {
		return fmt.Errorf("thrift list of %d elements in %d bytes at byte %d", n, left, s.pos)
	}
	return nil
}

func (s *thriftScan) next(n int) ([]byte, error) {
	if len(s.b)-s.pos < n {
		return nil, fmt.Errorf("thrift data ends at byte %d, inside a value", len(s.b))
	}
	s.pos += n
	return s.b[s.pos-n : s.pos], nil
}

func (s *thriftScan) varint() (uint64, error) {
	v, n := binary.Uvarint(s.b[s.pos:])
	if n <= 0 {
		return 0, fmt.Errorf("thrift varint at byte %d is truncated or too long", s.pos)
	}
	s.pos += n
	return v, nil
}
