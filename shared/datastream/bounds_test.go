package datastream

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
)

// Tests that decoding holds bounded memory whatever the size of a file or
// of a record in it (issue 12: staging a 1 GB file within 512 MiB).

// heapPeak samples the heap in use (MemStats.HeapInuse: live objects,
// garbage not yet swept, and the free space of spans in use) every
// millisecond until the returned function is called, which returns the
// most it saw.
func heapPeak(t *testing.T) func() uint64 {
	t.Helper()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	read := func() uint64 {
		metrics.Read(samples)
		return samples[0].Value.Uint64() + samples[1].Value.Uint64()
	}
	var peak atomic.Uint64
	peak.Store(read())
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if h := read(); h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	stopped := false
	finish := func() uint64 {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
		return max(peak.Load(), read())
	}
	t.Cleanup(func() { finish() })
	return finish
}

// heapNow is the heap in use after a collection: the baseline heapPeak's
// high-water is measured against.
func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// gzipped returns the gzip stream of src (at BestSpeed), compressed on
// the fly on another goroutine as the stream is read, which the test's
// end stops.
func gzipped(t *testing.T, src io.Reader) io.Reader {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		zw, err := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		if err == nil {
			if _, err = io.Copy(zw, src); err == nil {
				err = zw.Close()
			}
		}
		pw.CloseWithError(err)
	}()
	t.Cleanup(func() {
		pr.CloseWithError(errors.New("test over"))
		<-done
	})
	return pr
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// filler yields n bytes of s repeated, without holding them.
func filler(s string, n int) io.Reader {
	unit := strings.Repeat(s, max(1, (64<<10)/len(s)))
	return &repeatReader{line: []byte(unit), n: max(1, n/len(unit))}
}

func TestDecodingAFileInPartsHoldsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 600 MB of generated files")
	}
	const (
		target = 200 << 20 // bytes of each generated file
		part   = 10000     // events a part
		limit  = 150 << 20 // heap in use, at the most
	)
	jsonl, recs := shopEvents(t, 1<<20)
	lines := bytes.Count(jsonl, []byte{'\n'})
	jsonCycles := target / len(jsonl)
	// Avro files as Datastream writes them (blocks of about 64 kB); the
	// deflate file as many events as the JSON lines, as decoding 200 MB
	// of it would take far longer.
	avroFile := func(codec ocf.CodecName, cycles func(body []byte) int) (func(*testing.T) io.Reader, int) {
		header, body := splitOCF(t, writeOCF(t, benchSchema, codec, 200, recs...))
		n := cycles(body)
		return func(*testing.T) io.Reader {
			return io.MultiReader(bytes.NewReader(header), &repeatReader{line: body, n: n})
		}, len(recs) * n
	}
	nullAvro, nullEvents := avroFile(ocf.Null, func(body []byte) int { return target / len(body) })
	deflateAvro, deflateEvents := avroFile(ocf.Deflate, func([]byte) int { return jsonCycles })
	for _, tt := range []struct {
		name   string
		file   func(t *testing.T) io.Reader
		events int
	}{
		{"JSON lines", func(*testing.T) io.Reader { return &repeatReader{line: jsonl, n: jsonCycles} }, lines * jsonCycles},
		{"gzip JSON lines", func(t *testing.T) io.Reader { return gzipped(t, &repeatReader{line: jsonl, n: jsonCycles}) }, lines * jsonCycles},
		{"Avro", nullAvro, nullEvents},
		{"deflate Avro", deflateAvro, deflateEvents},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := heapNow()
			peak := heapPeak(t)
			d, err := Decode(context.Background(), tt.file(t), "big", Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			got, parts := 0, 0
			for more := true; more; {
				var evs Events // dropped after each part, as staging does
				if more, err = d.AppendUpTo(&evs, part); err != nil {
					t.Fatalf("after %d events: %v", got, err)
				}
				got += evs.Len()
				parts++
			}
			high := peak()
			t.Logf("%d events in %d parts: heap in use %d MiB before, %d MiB at the most", got, parts, base>>20, high>>20)
			if got != tt.events {
				t.Fatalf("decoded %d events, want %d", got, tt.events)
			}
			if high > limit {
				t.Errorf("the heap in use reached %d MiB decoding a %d MiB file in parts of %d events, want at most %d MiB", high>>20, target>>20, part, limit>>20)
			}
		})
	}
}

// avroBlock frames records as one block of an object container file.
func avroBlock(sync []byte, data []byte, count int) []byte {
	return append(enc(nil).long(int64(count)).raw(data), sync...)
}

