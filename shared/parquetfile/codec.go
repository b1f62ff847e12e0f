package parquetfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// codecState holds what a pageChecker reuses from page to page to check
// compressed pages, created on the first page that needs it.
type codecState struct {
	scratch []byte // LZ4 pages and zstd frames without a content size are decoded into it
	sink    []byte // gzip and brotli streams are read through it
	gzip    *gzip.Reader
	brotli  *brotli.Reader
	zstd    *zstd.Decoder
}

// sinkBytes is the size of codecState.sink.
const sinkBytes = 32 << 10

// checkCompressed checks that src, the compressed bytes of a page, decode
// to exactly want bytes (the page header's uncompressed size), without
// allocating more than that, before parquet-go decodes them: it sizes its
// buffer by the header and then trusts the codec. Snappy declares its
// length in a preamble; LZ4 is decoded, since parquet-go's decoder retries
// a corrupt block with ever larger buffers until memory runs out; gzip and
// brotli are decoded through a small buffer, since parquet-go reads their
// stream to its end, doubling its buffer as it goes (a page of gzip
// members inflated to gigabytes); zstd frames are read for their content
// sizes (see checkZstd).
func (cs *codecState) checkCompressed(codec format.CompressionCodec, src []byte, want int64) error {
	switch codec {
	case format.Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %v", err)
		}
		if int64(n) != want {
			return fmt.Errorf("snappy data decodes to %d bytes, the header says %d", n, want)
		}
	case format.Lz4Raw:
		if len(src) == 0 {
			return nil
		}
		// A byte of an LZ4 block expands to 255 at most: a larger claim
		// is corrupt, and is rejected before sizing the buffer by it.
		if want > 255*int64(len(src))+16 {
			return fmt.Errorf("%d bytes of lz4 data cannot decode to %d", len(src), want)
		}
		// Decoding into want bytes succeeds when parquet-go's decoding into
		// alloc >= want bytes does.
		n, err := lz4.UncompressBlock(src, cs.buffer(want))
		if err != nil {
			return fmt.Errorf("lz4 data does not decode into the %d bytes the header declares: %v", want, err)
		}
		if int64(n) != want {
			return fmt.Errorf("lz4 data decodes to %d bytes, the header says %d", n, want)
		}
	case format.Gzip:
		// parquet-go's gzip codec reads with klauspost's gzip reader, which
		// goes on to the next member at the end of one, as this one does.
		var err error
		if cs.gzip == nil {
			cs.gzip, err = gzip.NewReader(bytes.NewReader(src))
		} else {
			err = cs.gzip.Reset(bytes.NewReader(src))
		}
		if err != nil {
			return fmt.Errorf("gzip: %v", err)
		}
		return cs.drain("gzip", cs.gzip, want)
	case format.Brotli:
		if cs.brotli == nil {
			cs.brotli = brotli.NewReader(bytes.NewReader(src))
		} else if err := cs.brotli.Reset(bytes.NewReader(src)); err != nil {
			return fmt.Errorf("brotli: %v", err)
		}
		return cs.drain("brotli", cs.brotli, want)
	case format.Zstd:
		return cs.checkZstd(src, want)
	}
	return nil
}

// buffer returns the scratch buffer cut to n bytes.
func (cs *codecState) buffer(n int64) []byte {
	if int64(cap(cs.scratch)) < n {
		cs.scratch = make([]byte, n)
	}
	return cs.scratch[:n]
}

// drain reads r to its end, as parquet-go does, and fails as soon as it
// has read more than want bytes: memory stays at sinkBytes whatever the
// stream inflates to.
func (cs *codecState) drain(codec string, r io.Reader, want int64) error {
	if cs.sink == nil {
		cs.sink = make([]byte, sinkBytes)
	}
	var n int64
	for {
		m, err := r.Read(cs.sink[:min(int64(len(cs.sink)), want-n+1)])
		if n += int64(m); n > want {
			return fmt.Errorf("%s data decodes to more than the %d bytes the header declares", codec, want)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %v", codec, err)
		}
	}
	if n != want {
		return fmt.Errorf("%s data decodes to %d bytes, the header says %d", codec, n, want)
	}
	return nil
}

