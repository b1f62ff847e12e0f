package datastream

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
)

// decodeResult is everything a decode returns: the events and the error
// that ended it.
type decodeResult struct {
	events []Event
	err    error
}

func decodeWith(t testing.TB, r io.Reader, opts Options) decodeResult {
	t.Helper()
	var res decodeResult
	res.err = All(context.Background(), r, "f.jsonl", opts, func(ev Event) error {
		res.events = append(res.events, ev)
		return nil
	})
	return res
}

// appendWith decodes as the pipeline's staging does: Reader.AppendTo into
// Events, which takes the parallel decoder's blocks whole.
func appendWith(t testing.TB, r io.Reader, opts Options) decodeResult {
	t.Helper()
	var res decodeResult
	d, err := Decode(context.Background(), r, "f.jsonl", opts)
	if err != nil {
		res.err = err
		return res
	}
	defer d.Close()
	var evs Events
	res.err = d.AppendTo(&evs)
	for i, ev := range evs.All() {
		if at := evs.At(i); at != ev {
			t.Fatalf("Events.At(%d) is not the event All yields at %d", i, i)
		}
		res.events = append(res.events, *ev)
	}
	if len(res.events) != evs.Len() {
		t.Fatalf("Events.Len() = %d, All yields %d", evs.Len(), len(res.events))
	}
	return res
}

// sameDecode fails unless got holds exactly the events and error of want:
// the same values, record numbers and lines, and an error naming the same
// line, record and field for the same reason.
func sameDecode(t testing.TB, got, want decodeResult) {
	t.Helper()
	if len(got.events) != len(want.events) {
		t.Fatalf("decoded %d events, want %d (errors %v / %v)", len(got.events), len(want.events), got.err, want.err)
	}
	for i := range want.events {
		g, w := got.events[i], want.events[i]
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("event %d differs:\n got  record %d line %d %+v\n want record %d line %d %+v", i,
				g.Meta.Record, srcLine(g), g, w.Meta.Record, srcLine(w), w)
		}
	}
	if (got.err == nil) != (want.err == nil) {
		t.Fatalf("err = %v, want %v", got.err, want.err)
	}
	if want.err == nil {
		return
	}
	var ge, we *RecordError
	if !errors.As(got.err, &ge) || !errors.As(want.err, &we) {
		if got.err.Error() != want.err.Error() {
			t.Fatalf("err = %v, want %v", got.err, want.err)
		}
		return
	}
	if ge.Error() != we.Error() || ge.Line != we.Line || ge.Record != we.Record || ge.Field != we.Field || ge.Kind != we.Kind {
		t.Fatalf("err = %v (line %d record %d), want %v (line %d record %d)", ge, ge.Line, ge.Record, we, we.Line, we.Record)
	}
}

// wantEnding fails unless res holds events events and then ends cleanly
// (record 0) or with a *RecordError for record that matches ErrBadRecord
// and whose reason holds reason.
func wantEnding(t testing.TB, res decodeResult, events int, record int64, reason string) {
	t.Helper()
	if len(res.events) != events {
		t.Fatalf("decoded %d events, want %d (err %v)", len(res.events), events, res.err)
	}
	var re *RecordError
	switch {
	case record == 0 && res.err != nil:
		t.Fatalf("err = %v, want none", res.err)
	case record != 0 && (!errors.As(res.err, &re) || re.Record != record || !errors.Is(res.err, ErrBadRecord) || !strings.Contains(re.Reason, reason)):
		t.Fatalf("err = %v, want a bad record %d: %s", res.err, record, reason)
	}
}

func srcLine(ev Event) int64 {
	if ev.jsonSrc == nil {
		return 0
	}
	return ev.jsonSrc.line
}

// chunkSizes cut inputs everywhere: inside values, between lines, and
// around whole files.
var chunkSizes = []int{1, 7, 64, 333, 4096}

// parallelOpts decode with several workers and tiny chunks.
func parallelOpts(opts Options, workers, chunk int) Options {
	opts.Workers, opts.chunkBytes = workers, chunk
	return opts
}

func sequentialOpts(opts Options) Options {
	opts.Workers = 1
	return opts
}