func TestARecordLargerThanMaxRecordBytesFailsWithinBoundedMemory(t *testing.T) {
	const (
		limit = 1 << 20   // MaxRecordBytes
		huge  = 300 << 20 // bytes of the record that never ends
		slack = 48 << 20  // heap that failing may take, at the most
	)
	head := jsonLines(pgCDC, oracleInsert, pgCDC)
	reason := fmt.Sprintf("record of more than %d bytes exceeds max_record_bytes (%d)", limit, limit)

	// Avro: records 1 to 3 in block 1, 4 to 6 in block 2, record 5 (the
	// second of block 2) larger than the limit.
	avroFile := func(codec ocf.CodecName) []byte {
		var recs [][]byte
		for i := range 9 {
			if i == 4 {
				h, p := shopRecordNoted(i, strings.Repeat("n", limit+1))
				recs = append(recs, append(h, p...))
			} else {
				recs = append(recs, shopRecord(i))
			}
		}
		return writeOCF(t, benchSchema, codec, 3, recs...)
	}
	avroOf := func(data []byte) func(*testing.T) io.Reader {
		return func(*testing.T) io.Reader { return bytes.NewReader(data) }
	}
	// A block header claiming a block far beyond the block bound, and the
	// bytes to back it.
	// shopBlocks is a file of one block of three records, split after its
	// header, and its sync marker.
	shopBlocks := func(codec ocf.CodecName) (header, body, sync []byte) {
		file := shopFile(t, codec, 3, 3, -1)
		header, body = splitOCF(t, file)
		return header, body, syncMarker(t, file)
	}
	header, body, sync := shopBlocks(ocf.Null)
	hugeHead, hugeTail := slices.Concat(header, body, enc(nil).long(1).long(huge)), sync
	hugeBlock := func(*testing.T) io.Reader {
		return io.MultiReader(bytes.NewReader(hugeHead), filler("x", huge), bytes.NewReader(hugeTail))
	}
	// A deflate block inflating to far more than MaxBlockBytes.
	var bomb bytes.Buffer
	fw, _ := flate.NewWriter(&bomb, flate.BestCompression)
	io.Copy(fw, filler("\x00", 64<<20))
	fw.Close()
	header, body, sync = shopBlocks(ocf.Deflate)
	bombFile := slices.Concat(header, body, avroBlock(sync, bomb.Bytes(), 1))
	// A snappy block declaring an inflated length beyond MaxBlockBytes.
	header, body, sync = shopBlocks(ocf.Snappy)
	snappyFile := slices.Concat(header, body, avroBlock(sync, append(binary.AppendUvarint(nil, 1<<40), 0, 0, 0, 0, 0), 1))

	for _, tt := range []struct {
		name                  string
		file                  func(t *testing.T) io.Reader
		opts                  Options
		line, block, record   int64
		kind                  error
		reason                string
		readAtMost, heapSlack int64 // 0: not checked
	}{
		{"a JSON line of 300 MB after three lines", func(*testing.T) io.Reader {
			return io.MultiReader(strings.NewReader(head+`{"uuid":"`), filler("x", huge), strings.NewReader(`"}`+"\n"+head))
		}, Options{}, 4, 0, 4, ErrBadRecord, reason, 8 << 20, slack},
		{"a file of one line without end", func(*testing.T) io.Reader {
			return io.MultiReader(strings.NewReader(`{"uuid":"`), filler("x", huge))
		}, Options{}, 1, 0, 1, ErrBadRecord, reason, 8 << 20, slack},
		{"a JSON value of 300 MB over many lines", func(*testing.T) io.Reader {
			return io.MultiReader(strings.NewReader(head+"\n{\n"), filler(`  "key": "`+strings.Repeat("v", 40)+`",`+"\n", huge))
		}, Options{}, 5, 0, 4, ErrBadRecord, reason, 8 << 20, slack},
		{"a JSON value of more members than any event", func(*testing.T) io.Reader {
			return io.MultiReader(strings.NewReader(head+`{"payload":{`), filler(`"k":1,`, 8*maxMembers), strings.NewReader(`"k":1}}`+"\n"))
		}, Options{}, 4, 0, 4, ErrBadRecord, errTooManyMembers.Error(), 0, slack},
		{"a JSON value just over the limit, complete, at the end without a newline", func(*testing.T) io.Reader {
			return strings.NewReader(head + `{"uuid":"` + strings.Repeat("x", limit-10) + `"}`)
		}, Options{}, 4, 0, 4, ErrBadRecord, reason, 0, 0},
		{"an Avro record over the limit", avroOf(avroFile(ocf.Null)), Options{}, 0, 2, 5, ErrBadRecord, reason, 0, 0},
		{"a deflate Avro record over the limit", avroOf(avroFile(ocf.Deflate)), Options{}, 0, 2, 5, ErrBadRecord, reason, 0, 0},
		{"a snappy Avro record over the limit", avroOf(avroFile(ocf.Snappy)), Options{}, 0, 2, 5, ErrBadRecord, reason, 0, 0},
		{"an Avro block of 300 MB", hugeBlock, Options{}, 0, 2, 0, ErrBadFile,
			fmt.Sprintf("block of %d bytes exceeds max_block_bytes (%d)", huge, DefaultMaxBlockBytes), 8 << 20, slack},
		{"a deflate Avro block inflating past an explicit MaxBlockBytes", avroOf(bombFile), Options{MaxBlockBytes: 4 << 20}, 0, 2, 0, ErrBadFile,
			fmt.Sprintf("block inflates to more than max_block_bytes (%d)", 4<<20), 0, slack},
		{"a snappy Avro block declaring more than MaxBlockBytes", avroOf(snappyFile), Options{}, 0, 2, 0, ErrBadFile,
			fmt.Sprintf("block inflates to more than max_block_bytes (%d)", DefaultMaxBlockBytes), 0, 0},
	} {
		json := tt.block == 0
		for _, v := range []struct {
			name string
			opts Options
			gzip bool
		}{
			{"sequentially", sequentialOpts(tt.opts), false},
			{"in parallel", parallelOpts(tt.opts, 2, 0), false},
			{"from gzip sequentially", sequentialOpts(tt.opts), true},
			{"from gzip in parallel", parallelOpts(tt.opts, 2, 0), true},
		} {
			if v.gzip && !json {
				continue
			}
			t.Run(tt.name+" fails "+v.name, func(t *testing.T) {
				v.opts.MaxRecordBytes = limit
				src := &countingReader{r: tt.file(t)}
				var r io.Reader = src
				if v.gzip {
					r = gzipped(t, src)
				}
				base := heapNow()
				peak := heapPeak(t)
				res := decodeWith(t, r, v.opts)
				high := peak()
				var re *RecordError
				if !errors.As(res.err, &re) {
					t.Fatalf("err = %v, want a *RecordError", res.err)
				}
				if !errors.Is(res.err, tt.kind) || re.File != "f.jsonl" || re.Line != tt.line || re.Block != tt.block || re.Record != tt.record || re.Reason != tt.reason {
					t.Fatalf("err = %v (line %d, block %d, record %d), want %v naming f.jsonl, line %d, block %d, record %d: %s",
						res.err, re.Line, re.Block, re.Record, tt.kind, tt.line, tt.block, tt.record, tt.reason)
				}
				if want := tt.record - 1; tt.record > 0 && int64(len(res.events)) != want {
					t.Errorf("decoded %d events before the error, want %d", len(res.events), want)
				}
				if n := src.n.Load(); tt.readAtMost > 0 && n > tt.readAtMost {
					t.Errorf("read %d MiB of the file before failing, want at most %d MiB", n>>20, tt.readAtMost>>20)
				}
				if tt.heapSlack > 0 && high > base+uint64(tt.heapSlack) {
					t.Errorf("the heap in use grew from %d MiB to %d MiB, want at most %d MiB more", base>>20, high>>20, tt.heapSlack>>20)
				}
			})
		}
	}
}

