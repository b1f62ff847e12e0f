package datastream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Parallel decoding of Avro object container files.
//
// After the header, the blocks of a container file are independent: each
// is a record count, a byte size, the (compressed) records and the sync
// marker. The goroutine calling Next reads the blocks' bytes (the framing
// only, which is cheap) and hands each block to a goroutine that
// decompresses and decodes it with its own decoder state; Next then returns
// the events block by block, in file order. Record numbers need no fix-up:
// the counts of the blocks before a block are known when it is read. A file
// of one block is left to the sequential decoder: another goroutine would
// only add its decoder state.
//
// A block is trusted only when it was framed correctly (counts, size, sync
// marker) and all its records decode without any error, leaving no byte of
// the block unread. Any failure hands the rest of the file, from the first
// byte of the failed block (kept, as are the bytes of every block not yet
// returned), to the sequential decoder, which then returns the same events
// and the same first error, with the same block and record numbers, as
// decoding the whole file sequentially would.

// maxEventsPrealloc bounds the events a block's slice is sized for before
// its records decode: the count in a block header is not trusted.
const maxEventsPrealloc = 4096

// parallelAvro decodes the blocks of an Avro file on several goroutines.
// It is owned by the goroutine calling Next; block goroutines only touch
// their avroJob and the decoder state they hold.
type parallelAvro struct {
	d        *Reader
	header   *avroDecoder // the decoder that read the header: the template
	br       *bufio.Reader
	readErr  error // reading the input failed (not io.EOF)
	eof      bool  // no block is left to frame (or framing failed)
	single   bool  // the file has one block: decode it sequentially
	blocks   int64 // blocks framed
	records  int64 // records the framed blocks claim
	maxJobs  int   // blocks in flight: bounds the memory held
	window   []*avroJob
	states   chan *avroDecoder
	free     []*avroJob
	cur      *avroJob     // the block whose events Next is returning
	seq      *avroDecoder // the sequential decoder, once it has taken over
	stopping atomic.Bool  // Close or fall-back: block goroutines give up
	wg       sync.WaitGroup
}

// avroJob is one block and, once done is closed, its events or the reason
// they cannot be trusted.
type avroJob struct {
	block       int64 // the block's number, counting from 1 as errors do
	firstRecord int64 // records in the blocks before
	count       int64
	raw         []byte // the block's bytes as read, framing included
	data        []byte // the records, within raw
	framed      bool   // false: framing failed; the sequential decoder takes over here
	decoded
	err  error
	done chan struct{}
}

// newParallelAvro takes over from ad, which has read the header.
func newParallelAvro(ad *avroDecoder, workers int) *parallelAvro {
	p := &parallelAvro{
		d:       ad.d,
		header:  ad,
		br:      ad.br,
		maxJobs: 2 * workers,
		states:  make(chan *avroDecoder, workers),
	}
	for range workers {
		p.states <- ad.clone()
	}
	return p
}

// clone returns a decoder of the same file and schema with decoder state of
// its own and no input.
func (ad *avroDecoder) clone() *avroDecoder {
	c := &avroDecoder{d: ad.d, sync: ad.sync, codec: ad.codec, fields: ad.fields,
		payload: ad.payload, schema: ad.schema, mysql: ad.mysql}
	if ad.vals.slots != nil {
		c.vals.slots = make([]metaSlot, len(ad.vals.slots))
		for i, sl := range ad.vals.slots {
			c.vals.slots[i] = metaSlot{name: sl.name, kind: sl.kind, nullable: sl.nullable, schema: sl.schema}
		}
	}
	return c
}

// next returns the next event in file order.
func (p *parallelAvro) next() (Event, error) {
	if err := p.ready(); err != nil {
		return Event{}, err
	}
	if p.seq != nil {
		return p.seq.next()
	}
	return p.cur.take(), nil
}

// nextBlock returns, in file order, the events of the current block not
// yet returned; the caller owns the slice from then on. It returns nil, nil
// once the sequential decoder has taken over: next returns the rest.
func (p *parallelAvro) nextBlock() ([]Event, error) {
	if err := p.ready(); err != nil {
		return nil, err
	}
	if p.seq != nil {
		return nil, nil
	}
	return p.cur.takeRest(), nil
}

// ready makes p.cur hold an event not yet returned, or hands over to the
// sequential decoder (p.seq set); it returns io.EOF after the last block.
func (p *parallelAvro) ready() error {
	for {
		if p.seq != nil {
			return nil
		}
		if p.cur != nil {
			if p.cur.pending() {
				return nil
			}
			p.free = append(p.free, p.cur)
			p.cur = nil
		}
		p.fill()
		if len(p.window) == 0 {
			p.free = nil // the events' copies in them are not needed
			return io.EOF
		}
		j := p.window[0]
		if !j.framed || p.single {
			p.fallBack()
			continue
		}
		select {
		case <-j.done:
		case <-p.d.ctx.Done():
			return p.d.ctx.Err()
		}
		if j.err != nil {
			p.fallBack()
			continue
		}
		p.window = p.window[1:]
		// The events hold copies of what they need from the block.
		j.raw, j.data = reusable(j.raw), nil
		p.cur = j
	}
}

// fill frames blocks and starts their decoding until maxJobs are in
// flight, or they hold their share of input (aheadBytesPerJob each), or no
// block is left.
func (p *parallelAvro) fill() {
	for len(p.window) < p.maxJobs && !p.eof && inFlight(p.window) < p.maxJobs*aheadBytesPerJob {
		j := p.frame()
		if j == nil {
			return
		}
		p.window = append(p.window, j)
		if !j.framed {
			return
		}
		if j.block == 1 {
			if _, err := p.br.Peek(1); isEnd(err) {
				// A file of one block gains nothing from another
				// goroutine: the sequential decoder takes it, without
				// the decoder states of the block goroutines.
				p.eof, p.single = true, true
				return
			}
		}
		p.wg.Add(1)
		go p.decode(j)
	}
}

