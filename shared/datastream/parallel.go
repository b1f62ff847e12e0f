package datastream

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Parallel decoding of JSON lines.
//
// The goroutine calling Next reads the input in chunks of whole lines and
// hands each chunk to a goroutine that decodes it with its own decoder state
// (string cache, timestamp caches); Next then returns the events chunk by
// chunk, in file order, numbering records and lines from the chunks before.
//
// A chunk is trusted only when it decodes without any error and ends between
// two values. Any failure (a bad record, a read error, a value split across
// two chunks because a pretty-printed object spans lines) hands the rest of
// the file, from the start of the failed chunk, to the sequential decoder,
// which then returns the same events and the same first error, with the same
// line and record numbers, as decoding the whole file sequentially would. A
// chunk that ends between values makes the next one start between values, so
// every trusted chunk was framed exactly as the sequential decoder frames it.

// defaultChunkBytes is the size of a chunk: small enough that two workers
// share the tail of a file evenly and that little input is held, large
// enough that the per-chunk cost vanishes.
const defaultChunkBytes = 1 << 20

// minRead is the smallest read into a chunk.
const minRead = 512

// minEventBytes is less than any Datastream event takes as a JSON line:
// its envelope alone (uuid, timestamps, names, schema key) takes more.
const minEventBytes = 128

// Bounds on what the parallel decoders (parallelJSON, parallelAvro) hold
// beyond the events they hand out. Chunks and blocks in flight are limited
// in number (maxJobs) and in bytes: a job starts only while those in
// flight hold less than maxJobs*aheadBytesPerJob of input, so that long
// records (a chunk holds whole lines, a block whole records) are read ahead
// one at a time rather than maxJobs at a time. Buffers that grew past
// reuseBytes for such a record are dropped, not kept for the next job.
const (
	aheadBytesPerJob = 2 << 20
	reuseBytes       = 4 << 20
)

// inFlight is the input held by the jobs of a window.
func inFlight[J interface{ input() []byte }](window []J) int {
	n := 0
	for _, j := range window {
		n += len(j.input())
	}
	return n
}

// reusable returns b emptied, or nil when it is too large to keep.
func reusable(b []byte) []byte {
	if cap(b) > reuseBytes {
		return nil
	}
	return b[:0]
}

