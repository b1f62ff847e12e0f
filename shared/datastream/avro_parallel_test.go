package datastream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// shopRecord is record i of a file of benchSchema: MySQL changes whose
// metadata repeats from record to record while positions and payloads
// change.
func shopRecord(i int) enc {
	head, payload := shopRecordParts(i)
	return append(head, payload...)
}

// badShopRecord is shopRecord(i) whose payload's first column claims a
// union branch the schema does not have.
func badShopRecord(i int) enc {
	head, payload := shopRecordParts(i)
	return append(append(head, byte(9<<1)), payload[1:]...)
}

// shopRecordParts is shopRecord(i) cut where its payload starts.
func shopRecordParts(i int) (head, payload enc) {
	return shopRecordNoted(i, strings.Repeat("n", i%40))
}

// shopRecordNoted is shopRecordParts with the given note.
func shopRecordNoted(i int, note string) (head, payload enc) {
	ts := int64(1_715_237_814_000 + i)
	pos := int64(4 + i*97)
	ct := []string{"INSERT", "UPDATE-INSERT", "DELETE"}[i%3]
	logFile := fmt.Sprintf("mysql-bin.%06d", 14+i/7) // changes now and then
	keys := []string{"id"}
	if i%11 == 5 {
		keys = []string{"id", "customer"}
	}
	head = enc(nil).str(fmt.Sprintf("3c0ffaeb-b16e-4c8c-91d4-%012x", i)).long(1_715_237_869_833).long(ts).
		str("shop_orders").str("mysql-cdc-binlog").str("projects/1/locations/us-central1/streams/s").str("1d2ab1bcde3e861022798fbded72121b56007c52").
		long(1).long(1).long(ts).long(0).
		str("orders").str("shop").strs(keys...).some().str(logFile).some().long(pos).some().str(ct).some().boolean(ct == "DELETE")
	payload = enc(nil).some().long(int64(i)).some().str(fmt.Sprintf("Customer number %d", i)).null().
		some().raw(decimalBytes(big.NewInt(int64(i*137%1_000_000) - 5000))).some().long(int64(i % 50)).some().str("shipped").
		some().long(1_704_067_200_123_456).some().long(1_715_237_813_000_000).some().str(note).some().long(int64(i * 7))
	return head, payload
}

// shopFile is an object container file of n records of benchSchema,
// blockLen records a block; bad, when not negative, is a record made bad.
func shopFile(t testing.TB, codec ocf.CodecName, blockLen, n, bad int) []byte {
	t.Helper()
	recs := make([][]byte, n)
	for i := range recs {
		if i == bad {
			recs[i] = badShopRecord(i)
		} else {
			recs[i] = shopRecord(i)
		}
	}
	return writeOCF(t, benchSchema, codec, blockLen, recs...)
}

// syncMarker returns the sync marker of an object container file: the 16
// bytes that end its header and every block.
func syncMarker(t testing.TB, file []byte) []byte {
	t.Helper()
	// The header ends where the first block starts; the marker recurs
	// at the end of the file.
	if len(file) < 16 {
		t.Fatal("file too short")
	}
	m := file[len(file)-16:]
	if bytes.Count(file, m) < 2 {
		t.Fatal("no sync marker found twice")
	}
	return m
}

// checkParallelAvro decodes data sequentially and in parallel (Next,
// AppendTo and adopting whole blocks, with 2 and 3 workers) and fails
// unless all agree exactly.
func checkParallelAvro(t testing.TB, data []byte, opts Options) decodeResult {
	t.Helper()
	want := decodeWith(t, bytes.NewReader(data), sequentialOpts(opts))
	for _, workers := range []int{2, 3} {
		sameDecode(t, decodeWith(t, bytes.NewReader(data), parallelOpts(opts, workers, 0)), want)
		sameDecode(t, appendWith(t, bytes.NewReader(data), parallelOpts(opts, workers, 0)), want)
	}
	sameDecode(t, adoptWith(t, bytes.NewReader(data), parallelOpts(opts, 2, 0)), want)
	return want
}