func TestMaxBlockBytesFollowsMaxRecordBytes(t *testing.T) {
	data := shopFile(t, ocf.Null, 3, 3, -1)
	for _, tt := range []struct {
		name              string
		opts              Options
		maxRecord, maxBlk int64
	}{
		{"by default", Options{}, DefaultMaxRecordBytes, max(DefaultMaxBlockBytes, DefaultMaxRecordBytes)},
		{"with a smaller MaxRecordBytes", Options{MaxRecordBytes: 1 << 20}, 1 << 20, DefaultMaxBlockBytes},
		{"with a larger MaxRecordBytes", Options{MaxRecordBytes: 100 << 20}, 100 << 20, 100 << 20},
		{"with an explicit MaxBlockBytes", Options{MaxRecordBytes: 100 << 20, MaxBlockBytes: 1 << 20}, 100 << 20, 1 << 20},
		{"with limits beyond any memory", Options{MaxRecordBytes: 1<<63 - 1, MaxBlockBytes: 1<<63 - 1}, maxLimit, maxLimit},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode(context.Background(), bytes.NewReader(data), "f.avro", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if d.opts.MaxRecordBytes != tt.maxRecord || d.opts.MaxBlockBytes != tt.maxBlk {
				t.Errorf("MaxRecordBytes %d, MaxBlockBytes %d; want %d and %d", d.opts.MaxRecordBytes, d.opts.MaxBlockBytes, tt.maxRecord, tt.maxBlk)
			}
			if err := d.AppendTo(&Events{}); err != nil {
				t.Errorf("decode: %v", err)
			}
		})
	}
}