// jsonLines joins lines with newlines and a final newline.
func jsonLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestParallelDecodeMatchesSequentialDecode(t *testing.T) {
	mysqlLine := func(i int) string {
		return fmt.Sprintf(`{"uuid":"m%d","read_timestamp":"2024-05-09T06:57:49.833Z","source_timestamp":"2024-05-09T06:56:%02d.000Z","object":"shop_orders","read_method":"mysql-cdc-binlog","stream_name":"s","schema_key":"k","source_metadata":{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.000014","log_position":%d,"change_type":"INSERT","is_deleted":false},"payload":{"id":%d,"amount":%d.%02d,"note":"n%d"}}`, i, i%60, 4+i*97, i, i, i%100, i)
	}
	var many []string
	for i := range 300 {
		many = append(many, mysqlLine(i))
	}
	long := strings.Replace(mysqlLine(1), `"note":"n1"`, `"note":"`+strings.Repeat("x", 10000)+`"`, 1)
	pretty := "{\n  \"uuid\": \"p1\",\n" + strings.TrimPrefix(mysqlLine(2), "{")
	badLSN := strings.Replace(pgCDC, `"lsn":"F/FFFFFFFF"`, `"lsn":"x"`, 1)
	badScale := strings.Replace(mysqlLine(9), `"amount":9.09`, `"amount":9.123`, 1)
	schemas := map[string]value.StructType{"shop.orders": {Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: true},
		{Name: "amount", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "note", Type: value.String, Nullable: true},
	}}}
	tests := []struct {
		name string
		data string
		opts Options
	}{
		{"lines of every source", jsonLines(oracleInsert, oraclePKDelete, oraclePKInsert, pgBackfill, pgCDC), Options{}},
		{"many lines, inferred", jsonLines(many...), Options{}},
		{"many lines, typed by a known schema", jsonLines(many...), Options{Schemas: schemas}},
		{"blank lines, CRLF and indentation between values", "\n\n" + many[0] + "\r\n\r\n   " + many[1] + "\n\t\n" + many[2] + "\r\n", Options{}},
		{"a byte order mark before the first line", "\xEF\xBB\xBF" + jsonLines(many[:20]...), Options{}},
		{"a byte order mark at the start of a later line", jsonLines(many[:3]...) + "\xEF\xBB\xBF" + jsonLines(many[3:6]...), Options{}},
		{"no newline after the last value", strings.TrimSuffix(jsonLines(many[:30]...), "\n"), Options{}},
		{"two values on one line", many[0] + many[1] + "\n" + jsonLines(many[2:9]...), Options{}},
		{"a line longer than a chunk", jsonLines(many[0], long, many[1], long), Options{}},
		{"a value spread over several lines", jsonLines(many[:40]...) + pretty + "\n" + jsonLines(many[40:80]...), Options{}},
		{"a bad record in the middle", jsonLines(many[:100]...) + badLSN + "\n" + jsonLines(many[100:200]...), Options{}},
		{"two bad records: the first in file order wins", jsonLines(many[:50]...) + `{"uuid": ]` + "\n" + jsonLines(many[50:150]...) + badLSN + "\n" + jsonLines(many[150:]...), Options{}},
		{"a value that does not fit its known type", jsonLines(many[:120]...) + badScale + "\n" + jsonLines(many[120:]...), Options{Schemas: schemas}},
		{"a file that ends inside a value", jsonLines(many[:60]...) + many[60][:len(many[60])/2], Options{}},
		{"a number at the very end", jsonLines(many[:10]...) + "12", Options{}},
		{"a value that is not an object", jsonLines(many[:10]...) + "[1]\n" + jsonLines(many[10:20]...), Options{}},
		{"only whitespace after the first line", many[0] + strings.Repeat(" \n", 100), Options{}},
		{"a line of many values, longer than max_record_bytes", jsonLines(many[:20]...) + strings.Join(many[20:60], " ") + "\n" + jsonLines(many[60:80]...), Options{MaxRecordBytes: 1000}},
		{"a record of max_record_bytes", jsonLines(many[:30]...) + long + "\n" + jsonLines(many[30:60]...), Options{MaxRecordBytes: int64(len(long))}},
		{"a record larger than max_record_bytes", jsonLines(many[:30]...) + long + "\n" + jsonLines(many[30:60]...), Options{MaxRecordBytes: int64(len(long)) - 1}},
		{"a record larger than max_record_bytes at the end without a newline", jsonLines(many[:30]...) + long, Options{MaxRecordBytes: 4096}},
		{"a file ending inside a record larger than max_record_bytes", jsonLines(many[:30]...) + long[:8000], Options{MaxRecordBytes: 4096}},
		{"a record larger than max_record_bytes over many lines", jsonLines(many[:30]...) + strings.ReplaceAll(long, ",", ",\n") + "\n" + jsonLines(many[30:60]...), Options{MaxRecordBytes: 4096}},
		{"a record larger than max_record_bytes after blank lines", jsonLines(many[:30]...) + strings.Repeat("\n", 5000) + long + "\n", Options{MaxRecordBytes: 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := decodeWith(t, strings.NewReader(tt.data), sequentialOpts(tt.opts))
			for _, chunk := range chunkSizes {
				for _, workers := range []int{2, 3} {
					got := decodeWith(t, strings.NewReader(tt.data), parallelOpts(tt.opts, workers, chunk))
					sameDecode(t, got, want)
					sameDecode(t, appendWith(t, strings.NewReader(tt.data), parallelOpts(tt.opts, workers, chunk)), want)
				}
			}
		})
	}
}