// adoptWith decodes as Reader.AppendTo would if it adopted the blocks of
// parallelAvro.nextBlock as it adopts those of parallel JSON decoding.
func adoptWith(t testing.TB, r io.Reader, opts Options) decodeResult {
	t.Helper()
	var res decodeResult
	d, err := Decode(context.Background(), r, "f.jsonl", opts) // the name decodeWith gives
	if err != nil {
		res.err = err
		return res
	}
	defer d.Close()
	var evs Events
	collect := func() decodeResult {
		for _, ev := range evs.All() {
			res.events = append(res.events, *ev)
		}
		return res
	}
	if p, ok := d.par.(*parallelAvro); ok {
		for {
			blk, err := p.nextBlock()
			if errors.Is(err, io.EOF) {
				return collect()
			}
			if err != nil {
				res.err = err
				return collect()
			}
			if blk == nil {
				break // the sequential decoder has taken over
			}
			evs.adopt(blk)
		}
	}
	res.err = d.AppendTo(&evs)
	return collect()
}

func TestParallelAvroDecodeMatchesSequentialDecode(t *testing.T) {
	codecs := []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy}
	tests := []struct {
		name     string
		n, block int
		bad      int
		// wantEvents and wantRecord (of the error, 0: none) pin what the
		// sequential decoder returns, so that agreeing is not vacuous.
		wantEvents int
		wantRecord int64
	}{
		{"a file of many small blocks decodes to every event", 200, 7, -1, 200, 0},
		{"a file of one block decodes to every event", 50, 1000, -1, 50, 0},
		{"an empty file decodes to no event", 0, 10, -1, 0, 0},
		{"a bad record in the middle ends with the events before it and its error", 120, 10, 57, 57, 58},
		{"a bad first record of a block ends with the blocks before it", 120, 10, 60, 60, 61},
		{"a bad last record ends with every other event", 40, 9, 39, 39, 40},
	}
	for _, codec := range codecs {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s with codec %s", tt.name, codec), func(t *testing.T) {
				data := shopFile(t, codec, tt.block, tt.n, tt.bad)
				wantEnding(t, checkParallelAvro(t, data, Options{}), tt.wantEvents, tt.wantRecord, "")
			})
		}
	}
}

func TestParallelAvroDecodeOfDamagedFilesMatchesSequentialDecode(t *testing.T) {
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate} {
		data := shopFile(t, codec, 6, 24, -1)
		marker := syncMarker(t, data)
		headerEnd := bytes.Index(data, marker) + 16
		damaged := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(data)) }
		// Parsing the schema once keeps the many decodes below fast.
		opts := Options{AvroSchemas: &AvroSchemaCache{}}
		tests := []struct {
			name string
			data []byte
		}{
			{"a bad sync marker after the third block", damaged(func(b []byte) []byte {
				at := headerEnd
				for range 3 {
					at += bytes.Index(b[at:], marker) + 16
				}
				b[at-1] ^= 0xff
				return b
			})},
			{"a block claiming more bytes than the file holds", damaged(func(b []byte) []byte {
				at := headerEnd + bytes.Index(b[headerEnd:], marker) + 16 // second block
				return append(append(b[:at:at], enc(nil).long(8).long(1<<30)...), b[at+4:]...)
			})},
			{"a negative block count", damaged(func(b []byte) []byte {
				at := headerEnd + bytes.Index(b[headerEnd:], marker) + 16
				b[at] = 0x01 // zig-zag -1
				return b
			})},
			{"trailing garbage after the last block", append(bytes.Clone(data), 0x02, 0x00)},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s (codec %s)", tt.name, codec), func(t *testing.T) {
				want := checkParallelAvro(t, tt.data, opts)
				if !errors.Is(want.err, ErrBadFile) {
					t.Fatalf("sequential decode: err %v, want a bad file", want.err)
				}
			})
		}
		t.Run(fmt.Sprintf("a file cut anywhere (codec %s)", codec), func(t *testing.T) {
			for cut := headerEnd; cut < len(data); cut += 11 {
				want := checkParallelAvro(t, data[:cut], opts)
				if atBoundary := bytes.Equal(data[cut-16:cut], marker); (want.err == nil) != atBoundary {
					t.Fatalf("cut at %d of %d (after a block: %v): sequential decode err %v", cut, len(data), atBoundary, want.err)
				}
			}
		})
		t.Run(fmt.Sprintf("a file with any one byte changed (codec %s)", codec), func(t *testing.T) {
			for at := headerEnd; at < len(data); at += 13 {
				b := bytes.Clone(data)
				b[at] ^= 0x5a
				checkParallelAvro(t, b, opts)
			}
		})
	}
}