func TestBlankLinesWithoutEndDecodeToNothingWithinBoundedMemory(t *testing.T) {
	const blanks = 100 << 20
	for _, opts := range []Options{sequentialOpts(Options{}), parallelOpts(Options{}, 2, 0)} {
		t.Run(fmt.Sprintf("%d workers", opts.Workers), func(t *testing.T) {
			base := heapNow()
			peak := heapPeak(t)
			res := decodeWith(t, io.MultiReader(strings.NewReader(jsonLines(pgCDC)), filler(" \t", blanks), strings.NewReader(jsonLines(pgCDC))), Options{MaxRecordBytes: 1 << 20, Workers: opts.Workers})
			high := peak()
			if res.err != nil || len(res.events) != 2 {
				t.Fatalf("decoded %d events, err %v; want 2 and no error", len(res.events), res.err)
			}
			if high > base+32<<20 {
				t.Errorf("the heap in use grew from %d MiB to %d MiB", base>>20, high>>20)
			}
		})
	}
}

func TestMaxRecordBytesBoundsEachRecordNotEachLine(t *testing.T) {
	line := strings.Replace(pgCDC, `"note":"x"`, `"note":"`+strings.Repeat("x", 2000)+`"`, 1)
	size := int64(len(line))
	avroRecs := [][]byte{shopRecord(1), shopRecord(2)}
	h, p := shopRecordNoted(3, strings.Repeat("n", 2000))
	big := append(h, p...)
	avroRecs = append(avroRecs, big, shopRecord(4), shopRecord(5))
	avroFile := writeOCF(t, benchSchema, ocf.Null, 2, avroRecs...)
	for _, tt := range []struct {
		name   string
		data   string
		limit  int64
		events int
		record int64 // of the error; 0: none
	}{
		{"a JSON line of exactly max_record_bytes decodes", jsonLines(pgCDC, line, pgCDC), size, 3, 0},
		{"a JSON line one byte longer fails", jsonLines(pgCDC, line, pgCDC), size - 1, 1, 2},
		{"a line of records each within max_record_bytes decodes", jsonLines(pgCDC, strings.Repeat(line+" ", 20), pgCDC), size, 22, 0},
		{"blanks around a record do not count", jsonLines(pgCDC, "   "+line+"   ", pgCDC), size, 3, 0},
		{"an Avro record of exactly max_record_bytes decodes", string(avroFile), int64(len(big)), 5, 0},
		{"an Avro record one byte longer fails", string(avroFile), int64(len(big)) - 1, 2, 3},
	} {
		for _, opts := range []Options{sequentialOpts(Options{}), parallelOpts(Options{}, 2, 64)} {
			t.Run(fmt.Sprintf("%s, %d workers", tt.name, opts.Workers), func(t *testing.T) {
				opts.MaxRecordBytes = tt.limit
				wantEnding(t, decodeWith(t, strings.NewReader(tt.data), opts), tt.events, tt.record, "exceeds max_record_bytes")
			})
		}
	}
}

func TestParallelDecodersReadAheadABoundedNumberOfBytes(t *testing.T) {
	const n, note = 24, 4 << 20 // records of 4 MiB: more than aheadBytesPerJob
	h, p := shopRecordNoted(1, strings.Repeat("n", note))
	header, block := splitOCF(t, writeOCF(t, benchSchema, ocf.Null, 1, append(h, p...)))
	line := strings.Replace(pgCDC, `"note":"x"`, `"note":"`+strings.Repeat("x", note)+`"`, 1) + "\n"
	for _, tt := range []struct {
		name     string
		file     io.Reader
		inFlight func(d *Reader) (jobs, bytes int)
	}{
		{"JSON lines", &repeatReader{line: []byte(line), n: n}, func(d *Reader) (int, int) {
			p := d.par.(*parallelJSON)
			return len(p.window), inFlight(p.window)
		}},
		{"Avro", io.MultiReader(bytes.NewReader(header), &repeatReader{line: block, n: n}), func(d *Reader) (int, int) {
			p := d.par.(*parallelAvro)
			return len(p.window), inFlight(p.window)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decode(context.Background(), tt.file, "big", Options{Workers: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			mostJobs, mostBytes := 0, 0
			count, _ := drainMeasuring(t, d, func() int {
				jobs, b := tt.inFlight(d)
				mostJobs, mostBytes = max(mostJobs, jobs), max(mostBytes, b)
				return 0
			})
			if count != n {
				t.Fatalf("decoded %d events, want %d", count, n)
			}
			// Jobs start while those in flight hold less than their share:
			// the last one started may take a whole record more.
			budget := 8 * aheadBytesPerJob
			if limit := budget + 2*note; mostBytes > limit {
				t.Errorf("%d jobs held %d MiB of input, want at most %d MiB", mostJobs, mostBytes>>20, limit>>20)
			}
			if mostJobs < 2 {
				t.Errorf("at most %d job in flight: records of %d MiB are not decoded in parallel", mostJobs, note>>20)
			}
		})
	}
}
