package datastream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/hamba/avro/v2/ocf"
)

// addFixtureSeeds adds the fixture files whose names end in ext.
func addFixtureSeeds(f *testing.F, ext string, limit int) {
	root := fixture.Root()
	if root == "" {
		return
	}
	n := 0
	_ = filepath.WalkDir(filepath.Join(root, "datastream"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ext) || n >= limit {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
			n++
		}
		return nil
	})
}

// checkEvent fails when an event breaks the Event invariants.
func checkEvent(t *testing.T, ev Event) {
	if len(ev.Row) != len(ev.Schema.Fields) {
		t.Fatalf("row has %d values for %d columns", len(ev.Row), len(ev.Schema.Fields))
	}
	if len(ev.KeyNames) != len(ev.KeyValues) {
		t.Fatalf("%d key names for %d key values", len(ev.KeyNames), len(ev.KeyValues))
	}
	if _, err := ev.AppendJSON(nil); err != nil {
		t.Fatalf("decoded event cannot be printed: %v", err)
	}
}

// checkDecode decodes data and fails on any outcome other than events or a
// *RecordError; a panic fails the fuzzer by itself. The events decoded are
// then unified, which without a known schema must always succeed.
func checkDecode(t *testing.T, data []byte, opts Options) {
	opts.MaxBlockBytes = 1 << 20
	var evs []Event
	err := All(context.Background(), bytes.NewReader(data), "fuzz", opts, func(ev Event) error {
		checkEvent(t, ev)
		evs = append(evs, ev)
		return nil
	})
	if _, uerr := UnifyJSON(evs, value.StructType{}); uerr != nil {
		t.Fatalf("unify the decoded events: %v", uerr)
	}
	for _, ev := range evs {
		checkEvent(t, ev)
	}
	if err == nil {
		return
	}
	var re *RecordError
	if !errors.As(err, &re) || re.File != "fuzz" || (!errors.Is(err, ErrBadFile) && !errors.Is(err, ErrBadRecord)) {
		t.Fatalf("error is not a *RecordError naming the file: %#v", err)
	}
	if errors.Is(err, io.EOF) {
		t.Fatalf("error matches io.EOF and would read as a clean end: %v", err)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	addFixtureSeeds(f, ".json", 10)
	for _, s := range []string{oracleInsert, oraclePKDelete, pgBackfill, pgCDC, "[" + pgCDC + "," + pgCDC + "]", "", "[", "{}", `{"payload":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, Options{Format: FormatJSONL})
	})
}

// FuzzDecodeAvro fuzzes Avro files: mostly the blocks behind a fixed set of
// real headers (picked by the first input), with parsed schemas cached,
// because parsing a schema with hamba under the fuzzer's instrumentation
// costs far more than decoding a block; header 255 fuzzes whole files. Run
// it with a short -fuzzminimizetime: minimizing a 3 kB input with the
// default 60 s shows as a stall.
func FuzzDecodeAvro(f *testing.F) {
	var headers [][]byte
	cache := &AvroSchemaCache{}
	addFile := func(file []byte) {
		h, body := splitOCF(f, file)
		headers = append(headers, h)
		f.Add(uint8(len(headers)-1), body)
	}
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy} {
		addFile(writeOCF(f, typesSchema, codec, 2, typesRecord(1, 100, "INSERT", false), typesRecord(2, 101, "DELETE", true), typesRecord(3, 102, "UPDATE-INSERT", false)))
	}
	if root := fixture.Root(); root != "" {
		n := 0
		_ = filepath.WalkDir(filepath.Join(root, "datastream"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".avro") || n >= 12 {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				addFile(b)
				n++
			}
			return nil
		})
	}
	// Header 255 means the body is a whole file, so the header reader and
	// schema mapping are fuzzed too.
	f.Add(uint8(255), writeOCF(f, arraySchema, ocf.Snappy, 1, arrayRecord("16/CB002DB0", enc(nil).some().some().long(0).null())))
	f.Fuzz(func(t *testing.T, header uint8, body []byte) {
		if header == 255 {
			checkDecode(t, body, Options{Format: FormatAvro})
			return
		}
		h := headers[int(header)%len(headers)]
		checkDecode(t, append(append([]byte(nil), h...), body...), Options{Format: FormatAvro, AvroSchemas: cache})
	})
}

// splitOCF splits a container file after its header's sync marker.
func splitOCF(t testing.TB, data []byte) (header, body []byte) {
	t.Helper()
	r := bytes.NewReader(data)
	if _, err := r.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := readVarint(r)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			n = -n
			readVarint(r)
		}
		for range n {
			if _, err := readStreamBytes(r, 1<<20); err != nil {
				t.Fatal(err)
			}
			if _, err := readStreamBytes(r, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
	}
	off := len(data) - r.Len() + 16
	return data[:off], data[off:]
}

func TestFuzzAvroHeaderSplitRoundTrips(t *testing.T) {
	data := writeOCF(t, typesSchema, ocf.Deflate, 1, typesRecord(1, 100, "INSERT", false))
	h, body := splitOCF(t, data)
	evs, err := decodeAll(t, append(append([]byte(nil), h...), body...), "x.avro", Options{AvroSchemas: &AvroSchemaCache{}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
}

func FuzzParseNotification(f *testing.F) {
	f.Add("", []byte(objectResource))
	f.Add(StorageFinalizedType, []byte(objectResource))
	f.Add(PubSubPublishedType, []byte(`{"message":{"attributes":{"bucketId":"b","objectId":"a.avro","objectGeneration":"1","eventType":"OBJECT_FINALIZE"},"data":"e30="}}`))
	f.Add("", []byte(`{"message":{}}`))
	f.Fuzz(func(t *testing.T, ceType string, data []byte) {
		sf, err := ParseNotification(ceType, data)
		if err != nil {
			if !errors.Is(err, ErrBadNotification) {
				t.Fatalf("error does not match ErrBadNotification: %v", err)
			}
			return
		}
		if sf.Bucket == "" || sf.Name == "" {
			t.Fatalf("accepted a notification without bucket or name: %+v", sf)
		}
		Skip(sf)
	})
}