// frame reads the next block's bytes, making the checks readBlock makes
// before it decompresses. It returns nil at the end of the input, and a
// job that is not framed (and stops framing) when the block is bad: the
// sequential decoder reports why.
func (p *parallelAvro) frame() *avroJob {
	if _, err := p.br.Peek(1); isEnd(err) {
		p.eof = true
		return nil
	}
	var j *avroJob
	if n := len(p.free); n > 0 {
		j = p.free[n-1]
		p.free = p.free[:n-1]
		*j = avroJob{raw: j.raw, decoded: j.reuse()}
	} else {
		j = &avroJob{}
	}
	p.blocks++
	j.block, j.firstRecord = p.blocks, p.records
	count, err := p.varint(j)
	if err != nil {
		return j
	}
	size, err := p.varint(j)
	if err != nil {
		return j
	}
	if p.header.checkBlockHeader(count, size) != nil {
		p.eof = true
		return j
	}
	// As readBlock does, grow as the bytes arrive: a lying size must not
	// allocate more than the file holds.
	start := len(j.raw)
	j.raw, err = appendRead(j.raw, p.br, int(size)+16)
	if err != nil {
		p.failed(err)
		return j
	}
	if !bytes.Equal(j.raw[len(j.raw)-16:], p.header.sync[:]) {
		p.eof = true
		return j
	}
	j.data = j.raw[start : len(j.raw)-16]
	j.count = count
	j.framed = true
	j.done = make(chan struct{})
	p.records += count
	return j
}

// varint reads a framing varint, keeping its bytes in j.raw.
func (p *parallelAvro) varint(j *avroJob) (int64, error) {
	n, err := readVarint(teeByteReader{p.br, &j.raw})
	if err != nil {
		p.failed(err)
	}
	return n, err
}

// failed records that reading the input failed: no more blocks are framed,
// and the sequential decoder meets the same error where this read did.
func (p *parallelAvro) failed(err error) {
	p.eof = true
	// Only a plain io.EOF is the end of the input; any other error (even
	// one wrapping io.EOF) is what the replayed input must fail with.
	if err != io.EOF {
		p.readErr = err
	}
}

// input is the block's bytes, for inFlight.
func (j *avroJob) input() []byte { return j.raw }

// teeByteReader reads bytes from br, appending them to *raw.
type teeByteReader struct {
	br  *bufio.Reader
	raw *[]byte
}

func (t teeByteReader) ReadByte() (byte, error) {
	c, err := t.br.ReadByte()
	if err == nil {
		*t.raw = append(*t.raw, c)
	}
	return c, err
}

// decode decodes one block on its own goroutine, with a decoder state no
// other goroutine holds meanwhile.
func (p *parallelAvro) decode(j *avroJob) {
	defer p.wg.Done()
	defer close(j.done)
	ad := <-p.states
	defer func() {
		ad.buf, ad.bin = nil, binReader{} // do not keep the block alive
		ad.inflated = reusable(ad.inflated)
		p.states <- ad
	}()
	ad.block, ad.record = j.block, j.firstRecord
	if err := ad.loadBlock(j.count, j.data); err != nil {
		j.err = err
		return
	}
	// A lying count must not allocate much more than the block's bytes.
	if n := int(min(j.count, int64(len(ad.buf.b))/16+1, maxEventsPrealloc)); cap(j.events) < n {
		j.events = make([]Event, 0, n)
	}
	for ad.remaining > 0 {
		if len(j.events)%64 == 0 && (p.stopping.Load() || p.d.ctx.Err() != nil) {
			j.err = errChunkStopped
			return
		}
		ad.remaining--
		ad.record++
		// Decode into the slot the event lives in (see decodeChunk).
		j.events = append(j.events, Event{})
		if err := ad.decodeInto(&j.events[len(j.events)-1]); err != nil {
			j.err = err
			return
		}
	}
	if ad.buf.off != len(ad.buf.b) {
		j.err = errors.New("bytes left after the block's records")
	}
}

// fallBack hands the rest of the input, from the first byte of the oldest
// block not yet returned, to the sequential decoder.
func (p *parallelAvro) fallBack() {
	p.stop()
	first := p.window[0]
	// The blocks are read again from their buffers, not from one copy of
	// them all: each is dropped once read, so a large block is held twice
	// at the most (here and in the decoder's block buffer), not three times.
	var rest []io.Reader
	for _, j := range p.window {
		rest = append(rest, bytes.NewReader(j.raw))
	}
	switch {
	case p.readErr != nil:
		rest = append(rest, errReader{p.readErr})
	case !p.eof:
		rest = append(rest, p.br)
	}
	seq := p.header.clone()
	// What is left of the input is buffered already: a small buffer is
	// enough to frame the blocks.
	seq.br = bufio.NewReaderSize(io.MultiReader(rest...), 16<<10)
	// readBlock numbers the failed block again.
	seq.block, seq.record = first.block-1, first.firstRecord
	p.window, p.free, p.cur = nil, nil, nil
	p.seq = seq
}

// stop makes the block goroutines give up and waits for them.
func (p *parallelAvro) stop() {
	p.stopping.Store(true)
	p.wg.Wait()
}

// sequential reports that the sequential decoder has taken over.
func (p *parallelAvro) sequential() bool { return p.seq != nil }