func TestParallelDecodeOfGzipMatchesSequentialDecode(t *testing.T) {
	var lines []string
	for range 200 {
		lines = append(lines, oracleInsert, pgCDC)
	}
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(jsonLines(lines...)))
	w.Close()
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"a whole gzip stream", b.Bytes()},
		{"a truncated gzip stream", b.Bytes()[:b.Len()*2/3]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := decodeWith(t, bytes.NewReader(tt.data), sequentialOpts(Options{}))
			got := decodeWith(t, bytes.NewReader(tt.data), parallelOpts(Options{}, 2, 512))
			sameDecode(t, got, want)
			sameDecode(t, appendWith(t, bytes.NewReader(tt.data), parallelOpts(Options{}, 2, 512)), want)
		})
	}
}

func TestATruncatedGzipStreamIsAnErrorNamingTheFile(t *testing.T) {
	var lines []string
	for i := range 3000 {
		lines = append(lines, strings.Replace(pgCDC, `"uuid":"u5"`, fmt.Sprintf(`"uuid":"u%d"`, i), 1))
	}
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(jsonLines(lines...)))
	w.Close()
	full := b.Bytes()
	for _, cut := range []struct {
		name string
		n    int
	}{
		{"inside the header", 5},
		{"in the first block", 100},
		{"in the middle", len(full) / 2},
		{"before the checksum", len(full) - 8},
		{"inside the checksum", len(full) - 3},
	} {
		for _, opts := range []Options{sequentialOpts(Options{}), parallelOpts(Options{}, 2, 0), parallelOpts(Options{}, 3, 512)} {
			t.Run(fmt.Sprintf("cut %s, %d workers, chunks of %d", cut.name, opts.Workers, opts.chunkBytes), func(t *testing.T) {
				for _, res := range []decodeResult{
					decodeWith(t, bytes.NewReader(full[:cut.n]), opts),
					appendWith(t, bytes.NewReader(full[:cut.n]), opts),
				} {
					var re *RecordError
					if !errors.As(res.err, &re) || re.File != "f.jsonl" || !errors.Is(res.err, ErrBadFile) {
						t.Fatalf("after %d of %d events: err = %v, want a *RecordError naming f.jsonl that matches ErrBadFile", len(res.events), len(lines), res.err)
					}
					if !errors.Is(res.err, io.ErrUnexpectedEOF) || isEnd(res.err) {
						t.Errorf("err = %v, want it to say the stream ended early", res.err)
					}
					if len(res.events) > len(lines) {
						t.Errorf("decoded %d events from a stream of %d", len(res.events), len(lines))
					}
				}
			})
		}
	}
}