// checkZstd checks the zstd frames of a page against want. parquet-go
// decodes them with zstd's DecodeAll, which allocates the content size a
// frame declares (16 GiB for a frame of a megabyte that said so), stops a
// frame that outgrows it, and grows its buffer without bound for a frame
// that declares none. So when every frame declares a content size, as
// parquet-go's encoder and other one-shot encoders write them, the sizes
// must add up to want and nothing is decoded. A frame without one (a
// streaming encoder's) is decoded, into at most want bytes, once its
// blocks are read for what they can hold.
func (cs *codecState) checkZstd(src []byte, want int64) error {
	fr, err := readZstdFrames(src)
	if err != nil {
		return fmt.Errorf("zstd: %v", err)
	}
	if !fr.undeclared {
		if fr.declared != uint64(want) {
			return fmt.Errorf("zstd frames declare %d bytes, the header says %d", fr.declared, want)
		}
		return nil
	}
	switch {
	case fr.declared+fr.least > uint64(want):
		return fmt.Errorf("zstd data decodes to more than the %d bytes the header declares", want)
	case fr.declared+fr.most < uint64(want):
		return fmt.Errorf("zstd data decodes to %d bytes at most, the header says %d", fr.declared+fr.most, want)
	}
	if cs.zstd == nil {
		// Like parquet-go's decoder (defaults, one goroutine-free
		// decoder), but limited to the capacity of its destination.
		if cs.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true)); err != nil {
			return fmt.Errorf("zstd: %v", err)
		}
	}
	// Running out of room fails as any corrupt block does (the decoder
	// says "output bigger than max block size").
	out, err := cs.zstd.DecodeAll(src, cs.buffer(want)[:0:want])
	if err != nil {
		return fmt.Errorf("zstd data does not decode into the %d bytes the header declares: %v", want, err)
	}
	if int64(len(out)) != want {
		return fmt.Errorf("zstd data decodes to %d bytes, the header says %d", len(out), want)
	}
	return nil
}

// zstdFrames is what the frame and block headers of zstd data say about
// its decoded size.
type zstdFrames struct {
	declared   uint64 // the sum of the content sizes frames declare
	undeclared bool   // some frame declares none
	// least and most bound what the frames without a content size decode
	// to: raw and RLE blocks state their size, a compressed block decodes
	// to at most the block size limit.
	least, most uint64
}

// zstd format constants (RFC 8878).
const (
	zstdMagic          = 0xfd2fb528
	zstdSkippableMagic = 0x184d2a50 // the low 4 bits are free
	zstdMaxBlockBytes  = 128 << 10
)

// readZstdFrames reads the frame and block headers of src (RFC 8878,
// section 3.1) the way zstd's DecoderAll does: frames follow each other to
// the end of src, skippable frames are skipped.
func readZstdFrames(src []byte) (zstdFrames, error) {
	var fr zstdFrames
	pos := 0
	take := func(n int) ([]byte, error) {
		if n < 0 || len(src)-pos < n {
			return nil, fmt.Errorf("data ends at byte %d, inside a frame", len(src))
		}
		pos += n
		return src[pos-n : pos], nil
	}
	for pos < len(src) {
		at := pos
		b, err := take(4)
		if err != nil {
			return fr, err
		}
		switch magic := binary.LittleEndian.Uint32(b); {
		case magic&^0xf == zstdSkippableMagic:
			b, err := take(4)
			if err != nil {
				return fr, err
			}
			if _, err := take(int(binary.LittleEndian.Uint32(b))); err != nil {
				return fr, err
			}
			continue
		case magic != zstdMagic:
			return fr, fmt.Errorf("no frame magic at byte %d", at)
		}
		b, err = take(1)
		if err != nil {
			return fr, err
		}
		fhd := b[0]
		if fhd&(1<<3) != 0 {
			return fr, fmt.Errorf("reserved bit set in the frame header at byte %d", at)
		}
		single := fhd&(1<<5) != 0
		var window uint64
		if !single {
			b, err := take(1)
			if err != nil {
				return fr, err
			}
			base := uint64(1) << (10 + b[0]>>3)
			window = base + base/8*uint64(b[0]&7)
		}
		if _, err := take([]int{0, 1, 2, 4}[fhd&3]); err != nil { // dictionary id
			return fr, err
		}
		fcsBytes := []int{0, 2, 4, 8}[fhd>>6]
		if fcsBytes == 0 && single {
			fcsBytes = 1
		}
		b, err = take(fcsBytes)
		if err != nil {
			return fr, err
		}
		var fcs uint64
		for i := len(b) - 1; i >= 0; i-- {
			fcs = fcs<<8 | uint64(b[i])
		}
		if fcsBytes == 2 {
			fcs += 256
		}
		if single {
			window = fcs
		}
		blockMax := min(window, zstdMaxBlockBytes)
		var least, most uint64
		for last := false; !last; {
			b, err := take(3)
			if err != nil {
				return fr, err
			}
			h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			last = h&1 != 0
			size := int(h >> 3)
			switch (h >> 1) & 3 {
			case 0: // raw
				_, err = take(size)
				least, most = least+uint64(size), most+uint64(size)
			case 1: // RLE: one byte, repeated size times
				_, err = take(1)
				least, most = least+uint64(size), most+uint64(size)
			case 2: // compressed
				_, err = take(size)
				most += blockMax
			default:
				err = fmt.Errorf("reserved block type at byte %d", pos-3)
			}
			if err != nil {
				return fr, err
			}
		}
		if fhd&(1<<2) != 0 { // content checksum
			if _, err := take(4); err != nil {
				return fr, err
			}
		}
		if fcsBytes == 0 {
			fr.undeclared = true
			fr.least, fr.most = fr.least+least, fr.most+most
			continue
		}
		// The decoder fails a frame whose blocks do not decode to its
		// content size; these cannot.
		if fcs < least || fcs > most {
			return fr, fmt.Errorf("frame at byte %d declares %d bytes, its blocks hold %d to %d", at, fcs, least, most)
		}
		fr.declared += fcs
	}
	return fr, nil
}
