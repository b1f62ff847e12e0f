package backfillbench

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The simulated source table.
const (
	Database   = "shop"
	Table      = "accounts"
	TableID    = Database + "." + Table
	Object     = Database + "_" + Table // Datastream's folder and object name
	ReadMethod = "mysql-backfill-fulldump"
	streamName = "projects/545418958905/locations/us-central1/streams/dsdelta-bench"
)

// RereadEvery makes one event in RereadEvery read again a key the backfill
// read before (a backfill chunk restarted after a failure: Datastream
// delivers at least once), with new values and a later source timestamp,
// so keeping the latest row per key is real work on both sides.
const RereadEvery = 50

const (
	// eventsPerSecond is the read rate the source timestamps follow;
	// MySQL's are whole seconds.
	eventsPerSecond = 200
	// rereadGap keeps a re-read at least this many events after the first
	// read, so it is at least rereadGap/eventsPerSecond seconds newer and
	// never ties with it on the ordering key (source timestamp for a
	// backfill).
	rereadGap = 2000
)

// RereadAfter is the least time between the two reads of a key.
const RereadAfter = rereadGap / eventsPerSecond * time.Second

// Spec sizes the workload.
type Spec struct {
	Events int
	Files  int
	// OneTimestamp dates every first read at the backfill's start second
	// and every re-read a minute later, as a PostgreSQL backfill file
	// carries one timestamp for all its rows: source-time bounds then
	// tell the batches apart no more than keys do.
	OneTimestamp bool
}

// Data is the written workload.
type Data struct {
	Dir    string   // the source folder (the bucket root)
	Paths  []string // absolute paths of the JSONL files, in read order
	Bytes  int64
	Events int
	Keys   int // distinct keys: the rows of the current state
}

var (
	streamStart = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	epoch       = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	firstNames  = []string{"Ada", "Grace", "Linus", "Barbara", "Edsger", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Zoë", "José"}
	lastNames   = []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Allen", "Thompson", "Hamilton", "Ritchie", "Perlman", "Ñúñez", "O'Brien"}
	notes       = []string{"vip", "call back", "línea 2", "multi\nline", `quote "x"`, "🙂 emoji"}
)

// mix is splitmix64: every value is a pure function of the event index, so
// the files are reproducible and nothing but the re-read set is held.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// AppendKey appends the primary key of the event first read at index j: a
// version-4-shaped UUID whose first 64 bits are a bijection of j, so keys
// are distinct, and random in value and in read order.
func AppendKey(b []byte, j int) []byte {
	hi, lo := mix(uint64(j)), mix(uint64(j)^0x5bd1e9955bd1e995)
	hi = hi&^0xf000 | 0x4000
	lo = lo&^(3<<62) | 2<<62
	var raw [16]byte
	for i := range 8 {
		raw[i] = byte(hi >> (56 - 8*i))
		raw[8+i] = byte(lo >> (56 - 8*i))
	}
	var h [32]byte
	hex.Encode(h[:], raw[:])
	return append(appendGroups(b, h[:]), h[20:]...)
}

// appendGroups appends the first 20 hex digits of h in the 8-4-4-4 groups
// of a UUID, each followed by a dash.
func appendGroups[T string | []byte](b []byte, h T) []byte {
	for _, g := range [][2]int{{0, 8}, {8, 12}, {12, 16}, {16, 20}} {
		b = append(append(b, h[g[0]:g[1]]...), '-')
	}
	return b
}

// quoted holds the JSON forms of a string pool, encoded once.
func quoted(xs []string) [][]byte {
	out := make([][]byte, len(xs))
	for i, s := range xs {
		b, _ := json.Marshal(s) // a string always encodes
		out[i] = b
	}
	return out
}

// Generate writes the workload under dir as Datastream lays out one
// backfill: one folder per table, under the minute the backfill started,
// file names <schema_key>_<read_method>_<n>_<n>_<n>.jsonl, events split
// evenly over the files in read order.
func Generate(dir string, spec Spec) (Data, error) {
	g := NewGenerator(dir, spec)
	return g.Next(spec.Files)
}

// Generator writes a workload's files a few at a time, so that a backfill
// larger than the disk holds beside its lake can be written a round
// before it is loaded and deleted after: the files are those Generate
// writes, byte for byte.
type Generator struct {
	dir  string
	spec Spec
	gen  generator
	next int // the next file to write
}

// NewGenerator returns the generator of spec's files under dir.
func NewGenerator(dir string, spec Spec) *Generator {
	return &Generator{dir: dir, spec: spec, gen: generator{schemaKey: SchemaKey(), payloads: newPayloads(), reread: map[int]bool{}, oneTimestamp: spec.OneTimestamp}}
}

// Next writes the next n files (fewer at the end) and returns them: Events
// and Keys count the events of those files and the keys they read first
// (a re-read in them may re-read a key of an earlier round).
func (g *Generator) Next(n int) (Data, error) {
	d := Data{Dir: g.dir}
	folder := filepath.Join(g.dir, Folder(streamStart))
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return d, fmt.Errorf("create %s: %w", folder, err)
	}
	rereads := len(g.gen.reread)
	for f := g.next; f < g.end(n); f++ {
		lo, hi := g.events(f)
		path := filepath.Join(folder, FileName(ReadMethod, f))
		n, err := g.gen.writeFile(path, lo, hi)
		if err != nil {
			return d, err
		}
		// Dated a second apart, in read order, as Datastream writes
		// them: a file system's clock would give small files one time.
		at := streamStart.Add(time.Duration(f) * time.Second)
		if err := os.Chtimes(path, at, at); err != nil {
			return d, fmt.Errorf("date %s: %w", path, err)
		}
		d.Paths = append(d.Paths, path)
		d.Bytes += n
		d.Events += hi - lo
	}
	g.next = g.end(n)
	d.Keys = d.Events - (len(g.gen.reread) - rereads)
	return d, nil
}

