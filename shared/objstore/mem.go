package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// NewMemory returns an empty in-memory store, for unit tests. It is safe for
// concurrent use and keeps the same semantics as the other backends: atomic
// writes, generations that change on every write, put-if-absent and lexical
// listing. Close releases nothing.
func NewMemory() *Bucket { return NewBucket(newMemory()) }

// NewMemoryAt returns an empty in-memory store whose objects are dated by
// now: tests of what depends on when objects were written.
func NewMemoryAt(now func() time.Time) *Bucket {
	m := newMemory()
	m.now = now
	return NewBucket(m)
}

func newMemory() *memory { return &memory{objects: make(map[string]memObject), now: time.Now} }

// memory is the in-memory driver.
type memory struct {
	mu      sync.Mutex
	objects map[string]memObject
	lastGen int64
	now     func() time.Time
}

// memObject is immutable once stored: a write stores a new slice, so readers
// holding the old one keep seeing a consistent old object.
type memObject struct {
	data    []byte
	gen     int64
	updated time.Time
}

func (m *memory) URL() string { return "mem://" }

func (m *memory) Close() error { return nil }

func (m *memory) NewRangeReader(_ context.Context, name string, offset, length int64) (io.ReadCloser, error) {
	m.mu.Lock()
	o, ok := m.objects[name]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotExist
	}
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (m *memory) Stat(_ context.Context, name string) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	if !ok {
		return Info{}, ErrNotExist
	}
	return o.info(name), nil
}

// Write reads the content fully before the lock is taken and the
// preconditions are checked, so the check and the store are atomic.
func (m *memory) Write(ctx context.Context, name string, r io.Reader, opts WriteOptions) (Info, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Info{}, fmt.Errorf("read content: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, exists := m.objects[name]
	switch {
	case opts.IfAbsent && exists:
		return Info{}, ErrExists
	case opts.IfGenerationMatch > 0 && (!exists || old.gen != opts.IfGenerationMatch):
		return Info{}, ErrPrecondition
	}
	m.lastGen++
	o := memObject{data: data, gen: m.lastGen, updated: m.now()}
	m.objects[name] = o
	return o.info(name), nil
}

func (m *memory) List(ctx context.Context, prefix, startAt string, fn func(Info) error) error {
	// Snapshot under the lock so fn may call back into the store.
	m.mu.Lock()
	var infos []Info
	for name, o := range m.objects {
		if strings.HasPrefix(name, prefix) && name >= startAt {
			infos = append(infos, o.info(name))
		}
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

func (m *memory) Delete(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[name]; !ok {
		return ErrNotExist
	}
	delete(m.objects, name)
	return nil
}

func (o memObject) info(name string) Info {
	return Info{Name: name, Size: int64(len(o.data)), Generation: o.gen, Updated: o.updated}
}