func TestParallelAvroDecodeReportsAReadErrorAfterTheEventsBeforeIt(t *testing.T) {
	data := shopFile(t, ocf.Null, 5, 40, -1)
	for _, boom := range []error{errors.New("connection reset"), io.ErrUnexpectedEOF, fmt.Errorf("read object: %w", io.EOF)} {
		for _, cut := range []int{len(data) / 2, len(data) - 3, len(data)} {
			t.Run(fmt.Sprintf("%q after %d of %d bytes", boom, cut, len(data)), func(t *testing.T) {
				in := func() io.Reader { return &failingReader{data: data[:cut], err: boom} }
				want := decodeWith(t, in(), sequentialOpts(Options{}))
				// All takes an error wrapping io.EOF for the end of the file,
				// so only parity is checked for the last error.
				if (!errors.Is(want.err, boom) && !errors.Is(boom, io.EOF)) || len(want.events) == 0 {
					t.Fatalf("sequential decode: %d events, err %v; want events and the read error", len(want.events), want.err)
				}
				for _, workers := range []int{2, 3} {
					sameDecode(t, decodeWith(t, in(), parallelOpts(Options{}, workers, 0)), want)
					sameDecode(t, appendWith(t, in(), parallelOpts(Options{}, workers, 0)), want)
				}
			})
		}
	}
}

func TestParallelAvroDecodeOfFixturesMatchesSequentialDecode(t *testing.T) {
	_, files := fixtureFiles(t)
	n := 0
	for _, p := range files {
		if !strings.HasSuffix(p, ".avro") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(filepath.Base(p), func(t *testing.T) {
			checkParallelAvro(t, data, Options{})
		})
		// A fixture is mostly one block, which the sequential decoder
		// takes: its blocks three times over make a valid file of several
		// blocks to decode in parallel.
		header, body := splitOCF(t, data)
		tripled := append(append(append(bytes.Clone(header), body...), body...), body...)
		t.Run(filepath.Base(p)+" with its blocks three times over", func(t *testing.T) {
			want := checkParallelAvro(t, tripled, Options{})
			once := decodeWith(t, bytes.NewReader(data), sequentialOpts(Options{}))
			if want.err == nil && len(want.events) != 3*len(once.events) {
				t.Fatalf("decoded %d events, want 3 × %d", len(want.events), len(once.events))
			}
		})
	}
	if n == 0 {
		t.Fatal("no Avro fixture found")
	}
}

func TestParallelAvroDecodeOfASimulatedFileMatchesSequentialDecode(t *testing.T) {
	data, events := dssimAvro(t, 400)
	want := checkParallelAvro(t, data, Options{})
	if want.err != nil || len(want.events) != events {
		t.Fatalf("sequential decode: %d events, err %v; want %d events", len(want.events), want.err, events)
	}
}