// end is the file after the next n (fewer at the end).
func (g *Generator) end(n int) int { return min(g.next+n, g.spec.Files) }

// events are the events [lo, hi) of file f: the load split evenly over
// the files in read order.
func (g *Generator) events(f int) (lo, hi int) {
	return f * g.spec.Events / g.spec.Files, (f + 1) * g.spec.Events / g.spec.Files
}

// Skip passes over the next n files without writing them, as Next would
// have written them: the files after them are then those Generate writes.
func (g *Generator) Skip(n int) {
	for f := g.next; f < g.end(n); f++ {
		lo, hi := g.events(f)
		for i := lo; i < hi; i++ {
			g.gen.source(i)
		}
	}
	g.next = g.end(n)
}

// Done reports whether every file is written.
func (g *Generator) Done() bool { return g.next >= g.spec.Files }

// SchemaKey is the schema_key of the table's events (and the first part
// of its file names): a hash of the table and its columns.
func SchemaKey() string {
	sum := sha1.Sum([]byte(TableID + "id:string,email:string,name:string,balance:decimal,created_at:timestamp,is_active:long,notes:string"))
	return hex.EncodeToString(sum[:])
}

// Folder is the table's folder for files Datastream opened at t: one per
// minute, below the object's.
func Folder(t time.Time) string { return filepath.Join(Object, t.UTC().Format("2006/01/02/15/04")) }

// FileName is the name of the table's n-th file of a read method:
// <schema_key>_<read_method>_<n>_<n>_<n>.jsonl, as Datastream names them.
func FileName(readMethod string, n int) string {
	return fmt.Sprintf("%s_%s_%d_%d_%d.jsonl", SchemaKey(), readMethod, int32(mix(uint64(n))), n%8, n)
}

// IsKey reports whether the backfill's event j is a first read, so that
// its key (AppendKey) is one of the table's: the other events re-read a
// key read before.
func IsKey(j int) bool { return !isReread(j) }

type generator struct {
	schemaKey string
	payloads
	reread       map[int]bool // first-read indexes already read again
	oneTimestamp bool
}

// payloads renders the payload of a row from its key and a hash of its
// version, with the JSON forms of the string pools encoded once.
type payloads struct{ first, last, notes [][]byte }

func newPayloads() payloads {
	return payloads{first: quoted(firstNames), last: quoted(lastNames), notes: quoted(notes)}
}

// sourceTime is the source timestamp of event i, a re-read or not.
func (g *generator) sourceTime(i int, reread bool) time.Time {
	if !g.oneTimestamp {
		return streamStart.Add(time.Duration(i/eventsPerSecond) * time.Second)
	}
	if reread {
		return streamStart.Add(time.Minute)
	}
	return streamStart
}