// workers is the number of decoding goroutines for JSON lines.
func (d *Reader) workers() int {
	if d.opts.Workers > 0 {
		return d.opts.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// errChunkStopped ends a chunk's decoding when the Reader is closed.
var errChunkStopped = errors.New("datastream: decoding stopped")

// errLongLine marks the start of a line longer than Options.MaxRecordBytes,
// which ends the chunking: whether the line is one record too large or
// several values, the sequential decoder finds out (and says so).
var errLongLine = errors.New("datastream: line too long to decode in chunks")

// parallelJSON decodes JSON lines on several goroutines. It is owned by the
// goroutine calling Next; the chunk goroutines only touch their chunkJob
// and the decoder state they hold.
type parallelJSON struct {
	d          *Reader
	r          io.Reader // the input after carry
	carry      []byte    // input read past the last chunk boundary
	readErr    error     // the input failed (after carry); nil at io.EOF
	eof        bool      // r is exhausted (or failed)
	long       bool      // reading stopped at a line too long to chunk; the rest is in r
	chunkBytes int
	limit      int         // Options.MaxRecordBytes
	maxJobs    int         // chunks in flight: bounds the memory held
	window     []*chunkJob // chunks read and handed out, in file order
	states     chan *jsonDecoder
	free       []*chunkJob // delivered chunks, for their buffers

	cur        *chunkJob // the chunk whose events Next is returning
	baseLine   int64     // newlines before cur (or before window[0])
	baseRecord int64     // records before cur (or before window[0])

	seq *jsonDecoder // the sequential decoder, once it has taken over

	stopping atomic.Bool // Close: chunk goroutines give up
	// bytesPerEvent is the input per event of the last chunk decoded, to
	// size the next chunk's events.
	bytesPerEvent atomic.Int64
	wg            sync.WaitGroup
}

// chunkJob is one chunk of whole lines and, once done is closed, its
// events or the reason it cannot be trusted.
type chunkJob struct {
	data []byte
	buf  []byte // the allocation data lives in, reused for a later chunk
	decoded
	lines int64 // newlines in data
	err   error
	done  chan struct{}
}

// decoded is the events of a chunk or block decoded ahead (parallelJSON,
// parallelAvro) as they are handed out in file order: one by one (take),
// or the rest at once (takeRest), which gives the slice to the caller.
type decoded struct {
	events []Event
	pos    int  // events handed out
	given  bool // takeRest handed the slice over: it is not reused
}

// pending reports that events are left to hand out.
func (d *decoded) pending() bool { return d.pos < len(d.events) }

// take returns the next event. The copy left behind is overwritten when
// the slice is reused, and dropped at the end of the file.
func (d *decoded) take() Event {
	ev := d.events[d.pos]
	d.pos++
	return ev
}

// takeRest returns the events not yet handed out; the caller owns them.
func (d *decoded) takeRest() []Event {
	n := len(d.events)
	blk := d.events[d.pos:n:n]
	d.pos, d.given = n, true
	return blk
}

// reuse returns the slice to fill again, empty (a new one once it was
// handed over).
func (d *decoded) reuse() decoded {
	if d.given {
		return decoded{}
	}
	return decoded{events: d.events[:0]}
}

// newParallelJSON takes over from jd, which has read the start of r (and
// skipped a byte order mark) but consumed no value.
func newParallelJSON(d *Reader, jd *jsonDecoder, r io.Reader, workers int) *parallelJSON {
	p := &parallelJSON{
		d:          d,
		r:          r,
		carry:      append([]byte(nil), jd.fr.buf[jd.fr.pos:]...),
		eof:        jd.fr.eof || jd.fr.err != nil,
		readErr:    jd.fr.err,
		chunkBytes: d.opts.chunkBytes,
		limit:      d.recordLimit(),
		maxJobs:    2 * workers,
		states:     make(chan *jsonDecoder, workers),
		baseLine:   jd.fr.line,
	}
	if p.chunkBytes <= 0 {
		p.chunkBytes = defaultChunkBytes
	}
	for range workers {
		p.states <- &jsonDecoder{d: d, avro: jd.avro, fr: &jsonFramer{}}
	}
	return p
}

// next returns the next event in file order.
func (p *parallelJSON) next() (Event, error) {
	if err := p.ready(); err != nil {
		return Event{}, err
	}
	if p.seq != nil {
		return p.seq.next()
	}
	return p.cur.take(), nil
}

// sequential reports that the sequential decoder has taken over.
func (p *parallelJSON) sequential() bool { return p.seq != nil }

// nextBlock returns, in file order, the events of the current chunk not yet
// returned; the caller owns the slice from then on. It returns nil, nil
// once the sequential decoder has taken over: next returns the rest.
func (p *parallelJSON) nextBlock() ([]Event, error) {
	if err := p.ready(); err != nil {
		return nil, err
	}
	if p.seq != nil {
		return nil, nil
	}
	return p.cur.takeRest(), nil
}

// ready makes p.cur hold an event not yet returned, or hands over to the
// sequential decoder (p.seq set); it returns io.EOF after the last chunk.
func (p *parallelJSON) ready() error {
	for {
		if p.seq != nil {
			return nil
		}
		if p.cur != nil {
			if p.cur.pending() {
				return nil
			}
			p.baseLine += p.cur.lines
			p.baseRecord += int64(len(p.cur.events))
			p.free = append(p.free, p.cur)
			p.cur = nil
		}
		p.fill()
		if len(p.window) == 0 {
			if p.readErr != nil {
				p.fallBack()
				continue
			}
			p.free = nil // nor keep the buffers or the events' copies in them
			return io.EOF
		}
		j := p.window[0]
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
		// The events hold copies of what they need from the input.
		j.data, j.buf = nil, reusable(j.buf)
		for i := range j.events {
			ev := &j.events[i]
			ev.Meta.Record += p.baseRecord
			if ev.jsonSrc != nil {
				ev.jsonSrc.line += p.baseLine
			}
		}
		p.cur = j
	}
}

// fill reads chunks and starts their decoding until maxJobs are in flight,
// or they hold their share of input (aheadBytesPerJob each), or the input
// is exhausted.
func (p *parallelJSON) fill() {
	for len(p.window) < p.maxJobs && !p.long && (!p.eof || len(p.carry) > 0) && inFlight(p.window) < p.maxJobs*aheadBytesPerJob {
		j := p.readChunk()
		if j == nil {
			return
		}
		p.window = append(p.window, j)
		if j.err != nil {
			close(j.done) // errLongLine: the sequential decoder goes on from j
			return
		}
		p.wg.Add(1)
		go p.decodeChunk(j)
	}
}

// input is the chunk's bytes, for inFlight.
func (j *chunkJob) input() []byte { return j.data }

// readChunk reads the next chunk: at least chunkBytes (unless the input
// ends first) cut after its last newline, the rest kept in carry. It
// returns nil when no input is left. A line of more than limit bytes ends
// the chunking (p.long): the chunk returned holds what was read of it,
// errLongLine, and no more than limit bytes and one read.
func (p *parallelJSON) readChunk() *chunkJob {
	var j *chunkJob
	if n := len(p.free); n > 0 {
		j = p.free[n-1]
		p.free = p.free[:n-1]
		*j = chunkJob{buf: j.buf, decoded: j.reuse()}
	} else {
		j = &chunkJob{}
	}
	j.done = make(chan struct{})
	buf := append(j.buf[:0], p.carry...)
	p.carry = p.carry[:0]
	searched := 0 // buf[:searched] holds no newline
	for {
		if len(buf) >= p.chunkBytes || p.eof {
			if i := bytes.LastIndexByte(buf[searched:], '\n'); i >= 0 {
				cut := searched + i + 1
				p.carry = append(p.carry, buf[cut:]...)
				buf = buf[:cut]
				break
			}
			searched = len(buf)
			if p.eof {
				if p.readErr != nil {
					// The sequential decoder reports the error after the
					// values before it: leave it the partial last line.
					p.carry = append(p.carry, buf...)
					buf = buf[:0]
				}
				break
			}
			if len(buf) > p.limit {
				// buf is one line, from its start: too long to read
				// whole.
				p.long, j.err = true, errLongLine
				break
			}
		}
		// Grow geometrically, so that a line longer than a chunk is read
		// in linear time, and read a chunk at a time, so that a chunk
		// never holds more than limit bytes of a line and one read (an
		// exact make: slices.Grow may add a quarter).
		read := max(p.chunkBytes, minRead)
		if cap(buf)-len(buf) < max(p.chunkBytes/2, minRead) {
			nb := make([]byte, len(buf), len(buf)+min(max(read, len(buf)), max(p.limit+read-len(buf), read)))
			copy(nb, buf)
			buf = nb
		}
		n, err := io.ReadAtLeast(p.r, buf[len(buf):min(cap(buf), len(buf)+read)], 1)
		buf = buf[:len(buf)+n]
		if err != nil {
			p.eof = true
			if !isEnd(err) {
				p.readErr = err
			}
		}
	}
	j.buf = buf
	if len(buf) == 0 {
		p.free = append(p.free, j)
		return nil
	}
	j.data = buf
	return j
}

// decodeChunk decodes one chunk on its own goroutine, with a decoder state
// no other goroutine holds meanwhile.
func (p *parallelJSON) decodeChunk(j *chunkJob) {
	defer p.wg.Done()
	defer close(j.done)
	jd := <-p.states
	defer func() {
		jd.fr.buf = nil // do not keep the chunk alive
		p.states <- jd
	}()
	// Line and record numbers count from the chunk's start; next adds the
	// numbers of the chunks before when it returns the events.
	*jd.fr = jsonFramer{buf: j.data, eof: true, pastStart: true, limit: p.limit}
	jd.record, jd.done = 0, false
	// Size the events once rather than growing them step by step: from
	// the bytes per event of the chunks before (with a sixteenth to spare,
	// as lines vary), else by counting lines (usually one event a line).
	// The estimate is for a chunk's worth of the smallest events at the
	// most: a chunk holding a long line, or a pretty-printed value of
	// many short lines, would otherwise ask for hundreds of megabytes of
	// events it will not hold.
	size := min(len(j.data), 2*p.chunkBytes)
	var n int
	if bpe := int(p.bytesPerEvent.Load()); bpe > 0 {
		n = size/bpe + size/bpe/16 + 8
	} else {
		n = bytes.Count(j.data[:size], []byte{'\n'}) + 1
	}
	n = min(n, size/minEventBytes+8)
	if cap(j.events) < n {
		j.events = make([]Event, 0, n)
	}
	for {
		if len(j.events)%64 == 0 && (p.stopping.Load() || p.d.ctx.Err() != nil) {
			j.err = errChunkStopped
			return
		}
		// Decode into the slot the event lives in: copying a finished
		// Event in would pass every pointer of it through the write
		// barrier while the collector runs, which it mostly does here.
		j.events = append(j.events, Event{})
		err := jd.nextInto(&j.events[len(j.events)-1])
		if err != nil {
			j.events[len(j.events)-1] = Event{}
			j.events = j.events[:len(j.events)-1]
			if isEnd(err) {
				break
			}
			j.err = err
			return
		}
	}
	j.lines = jd.fr.line
	if len(j.events) > 0 {
		p.bytesPerEvent.Store(int64(max(1, len(j.data)/len(j.events))))
	}
}

// fallBack hands the rest of the input, from the start of the oldest chunk
// not yet returned, to the sequential decoder. The chunks are handed over,
// not copied: the first becomes the decoder's buffer, so that a line too
// long to chunk (errLongLine) is held once, not twice.
func (p *parallelJSON) fallBack() {
	p.stop()
	var first []byte
	var rest []io.Reader
	for _, b := range p.pieces() {
		if first == nil {
			first = b
		} else {
			rest = append(rest, bytes.NewReader(b))
		}
	}
	switch {
	case p.readErr != nil:
		rest = append(rest, errReader{p.readErr})
	case !p.eof:
		rest = append(rest, p.r)
	}
	jd := &jsonDecoder{d: p.d, avro: p.d.json.avro, record: p.baseRecord,
		fr: &jsonFramer{buf: first, r: io.MultiReader(rest...), line: p.baseLine, pastStart: true, limit: p.limit}}
	p.window, p.free, p.carry = nil, nil, nil
	p.seq = jd
	p.d.json = jd
}

// pieces is the input read and not yet returned, in file order: the chunks
// in flight, then carry (none of them empty).
func (p *parallelJSON) pieces() [][]byte {
	var out [][]byte
	for _, j := range p.window {
		out = append(out, j.data)
	}
	if len(p.carry) > 0 {
		out = append(out, p.carry)
	}
	return out
}

// stop makes the chunk goroutines give up and waits for them.
func (p *parallelJSON) stop() {
	p.stopping.Store(true)
	p.wg.Wait()
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