// failingReader returns data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestParallelDecodeReportsAReadErrorAfterTheEventsBeforeIt(t *testing.T) {
	boom := errors.New("connection reset")
	data := jsonLines(pgCDC, oracleInsert, pgCDC, oracleInsert) + pgCDC[:40]
	want := decodeWith(t, &failingReader{data: []byte(data), err: boom}, sequentialOpts(Options{}))
	if len(want.events) != 4 || !errors.Is(want.err, boom) {
		t.Fatalf("sequential decode: %d events, err %v; want 4 events and the read error", len(want.events), want.err)
	}
	for _, chunk := range chunkSizes {
		got := decodeWith(t, &failingReader{data: []byte(data), err: boom}, parallelOpts(Options{}, 2, chunk))
		sameDecode(t, got, want)
		sameDecode(t, appendWith(t, &failingReader{data: []byte(data), err: boom}, parallelOpts(Options{}, 2, chunk)), want)
		if !errors.Is(got.err, boom) {
			t.Errorf("chunk %d: err = %v, want it to wrap the read error", chunk, got.err)
		}
	}
}

func TestParallelDecodeOfFixturesMatchesSequentialDecode(t *testing.T) {
	_, files := fixtureFiles(t)
	for _, p := range files {
		if !strings.HasSuffix(p, ".json") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			want := decodeWith(t, bytes.NewReader(data), sequentialOpts(Options{}))
			for _, chunk := range []int{1, 100, 2000} {
				sameDecode(t, decodeWith(t, bytes.NewReader(data), parallelOpts(Options{}, 2, chunk)), want)
				sameDecode(t, appendWith(t, bytes.NewReader(data), parallelOpts(Options{}, 2, chunk)), want)
			}
			sameDecode(t, appendWith(t, bytes.NewReader(data), sequentialOpts(Options{})), want)
		})
	}
}

