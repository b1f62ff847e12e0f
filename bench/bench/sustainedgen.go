package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
)

// The sustained scenario's files: eventsPerFile change events each, of
// which updateShare are updates of live keys, insertShare inserts of new
// keys and the rest deletes of live keys (in tenths).
const (
	eventsPerFile = 5000
	updateShare   = 7
	insertShare   = 2
)

// liveKeys are the table's keys by index (backfillbench.AppendKey): the
// bulk load's first reads, below loaded, and the keys inserted since,
// from loaded on; deleted marks the keys deleted since.
type liveKeys struct {
	loaded  int // events of the bulk load
	next    int // the index the next insert takes
	live    int // keys live now
	deleted []uint64
}

// newLiveKeys are the keys of a bulk load of events events holding keys
// distinct keys.
func newLiveKeys(events, keys int) *liveKeys {
	return &liveKeys{loaded: events, next: events, live: keys, deleted: make([]uint64, events/64+1)}
}

func (k *liveKeys) isDeleted(j int) bool { return k.deleted[j/64]&(1<<(j%64)) != 0 }

// isLive reports whether key j is in the table now.
func (k *liveKeys) isLive(j int) bool {
	if j < 0 || j >= k.next || k.isDeleted(j) {
		return false
	}
	return j >= k.loaded || backfillbench.IsKey(j)
}

// pick draws a live key, every one as likely: more than nine indexes in
// ten are live, so a few draws find one.
func (k *liveKeys) pick(rng *rand.Rand) int {
	for {
		if j := rng.IntN(k.next); k.isLive(j) {
			return j
		}
	}
}

// change is one event of the mix: what it does to which key.
type change struct {
	op  backfillbench.Op
	key int
}

// nextChange draws the next event of the mix and applies it to the keys:
// an update or a delete of a live key, or the insert of a new one.
func (k *liveKeys) nextChange(rng *rand.Rand) change {
	switch r := rng.IntN(10); {
	case r < updateShare:
		return change{backfillbench.Update, k.pick(rng)}
	case r < updateShare+insertShare:
		j := k.next
		k.next++
		k.live++
		if j/64 >= len(k.deleted) {
			k.deleted = append(k.deleted, 0)
		}
		return change{backfillbench.Insert, j}
	default:
		j := k.pick(rng)
		k.deleted[j/64] |= 1 << (j % 64)
		k.live--
		return change{backfillbench.Delete, j}
	}
}

// producer writes the change files into the watched folder, as
// Datastream writes them into its bucket: each file written aside, then
// renamed into its minute's folder, so that a listing never sees part of
// one.
type producer struct {
	source, aside string
	w             *backfillbench.ChangeWriter
	keys          *liveKeys
	rng           *rand.Rand
	files         int    // written so far: the next file's number
	version       uint64 // of the last event: each update gives its key new values
	buf           []byte
	folders       map[string]bool // created
}

func newProducer(source, aside string, keys *liveKeys) *producer {
	return &producer{source: source, aside: aside, w: backfillbench.NewChangeWriter(), keys: keys,
		rng: rand.New(rand.NewPCG(31, 3)), folders: map[string]bool{}}
}

// pendingFile is a file written aside, not yet in place.
type pendingFile struct {
	name        string // object name in the source: its minute's folder, its file name
	aside, dest string // paths
}

// render writes the next file's events, read at now, aside.
func (p *producer) render(now time.Time) (pendingFile, error) {
	b := p.buf[:0]
	for seq := range eventsPerFile {
		c := p.keys.nextChange(p.rng)
		p.version++
		b = p.w.AppendChange(b, c.op, c.key, p.version, now, seq)
	}
	p.buf = b
	folder := backfillbench.Folder(now)
	name := backfillbench.FileName(backfillbench.CDCReadMethod, p.files)
	p.files++
	f := pendingFile{name: path.Join(filepath.ToSlash(folder), name), aside: filepath.Join(p.aside, name), dest: filepath.Join(p.source, folder, name)}
	if !p.folders[folder] {
		if err := os.MkdirAll(filepath.Join(p.source, folder), 0o755); err != nil {
			return f, fmt.Errorf("create %s: %w", folder, err)
		}
		p.folders[folder] = true
	}
	if err := os.WriteFile(f.aside, b, 0o644); err != nil {
		return f, fmt.Errorf("write %s: %w", f.aside, err)
	}
	return f, nil
}

// place renames a file written aside into its folder and returns when it
// was in place.
func (p *producer) place(f pendingFile) (time.Time, error) {
	if err := os.Rename(f.aside, f.dest); err != nil {
		return time.Time{}, fmt.Errorf("place %s: %w", f.name, err)
	}
	return time.Now(), nil
}

// remove deletes merged files from the source, which would otherwise
// fill the disk (a full run writes tens of GB); the pipeline never reads
// a merged file again.
func (p *producer) remove(names []string) {
	for _, n := range names {
		_ = os.Remove(filepath.Join(p.source, filepath.FromSlash(n)))
	}
}

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1

// threadCPU is the CPU time (user and system) of the calling thread, which
// must be locked to its goroutine (runtime.LockOSThread) to be that
// goroutine's.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
