package datastream

import (
	"iter"
	"sort"

	"github.com/dsdelta/dsdelta/shared/value"
)

// maxEventsBlock is the most events Events puts in a block it allocates:
// about half a MiB of Event structs.
const maxEventsBlock = 1024

// Events is the events of a file (or a batch) in order, held in blocks
// rather than one slice. Keeping a file's events in one growing slice
// copies each event about four times as the slice grows by a quarter at a
// time, and leaves every smaller copy to the collector; that was two fifths
// of the time of decoding and keeping a 50 MB file. Here an appended event
// is copied once, and Reader.AppendTo hands over the blocks the parallel
// JSON decoder filled without copying them at all. The zero value is empty
// and ready to use.
type Events struct {
	blocks [][]Event
	ends   []int // ends[k]: events in blocks[:k+1]
}

// Append adds ev after the events already held.
func (e *Events) Append(ev Event) {
	last := len(e.blocks) - 1
	if last < 0 || len(e.blocks[last]) == cap(e.blocks[last]) {
		// Blocks double up to maxEventsBlock, so a file of a few events
		// allocates little and no block is ever copied.
		e.blocks = append(e.blocks, make([]Event, 0, min(maxEventsBlock, max(16, e.Len()))))
		e.ends = append(e.ends, e.Len())
		last++
	}
	e.blocks[last] = append(e.blocks[last], ev)
	e.ends[last]++
}

// adopt adds the events of blk, which Events owns from then on; events
// appended later go to a new block, never into blk's spare capacity.
func (e *Events) adopt(blk []Event) {
	if len(blk) == 0 {
		return
	}
	e.blocks = append(e.blocks, blk[:len(blk):len(blk)])
	e.ends = append(e.ends, e.Len()+len(blk))
}

// Len is the number of events held.
func (e *Events) Len() int {
	if len(e.ends) == 0 {
		return 0
	}
	return e.ends[len(e.ends)-1]
}

// At returns the i-th event (0-based), which the caller may change in
// place. It panics when i is out of range, as indexing a slice does.
func (e *Events) At(i int) *Event {
	k := sort.SearchInts(e.ends, i+1)
	if k == len(e.blocks) || i < 0 {
		panic("datastream: Events index out of range")
	}
	start := 0
	if k > 0 {
		start = e.ends[k-1]
	}
	return &e.blocks[k][i-start]
}

// All yields every event in order with its index; the events may be
// changed in place.
func (e *Events) All() iter.Seq2[int, *Event] {
	return func(yield func(int, *Event) bool) {
		i := 0
		for _, b := range e.blocks {
			for j := range b {
				if !yield(i, &b[j]) {
					return
				}
				i++
			}
		}
	}
}

// UnifyJSON is the package's UnifyJSON over the events held.
func (e *Events) UnifyJSON(known value.StructType) (value.StructType, error) {
	return unifyJSON(func(yield func(*Event) bool) {
		for _, ev := range e.All() {
			if !yield(ev) {
				return
			}
		}
	}, known)
}

// AppendTo decodes the remaining events into events, in file order. It
// returns nil after the last event, or the first error (as Next returns
// it) with every event before it appended. It is Next in a loop, but the
// events decoded in parallel (JSON lines, Avro blocks) are handed over in
// the blocks the goroutines filled instead of being copied out one by one.
func (d *Reader) AppendTo(events *Events) error {
	_, err := d.AppendUpTo(events, 0)
	return err
}

// AppendUpTo is AppendTo that stops once events holds n events (n <= 0:
// no bound), so a caller can handle a file of any size in parts of bounded
// memory. A block decoded in parallel that reaches past n is handed over
// in part; the rest comes first in the next call. more reports that the
// file may hold further events; it is false after the last event and on
// an error.
func (d *Reader) AppendUpTo(events *Events, n int) (more bool, err error) {
	for n <= 0 || events.Len() < n {
		if len(d.rest) > 0 {
			d.rest = d.handOver(events, d.rest, n)
			continue
		}
		if p := d.par; p != nil && !p.sequential() && d.err == nil {
			if err := d.ctx.Err(); err != nil {
				d.err = err
				return false, err
			}
			blk, err := p.nextBlock()
			switch {
			case isEnd(err):
				d.err = err
				return false, nil
			case err != nil:
				d.err = err
				return false, err
			case blk != nil:
				d.rest = d.handOver(events, blk, n)
				continue
			}
			// The sequential decoder has taken over: Next returns the rest.
		}
		ev, err := d.Next()
		if isEnd(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		events.Append(ev)
	}
	return true, nil
}

// handOver adopts blk into events up to n events in all (n <= 0: all of
// it) and returns what is left of blk.
func (d *Reader) handOver(events *Events, blk []Event, n int) []Event {
	k := len(blk)
	if n > 0 {
		k = min(k, n-events.Len())
	}
	events.adopt(blk[:k:k])
	if k == len(blk) {
		return nil
	}
	return blk[k:]
}