// source picks the first-read index event i re-reads, or returns i when
// event i is a first read.
func (g *generator) source(i int) int {
	if !isReread(i) {
		return i
	}
	span := uint64(i - rereadGap)
	j := mix(uint64(i)^0xa0761d6478bd642f) % span
	// Each key is read again once at most, so two reads of a key never
	// share a second.
	for isReread(int(j)) || g.reread[int(j)] {
		j = (j + 1) % span
	}
	g.reread[int(j)] = true
	return int(j)
}

func isReread(i int) bool { return i%RereadEvery == RereadEvery-1 && i >= rereadGap }

func (g *generator) writeFile(path string, lo, hi int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line []byte
	var n int64
	for i := lo; i < hi; i++ {
		line = g.appendEvent(line[:0], i, i-lo)
		n += int64(len(line))
		if _, err := w.Write(line); err != nil {
			f.Close()
			return 0, fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", path, err)
	}
	return n, nil
}

// appendEvent renders event i (the seq-th of its file) in Datastream's JSON
// form for a MySQL backfill row, field for field as dssim renders one.
func (g *generator) appendEvent(b []byte, i, seq int) []byte {
	j := g.source(i)
	version := uint64(0)
	if j != i {
		version = 1
	}
	h := mix(uint64(j)*1_000_003 + version)
	src := g.sourceTime(i, j != i)
	read := src.Add(time.Duration(h%1000) * time.Millisecond)
	b = appendHead(b, g.schemaKey, ReadMethod, seq, read, src)
	b = append(b, `,"",0],"source_metadata":{"table":"`+Table+`","database":"`+Database+`","primary_keys":["id"],"log_file":"","log_position":0,"change_type":"INSERT","is_deleted":false},`...)
	return g.appendPayload(b, j, h)
}

// appendHead appends an event's fields up to its first sort key, the
// source timestamp in milliseconds: `{"uuid":...,"sort_keys":[<ms>`. The
// event is the seq-th of its file, read at read.
func appendHead(b []byte, schemaKey, readMethod string, seq int, read, src time.Time) []byte {
	b = appendGroups(append(b, `{"uuid":"`...), schemaKey)
	// Datastream's per-file counter: the low byte in binary digits.
	for bit := 7; bit >= 0; bit-- {
		b = append(b, byte('0'+seq>>bit&1))
	}
	b = append(b, `","read_timestamp":"`...)
	b = read.AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","source_timestamp":"`...)
	b = src.AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = append(b, `","object":"`+Object+`","read_method":"`...)
	b = append(b, readMethod...)
	b = append(b, `","stream_name":"`+streamName+`","schema_key":"`...)
	b = append(b, schemaKey...)
	b = append(b, `","sort_keys":[`...)
	return strconv.AppendInt(b, src.UnixMilli(), 10)
}

// appendPayload appends `"payload":{...}}` and the line's end: the row of
// key j whose values the hash h of its version gives.
func (g payloads) appendPayload(b []byte, j int, h uint64) []byte {
	b = append(b, `"payload":{"id":"`...)
	b = AppendKey(b, j)
	b = append(b, `","email":"user`...)
	b = strconv.AppendInt(b, int64(j), 10)
	b = append(b, '+')
	b = strconv.AppendUint(b, (h>>12)%1000, 10)
	b = append(b, `@example.com","name":`...)
	// The two quoted names joined by a space inside one JSON string.
	fn, ln := g.first[(h>>22)%uint64(len(g.first))], g.last[(h>>26)%uint64(len(g.last))]
	b = append(b, fn[:len(fn)-1]...)
	b = append(b, ' ')
	b = append(b, ln[1:]...)
	b = append(b, `,"balance":`...)
	cents := int64((h>>30)%200_000_000) - 5_000_000
	if cents < 0 {
		b = append(b, '-')
		cents = -cents
	}
	b = strconv.AppendInt(b, cents/100, 10)
	b = append(b, '.', byte('0'+cents%100/10), byte('0'+cents%10))
	b = append(b, `,"created_at":"`...)
	b = time.UnixMicro(epoch+int64((h>>20)%(700*86400*1_000_000))).UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z")
	b = append(b, `","is_active":`...)
	b = strconv.AppendUint(b, h>>63, 10)
	b = append(b, `,"notes":`...)
	if h%3 == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, g.notes[(h>>8)%uint64(len(g.notes))]...)
	}
	return append(b, "}}\n"...)
}