func TestParallelAvroDecodeLeavesNoGoroutineBehind(t *testing.T) {
	data := shopFile(t, ocf.Deflate, 10, 2000, -1)
	tests := []struct {
		name string
		run  func(t *testing.T, d *Reader, cancel context.CancelFunc)
	}{
		{"when read to the end", func(t *testing.T, d *Reader, _ context.CancelFunc) {
			n := 0
			for {
				if _, err := d.Next(); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				n++
			}
			if n != 2000 {
				t.Fatalf("decoded %d events, want 2000", n)
			}
		}},
		{"when closed in the middle of the file", func(t *testing.T, d *Reader, _ context.CancelFunc) {
			for range 25 {
				if _, err := d.Next(); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"when the context is cancelled in the middle of the file", func(t *testing.T, d *Reader, cancel context.CancelFunc) {
			for range 25 {
				if _, err := d.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			if _, err := d.Next(); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d, err := Decode(ctx, bytes.NewReader(data), "g.avro", parallelOpts(Options{}, 3, 0))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := d.par.(*parallelAvro); !ok {
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

func TestParallelAvroDecodeHoldsABoundedNumberOfBlocks(t *testing.T) {
	data := shopFile(t, ocf.Null, 4, 400, -1)
	d, err := Decode(context.Background(), bytes.NewReader(data), "g.avro", parallelOpts(Options{}, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := d.par.(*parallelAvro)
	for i := range 399 {
		if _, err := d.Next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if len(p.window) > p.maxJobs {
			t.Fatalf("after %d events, %d blocks are in flight, want at most %d", i+1, len(p.window), p.maxJobs)
		}
	}
	if p.blocks != 100 {
		t.Fatalf("framed %d blocks, want 100", p.blocks)
	}
}

func TestOneWorkerDecodesAvroSequentially(t *testing.T) {
	data := shopFile(t, ocf.Null, 4, 10, -1)
	d, err := Decode(context.Background(), bytes.NewReader(data), "g.avro", Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.par != nil {
		t.Fatalf("Workers 1 decodes with %T, want the sequential decoder", d.par)
	}
}

// metaTestSchema is a source_metadata record with a field of every shape
// readMeta reads itself, and some it leaves to readGeneric.
const metaTestSchema = `{"type":"record","name":"m","fields":[
 {"name":"s","type":"string"},{"name":"ns","type":["null","string"]},{"name":"sn","type":["string","null"]},
 {"name":"l","type":"long"},{"name":"nl","type":["null","long"]},
 {"name":"i","type":"int"},{"name":"ni","type":["null","int"]},
 {"name":"b","type":"boolean"},{"name":"nb","type":["null","boolean"]},
 {"name":"a","type":{"type":"array","items":"string"}},{"name":"na","type":["null",{"type":"array","items":"string"}]},
 {"name":"m","type":{"type":"map","values":"long"}},
 {"name":"r","type":{"type":"record","name":"r","fields":[{"name":"x","type":"long"}]}},
 {"name":"u","type":["null","string","long"]}]}`

func TestReadMetaReadsWhatReadGenericReads(t *testing.T) {
	for _, top := range []string{metaTestSchema, `["null",` + metaTestSchema + `]`} {
		sch, err := avro.ParseWithCache(top, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		rec := metaRecord(sch)
		if rec == nil {
			t.Fatalf("metaRecord(%s) = nil", sch.Type())
		}
		_, union := sch.(*avro.UnionSchema)
		var v avroValues
		v.slots = metaSlots(rec)
		for i := range 6 {
			e := enc(nil)
			if union {
				e = e.some()
			}
			e = e.str("tbl").some().str(fmt.Sprintf("f%d", i/2)).long(1).
				long(int64(i/3)).some().long(int64(1000+i)).
				long(int64(-i)).null().
				boolean(i%2 == 0).some().boolean(true).
				strs("id", fmt.Sprint(i/4)).null().
				long(1).str("k").long(5).long(0).
				long(int64(i)).
				long(2).long(int64(i))
			name := fmt.Sprintf("record %d of a %s", i, sch.Type())
			t.Run(name+" reads the same values", func(t *testing.T) {
				g := &binReader{b: e}
				want, wantErr := readGeneric(g, sch, 0)
				r := &binReader{b: e}
				got, err := v.readMeta(r, sch)
				if err != nil || wantErr != nil {
					t.Fatalf("readMeta: %v; readGeneric: %v", err, wantErr)
				}
				if !reflect.DeepEqual(map[string]any(got), want) {
					t.Fatalf("readMeta = %#v\nreadGeneric = %#v", got, want)
				}
				if r.off != g.off || r.steps != g.steps || r.items != g.items {
					t.Fatalf("readMeta read %d bytes, %d values, %d items; readGeneric %d, %d, %d", r.off, r.steps, r.items, g.off, g.steps, g.items)
				}
			})
			t.Run(name+" fails as readGeneric fails when cut short", func(t *testing.T) {
				for cut := range len(e) {
					g := &binReader{b: e[:cut]}
					_, wantErr := readGeneric(g, sch, 0)
					r := &binReader{b: e[:cut]}
					_, err := v.readMeta(r, sch)
					if fmt.Sprint(err) != fmt.Sprint(wantErr) || wantErr == nil {
						t.Fatalf("cut at %d: readMeta err %v, readGeneric err %v", cut, err, wantErr)
					}
				}
			})
		}
		if union {
			t.Run("a null record is nil", func(t *testing.T) {
				got, err := v.readMeta(&binReader{b: enc(nil).null()}, sch)
				if got != nil || err != nil {
					t.Fatalf("readMeta = %v, %v; want nil, nil", got, err)
				}
			})
		}
	}
}

func TestReadStringReadsWhatReadGenericReads(t *testing.T) {
	for _, s := range []string{`"string"`, `["null","string"]`, `["string","null"]`, `["null","string","string"]`} {
		sch, err := avro.ParseWithCache(s, "", &avro.SchemaCache{})
		if err != nil {
			// hamba refuses duplicate union members; nothing to check.
			continue
		}
		if !isStringSchema(sch) {
			t.Fatalf("isStringSchema(%s) = false", s)
		}
		var inputs []enc
		if _, ok := sch.(*avro.UnionSchema); ok {
			inputs = append(inputs, enc(nil).null(), enc(nil).long(1).str("abc"), enc(nil).long(0).str("x"), enc(nil).long(7), enc(nil).long(1).long(40))
		} else {
			inputs = append(inputs, enc(nil).str("abc"), enc(nil).str(""), enc(nil).long(40), enc(nil))
		}
		for _, in := range inputs {
			for _, intern := range []bool{false, true} {
				var v avroValues
				g := &binReader{b: in}
				want, wantErr := readGeneric(g, sch, 0)
				r := &binReader{b: in}
				got, err := v.readString(r, sch, intern)
				ws, _ := want.(string)
				if got != ws || fmt.Sprint(err) != fmt.Sprint(wantErr) || r.off != g.off || r.steps != g.steps {
					t.Fatalf("%s on %x: readString = %q, %v; readGeneric = %#v, %v", s, in, got, err, want, wantErr)
				}
			}
		}
	}
	for _, s := range []string{`"long"`, `["null","long"]`, `["null","string","long"]`} {
		sch, err := avro.ParseWithCache(s, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		if isStringSchema(sch) {
			t.Fatalf("isStringSchema(%s) = true", s)
		}
	}
}

// FuzzParallelAvroMatchesSequential checks that decoding the blocks of an
// Avro file on several goroutines returns exactly what decoding
// sequentially returns, whatever the blocks hold. As in FuzzDecodeAvro, the
// fuzzer changes the blocks behind one of a few fixed headers (header 255:
// the input is a whole file).
func FuzzParallelAvroMatchesSequential(f *testing.F) {
	var headers [][]byte
	add := func(file []byte) {
		h, body := splitOCF(f, file)
		headers = append(headers, h)
		f.Add(uint8(len(headers)-1), body)
	}
	add(shopFile(f, ocf.Null, 3, 9, -1))
	add(shopFile(f, ocf.Deflate, 2, 7, 4))
	add(shopFile(f, ocf.Snappy, 4, 9, -1))
	f.Add(uint8(255), shopFile(f, ocf.Null, 2, 5, 3))
	// Header numbers with bit 6 set decode with a MaxRecordBytes that some
	// records exceed.
	h, body := splitOCF(f, shopFile(f, ocf.Deflate, 3, 9, -1))
	headers = append(headers, h)
	f.Add(uint8(64+len(headers)-1), body)
	cache := &AvroSchemaCache{}
	f.Fuzz(func(t *testing.T, header uint8, body []byte) {
		if header == 255 {
			checkParallelAvro(t, body, Options{Format: FormatAvro})
			return
		}
		opts := Options{Format: FormatAvro, AvroSchemas: cache}
		if header&64 != 0 {
			opts.MaxRecordBytes = 288 // records 5, 6 and 8 of the seed are larger
		}
		h := headers[int(header&^64)%len(headers)]
		checkParallelAvro(t, append(bytes.Clone(h), body...), opts)
	})
}