// waitGoroutines waits until no more than n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left running, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParallelDecodeLeavesNoGoroutineBehind(t *testing.T) {
	data := []byte(strings.Repeat(pgCDC+"\n", 2000))
	tests := []struct {
		name string
		run  func(t *testing.T, d *Reader, cancel context.CancelFunc)
	}{
		{"when read to the end", func(t *testing.T, d *Reader, _ context.CancelFunc) {
			for {
				if _, err := d.Next(); errors.Is(err, io.EOF) {
					return
				} else if err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"when closed in the middle of the file", func(t *testing.T, d *Reader, _ context.CancelFunc) {
			for range 10 {
				if _, err := d.Next(); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"when the context is cancelled in the middle of the file", func(t *testing.T, d *Reader, cancel context.CancelFunc) {
			for range 10 {
				if _, err := d.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			if _, err := d.Next(); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if _, err := d.Next(); !errors.Is(err, context.Canceled) {
				t.Fatalf("after cancellation, err = %v, want context.Canceled again", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d, err := Decode(ctx, bytes.NewReader(data), "g.jsonl", parallelOpts(Options{}, 3, 4096))
			if err != nil {
				t.Fatal(err)
			}
			if d.par == nil {
				t.Fatal("the file is not decoded in parallel")
			}
			tt.run(t, d, cancel)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			waitGoroutines(t, before)
		})
	}
}

func TestParallelDecodeStopsWhenCancelledWhileTheInputBlocks(t *testing.T) {
	// The input delivers two lines, then blocks until cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := io.MultiReader(strings.NewReader(jsonLines(pgCDC, pgCDC)), blockingReader{ctx.Done()})
	d, err := Decode(ctx, r, "slow.jsonl", parallelOpts(Options{}, 2, 64))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	got := 0
	go func() {
		for {
			if _, err := d.Next(); err != nil {
				done <- err
				return
			}
			got++
		}
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || got > 2 {
			t.Errorf("err = %v after %d events, want context.Canceled after at most 2", err, got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after cancellation")
	}
}

// blockingReader blocks until done is closed, then fails.
type blockingReader struct{ done <-chan struct{} }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.done
	return 0, context.Canceled
}

func TestParallelDecodeHoldsABoundedNumberOfChunks(t *testing.T) {
	const n = 20000 // about 14 MB
	const chunk = 64 << 10
	d, err := Decode(context.Background(), &repeatReader{line: []byte(pgBackfill + "\n"), n: n}, "big.jsonl", parallelOpts(Options{}, 2, chunk))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := d.par.(*parallelJSON)
	count, maxHeld := drainMeasuring(t, d, func() int { return heldBytes(p) })
	if count != n {
		t.Fatalf("decoded %d events, want %d", count, n)
	}
	if limit := (p.maxJobs + 2) * 2 * chunk; maxHeld > limit {
		t.Errorf("the decoder held %d bytes of input, want at most %d", maxHeld, limit)
	}
}

// heldBytes is the input p holds: chunks in flight, delivered chunks kept
// for reuse, and the partial line read past the last chunk.
func heldBytes(p *parallelJSON) int {
	n := cap(p.carry)
	for _, j := range p.window {
		n += cap(j.buf)
	}
	for _, j := range p.free {
		n += cap(j.buf)
	}
	if p.cur != nil {
		n += cap(p.cur.buf)
	}
	return n
}

// FuzzParallelJSONMatchesSequential checks that decoding in chunks on
// several goroutines returns exactly what decoding sequentially returns,
// whatever the input.
func FuzzParallelJSONMatchesSequential(f *testing.F) {
	addFixtureSeeds(f, ".json", 10)
	f.Add([]byte(jsonLines(oracleInsert, pgCDC, pgBackfill)))
	f.Add([]byte("\xEF\xBB\xBF" + jsonLines(pgCDC, "{\n\"a\":1}", pgCDC)))
	f.Add([]byte(jsonLines(pgCDC, `{"uuid": ]`, pgCDC) + "7"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := decodeWith(t, bytes.NewReader(data), sequentialOpts(Options{}))
		for _, chunk := range []int{1, 37} {
			sameDecode(t, decodeWith(t, bytes.NewReader(data), parallelOpts(Options{}, 2, chunk)), want)
			sameDecode(t, appendWith(t, bytes.NewReader(data), parallelOpts(Options{}, 2, chunk)), want)
		}
		// A small MaxRecordBytes makes lines too long to chunk, and must
		// fail the same records however the input is read.
		small := Options{MaxRecordBytes: 100}
		want = decodeWith(t, bytes.NewReader(data), sequentialOpts(small))
		sameDecode(t, decodeWith(t, bytes.NewReader(data), parallelOpts(small, 2, 37)), want)
		sameDecode(t, decodeWith(t, iotest.OneByteReader(bytes.NewReader(data)), sequentialOpts(small)), want)
	})
}

// TestLinesOfTheSameColumnsShareTheirInferredSchema: the schema inferred
// for a line is shared by the next lines of the same columns and types,
// and a line of other types gets its own, leaving the shared one as it
// was.
func TestLinesOfTheSameColumnsShareTheirInferredSchema(t *testing.T) {
	line := func(i int, note string) string {
		return fmt.Sprintf(`{"uuid":"m%d","read_timestamp":"2024-05-09T06:57:49.833Z","source_timestamp":"2024-05-09T06:56:%02d.000Z","object":"shop_orders","read_method":"mysql-cdc-binlog","source_metadata":{"table":"orders","database":"shop","primary_keys":["id"],"log_file":"mysql-bin.000014","log_position":%d,"change_type":"INSERT","is_deleted":false},"payload":{"id":%d,"note":%s}}`, i, i, 4+i, i, note)
	}
	data := jsonLines(line(1, `"a"`), line(2, `"b"`), line(3, `7`), line(4, `"c"`), line(5, `"d"`))
	var evs []Event
	err := All(context.Background(), strings.NewReader(data), "f.jsonl", sequentialOpts(Options{}), func(ev Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil || len(evs) != 5 {
		t.Fatalf("decoded %d events: %v", len(evs), err)
	}
	fields := func(i int) []value.Field { return evs[i].Schema.Fields }
	if &fields(0)[0] != &fields(1)[0] || &fields(3)[0] != &fields(4)[0] {
		t.Error("lines of the same columns and types do not share their schema")
	}
	if &fields(2)[0] == &fields(1)[0] || &fields(3)[0] == &fields(2)[0] {
		t.Error("a line of another type shares a schema")
	}
	for i, want := range []value.Type{value.String, value.String, value.Long, value.String, value.String} {
		if got := fields(i)[1].Type; !value.Equal(got, want) {
			t.Errorf("line %d: note typed %v, want %v", i+1, got, want)
		}
	}
}
